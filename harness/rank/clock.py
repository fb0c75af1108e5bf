"""A unit's side of the world clock: the time its code reads, and every wait it knows.

A unit (a rank, or in exec mode a host's launcher) reads the world's time, never
the machine's: ``time.time``, ``monotonic``, ``perf_counter`` (and ``_ns``),
``localtime()``, ``datetime.now`` and the rest answer from ``RankClock``. Every
wait the harness knows is a wait on that clock: ``time.sleep``, the timeouts of
``threading`` (``Condition``, ``Event``, ``Semaphore``, ``Barrier``, a ``Lock``'s
``acquire(timeout=)``, ``Thread.join``), ``queue.Queue``/``SimpleQueue`` and the
shim's collectives. The clock counts the unit's threads that run; when none
does, the unit is idle and says so (``idle``: the wakes it has taken, and its
earliest wake-up), and the harness moves the world's time (``world/clock.py``)
and wakes it (a ``time`` frame on its control socket, or a collective's reply).

While a unit computes, its reading advances by ``TICK_NS`` per time call and
never with the machine's time, so an import costs nothing and a busy-wait on
``time.monotonic()`` still ends; a reading that runs ``QUANTUM_NS`` ahead of the
world's waits for the world (the others may move meanwhile). A process the unit
forks is not part of the world: it reads the world's time as it was at the fork
plus the machine's time since, and waits in real time (``detach``).

What is not on the clock holds it (see docs/explanation/time.md): a thread
in a wait the harness does not know (a socket, ``select``, a C call, a lock made
before the rank's fork) counts as running.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import datetime
import functools
import gc
import heapq
import itertools
import os
import posix
import queue
import select
import selectors
import signal
import socket
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from harness.filesystem.mounts import LOOKS
from harness.rank.guard import Guard

NS = 1_000_000_000
#: The world's ``time.time()`` at its start: 2030-01-01T00:00:00Z, after any file of
#: the machine was written, the same on every machine (reproducible reports).
EPOCH_NS = 1_893_456_000 * NS
#: ``time.monotonic()`` (and ``perf_counter``) at the world's start: a host up an hour.
MONOTONIC_BASE_NS = 3_600 * NS
#: What one reading of the clock costs the unit's time while it computes (after
#: Shadow's "unblocked syscall latency"): a busy-wait on the clock still ends.
TICK_NS = 100_000
#: How far a computing unit's reading may run ahead of the world's before it waits
#: for the world (so that a busy-wait lets the others' wake-ups happen in order).
QUANTUM_NS = 10_000_000

# The machine's clocks, as they were before anything was replaced: the harness's own
# rank-side code that means wall time (a fallback timer, a signal on its way) reads these.
real_time = time.time
real_time_ns = time.time_ns
real_monotonic = time.monotonic
real_monotonic_ns = time.monotonic_ns
real_sleep = time.sleep
_allocate = _thread.allocate_lock
_get_ident = _thread.get_ident

PENDING, BLOCKED, NOTIFIED, TIMED_OUT, GONE = range(5)


class Waiter:
    """One thread's wait: a real lock it blocks on, released by whoever wakes it."""

    __slots__ = ("lock", "state", "deadline", "poked")

    def __init__(self, deadline: int | None) -> None:
        self.lock = _allocate()
        self.lock.acquire()
        self.state = PENDING
        self.deadline = deadline
        self.poked = False  # its lock was released for a signal's handler (``RankClock.poke``)


class TurnWaiter(Waiter):
    """A thread's wait for its turn before an operation another unit could see
    (``RankClock.turn``), and what that operation is (``op``, ``path``, ``where``): the
    world grants turns due at one instant together only where they commute."""

    __slots__ = ("doing",)

    def __init__(self, deadline: int, doing: dict[str, Any]) -> None:
        super().__init__(deadline)
        self.doing = doing


class FdWaiter(Waiter):
    """A wait on file descriptors that only this unit's own threads can make ready (a
    ``selectors`` wait of an ``asyncio`` loop on its self-pipe): its thread waits in the
    kernel on ``fds`` and on a wake descriptor of its own, which the world's clock writes
    in place of releasing a lock when the wait's deadline comes. Only a thread the clock
    counts waits so (``_world_select`` asks): any other waits on the machine's time."""

    __slots__ = ("wake", "_poll", "_look")

    def __init__(self, deadline: int | None, fds: dict[int, int]) -> None:
        self.state = PENDING
        self.deadline = deadline
        self.poked = False  # never poked: a signal's handler interrupts its poll by itself
        self.wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.lock = self  # what the clock releases
        # Two: its thread waits on one while another thread looks through the other (a
        # poll object refuses to be polled by two threads at once).
        self._poll, self._look = select.poll(), select.poll()
        for fd, events in fds.items():  # fd -> poll events
            self._poll.register(fd, events)
            self._look.register(fd, events)
        self._poll.register(self.wake, select.POLLIN)

    def release(self) -> None:
        os.eventfd_write(self.wake, 1)

    def ready(self) -> bool:
        """Is one of its descriptors ready now (it wakes by itself)?"""
        try:
            return bool(self._look.poll(0))
        except OSError:
            return True  # a descriptor closed under it: its selector says so once it wakes

    def wait(self) -> None:
        """In its thread: until a descriptor is ready or the clock wrote the wake."""
        self._poll.poll()

    def close(self) -> None:
        os.close(self.wake)


class RankClock:
    """This unit's reading of the world's time and the count of its threads that run.

    ``send`` carries a message to the harness on the unit's call socket (it is
    called with the clock's lock held, so that what the unit says arrives in the
    order it was true). Times are nanoseconds from the world's start.
    """

    def __init__(self, send: Callable[[dict[str, Any]], None], start_ns: int = 0) -> None:
        self._lock = Guard()  # no handler of the target's runs inside (guard.py)
        self._send = send
        self.now = start_ns  # this unit's reading
        self.synced = start_ns  # the world's time, as the harness last said it
        self.running = 1  # the thread that made the clock
        self.seen = 0  # wakes taken (replies to its waits, time frames)
        self.forked = False  # it started a process of its own (which may live on)
        self._timed: list[tuple[int, int, Waiter]] = []
        self._order = itertools.count()
        self._waiting: set[int] = set()  # threads inside a wait (a signal handler may nest)
        self._blocked_on: dict[int, Waiter] = {}  # thread -> the wait it sleeps in (``poke``)
        #: the threads the count covers: this one, and those started through ``threading``
        #: since (a thread C code starts, or the harness's own, waits on the machine's time)
        self._counted: set[int] = {_get_ident()}
        self.detached: tuple[int, int] | None = None  # a forked child: (world ns, machine ns)
        self._fd_waiters: set[FdWaiter] = set()  # threads in a wait on their own descriptors
        #: the world time before which no other unit can act (the harness said so when it
        #: woke this one alone: every other waits for later, or for this one): its turns
        #: until then are its own, with no word to the harness (None: none)
        self.alone: int | None = None
        self.alone_looks = False  # woken beside others: only its looks are its own
        #: signals delivered whose handler the count covers before it runs (a signal sent
        #: again before its handler runs is one: the kernel keeps one of each pending)
        self._coming: set[int] = set()
        self._raised_out: set[int] = set()  # threads a handler's exception takes out of a wait

    # -- reading -------------------------------------------------------------------------
    def read(self) -> int:
        """The world's time as this unit reads it; each reading costs ``TICK_NS``."""
        if self.detached is not None:
            return self._detached_now()
        me = _get_ident()
        with self._lock:
            t = self.now
            self.now = t + TICK_NS
            ahead = self.now - self.synced >= QUANTUM_NS and me in self._counted \
                and me not in self._waiting
        if ahead:
            self.block(Waiter(self.now))  # the world catches up; the others move meanwhile
        return t

    def turn(self, doing: dict[str, Any]) -> None:
        """This thread is about to do what another unit could see (``doing``: a file
        operation its view handles, as ``{"op", "path", "where"}``): it costs a tick, and
        it waits for the world to reach that time, so that units at one instant act in the
        seed's order (``world/clock.py``). Off the clock (a forked child, a thread the clock
        does not count, inside another wait) it is nothing."""
        if not self.counts():
            return
        with self._lock:
            self.now += TICK_NS
            at = self.now
            if self.alone is not None and at < self.alone and \
                    (not self.alone_looks or doing["op"] in LOOKS):
                return  # no other unit can act before then: the world would grant it at once
        self.block(TurnWaiter(at, doing))

    def wait_for_others(self, doing: dict[str, str], at_least_ns: int) -> None:
        """Wait before ``doing`` until every other unit has finished or waits on another
        (not on the clock), and at least ``at_least_ns``: a turn the world grants only then
        (``WorldClock``'s ``UNTIL_OTHERS_WAIT``), never one of its own."""
        if not self.counts():
            return
        with self._lock:
            self.now += TICK_NS
            at = self.now + max(0, at_least_ns)
        self.block(TurnWaiter(at, {**doing, "until": "others-wait"}))

    def deadline_after(self, seconds: float) -> int:
        """The world time ``seconds`` from now (a wait's deadline)."""
        return self.read() + max(0, round(seconds * NS))

    def _detached_now(self) -> int:
        assert self.detached is not None
        world, machine = self.detached
        return world + (real_monotonic_ns() - machine)

    # -- waiting -------------------------------------------------------------------------
    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            self.read()
            real_sleep(0)  # a yield, as sleep(0) is
            return
        self.block(Waiter(self.deadline_after(seconds)))

    def counts(self) -> bool:
        """Is a wait of this thread the world's (else the machine's: a forked child's, a
        thread the clock does not count, a wait a signal handler makes inside another)?"""
        me = _get_ident()
        return self.detached is None and me in self._counted and me not in self._waiting

    def block(self, waiter: Waiter) -> bool:
        """Wait until ``waiter`` is notified (True) or the world reaches its deadline
        (False). The thread no longer runs: the last one to stop makes the unit idle. An
        ``FdWaiter`` also ends, notified, when one of its descriptors is ready."""
        if not self.counts():
            return self._block_real(waiter)
        me = _get_ident()
        fds = waiter if isinstance(waiter, FdWaiter) else None
        with self._lock:
            if waiter.state == NOTIFIED:  # notified between its registration and now
                return True
            if waiter.deadline is not None and waiter.deadline <= self.synced:  # the world is there
                waiter.state = TIMED_OUT
                return False
            waiter.state = BLOCKED
            self.running -= 1
            self._waiting.add(me)
            outer = self._blocked_on.get(me)  # a handler's wait inside another: restored after
            self._blocked_on[me] = waiter
            if fds is not None:
                self._fd_waiters.add(fds)
            if waiter.deadline is not None:
                heapq.heappush(self._timed, (waiter.deadline, next(self._order), waiter))
            if self.running == 0:
                self._tell_idle()
        try:
            if fds is not None:
                fds.wait()
            else:
                while True:
                    waiter.lock.acquire()  # interruptible: a signal's handler runs, then it waits on
                    with self._lock:  # a poke (a handler that had to run now: it has) or the end?
                        if not (waiter.poked and waiter.state == BLOCKED):
                            break
                        waiter.poked = False
        except BaseException:
            with self._lock:
                if waiter.state == BLOCKED:  # the handler raised: this thread runs again
                    waiter.state = GONE
                    if me in self._raised_out:
                        self._raised_out.discard(me)  # counted since its handler began
                    else:
                        self.running += 1
            raise
        finally:
            self._waiting.discard(me)
            with self._lock:
                if outer is not None:
                    self._blocked_on[me] = outer
                else:
                    self._blocked_on.pop(me, None)
            if fds is not None:
                with self._lock:
                    self._fd_waiters.discard(fds)
                    if waiter.state == BLOCKED:  # a descriptor woke it: it runs again
                        waiter.state = NOTIFIED
                        self.running += 1
        return waiter.state == NOTIFIED

    def _block_real(self, waiter: Waiter) -> bool:
        """A wait off the clock: a forked child's, or one a signal handler makes inside
        another wait of the same thread."""
        with self._lock:
            if waiter.state == NOTIFIED:
                return True
            waiter.state = BLOCKED
        if waiter.deadline is None:
            waiter.lock.acquire()
        else:
            now = self._detached_now() if self.detached is not None else self.synced
            waiter.lock.acquire(True, max(0.0, (waiter.deadline - now) / NS))
        with self._lock:
            if waiter.state == BLOCKED:
                waiter.state = TIMED_OUT
        return waiter.state == NOTIFIED

    @staticmethod
    def _release(waiter: Waiter) -> None:
        """End a blocked wait (its new state set): its lock is released, unless a poke
        already did (the thread then sees the state when its acquire returns)."""
        if waiter.poked:
            waiter.poked = False
        else:
            waiter.lock.release()

    def poke(self, ident: int) -> None:
        """A signal was just sent to thread ``ident``: if it waits on the clock, release its
        lock once, so that it runs the signal's handler and waits on. The signal may have
        come after Python last looked for one and before the thread went to sleep in the
        kernel, where nothing would wake it (CPython runs a handler only between bytecodes)."""
        with self._lock:
            waiter = self._blocked_on.get(ident)
            if waiter is not None and waiter.state == BLOCKED and not waiter.poked:
                waiter.poked = True
                waiter.lock.release()

    def notify(self, waiter: Waiter) -> bool:
        """Wake ``waiter``'s thread (its wait ends as notified); False if its wait had
        already ended (timed out, or left by an exception): the notice is not taken."""
        with self._lock:
            if waiter.state == BLOCKED:
                waiter.state = NOTIFIED
                if self.detached is None:
                    self.running += 1  # counted by the waker: never a moment idle in between
                self._release(waiter)
                return True
            if waiter.state == PENDING:
                waiter.state = NOTIFIED
                return True
            return False

    # -- what the harness says -------------------------------------------------------------
    def on_time(self, t: int, alone: int | None = None, looks: bool = False) -> None:
        """The world's time is ``t``: wake every wait due by then (the control thread).
        ``alone``: no other unit can act before that time (``turn``); ``looks``: only its
        looks are its own until then (it was woken beside others)."""
        with self._lock:
            self.seen += 1
            self.alone, self.alone_looks = alone, looks
            self.synced = max(self.synced, t)
            self.now = max(self.now, t)
            timed = self._timed
            while timed and timed[0][0] <= t:
                _, _, waiter = heapq.heappop(timed)
                if waiter.state == BLOCKED:
                    waiter.state = TIMED_OUT
                    self.running += 1
                    self._release(waiter)
            if self.running == 0:  # nothing was due after all (a wait left meanwhile)
                self._tell_idle()

    def request(self, send: Callable[[dict[str, Any] | None], None]) -> None:
        """A request whose reply wakes this thread (a collective, a send, a recv) is being
        sent: the thread waits from now, and ``send`` gets the idle word if that made the
        unit idle, to carry in the request (the same frame: it cannot be overtaken)."""
        if self.detached is not None:
            send(None)
            return
        with self._lock:
            self.alone = None  # what it asks may wake another unit (a send, a collective)
            self.running -= 1
            send(self._idle_word() if self.running == 0 and not self._woken() else None)

    def replied(self, t: int) -> None:
        """The reply came (at world time ``t``): the thread runs again."""
        if self.detached is not None:
            return
        with self._lock:
            self.seen += 1
            self.running += 1
            self.synced = max(self.synced, t)
            self.now = max(self.now, t)

    # -- signals (``harness.rank.signals``) ---------------------------------------------------
    def signal_coming(self, signum: int, disposition: str, told: int | None) -> None:
        """A signal is being delivered to the main thread (``signals.disposition``: what it
        does). A Python handler of the target's runs: the unit runs from now until it
        returns (``handler_began``), so the world does not move while it does; it dies: the
        unit stays woken until the harness hears of its exit. ``told``: the harness sent it
        (a wake) at this world time; None: the unit's own fault did."""
        if self.detached is not None:
            return
        with self._lock:
            if told is not None:
                self.seen += 1
                self.synced = max(self.synced, told)
                self.now = max(self.now, told)
            if disposition == "runs":
                if signum not in self._coming:
                    self._coming.add(signum)
                    self.running += 1
            elif disposition == "nothing" and told is not None and self.running == 0:
                self._tell_idle()  # nothing of it runs: idle again, with the wake taken

    def handler_began(self, signum: int) -> tuple[bool, bool]:
        """A handler of the target's starts in this thread: it runs, on the world's clock,
        even if the thread was inside a wait. Returns what ``handler_ended`` undoes."""
        if self.detached is not None:
            return False, False
        me = _get_ident()
        with self._lock:
            took = signum in self._coming
            self._coming.discard(signum)
            nested = me in self._waiting and me in self._counted
            if nested:
                self._waiting.discard(me)
                if not took:
                    self.running += 1
            return nested, took or nested

    def handler_ended(self, token: tuple[bool, bool], raised: bool = False) -> None:
        """The handler returned (or ``raised``: its exception ends the wait it interrupted,
        and the thread runs on, counted)."""
        nested, counted = token
        if self.detached is not None:
            return
        with self._lock:
            if nested and raised:
                self._raised_out.add(_get_ident())
                return
            if nested:
                self._waiting.add(_get_ident())
            if counted:
                self.running -= 1
                if self.running == 0:
                    self._tell_idle()

    # -- threads ---------------------------------------------------------------------------
    def thread_started(self) -> None:
        """Counted before the new thread exists: never a moment when it runs uncounted."""
        if self.detached is None:
            with self._lock:
                self.running += 1

    def thread_began(self) -> None:
        """In the new thread, first thing: its waits are the world's from here."""
        self._counted.add(_get_ident())

    def thread_ended(self) -> None:
        if self.detached is None:
            with self._lock:
                self._counted.discard(_get_ident())
                self.running -= 1
                if self.running == 0:
                    self._tell_idle()

    @contextlib.contextmanager
    def outside(self) -> Iterator[None]:
        """A wait the harness knows to end only when another unit does (an exec-mode
        launcher waiting for its ranks): idle meanwhile, with no wake-up of its own.
        It runs again without a word from the harness, which hears of it first from
        the exit of the rank that woke it (that rank runs, and holds the clock, until
        its exit is told)."""
        if self.detached is not None:
            yield
            return
        with self._lock:
            self.running -= 1
            if self.running == 0:
                self._tell_idle()
        try:
            yield
        finally:
            with self._lock:
                self.running += 1

    def started_process(self) -> None:
        """The unit started a process of its own: while it lives, the harness lets the
        world's time follow the machine's (it cannot see what that process waits on)."""
        with self._lock:
            if not self.forked and self.detached is None:
                self.forked = True
                self._send({"type": "forked"})

    def cut_off(self) -> None:
        """The harness dropped this unit (it refused what the unit said, or it is gone):
        no time will come from it again. The unit runs on the machine's time from here, and
        every wait that a time frame would have ended ends now, so that it runs to its end
        (its fate is the refusal's) rather than wait forever for a turn."""
        with self._lock:
            if self.detached is not None:
                return
            self.detached = (self.now, real_monotonic_ns())
            self.alone = None
            for _, _, waiter in self._timed:
                if waiter.state == BLOCKED:
                    waiter.state = TIMED_OUT
                    self.running += 1
                    self._release(waiter)
            self._timed = []

    # -- a forked child ------------------------------------------------------------------
    def detach(self) -> None:
        """In a process forked from this unit: off the world, on the machine's time from here."""
        self._lock = Guard()  # no handler of the target's runs inside (guard.py)
        self.alone = None
        self.detached = (self.now, real_monotonic_ns())
        self._timed = []
        self._waiting = set()
        self._blocked_on = {}
        self._counted = set()
        self._fd_waiters = set()

    # -- what it says -----------------------------------------------------------------------
    def _idle_word(self) -> dict[str, Any]:
        timed = self._timed
        while timed and timed[0][2].state != BLOCKED:
            heapq.heappop(timed)
        if not timed:
            return {"seen": self.seen, "wake": None}
        word: dict[str, Any] = {"seen": self.seen, "wake": timed[0][0]}
        if isinstance(timed[0][2], TurnWaiter):
            word["turn"] = timed[0][2].doing
        return word

    def _woken(self) -> bool:
        """Is a thread waiting on its own descriptors about to run (one is ready)?"""
        return any(w.state == BLOCKED and w.ready() for w in self._fd_waiters)

    def _tell_idle(self) -> None:
        if not self._woken():  # else that thread runs, and says so when it stops again
            self._send({"type": "idle", **self._idle_word()})


# -- the clock this process runs on --------------------------------------------------------

_clock: RankClock | None = None


def current() -> RankClock | None:
    return _clock


# -- time --------------------------------------------------------------------------------

# Before a unit has its clock (a world's leader, which installs these functions once for all
# its units, and a unit's own start before ``install``), they are the machine's.

def world_time() -> float:
    clock = _clock
    return real_time() if clock is None else (EPOCH_NS + clock.read()) / NS


def world_time_ns() -> int:
    clock = _clock
    return real_time_ns() if clock is None else EPOCH_NS + clock.read()


def world_monotonic() -> float:
    clock = _clock
    return real_monotonic() if clock is None else (MONOTONIC_BASE_NS + clock.read()) / NS


def world_monotonic_ns() -> int:
    clock = _clock
    return real_monotonic_ns() if clock is None else MONOTONIC_BASE_NS + clock.read()


#: what CPython says of a NaN where it converts a timeout (``_PyTime_FromSecondsObject``)
NAN_TIMEOUT = "Invalid value NaN (not a number)"


def world_sleep(secs: float) -> None:
    clock = _clock
    if clock is None or not isinstance(secs, (int, float)):
        return real_sleep(secs)  # (the machine's own TypeError for a non-number)
    if secs != secs:
        raise ValueError(NAN_TIMEOUT)
    if secs < 0:
        raise ValueError("sleep length must be non-negative")
    clock.sleep(secs)


_real_localtime, _real_gmtime = time.localtime, time.gmtime
_real_ctime, _real_asctime, _real_strftime = time.ctime, time.asctime, time.strftime
_real_clock_gettime = getattr(time, "clock_gettime", None)
_real_clock_gettime_ns = getattr(time, "clock_gettime_ns", None)
_WALL_CLOCKS = {getattr(time, n) for n in ("CLOCK_REALTIME", "CLOCK_TAI") if hasattr(time, n)}
_MONO_CLOCKS = {getattr(time, n) for n in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW",
                                           "CLOCK_BOOTTIME") if hasattr(time, n)}


def world_localtime(secs: float | None = None) -> time.struct_time:
    return _real_localtime(world_time() if secs is None else secs)


def world_gmtime(secs: float | None = None) -> time.struct_time:
    return _real_gmtime(world_time() if secs is None else secs)


def world_ctime(secs: float | None = None) -> str:
    return _real_ctime(world_time() if secs is None else secs)


def world_asctime(t: Any = None) -> str:
    return _real_asctime(world_localtime() if t is None else t)


def world_strftime(fmt: str, t: Any = None) -> str:
    return _real_strftime(fmt, world_localtime() if t is None else t)


def world_clock_gettime(clk_id: int) -> float:
    if clk_id in _WALL_CLOCKS:
        return world_time()
    if clk_id in _MONO_CLOCKS:
        return world_monotonic()
    assert _real_clock_gettime is not None
    return _real_clock_gettime(clk_id)


def world_clock_gettime_ns(clk_id: int) -> int:
    if clk_id in _WALL_CLOCKS:
        return world_time_ns()
    if clk_id in _MONO_CLOCKS:
        return world_monotonic_ns()
    assert _real_clock_gettime_ns is not None
    return _real_clock_gettime_ns(clk_id)


#: where each function of ``time`` goes: the machine's function -> the world's
TIME = {
    "time": world_time, "time_ns": world_time_ns, "monotonic": world_monotonic,
    "monotonic_ns": world_monotonic_ns, "perf_counter": world_monotonic,
    "perf_counter_ns": world_monotonic_ns, "sleep": world_sleep, "localtime": world_localtime,
    "gmtime": world_gmtime, "ctime": world_ctime, "asctime": world_asctime,
    "strftime": world_strftime, "clock_gettime": world_clock_gettime,
    "clock_gettime_ns": world_clock_gettime_ns,
}


# -- threading -------------------------------------------------------------------------------

class WorldLock:
    """``threading.Lock`` whose blocked ``acquire`` is a wait the world knows (with a
    timeout on the world's clock): the thread that holds it may be the one asleep."""

    __slots__ = ("_lock", "_meta", "_waiters", "__weakref__")

    def __init__(self) -> None:
        self._lock = _allocate()
        self._meta = Guard()  # the waiters and the hand-over; never held long (guard.py)
        self._waiters: deque[Waiter] = deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if timeout != timeout:  # converted first, as the machine's lock does
            raise ValueError(NAN_TIMEOUT)
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            return self._lock.acquire(False)
        if timeout != -1 and timeout < 0:
            raise ValueError("timeout value must be a non-negative number")
        if self._lock.acquire(False):
            return True
        clock = _clock
        if clock is None or clock.detached is not None:
            return self._lock.acquire(True, timeout)
        deadline = None if timeout == -1 else clock.deadline_after(timeout)
        while True:
            waiter = Waiter(deadline)
            with self._meta:
                if self._lock.acquire(False):
                    return True
                self._waiters.append(waiter)
            woke = clock.block(waiter)
            if self._lock.acquire(False):
                if not woke:
                    self._forget(waiter)
                return True
            if not woke:
                self._forget(waiter)
                return False

    def _forget(self, waiter: Waiter) -> None:
        with self._meta:
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass

    def release(self) -> None:
        self._lock.release()  # the machine's RuntimeError if it was not held
        with self._meta:
            clock = _clock
            while self._waiters:
                waiter = self._waiters.popleft()
                if clock is None or clock.notify(waiter):
                    if clock is None:
                        waiter.lock.release()
                    break

    def locked(self) -> bool:
        return self._lock.locked()

    __enter__ = acquire

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _at_fork_reinit(self) -> None:
        self._lock = _allocate()
        self._meta = Guard()
        self._waiters = deque()

    def __repr__(self) -> str:
        return f"<{'locked' if self._lock.locked() else 'unlocked'} world lock at {id(self):#x}>"


def world_rlock(*args: Any, **kwargs: Any) -> Any:
    """``threading.RLock``: the pure-Python one, built on ``WorldLock``."""
    return threading._PyRLock(*args, **kwargs)  # type: ignore[attr-defined]


_condition_wait = threading.Condition.wait
_condition_notify = threading.Condition.notify
_thread_start = threading.Thread.start
_thread_join = threading.Thread.join
_thread_bootstrap_inner = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]


def _wait(self: threading.Condition, timeout: float | None = None) -> bool:
    clock = _clock
    if clock is None or clock.detached is not None:
        return _condition_wait(self, timeout)
    if timeout is not None and timeout != timeout:  # Python's wait: not > 0, so no wait
        return _condition_wait(self, timeout)
    if not self._is_owned():  # type: ignore[attr-defined]
        raise RuntimeError("cannot wait on un-acquired lock")
    waiter = Waiter(None if timeout is None else clock.deadline_after(timeout))
    self._waiters.append(waiter)  # type: ignore[attr-defined]
    saved = self._release_save()  # type: ignore[attr-defined]
    woke = False
    try:
        woke = clock.block(waiter)
        return woke
    finally:
        self._acquire_restore(saved)  # type: ignore[attr-defined]
        if not woke:
            try:
                self._waiters.remove(waiter)  # type: ignore[attr-defined]
            except ValueError:
                pass


def _notify(self: threading.Condition, n: int = 1) -> None:
    if not self._is_owned():  # type: ignore[attr-defined]
        raise RuntimeError("cannot notify on un-acquired lock")
    waiters = self._waiters  # type: ignore[attr-defined]
    clock = _clock
    while waiters and n > 0:
        waiter = waiters.popleft()
        if isinstance(waiter, Waiter):
            woke = clock.notify(waiter) if clock is not None else _release(waiter.lock)
        else:  # a machine lock, from a wait begun before the clock (or in a forked child)
            woke = _release(waiter)
        if woke:
            n -= 1


def _release(lock: Any) -> bool:
    try:
        lock.release()
        return True
    except RuntimeError:
        return False


def _start(self: threading.Thread) -> None:
    clock = _clock
    if clock is None or getattr(self, "_harness_uncounted", False):
        return _thread_start(self)
    self._harness_done = threading.Event()  # type: ignore[attr-defined]
    clock.thread_started()
    try:
        _thread_start(self)
    except BaseException:
        clock.thread_ended()
        raise


def _bootstrap_inner(self: threading.Thread) -> None:
    clock = _clock
    if clock is not None and getattr(self, "_harness_done", None) is not None:
        clock.thread_began()
    try:
        _thread_bootstrap_inner(self)
    finally:
        done = getattr(self, "_harness_done", None)
        clock = _clock
        if done is not None and clock is not None:
            done.set()  # its joiners run again, counted by this thread
            clock.thread_ended()


def _join(self: threading.Thread, timeout: float | None = None) -> None:
    done = getattr(self, "_harness_done", None)
    if done is None or _clock is None or _clock.detached is not None:
        return _thread_join(self, timeout)
    if not self._started.is_set():  # type: ignore[attr-defined]
        raise RuntimeError("cannot join thread before it is started")
    if self is threading.current_thread():
        raise RuntimeError("cannot join current thread")
    if timeout is not None and timeout != timeout:  # max(nan, 0) reaches the lock's acquire
        raise ValueError(NAN_TIMEOUT)
    if done.wait(timeout):
        _thread_join(self, None)  # its last instructions, after its run ended: microseconds


# -- selectors (and so asyncio) ------------------------------------------------------------

#: the ``select`` of each selector class that defines its own, as the machine has it
_SELECTS = {cls: vars(cls)["select"] for cls in vars(selectors).values()
            if isinstance(cls, type) and issubclass(cls, selectors.BaseSelector)
            and "select" in vars(cls) and not getattr(vars(cls)["select"], "__isabstractmethod__", False)}
_POLL_EVENTS = {selectors.EVENT_READ: select.POLLIN, selectors.EVENT_WRITE: select.POLLOUT}
#: (fd, device, inode) -> is it a socket whose peer is this process (a ``socketpair``)?
_own_sockets: dict[tuple[int, int, int], bool] = {}


def _own(fd: int) -> bool:
    """Can only this process's own threads make ``fd`` ready? True for a socket whose peer
    is this process (a ``socketpair``: an asyncio loop's self-pipe); a pipe, a socket to
    another process (a rank's, a server's) or anything else can be made ready from outside
    the world's clock, and its wait holds the clock."""
    try:
        st = posix.fstat(fd)  # the machine's (never the view: it is the harness asking)
    except OSError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        return False
    key = (fd, st.st_dev, st.st_ino)
    known = _own_sockets.get(key)
    if known is None:
        try:
            with socket.socket(fileno=posix.dup(fd)) as sock:
                peer = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            known = int.from_bytes(peer[:4], sys.byteorder) == os.getpid()
        except OSError:
            known = False
        _own_sockets[key] = known
    return known


def _world_select(real: Callable[..., Any]) -> Callable[..., Any]:
    """A selector's ``select`` whose timeout is the world's, when every descriptor it
    watches is one only this unit's threads can make ready (``_own``, and the unit has
    started no process, which would hold a copy of each): an asyncio loop's ``sleep``,
    ``wait_for`` and timers then wait on the world's clock. Any other wait is the
    machine's, as before (it holds the clock)."""
    @functools.wraps(real)
    def select_(self: Any, timeout: float | None = None) -> Any:
        clock = _clock
        if clock is None or not clock.counts() or clock.forked or (
                timeout is not None and timeout <= 0):  # a child may hold any descriptor
            return real(self, timeout)
        keys = self.get_map().values()
        if not all(_own(key.fd) for key in keys):
            return real(self, timeout)
        ready = real(self, 0)
        if ready:
            return ready
        fds = {key.fd: sum(p for e, p in _POLL_EVENTS.items() if key.events & e)
               for key in keys}
        waiter = FdWaiter(None if timeout is None else clock.deadline_after(timeout), fds)
        try:
            clock.block(waiter)
        finally:
            waiter.close()
        return real(self, 0)
    return select_


# -- datetime ----------------------------------------------------------------------------------

def _now(cls: Any, tz: Any = None) -> Any:
    return cls.fromtimestamp(world_time(), tz)


def _utcnow(cls: Any) -> Any:
    return cls.fromtimestamp(world_time(), datetime.timezone.utc).replace(tzinfo=None)


def _today(cls: Any) -> Any:
    return cls.fromtimestamp(world_time())


def _patch_type(cls: type, name: str, value: Any) -> None:
    """Set a method of a built-in type (``datetime.now``), where ``setattr`` refuses:
    every reference to the class, bound before this process was forked or after, then
    reads the world's time. Undone by ``uninstall``."""
    namespace = gc.get_referents(cls.__dict__)[0]
    _saved_types.append((cls, name, namespace.get(name)))
    namespace[name] = value
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


_saved_types: list[tuple[type, str, Any]] = []


# -- install -------------------------------------------------------------------------------

_saved: list[tuple[Any, str, Any]] = []
_functions = False  # the world's functions are in place (``install_functions``)
#: references to the machine's functions held by modules imported before the fork
#: (``threading._time``, ``queue.time``, ``from time import sleep``): found once, in the
#: fork server (``find_early_bindings``), rebound in each unit
_early: list[tuple[Any, Any, Any]] | None = None
_scanned: set[str] = set()  # the modules looked at for them
#: modules whose own references stay the machine's: the harness's (it means wall time
#: where it reads it), and those ``install`` rebinds by hand
_KEEP = ("harness", "time", "threading", "_thread", "datetime", "_datetime", "queue", "_queue",
         "importlib", "_frozen_importlib", "_frozen_importlib_external", "faulthandler")


def _set(owner: Any, name: str, value: Any) -> None:
    from harness.rebinding import replace

    replace(owner, name, value, _saved)


def _replacements() -> dict[int, Any]:
    """id of a machine function or class -> what stands in its place in a unit."""
    out = {id(getattr(time, name)): world for name, world in TIME.items() if hasattr(time, name)}
    out[id(_thread.allocate_lock)] = WorldLock
    out[id(threading.RLock)] = world_rlock
    out[id(queue.SimpleQueue)] = queue._PySimpleQueue  # type: ignore[attr-defined]
    out.update({k: v for k, v in _STARTS.items()})
    from harness.rank import signals

    out.update({id(real): world for real, world in signals.REPLACEMENTS.values()})
    return out


def find_early_bindings() -> list[tuple[Any, Any, Any]]:
    """Where modules imported before the fork hold the machine's clock functions, locks or
    queues (run once in the fork server, as ``filesystem.patch.find_early_bindings``)."""
    global _early
    from harness.rebinding import scan_modules

    _early = [*(_early or ()), *scan_modules(set(_replacements()), _KEEP, _scanned)]
    return _early


def install(clock: RankClock) -> None:
    """Make ``clock`` this process's time and the judge of its waits (once per unit;
    a unit forked from another replaces its parent's)."""
    global _clock
    inherited = _clock is not None
    _clock = clock
    install_functions()
    if inherited:
        return
    logging = sys.modules.get("logging")  # its records' relativeCreated count from its import
    if logging is not None and hasattr(logging, "_startTime"):
        _set(logging, "_startTime", (EPOCH_NS + clock.now) / NS)  # a look, not a reading


def install_functions() -> None:
    """Put the world's functions in the place of the machine's, once per process: each is
    the machine's while the process has no clock (a world's leader installs them for all
    its units, which inherit them with its pages)."""
    global _functions
    if _functions:
        return
    _functions = True
    for name, world in TIME.items():
        if hasattr(time, name):
            _set(time, name, world)
    _set(threading, "_time", world_monotonic)
    _set(threading, "Lock", WorldLock)
    _set(threading, "_allocate_lock", WorldLock)
    _set(threading, "RLock", world_rlock)
    _set(threading.Condition, "wait", _wait)
    _set(threading.Condition, "notify", _notify)
    _set(threading.Thread, "start", _start)
    _set(threading.Thread, "join", _join)
    _set(threading.Thread, "_bootstrap_inner", _bootstrap_inner)
    _set(queue, "time", world_monotonic)
    from harness.rank import signals

    for name, (_, world) in signals.REPLACEMENTS.items():
        _set(signal, name, world)
    _set(queue, "SimpleQueue", queue._PySimpleQueue)  # type: ignore[attr-defined]
    for cls, real in _SELECTS.items():
        _set(cls, "select", _world_select(real))
    try:
        _patch_type(datetime.datetime, "now", classmethod(_now))
        _patch_type(datetime.datetime, "utcnow", classmethod(_utcnow))
        _patch_type(datetime.date, "today", classmethod(_today))
    except Exception:  # noqa: BLE001 - another interpreter: datetime keeps the machine's time
        pass
    _watch_process_starts()
    _rebind(_early if _early is not None else find_early_bindings())
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _rebind(sites: list[tuple[Any, Any, Any]]) -> None:
    from harness.rebinding import rebind

    rebind(sites, _replacements(), _saved)


def _after_fork_in_child() -> None:
    clock = _clock
    if clock is not None and clock.detached is None:
        clock.detach()


def _counted(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a way to start a process), telling the clock that the unit did once the
    process is there: a start the kernel refused (``EAGAIN`` at a process limit) started
    nothing, and the harness must not say the rank ran one. ``system`` waits for its
    process: the clock is told before, as it would not be until the process ended."""
    waits = fn.__name__ == "system"

    @functools.wraps(fn)  # its module and name: a value holding it pickles as it did
    def start(*args: Any, **kwargs: Any) -> Any:
        clock = _clock
        if clock is not None and waits:
            clock.started_process()
        started = fn(*args, **kwargs)
        pid = started[0] if isinstance(started, tuple) else started
        if clock is not None and not waits and pid and clock is _clock:  # not in the child
            clock.started_process()
        return started
    return start


def _process_starts() -> list[tuple[Any, str]]:
    """Where Python code starts a process from: ``os``/``posix`` (fork, posix_spawn,
    system) and ``_posixsubprocess.fork_exec`` (``subprocess``, which binds it early)."""
    import posix

    sites: list[tuple[Any, str]] = []
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(posix, name):
            sites += [(posix, name), (os, name)]  # posix: where pickle finds it by its name
    try:
        import _posixsubprocess
    except ImportError:
        return sites
    return sites + [(_posixsubprocess, "fork_exec")]


#: the machine's function -> the one that counts the process it starts (made once)
_STARTS = {id(fn): _counted(fn) for fn in {id(getattr(o, n)): getattr(o, n)
                                             for o, n in _process_starts()}.values()}


def _watch_process_starts() -> None:
    """Tell the clock when the unit starts a process of its own, through the functions
    Python code calls (references bound before the fork are rebound with the rest)."""
    for owner, name in _process_starts():
        real = getattr(owner, name)
        if id(real) in _STARTS:
            _set(owner, name, _STARTS[id(real)])


def uninstall() -> None:
    """Back to the machine's clock (a test's process)."""
    global _clock, _functions
    from harness.rebinding import undo

    undo(_saved)
    while _saved_types:
        cls, name, value = _saved_types.pop()
        namespace = gc.get_referents(cls.__dict__)[0]
        if value is None:
            namespace.pop(name, None)
        else:
            namespace[name] = value
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))
    _clock = None
    _functions = False
