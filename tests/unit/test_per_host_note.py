"""What a failing cell's reason says when a file it hands over is per host on its topology,
or a path the ranks did not find is on this machine but on no host (``runner.hosts``)."""

from __future__ import annotations

from pathlib import Path

from harness.filesystem.mounts import Mount
from harness.roles import FileUse, Roles
from harness.runner.hosts import per_host_note
from harness.topology import get_topology

from support import error, rank

HOME, CWD = "/home/u", "/home/u/repo"


def _handoff(path: str) -> Roles:
    return Roles({"handoff": (FileUse(path, (0,), (1, 2, 3, 4, 5, 6, 7)),)})


def test_a_handoff_on_a_hosts_own_disk_names_the_mount_to_say_it_is_shared() -> None:
    note = per_host_note(_handoff("/mnt/shared/run/cfg.json"), [], get_topology("2x4"), [],
                         HOME, CWD)
    assert note == ("'/mnt/shared/run/cfg.json' is per host on 2x4: ranks 4-7 on host 1 never "
                    "see what rank 0 wrote on host 0 (if /mnt/shared is one filesystem on your "
                    "pod: --mount /mnt/shared=shared)")


def test_a_handoff_under_tmp_says_tmp_is_each_hosts_own() -> None:
    note = per_host_note(_handoff("/tmp/cfg.yaml"), [], get_topology("8x1"), [], HOME, CWD)
    assert note is not None and note.endswith("(/tmp is each host's own on a pod)")
    assert "ranks 1-7 on hosts 1-7" in note


def test_nothing_to_say_where_the_path_is_shared_or_the_world_one_host() -> None:
    roles = _handoff("/mnt/shared/run/cfg.json")
    shared = [Mount("/mnt/shared", scope="shared")]
    assert per_host_note(roles, shared, get_topology("2x4"), [], HOME, CWD) is None
    assert per_host_note(roles, [], get_topology("1x8"), [], HOME, CWD) is None
    # every reader on the writer's host: nobody missed it
    same_host = Roles({"handoff": (FileUse("/tmp/x", (0,), (1, 2, 3)),)})
    assert per_host_note(same_host, [], get_topology("2x4"), [], HOME, CWD) is None


def test_a_scenarios_per_host_mount_is_named_as_the_scenarios() -> None:
    note = per_host_note(_handoff("/mnt/ckpt/a.bin"), [Mount("/mnt/ckpt", scope="host")],
                         get_topology("2x4"), [], HOME, CWD)
    assert note is not None and note.endswith("(this scenario mounts /mnt/ckpt on each host)")


def test_a_machine_path_no_host_has_is_said_from_the_ranks_words(tmp_path: Path) -> None:
    lib = Path("/tmp") / f"harness-test-lib-{tmp_path.name}.py"
    lib.write_text("X = 1\n")
    try:
        failed = rank(0, "ERROR", host=0, error=error(
            "FileNotFoundError", f"[Errno 2] No such file or directory: '{lib}'"))
        note = per_host_note(None, [], get_topology("1x8"), [failed], HOME, CWD)
        assert note == (f"'{lib}' is on this machine but on no host of the world: /tmp starts "
                        "empty on every host, as each VM's own does on a pod (keep code and "
                        "data under the working directory, or a path the pod's hosts have)")
    finally:
        lib.unlink()
    gone = rank(0, "ERROR", host=0, error=error(
        "FileNotFoundError", "[Errno 2] No such file or directory: '/tmp/absent'"))
    assert per_host_note(None, [], get_topology("1x8"), [gone], HOME, CWD) is None, \
        "a file the machine lacks too is the target's own business"
