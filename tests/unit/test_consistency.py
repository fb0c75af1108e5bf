"""Each consistency model's visibility rules, driven through views in this process.

Four views share one sandbox as the ranks of a 2x2 world would (ranks 0 and 1
on host 0, ranks 2 and 3 on host 1); nothing is patched and no world runs:
the coordinator is a list of what the views told it, and a ``Publisher``.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import pytest

from harness.filesystem import sandbox as sandbox_layout
from harness.filesystem.consistency import MODELS, model_of, rank_restarted
from harness.filesystem.hooks import NoHooks
from harness.filesystem.mounts import Mount, MountTable
from harness.filesystem.publisher import Publisher
from harness.filesystem.view import View
from harness.topology import get_topology

TOPOLOGY = get_topology("2x2")
F = "/mnt/x/f"


class World:
    """Views of one sandbox, one per rank, and what they told the coordinator."""

    def __init__(self, tmp_path: Any, consistency: str, hooks: Any = None, **mount: Any) -> None:
        self.table = MountTable((Mount("/", scope="host"),
                                 Mount("/mnt/x", scope="shared", consistency=consistency, **mount)))
        self.sandbox = str(tmp_path / "sandbox")
        sandbox_layout.create(self.sandbox, self.table, TOPOLOGY)
        self.told: list[dict[str, Any]] = []
        self.views = [View(self.table, self.sandbox, r, TOPOLOGY.host_of(r), "/", "/home",
                           hooks=hooks, notify=self.told.append)
                      for r in range(TOPOLOGY.world_size)]

    def read(self, rank: int, path: str = F) -> bytes | None:
        try:
            with self.views[rank].open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, rank: int, data: bytes, path: str = F) -> None:
        with self.views[rank].open(path, "wb") as f:
            f.write(data)


def test_each_mode_has_one_model_and_only_local_writes_in_place():
    assert sorted(MODELS) == ["close-to-open", "delayed", "local", "object"]
    for name, model in MODELS.items():
        assert model_of(Mount("/m", consistency=name)) is model
        staged = model.staging("/sb", Mount("/m"), "shared", rank=3, host=1, rel="a/b")
        assert (staged is None) == (name == "local")
    assert MODELS["object"].staging("/sb", Mount("/m"), "shared", 3, 1, "f").endswith("/rank-3/f")
    assert MODELS["close-to-open"].staging("/sb", Mount("/m"), "shared", 3, 1, "f") \
        .endswith("/host-1/f")


def test_local_shows_flushed_bytes_to_every_host_before_close(tmp_path):
    w = World(tmp_path, "local")
    f = w.views[0].open(F, "wb")
    f.write(b"flushed")
    f.flush()
    assert w.read(2) == b"flushed"
    f.close()
    assert w.read(3) == b"flushed" and w.told == []


def test_close_to_open_shows_a_write_to_other_hosts_only_once_closed(tmp_path):
    w = World(tmp_path, "close-to-open")
    w.write(2, b"old")
    f = w.views[0].open(F, "wb")
    f.write(b"new")
    f.flush()
    assert w.read(1) == b"new", "the writer's host reads its own write"
    assert w.read(2) == b"old", "another host still sees the last closed version"
    f.close()
    assert [w.read(r) for r in range(4)] == [b"new"] * 4 and w.told == []


def test_delayed_asks_the_coordinator_to_publish_after_the_delay(tmp_path):
    w = World(tmp_path, "delayed", delay_ms=1500)
    w.write(0, b"v1")
    (held,) = w.told
    assert {k: held[k] for k in ("type", "path", "until", "delay_ms", "writer", "copy")} == \
        {"type": "hold", "path": F, "until": "time", "delay_ms": 1500, "writer": 0, "copy": True}
    assert w.read(1) == b"v1", "the writer's host sees its write at once"
    assert w.read(2) is None, "another host sees nothing before the delay"
    publisher = Publisher(TOPOLOGY.world_size)
    publisher.hold(0, held, now=10.0)
    assert publisher.due(11.4) == [] and w.read(3) is None
    assert [h.path for h in publisher.due(11.5)] == [F]
    assert [w.read(r) for r in range(4)] == [b"v1"] * 4


def test_delayed_writer_host_sees_a_newer_write_once_it_is_published(tmp_path):
    w = World(tmp_path, "delayed", delay_ms=10)
    w.write(0, b"v1")
    publisher = Publisher(TOPOLOGY.world_size)
    publisher.hold(0, w.told.pop(), now=0.0)
    publisher.due(1.0)
    w.write(2, b"v2")  # host 1 writes later; host 0 still holds its staging copy of v1
    assert w.read(0) == b"v1" and w.read(3) == b"v2"
    publisher.hold(2, w.told.pop(), now=1.0)
    publisher.due(2.0)
    assert w.read(0) == b"v2", "a published write at least as new replaces the staged one"


def test_object_stays_invisible_until_fsync_or_close_even_on_the_same_host(tmp_path):
    w = World(tmp_path, "object")
    f = w.views[0].open(F, "wb")
    f.write(b"part1")
    f.flush()
    assert w.read(0) == b"part1", "the writer reads its own object"
    assert w.read(1) is None, "not uploaded: invisible even to a rank on the writer's host"
    w.views[0].fsync(f)
    assert w.read(2) == b"part1", "fsync uploads the whole object as it is"
    f.write(b"part2")
    f.flush()
    assert w.read(3) == b"part1"
    f.close()
    assert [w.read(r) for r in range(4)] == [b"part1part2"] * 4


def test_object_a_restarted_rank_loses_what_it_had_not_closed(tmp_path):
    w = World(tmp_path, "object")
    mine, other = w.views[0].open(F, "wb"), w.views[1].open("/mnt/x/g", "wb")
    for f in (mine, other):
        f.write(b"unclosed")
        f.flush()
    rank_restarted(w.sandbox, w.table, rank=0, host=0)
    assert w.read(0) is None, "rank 0's unclosed object was never uploaded"
    assert w.read(1, "/mnt/x/g") == b"unclosed", "rank 1 did not die: its object is still staged"
    rank_restarted(w.sandbox, None, rank=1, host=0)  # no mounts: nothing to do


def test_close_to_open_keeps_a_restarted_ranks_host_copy(tmp_path):
    w = World(tmp_path, "close-to-open")
    f = w.views[0].open(F, "wb")
    f.write(b"host cache")
    f.flush()
    rank_restarted(w.sandbox, w.table, rank=0, host=0)
    assert w.read(1) == b"host cache"


class Recorder(NoHooks):
    """Hooks that note every rename and let a test look at the world mid-rename."""

    def __init__(self) -> None:
        self.renames: list[str] = []
        self.during: Any = None

    def before(self, view: View, op: str, r: Any, r2: Any = None) -> None:
        if op == "rename":
            self.renames.append(r.vpath)
            if self.during is not None:
                self.during(len(self.renames))


def _tree(w: World) -> None:
    w.views[0].mkdir("/mnt/x/src")
    for name in ("a", "b", "c"):
        w.write(0, name.encode(), f"/mnt/x/src/{name}")


def test_object_renames_a_directory_object_by_object(tmp_path):
    hooks = Recorder()
    w = World(tmp_path, "object", hooks=hooks)
    _tree(w)
    halfway: list[tuple[list[str], list[str]]] = []
    hooks.during = lambda n: n == 3 and halfway.append(
        (w.views[2].listdir("/mnt/x/src"), w.views[2].listdir("/mnt/x/dst")))
    w.views[0].rename("/mnt/x/src", "/mnt/x/dst")
    assert hooks.renames == ["/mnt/x/src", "/mnt/x/src/a", "/mnt/x/src/b", "/mnt/x/src/c"]
    assert halfway == [(["b", "c"], ["a"])], "another rank sees the directory half moved"
    assert w.views[2].listdir("/mnt/x/dst") == ["a", "b", "c"]
    assert w.read(3, "/mnt/x/dst/c") == b"c"
    with pytest.raises(FileNotFoundError):
        w.views[2].listdir("/mnt/x/src")


@pytest.mark.parametrize("consistency", ["local", "close-to-open", "delayed"])
def test_other_models_rename_a_directory_in_one_step(tmp_path, consistency):
    hooks = Recorder()
    w = World(tmp_path, consistency, hooks=hooks, delay_ms=0)
    _tree(w)
    publisher = Publisher(TOPOLOGY.world_size)  # (delayed: the three files are published first)
    for message in w.told:
        publisher.hold(0, message, now=0.0)
    assert len(publisher.due(0.0)) == len(w.told) == (3 if consistency == "delayed" else 0)
    w.views[0].rename("/mnt/x/src", "/mnt/x/dst")
    assert hooks.renames == ["/mnt/x/src"]
    assert w.views[2].listdir("/mnt/x/dst") == ["a", "b", "c"]


class Rewriter(NoHooks):
    """A content fault as the engine applies it: rewrite the staged bytes, or withhold them."""

    def __init__(self, withhold: bool) -> None:
        self.withhold = withhold

    def prepare_write(self, view: View, r: Any) -> Any:
        r.content_faults = ["rewrite"]
        r.staging = os.path.join(view.sandbox, "held", f"rank-{view.rank}", "f")  # as the engine does
        return r

    def after_close(self, view: View, r: Any, writing: bool = True) -> bool:
        if not writing:
            return False
        with open(r.staging, "wb") as f:  # noqa: PTH123 - the test's own I/O, nothing patched
            f.write(b"torn")
        return self.withhold


@pytest.mark.parametrize("consistency", ["local", "close-to-open", "object"])
def test_the_model_publishes_what_the_hooks_left_and_nothing_they_withheld(tmp_path, consistency):
    published = World(tmp_path / "published", consistency, hooks=Rewriter(withhold=False))
    published.write(0, b"whole file")
    assert published.read(2) == b"torn"
    withheld = World(tmp_path / "withheld", consistency, hooks=Rewriter(withhold=True))
    withheld.write(0, b"whole file")
    assert withheld.read(2) is None


def test_object_fsync_does_not_upload_a_write_whose_bytes_a_fault_decides_at_close(tmp_path):
    w = World(tmp_path, "object", hooks=Rewriter(withhold=False))
    f = w.views[0].open(F, "wb")
    f.write(b"whole file")
    f.flush()
    w.views[0].fsync(f)
    assert w.read(2) is None
    f.close()
    assert w.read(2) == b"torn"


def test_a_view_without_a_coordinator_refuses_to_hold_a_delayed_write(tmp_path):
    w = World(tmp_path, "delayed", delay_ms=5)
    lone = View(w.table, w.sandbox, 0, 0, "/", "/home")
    f = lone.open(F, "wb")
    f.write(b"x")
    with pytest.raises(RuntimeError, match="no coordinator"):
        f.close()


def test_a_read_only_mount_refuses_writes_whatever_its_model(tmp_path):
    w = World(tmp_path, "object", mode="ro")
    with pytest.raises(OSError) as info:
        w.write(0, b"x")
    assert info.value.errno == errno.EROFS and info.value.filename == F


@pytest.mark.parametrize("consistency", ["close-to-open", "delayed", "object"])
def test_a_torn_staged_write_can_be_renamed_by_its_writer_on_a_staging_mount(tmp_path, consistency):
    """Found by harness explore: a torn write of ``f.tmp`` on a mount that stages writes
    left its bytes apart from the model's staging, so the writer's own rename of it onto
    ``f`` raised FileNotFoundError (a correct tmp-and-rename writer reported as broken)."""
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import make_plan

    plan = make_plan([{"kind": "torn-write", "path": F + ".tmp", "offset": 4}], seed=0,
                     world_size=TOPOLOGY.world_size, hosts=TOPOLOGY.hosts, home="/home")
    w = World(tmp_path, consistency, **({"delay_ms": 5} if consistency == "delayed" else {}))
    engine = FaultEngine(plan, rank=0, host=0, notify=w.told.append)
    w.views[0].hooks = engine
    w.write(0, b"whole file", F + ".tmp")
    w.views[0].rename(F + ".tmp", F)
    assert w.read(0) == b"whol"  # the writer's host sees the torn bytes under the new name
