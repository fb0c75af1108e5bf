"""The sandbox holds against every route out of it the hostile probe found (issue 24): a
sentinel file of the machine's is compared byte for byte after a rank tried each one, and
nothing the rank made is left on the machine.

Routes: a symlink whose text goes through ``/proc/self/root``, ``/proc/self/cwd``,
``/proc/<pid>/root``, ``/proc/thread-self/root`` or ``/proc/self/task/<tid>/root``, then a
write, a listing, a rename and a delete through it; a read-only descriptor of a machine
file reopened for writing through ``/dev/fd/N``, ``/proc/self/fd/N``, an ``F_DUPFD`` copy,
or ``/proc/self/map_files/<range>`` of a mapping; a ``multiprocessing.shared_memory``
segment. In both isolation modes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import run_world
from harness.rank import namespaces

from support import TARGETS_DIR

SENTINEL = b"the machine's own bytes\n" * 10


@pytest.mark.parametrize("isolation", [
    "python",
    pytest.param("kernel", marks=pytest.mark.skipif(bool(namespaces.unavailable()),
                                                    reason="no mount namespace here")),
])
def test_no_route_out_of_the_sandbox_touches_the_machine(tmp_path: Path, isolation: str) -> None:
    files = [tmp_path / name for name in ("mapped.txt", "read-only.txt", "sentinel.txt")]
    for path in files:
        path.write_bytes(SENTINEL)
    shm = Path("/dev/shm/harness_escape_probe")
    assert not shm.exists()
    result = run_world(f"{TARGETS_DIR / 'escape_targets.py'}:escape", topology="2x1",
                       timeout=60, cwd=str(tmp_path), isolation=isolation)
    assert result.outcome == "PASS", result.detail()
    assert result.isolation == isolation
    routes = result.ranks[0].value
    for path in files:
        assert path.read_bytes() == SENTINEL, (path.name, routes)
    assert sorted(tmp_path.iterdir()) == files, routes
    assert not shm.exists(), routes
    # and each route met the view, not the machine: the links' writes landed in the view
    # (a copy the host owns); a reopened read-only descriptor of the machine is refused
    for tag in ("proc-self-root", "proc-self-cwd", "proc-pid-root", "proc-thread-self-root",
                "proc-task-root"):
        assert routes[f"{tag}: write"] == "done", routes
    # the view's own descriptor leads to the view's file (copied up, then written), and so
    # does its F_DUPFD copy
    for route in ("/dev/fd", "/proc/self/fd", "F_DUPFD"):
        assert routes[route] == "done", routes
    assert routes["map_files"] == "PermissionError: Permission denied", routes
    assert routes["shared_memory"] == "seen in the host's /dev/shm", routes
