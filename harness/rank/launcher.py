"""Exec mode's ``xmp.spawn``: fork this host's ranks from its launcher, the way
PJRT's spawn runs them through a ProcessPoolExecutor: wait for all, re-raise
the first failure in ordinal order, turn a hard death into BrokenProcessPool.

The shim asks for this through its runtime protocol (``Runtime.spawn``)."""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
from collections.abc import Callable
from typing import Any

from harness.rank import bootstrap, process
from harness.rank import clock as rank_clock
from harness.rank.runtime import RankContext
from harness.vocabulary import UNIT_FAILED


def spawn_local_ranks(ctx: RankContext, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Fork this host's ranks for one ``xmp.spawn`` call and wait for them all.

    Every call forks a fresh set (a spawn round): the k-th call's processes
    are the k-th lives of the host's ranks, and the harness pairs their
    collectives with the k-th round of every other host. Spawning does not
    initialise the launcher's own runtime, so it may spawn again.
    """
    spec = ctx.spec
    round_ = ctx.rounds
    ctx.rounds += 1
    clock = rank_clock.current()
    start_ns = clock.read() if clock is not None else 0  # its ranks start at the launcher's time
    children: dict[int, tuple[int, int]] = {}  # pid -> (rank, read end of its result pipe)
    for rank in spec.topology.ranks_of_host(ctx.host):
        read_fd, write_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        launcher = os.getpid()
        pid = process.fork()
        if pid == 0:
            try:
                process.die_with_parent(launcher)
                os.close(read_fd)
                for _, other in children.values():
                    os.close(other)
                process.after_fork()
                child = bootstrap.become_rank(spec, rank, round_=round_, start_ns=start_ns)
                child.result_fd = write_fd
                bootstrap.report_and_exit(child, lambda r=rank: fn(r, *args))
            except BaseException:  # noqa: BLE001 - the harness's own failure inside a rank
                process.say_failed(spec.outdir, process.unit_name("rank", rank))
            finally:
                os._exit(UNIT_FAILED)
        os.close(write_fd)
        children[pid] = (rank, read_fd)
    assert ctx.channel is not None
    # From here this process only waits for its ranks: the world's clock counts them in
    # before it counts the launcher out (the same socket carries both words, in order).
    ctx.channel.notify({"type": "spawning", "ranks": [rank for rank, _ in children.values()]})

    results: dict[int, dict[str, Any]] = {}
    buffers: dict[int, bytearray] = {fd: bytearray() for _, fd in children.values()}
    pidfds = {os.pidfd_open(pid): pid for pid in children}
    pipes = {fd: rank for rank, fd in children.values()}
    broken = False
    while pidfds:
        # Waiting for ranks that run, the launcher is idle; once it has ended them (one
        # died hard), it holds the world's clock until their deaths, which it caused, are told.
        idle = clock is not None and not broken
        with clock.outside() if idle else contextlib.nullcontext():  # type: ignore[union-attr]
            ready, _, _ = select.select(list(pidfds) + list(pipes), [], [])
        for fd in ready:
            if fd in pipes:
                chunk = os.read(fd, 65536)
                if chunk:
                    buffers[fd].extend(chunk)
                    continue
                rank = pipes.pop(fd)
                os.close(fd)
                if buffers[fd]:
                    results[rank] = pickle.loads(bytes(buffers[fd]))
            elif fd in pidfds:
                pid = pidfds.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                rank = children[pid][0]
                ctx.channel.notify({"type": "rank-exit", "rank": rank, "status": status})
                if os.WIFSIGNALED(status) and not broken:
                    broken = True
                    for other, (_, _) in children.items():
                        if other != pid:
                            try:
                                os.kill(other, signal.SIGTERM)
                            except ProcessLookupError:
                                pass
    # A child's pidfd and its pipe can be ready in the same round: every child is
    # gone now, so what is left in the pipes is complete.
    for fd, rank in pipes.items():
        while chunk := os.read(fd, 65536):
            buffers[fd].extend(chunk)
        os.close(fd)
        if buffers[fd]:
            results[rank] = pickle.loads(bytes(buffers[fd]))
    if broken:
        from concurrent.futures.process import BrokenProcessPool
        raise BrokenProcessPool("A process in the process pool was terminated abruptly while "
                                "the future was running or pending.")
    for rank in sorted(results):
        result = results[rank]
        if not result.get("ok"):
            raise _rebuild(result["error"])


def _rebuild(error: dict[str, Any]) -> BaseException:
    from concurrent.futures.process import _RemoteTraceback

    exc: BaseException
    try:
        exc = pickle.loads(error["pickled"])
    except Exception:  # noqa: BLE001 - fall back to the text the child sent
        exc = RuntimeError(f"{error['type']}: {error['message']}")
    exc.__cause__ = _RemoteTraceback(error.get("traceback", ""))
    return exc
