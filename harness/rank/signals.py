"""Signals the world delivers (a pre-emption's notice), on the world's clock.

A notice is SIGTERM to every process of a host, at one world instant. What the
target does with it is its own Python handler (``signal.signal``), which runs in
its main thread: inside a wait, between two bytecodes, or never (the signal is
blocked or ignored). The world must not move while a handler runs, or a save
that takes 40 world seconds would finish "in no time" and a grace could never
run out. So the harness delivers a signal itself (``deliver``: the rank's
control thread, told by the harness; or the rank whose fault struck) and the
clock counts the main thread as running from the delivery until the handler
returns (``RankClock.signal_coming``/``handler_began``/``handler_ended``); a
handler's own waits and file operations are then the world's, as the rest of
the target's are.

Every Python handler the target sets goes through ``signal.signal`` and is
wrapped here to tell the clock when it starts and ends; ``signal.getsignal``
returns the target's own function, so code that compares handlers works. A
handler set in C (not through ``signal.signal``) runs unseen: its work holds
the clock only if the main thread was running anyway.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from harness.rank import clock as rank_clock
from harness.rank import guard, sweep

real_signal = signal.signal
real_getsignal = signal.getsignal

#: signum -> the handler the target set, as it set it (what ``getsignal`` answers)
_set_by_target: dict[int, Any] = {}


def world_signal(signalnum: int, handler: Any) -> Any:
    """``signal.signal``: the target's Python handler, wrapped so the clock knows it runs."""
    if signalnum == signal.SIGTERM and _notifier_replaced is not None \
            and getattr(real_getsignal(signal.SIGTERM), "_harness_notifier", False):
        _notifier_replaced()  # the XLA runtime's catcher is gone: it hears no notice now
    wrapped = _wrap(handler) if callable(handler) else handler
    previous = real_signal(signalnum, wrapped)  # the real checks: main thread, a valid signal
    previous = _set_by_target.pop(int(signalnum), previous)
    guard.HANDLED.discard(int(signalnum))
    if callable(handler):
        _set_by_target[int(signalnum)] = handler
        guard.HANDLED.add(int(signalnum))
    return previous


def world_getsignal(signalnum: int) -> Any:
    current = real_getsignal(signalnum)
    if getattr(current, "_harness_notifier", False):
        return None  # a handler set in C, as Python reports one
    if getattr(current, "_harness_wrapped", False):
        return _set_by_target.get(int(signalnum), current)
    return current


def _wrap(handler: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(handler)
    def on_signal(signum: int, frame: Any) -> Any:
        clock = rank_clock.current()
        if clock is None:
            return handler(signum, frame)
        token = clock.handler_began(signum)
        try:
            result = handler(signum, frame)
        except BaseException:
            clock.handler_ended(token, raised=True)
            raise
        clock.handler_ended(token)
        return result

    on_signal._harness_wrapped = True  # type: ignore[attr-defined]
    return on_signal


def _sigterm_notifier(signum: int, frame: Any) -> None:
    """The XLA runtime's SIGTERM catcher (tsl's ``SigtermNotifier``): a C handler that only
    notes the signal; the process lives on, and the world's sync point hears of it."""


_sigterm_notifier._harness_notifier = True  # type: ignore[attr-defined]
_notifier_replaced: Callable[[], None] | None = None


def catch_sigterm(replaced: Callable[[], None]) -> None:
    """The XLA runtime's preemption sync manager catches SIGTERM from now, as its C++
    handler does: a delivered SIGTERM no longer ends the process, ``getsignal`` answers
    None, and a handler the target sets later replaces it (``replaced`` is told)."""
    global _notifier_replaced
    _notifier_replaced = replaced
    real_signal(signal.SIGTERM, _sigterm_notifier)
    _set_by_target.pop(int(signal.SIGTERM), None)


def release_sigterm() -> None:
    """The manager shut down: SIGTERM's default action again, if its catcher still held it."""
    global _notifier_replaced
    _notifier_replaced = None
    if getattr(real_getsignal(signal.SIGTERM), "_harness_notifier", False):
        real_signal(signal.SIGTERM, signal.SIG_DFL)


#: a thread of this rank that waits for the harness's signal (``awaiting``)
_awaited: rank_clock.Waiter | None = None


@contextlib.contextmanager
def awaiting(host: int) -> Iterator[None]:
    """What the block sends (a fault that gives this rank's ``host`` a notice) is answered
    with a signal, or with the word that none comes (signal 0): on its way out, the block
    waits for it, so the rank's handler runs where the fault struck, in every run. The
    block is a turn of the world's clock, one that no other notice's turn commutes with:
    ranks struck at one instant, of one host or of several, give their notices in the
    seed's order (the world's notices, their hard stops and the history follow it)."""
    global _awaited
    clock = rank_clock.current()
    if clock is not None:
        clock.turn({"op": "notice", "path": "/notices", "where": "world"})
    waiter = _awaited = rank_clock.Waiter(None)
    try:
        yield
        if clock is not None:
            clock.block(waiter)
    finally:
        _awaited = None


def deliver(signum: int, told: int | None = None) -> None:
    """Deliver ``signum`` to this process, as a host's soft off does: to its main thread
    (where Python runs handlers) and to every process it started. ``told``: the world time
    the harness sent it at (a wake of this unit); None: this unit's own doing. Signal 0 is
    the harness's word that no signal comes."""
    clock = rank_clock.current()
    way = disposition(signum) if signum else NOTHING
    waiter = _awaited if clock is not None and told is not None else None
    if waiter is not None and way == NOTHING:  # it runs on at once: never a moment idle
        clock.notify(waiter)  # type: ignore[union-attr]
        waiter = None
    # The clock hears of a handler that runs (or a death) before the signal is sent, so the
    # handler counts; of a signal that does nothing only once it is sent, for it lets the
    # world move on: a signal sent later (a slow look at /proc for the children) could
    # find the main thread past its collective, its handler after its result.
    if clock is not None and way != NOTHING:
        clock.signal_coming(signum, way, told)
    if signum:
        for child in sweep.descendants(os.getpid()):  # off the world's clock: on the machine's
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signum)
        main = threading.main_thread().ident
        assert main is not None
        signal.pthread_kill(main, signum)
        if clock is not None and way == RUNS:
            clock.poke(main)  # asleep in a wait of the clock's: it runs the handler, waits on
    if clock is not None and way == NOTHING:
        clock.signal_coming(signum, way, told)
    if waiter is not None:
        clock.notify(waiter)  # type: ignore[union-attr] - after the kill: the handler first


#: What a signal delivered now does (``disposition``).
RUNS, DIES, NOTHING = "runs", "dies", "nothing"
#: Signals whose default action ends the process.
_TERMINATING = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                          signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE})


def disposition(signum: int) -> str:
    """What ``signum`` does if delivered now: a handler of the target's ``RUNS``, the
    process ``DIES`` (its default action), or ``NOTHING`` (ignored, blocked in the main
    thread, or a handler set in C, which runs unseen)."""
    if _blocked_in_main(signum):
        return NOTHING
    current = real_getsignal(signum)
    if getattr(current, "_harness_wrapped", False):
        return RUNS
    if getattr(current, "_harness_notifier", False):
        return NOTHING
    if current == signal.SIG_DFL and signum in _TERMINATING:
        return DIES
    return NOTHING


def deferring() -> set[int] | None:
    """Block, in this thread, the signals the target handles in Python, until ``undefer``:
    around a call that on a pod is C++ (a collective), where a handler waits for its return.
    None: nothing to block (no handler of the target's, or not the main thread)."""
    if not _set_by_target or threading.current_thread() is not threading.main_thread():
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _set_by_target.keys())


def undefer(previous: set[int] | None) -> None:
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _blocked_in_main(signum: int) -> bool:
    """Does the main thread block ``signum`` (``pthread_sigmask``)? Then it stays pending
    and its handler runs when the thread unblocks it, counted then."""
    try:  # a process's status is its main thread's (the thread group's leader)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError):
        pass
    return False


#: the machine's function -> the world's (``clock.install_functions`` puts them in place)
REPLACEMENTS = {"signal": (real_signal, world_signal),
                "getsignal": (real_getsignal, world_getsignal)}

