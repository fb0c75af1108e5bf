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

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import PASS, run_world
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
    # a unit holds no capability (``rank/confine.py``), root or not: the kernel refuses
    # map_files (it asks CAP_SYS_ADMIN) before the view is asked
    assert routes["map_files"] == "PermissionError: Operation not permitted", routes
    assert routes["shared_memory"] == "seen in the host's /dev/shm", routes


@pytest.mark.parametrize("isolation", [
    "python",
    pytest.param("kernel", marks=pytest.mark.skipif(bool(namespaces.unavailable()),
                                                    reason="no mount namespace here")),
])
def test_a_rank_holds_none_of_roots_powers_over_the_machine(tmp_path: Path,
                                                             isolation: str) -> None:
    """Run as the machine's root (as CI runs), a rank's process and whatever it execs hold
    no capability and no way back to one: mounting, remounting a read-only mount
    read-write, a device node (of the machine's disk, or in the world's ``/dev``),
    ``open_by_handle_at``, ``/proc/sys``, tracing a process outside the world and a kernel
    keyring are refused with the kernel's own errno; a FIFO is still made. The files the
    world saw are as they were, byte for byte."""
    (tmp_path / "kept.txt").write_bytes(SENTINEL)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    outside = subprocess.Popen(["sleep", "600"])  # a stand-in for the harness
    scratch = "/tmp" if isolation == "kernel" else str(tmp_path / "scratch")
    try:
        result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:root_powers", topology="1x1",
                           timeout=60, cwd=str(tmp_path), isolation=isolation,
                           args=({"harness": outside.pid, "scratch": scratch,
                                  "readonly": "/usr" if isolation == "kernel" else "/",
                                  "dev": "/dev/harness-probe" if isolation == "kernel"
                                  else f"{scratch}/null"},))
    finally:
        outside.kill()
        outside.wait()
    assert result.outcome == PASS, result.detail()
    value = result.ranks[0].value
    capabilities = value["capabilities"]
    assert (capabilities["CapPrm"], capabilities["CapEff"], capabilities["NoNewPrivs"]) == (
        "0000000000000000", "0000000000000000", "1"), capabilities
    if isolation == "kernel" or os.geteuid() == 0:  # else no process of its user may drop it
        assert capabilities["CapBnd"] == "0000000000000000", capabilities
    refused = {"mount": "EPERM", "remount read-write": "EPERM",
               "mknod the machine's disk": "EPERM", "mknod in /dev": "EPERM",
               "open_by_handle_at": "EPERM", "remount /proc/sys": "EPERM",
               "ptrace the harness": "ESRCH" if isolation == "kernel" else "EPERM",
               "keyring": "EPERM", "a fifo": "done"}
    exec_ = value["exec"]
    assert {k: v for k, v in exec_.items() if k != "write /proc/sys"} == refused, exec_
    assert exec_["write /proc/sys"] in ("EROFS", "EACCES"), exec_
    if isolation == "python":
        assert sorted(os.listdir(tmp_path / "scratch")) == ["fifo", "mnt"]
        shutil.rmtree(tmp_path / "scratch")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
