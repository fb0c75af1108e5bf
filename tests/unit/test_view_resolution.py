"""A view works out where each path lives once (``Resolution._resolve``): the answer must be
the one it would work out again, a new object each time, and never what the filesystem
held when it was first asked (a link another rank makes later is followed)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.filesystem import resolution
from harness.filesystem import sandbox as sandbox_layout
from harness.filesystem.mounts import Mount, MountTable
from harness.filesystem.view import View
from harness.topology import get_topology

TOPOLOGY = get_topology("2x2")
TABLE = MountTable((Mount("/", scope="host"), Mount("/tmp", scope="host", base="fresh"),
                    Mount("/mnt/x", scope="shared", consistency="delayed"),
                    Mount("/mnt/ro", scope="shared", mode="ro", base="fresh"),
                    Mount("/scratch", scope="rank", base="fresh")))
FIELDS = ("vpath", "mount", "key", "upper", "lower", "whiteout", "staging", "backing")


def views(tmp_path: Any) -> list[View]:
    sandbox = str(tmp_path / "sandbox")
    sandbox_layout.create(sandbox, TABLE, TOPOLOGY)
    return [View(TABLE, sandbox, r, TOPOLOGY.host_of(r), "/", "/home", private=("/private",))
            for r in range(TOPOLOGY.world_size)]


names = st.sampled_from(["", "tmp", "mnt", "x", "ro", "scratch", "private", "proc", "dev", "a",
                         "b.json", "home", ".cache"])
paths = st.lists(names, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


@settings(max_examples=200, deadline=None)
@given(paths=st.lists(paths, min_size=1, max_size=8))
def test_a_path_resolved_again_is_what_it_resolves_to_afresh_and_a_new_object(tmp_path_factory,
                                                                              paths):
    view = views(tmp_path_factory.mktemp("w"))[3]  # host 1, rank 3: every scope differs from 0
    for path in paths + paths:  # each twice: the second from what the first kept
        got, fresh = view._resolve(path), view._resolve_anew(path)
        assert [getattr(got, f) for f in FIELDS] == [getattr(fresh, f) for f in FIELDS], path
        again = view._resolve(path)
        assert again is not got and again.content_faults is not got.content_faults
        got.content_faults.append("marked by a hook")
        assert view._resolve(path).content_faults == []


def test_a_link_another_rank_makes_after_a_lookup_is_followed_by_the_next(tmp_path):
    rank0, rank1 = views(tmp_path)[:2]  # both on host 0: one upper layer for "/"
    rank0.mkdir("/data")
    rank0.mkdir("/data/real")
    with rank0.open("/data/real/f", "w") as f:
        f.write("through the link")
    assert rank0.resolve("/data/alias/f").vpath == "/data/alias/f"  # no link yet
    rank1.symlink("/data/real", "/data/alias")
    assert rank0.resolve("/data/alias/f").vpath == "/data/real/f"
    with rank0.open("/data/alias/f") as f:
        assert f.read() == "through the link"


def test_what_a_view_keeps_resolved_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(resolution, "_RESOLVED_KEPT", 8)
    view = views(tmp_path)[0]
    for i in range(50):
        view._resolve(f"/tmp/file-{i}")
        assert len(view._paths_resolved) <= 8
    assert view._resolve("/tmp/file-0").upper == view._resolve_anew("/tmp/file-0").upper
