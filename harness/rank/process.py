"""What a unit process does to itself: die with its parent, adopt orphans,
forget its parent's handlers, capture its output, dump its stacks at the deadline."""

from __future__ import annotations

import atexit
import faulthandler
import os
import posix
import signal
import sys
from typing import Any

from harness.rank.clock import real_time
from harness.rank.spec import WorldSpec
from harness.vocabulary import UNIT_FAILED_SUFFIX

_libc = None
_fork = os.fork  # before the world clock counts the target's own forks (harness.rank.clock)


def _libc_of() -> Any:
    global _libc
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _prctl(option: int, arg: int) -> None:
    if sys.platform != "linux":
        return
    _libc_of().prctl(option, arg, 0, 0, 0)


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def die_with_parent(parent: int | None = None) -> None:
    """SIGKILL this process when its parent goes away, whatever happens. ``parent``: the
    pid that forked it, read before the fork. A parent that died between the fork and
    this call fired no signal (none was asked for yet): the child then goes at once,
    rather than run on under init, where no one waits for it (a rank that killed its
    fork server while the leader was still forking its peers left such orphans)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def name_process(name: str) -> None:
    """What ``ps``, ``top`` and a profiler call this process (15 bytes at most): the
    harness's own processes say what they are; a rank keeps its interpreter's name."""
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write(name[:15])
    except OSError:
        pass


def become_subreaper() -> None:
    """Adopt every orphaned descendant, so none can escape the world."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def after_fork() -> None:
    """Forget what the parent registered: its atexit hooks, its signal handlers."""
    atexit._clear()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass


def enter_limits(spec: WorldSpec) -> None:
    """In a world's leader, before it forks anything: into the world's cgroup (every
    process it starts is then in it: ``harness.world.cgroups``), and no file any of them
    writes may grow past the world's written limit (RLIMIT_FSIZE: one ``fallocate`` cannot
    put more on the machine's disk)."""
    pid = str(os.getpid()).encode()
    for path in spec.cgroup:
        try:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        except OSError:  # the meter's accounting still holds the world
            pass
    if spec.file_size is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (spec.file_size, spec.file_size))


def unit_limits(spec: WorldSpec) -> None:
    """In a unit, right after its fork: a file past the written limit kills it with the
    kernel's own SIGXFSZ (Python ignores it, and a target may swallow the ``OSError``: the
    exit status is what the harness sees from outside), and in its world's cgroup the
    kernel's OOM killer takes a unit before the leader that reports the world's exits."""
    if spec.file_size is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    if spec.cgroup:
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass


MADV_COLLAPSE = 25  # Linux 6.1
_HUGE = 1 << 21


def share_in_huge_pages() -> int:
    """Map this process's heap in 2 MB pages, so that a fork copies a few hundred page
    table entries rather than tens of thousands, and an exit frees as few; returns how
    many bytes the kernel mapped so.

    The fork server calls it once its preloads are imported. glibc's own heap is already
    in huge pages (``GLIBC_TUNABLES``, ``harness.world.pool``); Python's object arenas are
    not, and a server holding torch has ~100 MB of them. A fork and an exit of such a
    process took 8-12 ms before, 3-4 ms after, on this project's 2-core machine: the
    largest part of a rank's own CPU. A process that writes a page still copies only that
    4 kB page (the kernel splits the huge one in the writer). ``MADV_COLLAPSE`` asks for it
    now, whatever the machine's THP setting, and leaves later pages as the setting has
    them; a kernel without it (before 6.1) or without free huge pages
    leaves everything as it was.
    """
    if sys.platform != "linux":
        return 0
    import ctypes

    madvise = _libc_of().madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    mapped = 0
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return 0
    for line in lines:
        fields = line.split()
        if len(fields) < 2 or not fields[1].startswith("rw") or fields[1][3] != "p" or (
                len(fields) > 5 and fields[5] != "[heap]"):
            continue  # private, writable and anonymous (or the brk heap) only
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        start, end = (lo + _HUGE - 1) & ~(_HUGE - 1), hi & ~(_HUGE - 1)
        if end - start >= _HUGE and madvise(start, end - start, MADV_COLLAPSE) == 0:
            mapped += end - start
    return mapped


def unit_name(role: str, ident: int) -> str:
    """What a unit's files are called in its world's directory: ``rank-3``, ``host-1``."""
    return f"rank-{ident}" if role == "rank" else f"host-{ident}"


def say_failed(outdir: str, name: str) -> None:
    """In a unit or a world's leader (``name``: ``rank-3``, ``host-1``, ``leader``), for the
    exception being handled: the harness failed there, not the target. Its traceback goes
    to this process's stderr and, where the world's directory takes it, beside its output
    (``UNIT_FAILED_SUFFIX``: the stderr may not be the capture file yet, or be what
    failed), for the report to say what failed (``failure_of``)."""
    import traceback

    text = traceback.format_exc()
    try:
        os.write(2, text.encode(errors="replace"))
    except OSError:
        pass
    try:
        fd = posix.open(os.path.join(outdir, name + UNIT_FAILED_SUFFIX),  # never the view
                        os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:
        return  # its stderr has it: the report says the harness failed, without the why
    try:
        os.write(fd, text.encode(errors="replace"))
    finally:
        os.close(fd)


def failure_of(outdir: str, name: str, limit: int = 64 * 1024) -> tuple[str, str]:
    """In the harness: the traceback ``say_failed`` left for ``name``, and its last line
    (the exception), or ("", "") if it left none."""
    try:
        with open(os.path.join(outdir, name + UNIT_FAILED_SUFFIX), "rb") as f:
            text = f.read(limit).decode(errors="replace")
    except OSError:
        return "", ""
    lines = text.strip().splitlines()
    return text, lines[-1] if lines else "no traceback"


def output_paths(spec: WorldSpec, name: str) -> tuple[str, str]:
    return (os.path.join(spec.outdir, f"{name}.stdout"),
            os.path.join(spec.outdir, f"{name}.stderr"))


def redirect_output(spec: WorldSpec, name: str, life: int = 0, round_: int = 0) -> None:
    """Point fds 1 and 2 at the capture files; a restarted rank, or one a later
    ``xmp.spawn`` of its launcher started again, appends to its own."""
    again = (f"--- restarted after pre-emption (life {life}) ---\n" if life else
             f"--- started again by xmp.spawn call {round_ + 1} of its launcher ---\n"
             if round_ else "")
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if again else os.O_TRUNC)
    for fd, path in zip((1, 2), output_paths(spec, name)):
        target = os.open(path, flags, 0o644)
        if again:
            os.write(target, again.encode())
        os.dup2(target, fd)
        os.close(target)


_fallback_fd: int | None = None
_fallback_deadline = 0.0


def arm_fallback_stacks(spec: WorldSpec, name: str) -> None:
    # A C-level thread that dumps every stack at the deadline even if the rank
    # holds the GIL or blocks every signal; used when the control thread is mute.
    global _fallback_fd, _fallback_deadline
    path = os.path.join(spec.outdir, f"{name}.faulthandler")
    _fallback_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    _fallback_deadline = spec.deadline
    _rearm_fallback()


def _rearm_fallback() -> None:
    delay = max(_fallback_deadline - real_time() - 0.05, 0.01)  # the machine's: a last resort
    faulthandler.dump_traceback_later(delay, exit=False, file=_fallback_fd)


def fork() -> int:
    """``os.fork`` for a process that may hold the fallback timer.

    faulthandler's timer thread does not survive a fork, and re-arming it in
    the child would wait forever on that thread: disarm around the fork.
    """
    faulthandler.cancel_dump_traceback_later()
    pid = _fork()  # the machine's: the harness's own fork starts a unit, not a process of the target's
    if pid != 0 and _fallback_fd is not None:
        _rearm_fallback()
    return pid
