"""The reaper: a small process that outlives the harness and ends what it left.

Started once per harness process, in its own session (a Ctrl-C or a kill of the
harness's process group does not reach it), it waits on a pipe only the harness
holds. When the pipe closes, however the harness ended (exit, SIGTERM, SIGKILL),
it ends every process marked with the harness's run token (``HARNESS_RUN``: the
fork servers, their leaders, every rank and whatever those forked, daemons
included; see ``sweep``) and removes the harness's world directories
(``harness-<pid>-*`` in the temporary directory), its worlds' cgroups
(``harness.world.cgroups``) and the SysV segments its worlds' processes made. A
harness that starts also removes the directories and cgroups of harness processes
that are gone, in case a reaper was killed too.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from harness.rank import sweep
from harness.world import cgroups, held

log = logging.getLogger(__name__)

#: The environment variable every process of this harness run carries.
RUN_KEY = "HARNESS_RUN"
#: An ended world's directory, renamed so before it is removed: no longer a world's.
ENDED = "ended-"
#: how long the harness's exit waits for its reaper's sweep (a /proc scan: milliseconds)
REAPER_GRACE_S = 2.0

_lock = threading.Lock()
_started: subprocess.Popen | None = None


def run_token() -> str:
    """This harness process's token, set in its environment so that every process it
    starts (and every process those start) carries it."""
    token = os.environ.get(RUN_KEY, "")
    if not token.startswith(f"{os.getpid()}-"):  # inherited from a harness that ran us
        token = os.environ[RUN_KEY] = f"{os.getpid()}-{os.urandom(4).hex()}"
    return token


def ensure() -> None:
    """Start the reaper (once per harness process), after sweeping what dead ones left."""
    global _started
    with _lock:
        if _started is not None and _started.poll() is None:
            return
        token = run_token()
        remove_orphaned_dirs()
        cgroups.remove_orphaned(sweep.running)
        read, write = os.pipe()
        try:
            _started = subprocess.Popen(
                [sys.executable, "-c", "from harness.world.reaper import main; main()", token,
                 str(os.getpid()), *world_dirs()],
                stdin=read, stdout=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(
                    p for p in (_HARNESS_PARENT, os.environ.get("PYTHONPATH", "")) if p)})
        finally:
            os.close(read)
        os.set_inheritable(write, False)  # only this process holds it: its end is our end
        if not _pipes:
            atexit.register(_stop)  # once: the first reaper's start
        _pipes.append(write)


def _stop() -> None:
    """At the harness's exit: the reaper ends what is left now and the harness waits for it
    (briefly), so that nothing of this run is still being ended after the harness returns."""
    while _pipes:
        try:
            os.close(_pipes.pop())
        except OSError:
            pass
    if _started is not None:
        try:
            _started.wait(timeout=REAPER_GRACE_S)
        except subprocess.TimeoutExpired:  # another process holds our pipe (a fork): it ends later
            pass


_pipes: list[int] = []
_HARNESS_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def world_dirs() -> list[str]:
    """Where worlds' directories are made: the temporary directory, and where a kernel-
    isolated world keeps its own (``harness.world.isolation.KERNEL_BASE``)."""
    from harness.world.isolation import KERNEL_BASE

    return list(dict.fromkeys((tempfile.gettempdir(), KERNEL_BASE)))


def remove_orphaned_dirs(tmp: str | None = None) -> int:
    """Remove ``harness-<pid>-*`` directories of harness processes that no longer run."""
    removed = 0
    for base in [tmp] if tmp else world_dirs():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            parts = name.removeprefix(ENDED).split("-")
            if len(parts) < 3 or parts[0] != "harness" or not parts[1].isdigit():
                continue
            if sweep.running(int(parts[1])):
                continue
            remove_tree(os.path.join(base, name))
            removed += 1
    return removed


def main() -> None:
    """The reaper itself: wait for the harness to go, then end what it left."""
    token, harness_pid, bases = sys.argv[1], sys.argv[2], sys.argv[3:]
    from harness.rank.process import name_process

    name_process("harness-reaper")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the harness
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    ours = set(sweep.marked((RUN_KEY, token)))
    segments = [s.shmid for s in held.segments() if s.creator in ours]  # before they go
    sweep.end(RUN_KEY, token)
    held.remove_segments(segments)
    cgroups.remove_of(int(harness_pid))
    for base in bases:
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if name.removeprefix(ENDED).startswith(f"harness-{harness_pid}-"):
                remove_tree(os.path.join(base, name))


#: How long the harness's exit waits for the directories of its ended worlds to go (the
#: reaper removes what is left after it).
REMOVALS_GRACE_S = 30.0
_removals: queue.SimpleQueue[str | None] = queue.SimpleQueue()
_remover: threading.Thread | None = None


def remove_later(path: str) -> None:
    """Remove an ended world's directory beside what the harness does next, not before its
    result returns (a sandbox of many files takes milliseconds a world): renamed at once
    (``ENDED``, then it is no world's directory), removed by a thread of the harness's. The
    harness's exit waits for the last one; one it could not wait for is the reaper's."""
    global _remover
    ended = os.path.join(os.path.dirname(path), ENDED + os.path.basename(path))
    try:
        os.rename(path, ended)
        path = ended
    except OSError:
        pass  # removed in place, then
    with _lock:
        if _remover is None:
            thread = threading.Thread(target=_remove_all, name="harness-removals", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # the interpreter is ending: no new thread
                pass
            else:
                _remover = thread
                atexit.register(_removed)
        later = _remover is not None and _remover.is_alive()
    if later:
        _removals.put(path)
    else:  # the harness is ending (its exit already waited for the remover): now
        remove_tree(path)


def remove_tree(path: str) -> None:
    """``path`` and everything under it, the kernel overlay's own work directories too
    (``work/work``, made mode 000: a user who is not root may not list them until it gives
    itself the right; root may, so only a failed first pass pays a second walk)."""
    failed: list[str] = []
    shutil.rmtree(path, onerror=lambda _f, where, _e: failed.append(where))
    if not failed:
        return
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            try:
                os.chmod(os.path.join(root, name), 0o700)
            except OSError:
                pass
    shutil.rmtree(path, ignore_errors=True)


def _remove_all() -> None:
    while (path := _removals.get()) is not None:
        remove_tree(path)


def _removed() -> None:
    """At the harness's exit: every directory handed over so far is gone (within a grace)."""
    if _remover is not None:
        _removals.put(None)
        _remover.join(REMOVALS_GRACE_S)
