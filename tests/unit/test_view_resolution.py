"""A view works out where each path lives once (``Resolution._resolve``): the answer must be
the one it would work out again, a new object each time, and never what the filesystem
held when it was first asked (a link another rank makes later is followed)."""

from __future__ import annotations

import errno
import os
from typing import Any

import pytest
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


def test_a_descriptor_the_view_did_not_open_is_read_by_its_files_name_in_the_view(tmp_path):
    """(issue 47) A machine file's descriptor is its own virtual path, one of the sandbox the
    path its copy backs; a pipe, a nameless file or the harness's own file is no path of the
    view's (the machine's call acts on it); a change through one on a read-only mount's
    file is EROFS."""
    view = views(tmp_path)[3]
    machine_dir = tmp_path / "machine"
    machine_dir.mkdir()
    view.mkdir("/scratch/d")  # rank 3's own copy, in the sandbox
    opened = [os.open(machine_dir, os.O_RDONLY),
              os.open(view.resolve("/scratch/d").upper, os.O_RDONLY)]
    read, write = os.pipe()
    unnamed = os.open(view.resolve("/scratch/d").upper, os.O_RDWR | os.O_TMPFILE)
    view.unnamed[unnamed] = "/scratch/d"
    private_file = tmp_path / "sandbox" / "harness-own.txt"
    private_file.write_text("x")
    private = os.open(private_file, os.O_RDONLY)
    ro_dir = view.resolve("/mnt/ro").upper
    os.makedirs(ro_dir, exist_ok=True)
    open(os.path.join(ro_dir, "f"), "w").close()
    ro = os.open(os.path.join(ro_dir, "f"), os.O_RDONLY)
    try:
        assert [view.foreign(fd) for fd in opened] == [str(machine_dir), "/scratch/d"]
        assert [view.foreign(fd) for fd in (read, unnamed, private)] == [None, None, None]
        assert view._at("made", opened[1]) == "/scratch/d/made"
        with pytest.raises(OSError) as refused:
            view.fchmod(ro, 0o600)
        assert refused.value.errno == errno.EROFS and refused.value.filename == "/mnt/ro/f"
    finally:
        for fd in (*opened, read, write, unnamed, private, ro):
            os.close(fd)
