"""The launcher on one worker: this host's ranks of one cell, started by ``xmp.spawn``.

Runs on the worker (``python -m harness.pod.host SPEC HOST``), never in the
controller. It starts a session of its own, so that everything the cell
starts on this host can be found and ended (and nothing else is touched);
removes what an earlier cell left at the target's paths and places the
scenario's files; starts the ranks as the user's code would, with
``xmp.spawn`` (the real torch_xla's, or on a local pod the shim's over the
gloo fabric); and ends them at the deadline, after asking each for its Python
stacks. What it knows of its ranks goes to ``host-N.json``; each rank writes
its own files (``rank.py``).

``python -m harness.pod.host --stop WORKDIR HOST`` ends a running cell on this
host (the controller's way to stop the other hosts when one fails).
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import signal
import sys
import threading
import time
from typing import Any

from harness.pod.spec import PodCellSpec, host_file, rank_file, watched_file
from harness.vocabulary import UNIT_FAILED

#: What a launcher prints when it is ready to start its ranks (``PodSession.run_all``'s gate).
READY = "harness-pod: ready"
#: How long a host's ranks may take to start (their runtime up) before the deadline counts.
RANKS_START_LIMIT_S = 60.0
#: How long ranks get to write their stacks after SIGUSR1, before SIGKILL.
STACK_WAIT_S = 1.0

_statuses: dict[int, int] = {}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--stop"]:
        return stop(os.path.join(os.path.expanduser("~"), argv[1]), int(argv[2]), "stopped")
    spec_path, host = argv[0], int(argv[1])
    home = os.path.expanduser("~")
    if os.getsid(0) != os.getpid():
        os.setsid()
    with open(spec_path, "rb") as f:
        spec: PodCellSpec = pickle.load(f)
    workdir = os.path.join(home, spec.workdir)
    with open(os.path.join(workdir, f"host-{host}.pid"), "w") as f:
        f.write(str(os.getpid()))
    prepare(spec, host)
    if spec.fabric is not None:
        _install_fabric(spec, host)
    _warm(spec)
    # every host is ready: the controller starts them together, and the deadline runs from here
    print(READY, flush=True)
    if sys.stdin.readline().strip() != "go":
        return 0  # the controller stopped the cell before it started
    timer = threading.Thread(target=_watch, args=(workdir, host, spec), daemon=True,
                             name="harness-pod-deadline")
    timer.start()
    report: dict[str, Any] = {"host": host, "pid": os.getpid()}
    try:
        import torch_xla.distributed.xla_multiprocessing as xmp

        xmp.spawn(_rank_entry, args=(spec_path, home))
    except BaseException as exc:  # noqa: BLE001 - a rank's death, said in the host's report
        report["spawn_error"] = f"{type(exc).__name__}: {exc}"
    report["statuses"] = {str(r): s for r, s in _statuses.items()}
    _write_watched(spec, host)
    _write_json(os.path.join(home, host_file(spec.workdir, host)), report)
    return 0


def _write_watched(spec: PodCellSpec, host: int) -> None:
    """The watched files as the ranks left them, for the checker (as the simulator's world
    records them when it ends)."""
    if not spec.watch:
        return
    from harness.filesystem.snapshot import snapshot_real

    home = os.path.expanduser("~")
    _write_json(os.path.join(home, watched_file(spec.workdir, host)),
                snapshot_real(list(spec.watch), home, spec.home))


def _warm(spec: PodCellSpec) -> None:
    """What every rank would import first, imported once here before the ranks start (the
    ranks fork from this process on a local pod; PJRT's spawn imports the target anyway)."""
    import torch_xla.distributed.xla_multiprocessing  # noqa: F401
    import torch_xla.runtime  # noqa: F401

    from harness.rank.bootstrap import resolve_target

    home = os.path.expanduser("~")
    cwd = os.getcwd()
    os.chdir(os.path.join(home, spec.code_dir))
    sys.path.insert(0, os.getcwd())
    try:
        resolve_target(spec.target)
    except Exception:  # noqa: BLE001 - each rank meets it again and reports it as its own
        pass
    finally:
        os.chdir(cwd)


def _rank_entry(index: int, spec_path: str, home: str) -> int:
    """A rank, as ``xmp.spawn`` calls it: who it is comes from the runtime, as for user code."""
    import torch_xla.runtime as xr

    from harness.pod import rank as rank_mod

    with open(spec_path, "rb") as f:
        spec: PodCellSpec = pickle.load(f)
    return rank_mod.run(spec, xr.global_ordinal(), home)


def prepare(spec: PodCellSpec, host: int) -> None:
    """A clean host for this cell: an earlier cell's files at the target's paths removed,
    the scenario's files placed (those of this host)."""
    for path in spec.clean:
        _remove(path)
    home = os.path.expanduser("~")
    for leftover in spec.files:
        if leftover.hosts is not None and host not in leftover.hosts:
            continue
        path = spec.rehome(os.path.expanduser(leftover.path), home)
        roots = [home if r == "~" else r for r in spec.confined]
        if roots and not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            raise SystemExit(f"harness-pod: a local pod's worker places files only in its own "
                             f"{', '.join(spec.confined)}: {path} is this machine's")
        if leftover.is_dir:
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(leftover.content)
        os.chmod(path, leftover.mode)


def _remove(path: str) -> None:
    """A file an earlier cell's ranks wrote; never a directory (not the harness's to empty)."""
    path = os.path.expanduser(path)
    if os.path.isdir(path) and not os.path.islink(path):
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno != errno.EROFS:  # on the pod's read-only disk: nothing was written there
            raise


def _install_fabric(spec: PodCellSpec, host: int) -> None:
    """The local pod: the shim stands in for torch_xla, its collectives over gloo."""
    from harness.imports import when_imported
    from harness.pod.fabric import GlooRuntime
    from harness.rank.environment import shim_root

    sys.path.insert(0, shim_root())
    os.environ["HARNESS_PROFILE"] = spec.profile
    assert spec.fabric is not None
    runtime = GlooRuntime(spec.fabric, spec.profile, host, spec.hosts, spec.ranks_per_host,
                          lambda fn, args: _fork_ranks(spec, host, runtime, fn, args))
    when_imported("torch_xla._internal.runtime", lambda shim: shim.install(runtime))


def _fork_ranks(spec: PodCellSpec, host: int, runtime: Any, fn: Any, args: tuple) -> None:
    """The shim's ``xmp.spawn`` on a local pod: one child per chip, waited for, a hard
    death turned into BrokenProcessPool as PJRT's process pool does."""
    from harness.rank.process import die_with_parent
    from harness.topology import get_topology

    # the TPU VM environment PJRT's spawn gives each rank (TPU_WORKER_ID, TPU_VISIBLE_CHIPS,
    # ...), as the simulator gives it: a local pod's ranks are the shim's, on this machine
    topology = get_topology(f"{spec.hosts}x{spec.ranks_per_host}")
    children = {}
    for r in spec.ranks_of_host(host):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = UNIT_FAILED
            try:
                die_with_parent()
                os.environ.update(topology.rank_environment(r, spec.profile))
                runtime.become_rank(r)
                code = fn(r, *args) or 0
            except BaseException:  # noqa: BLE001 - before the rank could report it itself
                import traceback

                print(f"harness pod: rank {r} failed before its target ran:", file=sys.stderr)
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        children[pid] = r
    broken = False
    for pid, r in children.items():
        _, status = os.waitpid(pid, 0)
        _statuses[r] = status
        broken = broken or os.WIFSIGNALED(status)
    if broken:
        from concurrent.futures.process import BrokenProcessPool

        raise BrokenProcessPool("A process in the process pool was terminated abruptly while "
                                "the future was running or pending.")


def _watch(workdir: str, host: int, spec: PodCellSpec) -> None:
    """The cell's deadline, counted from when this host's ranks have started (their runtime
    up, as the simulator's ranks are when its clock starts), or from ``RANKS_START_LIMIT_S``
    after the go if they never all do."""
    ranks = spec.ranks_of_host(host)
    limit = time.monotonic() + RANKS_START_LIMIT_S
    while time.monotonic() < limit and len(_rank_pids(workdir, ranks)) < len(ranks):
        time.sleep(0.05)
    time.sleep(spec.timeout)
    _deadline(workdir, host, spec)


def _deadline(workdir: str, host: int, spec: PodCellSpec) -> None:
    stop(workdir, host, "deadline", spec.ranks_of_host(host))
    _write_watched(spec, host)
    os._exit(0)


def stop(workdir: str, host: int, why: str, ranks: range | None = None) -> int:
    """Ask this host's ranks for their stacks, then end every process of the cell's session
    on this host; say so in ``host-N.json``."""
    pid_file = os.path.join(workdir, f"host-{host}.pid")
    try:
        with open(pid_file) as f:
            launcher = int(f.read())
    except (OSError, ValueError):
        return 0
    members = [p for p in _session(launcher) if p != os.getpid()]
    rank_pids = _rank_pids(workdir, ranks)
    alive = sorted(r for r, p in rank_pids.items() if p in members)
    for r in alive:
        _signal(rank_pids[r], signal.SIGUSR1)
    if alive:
        time.sleep(STACK_WAIT_S)
    if why != "deadline":  # first, so that it cannot write its own report over this one
        _signal(launcher, signal.SIGKILL)
    for pid in members:
        if pid != launcher:
            _signal(pid, signal.SIGKILL)
    path = os.path.join(workdir, f"host-{host}.json")
    _write_json(path, {"host": host, "pid": launcher, "ended": why, "alive": alive,
                       "statuses": {str(r): s for r, s in _statuses.items()}})
    return 0


def _rank_pids(workdir: str, ranks: range | None) -> dict[int, int]:
    out = {}
    for name in os.listdir(workdir):
        if name.startswith("rank-") and name.endswith(".pid"):
            r = int(name[5:-4])
            if ranks is None or r in ranks:
                try:
                    with open(rank_file(workdir, r, "pid")) as f:
                        out[r] = int(f.read())
                except (OSError, ValueError):
                    pass
    return out


def _session(sid: int) -> list[int]:
    """The processes of session ``sid``: those this cell started on this host."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getsid(int(name)) == sid:
                    out.append(int(name))
            except OSError:
                pass
    return out


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".part"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
