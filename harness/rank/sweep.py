"""Find and end every process a world (or a whole harness run) left, wherever it went.

A daemon that double-forks and calls ``setsid`` leaves its process group and its
parent (reparented to init when the fork server, our subreaper, is killed under it),
but it keeps its environment, and ``/proc/<pid>/environ`` (readable by a process of
the same user) shows the environment a process was *started* with: ``HARNESS_RUN``
names the harness process that started the fork server, and so every process forked
under it. A world's processes are forked, never started anew, so their environment
block is the fork server's; it holds a slot (``HARNESS_WORLD_SLOT=-----...``) that
each world's leader overwrites in place with the world's id (``mark_world``), and
every rank and daemon forked under it inherits the page. A process that execs a new
program carries ``HARNESS_WORLD_ID`` in its new block instead. Found processes are
stopped first, so that none can fork while they are counted, then killed. A process
that execs with an empty environment escapes this: docs/explanation/isolation.md says so.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import time
from typing import Any

log = logging.getLogger(__name__)

#: How many scan-stop-kill rounds before giving up on a process that keeps forking.
ROUNDS = 20
SLOT_KEY = "HARNESS_WORLD_SLOT"
SLOT_WIDTH = 48
#: The empty slot, as the fork server is started with it.
EMPTY_SLOT = "-" * SLOT_WIDTH
_slot_address: int | None = None


def find_slot() -> None:
    """In the fork server, before anything edits its environment: where the slot is."""
    global _slot_address
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        entries = ctypes.cast(ctypes.c_void_p.in_dll(libc, "environ").value,
                              ctypes.POINTER(ctypes.c_void_p))
        prefix = f"{SLOT_KEY}=".encode()
        i = 0
        while entries[i]:
            if ctypes.string_at(entries[i], len(prefix) + SLOT_WIDTH) == prefix + EMPTY_SLOT.encode():
                _slot_address = entries[i] + len(prefix)
                return
            i += 1
    except (OSError, ValueError, AttributeError):
        log.warning("no world slot in the environment: a world's daemons are found only "
                    "through the harness run's mark")


def mark_world(world_id: str) -> None:
    """In a world's leader, right after its fork: write the world's id into the slot."""
    if _slot_address is None:
        return
    import ctypes

    ctypes.memmove(_slot_address, world_id.encode()[:SLOT_WIDTH].ljust(SLOT_WIDTH, b"-"),
                   SLOT_WIDTH)


def of_world(world_id: str) -> list[int]:
    """Every process of a world: forked under its leader, or started anew by one of them."""
    slot = world_id[:SLOT_WIDTH].ljust(SLOT_WIDTH, "-")
    return marked((SLOT_KEY, slot), ("HARNESS_WORLD_ID", world_id))


def marked(*marks: tuple[str, str]) -> list[int]:
    """Every process but this one whose environment holds any ``key=value`` of ``marks``
    (one pass over /proc)."""
    needles = [b"\0" + f"{key}={value}".encode() + b"\0" for key, value in marks]
    own = os.getpid()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == own:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or not ours
            continue
        env = b"\0" + env
        if any(needle in env for needle in needles):
            found.append(int(name))
    return found


def end_world(world_id: str) -> int:
    """Stop, then kill, every process of a world; how many there were."""
    return _end(lambda: of_world(world_id), f"world {world_id}")


def end(key: str, value: str) -> int:
    """Stop, then kill, every process marked ``key=value``; how many there were."""
    return _end(lambda: marked((key, value)), f"{key}={value}")


def _end(find: Any, what: str) -> int:
    ended: set[int] = set()
    for _ in range(ROUNDS):
        pids = [p for p in find() if p not in ended or running(p)]
        if not pids:
            break
        for pid in pids:  # stopped first: a stopped process cannot fork while we look
            _signal(pid, signal.SIGSTOP)
        for pid in pids:
            _signal(pid, signal.SIGKILL)
            ended.add(pid)
        _wait_gone(pids)
    else:
        log.warning("processes of %s kept appearing after %d rounds", what, ROUNDS)
    return len(ended)


def _wait_gone(pids: list[int], limit: float = 2.0) -> None:
    """A SIGKILL is delivered, not done: wait (briefly) until the processes are dead, so
    that a world said to be over has no process left running."""
    wait_gone(pids, limit)


def wait_gone(pids: list[int], limit: float) -> bool:
    """Wait until none of ``pids`` runs any more (gone, or a zombie), at most ``limit``
    seconds; True if none does.

    Woken by each process's end (a pidfd becomes readable when its process exits), not
    by polling: a world's end waits for its last process as long as that takes, not
    up to a polling period more. Without pidfds (an old kernel), /proc is polled.
    """
    end = time.monotonic() + limit
    fds: list[int] = []
    try:
        for pid in pids:
            try:
                fds.append(os.pidfd_open(pid))
            except ProcessLookupError:
                continue  # gone already (a zombie still has its pidfd: waited for below)
            except (OSError, AttributeError):
                return _poll_gone(pids, end)
        poller = select.poll()  # not select: a busy harness has fds past 1024
        for fd in fds:
            poller.register(fd, select.POLLIN)
        while fds:
            left = end - time.monotonic()
            if left <= 0:
                return not any(running(p) for p in pids)
            for fd, _ in poller.poll(left * 1000):
                poller.unregister(fd)
                fds.remove(fd)
                os.close(fd)
        return True
    finally:
        for fd in fds:
            os.close(fd)


def _poll_gone(pids: list[int], end: float) -> bool:
    while any(running(p) for p in pids):
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)
    return True


def running(pid: int | None) -> bool:
    """Is ``pid`` a process that still runs? (Gone, or a zombie waiting for its parent: no.)"""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")  # a zombie waits for its parent only


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _state(stat_path: str) -> str | None:
    """The state letter of a process or thread (``R``, ``S``, ``Z``...) from its ``stat``."""
    try:
        with open(stat_path) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def live_children(pid: int) -> list[int]:
    """The children of ``pid`` (from any of its threads) that have not exited: a zombie
    its parent has not reaped does nothing. Empty when /proc cannot tell."""
    out = []
    for tid in _tasks(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                children = [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
        out += [c for c in children if _state(f"/proc/{c}/stat") not in (None, "Z", "X")]
    return out


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc), children before theirs."""
    todo, out = [pid], []
    while todo:
        children = live_children(todo.pop(0))
        out += children
        todo += children
    return out


def asleep(pid: int) -> int | None:
    """If every thread of ``pid`` sleeps in the kernel (a socket, a pipe, a lock), none
    running, runnable or in a disk wait: the CPU time it has used (clock ticks), to tell
    later whether it ran meanwhile; else None."""
    tasks = _tasks(pid)
    states = [_state(f"/proc/{pid}/task/{tid}/stat") for tid in tasks]
    if not tasks or not all(s in (None, "S", "T", "t") for s in states):
        return None  # (a thread gone meanwhile says nothing)
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return None
