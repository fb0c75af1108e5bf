"""The world clock: the time every unit of a world sees, and when it may move.

Inside a world, time is the world's, not the machine's (after FoundationDB's
simulation, the Shadow simulator and trio's ``MockClock(autojump_threshold=0)``).
Each unit (a rank, or in exec mode a host's launcher) tells the harness when
every thread of its own waits in a wait the harness knows (a sleep, a thread's
wait with or without a timeout, a collective) and the earliest time it wants
waking (``idle``). The clock then moves in one of three ways:

- **jump**: every live unit is idle and nothing is in flight, so nothing can
  happen before the earliest wake-up: the clock goes straight there. A world
  whose ranks all sleep an hour takes milliseconds; one where every rank waits
  in a rendezvous that can never complete reaches its deadline at once;
- **real speed**: the units that are not idle (or all of them) have child
  processes of their own (a real subprocess, a DataLoader's workers), which the
  harness cannot see into: the clock follows the wall clock while they live,
  so what they do takes the time it takes;
- **held**: a unit computes (an import, a loop, a C call): no world time
  passes, however long the machine takes. A rank advances its own reading by a
  fixed tick per time call (``harness.rank.clock``), so a busy-wait ends.

Units at one instant act in an order drawn from the world's seed (after
FoundationDB's simulator and neon's desim). A rank waits on the clock for its
**turn** before each file operation its view sees (``RankClock.turn``), saying
which: of the units whose turn is due at the same time, the clock draws an order
from the seed and wakes every one whose operation conflicts with none before it in
that order (reads of one file, or writes of two, commute); the rest wait until those
wait again. So a write and a read of one file at one instant happen in the seed's
order, the same on a quiet laptop and on a loaded CI runner.
Units due from any other wait (a sleep, a timeout) are woken together: what they do
until their next turn no other unit can see, so they compute side by side, as do
the ranks a collective's reply wakes.

Times are integer nanoseconds from the world's start (no float drift: the same
seed gives the same times on every machine). Pure state: sockets and the wall
clock are the caller's (``server.py``), as they are the coordinator's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from harness.filesystem.mounts import LOOKS

#: A unit of the world: ("rank", r), or in exec mode ("host", h) for a host's launcher.
Key = tuple[str, int]

NS = 1_000_000_000

#: How the clock moves now (see the module's docstring).
JUMP, REAL, HELD = "jump", "real", "held"
#: A turn's ``until``: granted only once every other unit waits on another one (or is
#: gone), not on the clock: a writer slower than any polling window (``slow-write``).
UNTIL_OTHERS_WAIT = "others-wait"


def seconds(ns: int) -> float:
    return ns / NS


def ns(seconds_: float) -> int:
    return round(seconds_ * NS)


@dataclass
class Member:
    """What the clock knows of one unit."""

    idle: bool = False
    wake: int | None = None  # the earliest time it asked to be woken at, while idle
    turn: dict[str, str] | None = None  # that wake is a turn before this file operation
    sent: int = 0  # wakes the harness sent it: replies to its waits, and the time
    forked: bool = False  # it has started processes of its own (they may still live)


def _until_others(member: Member) -> bool:
    return member.turn is not None and member.turn.get("until") == UNTIL_OTHERS_WAIT


def _names(op: dict[str, str]) -> list[tuple[str, str]]:
    return [(op["where"], p) for p in (op["path"], op.get("dst")) if p]


def _related(a: str, b: str) -> bool:
    """One path, or one a directory of the other (a listing and a create in it)."""
    return a == b or b.startswith(a.rstrip("/") + "/") or a.startswith(b.rstrip("/") + "/")


def conflict(a: dict[str, str], b: dict[str, str]) -> bool:
    """Could two file operations' order change what either sees? Not if both only look,
    or if they touch unrelated files (or one path on two hosts' own disks)."""
    if a["op"] in LOOKS and b["op"] in LOOKS:
        return False
    return any(wa == wb and _related(pa, pb) for wa, pa in _names(a) for wb, pb in _names(b))


class WorldClock:
    """The world's time, who holds it, and who is due to wake."""

    def __init__(self, deadline: int, seed: int = 0) -> None:
        self.now = 0
        self.deadline = deadline
        self.members: dict[Key, Member] = {}
        self._order = random.Random(f"order:{seed}")  # who goes first among units due together
        self.granted: list[dict[str, str]] = []  # the turns the last ``advance`` granted
        self.went_on: list[Key] = []  # the slow writers it let go on

    # -- who is in the world ----------------------------------------------------------
    def join(self, key: Key) -> None:
        """A unit that exists (or is about to): busy until it says otherwise. A new life
        of a unit (a restart, another spawn) counts its wakes from zero."""
        self.members[key] = Member()

    def leave(self, key: Key) -> None:
        self.members.pop(key, None)

    def __contains__(self, key: Key) -> bool:
        return key in self.members

    # -- what units say ----------------------------------------------------------------
    def heard(self, key: Key) -> None:
        """Any message but an idle one: the unit runs (it sent it)."""
        member = self.members.get(key)
        if member is not None:
            member.idle, member.wake, member.turn = False, None, None

    def idle(self, key: Key, seen: int, wake: int | None,
             turn: dict[str, str] | None = None) -> None:
        """Every thread of the unit waits in a known wait; it had taken ``seen`` of the
        wakes sent to it. One sent since (a reply still in flight) makes this stale.
        ``turn``: its earliest wake is a turn before this file operation."""
        member = self.members.get(key)
        if member is None:
            return
        if seen == member.sent:
            member.idle, member.wake, member.turn = True, wake, turn
        else:
            member.idle, member.wake, member.turn = False, None, None

    def started_process(self, key: Key) -> None:
        """The unit started a process of its own: from now on, while one lives, the
        clock follows the machine's rather than jump (see the module's docstring)."""
        member = self.members.get(key)
        if member is not None:
            member.forked = True

    def woke(self, key: Key) -> None:
        """The harness sent the unit something that wakes one of its waits."""
        member = self.members.get(key)
        if member is not None:
            member.sent += 1
            member.idle, member.wake, member.turn = False, None, None

    # -- moving ------------------------------------------------------------------------
    def busy(self) -> list[Key]:
        return [k for k, m in self.members.items() if not m.idle]

    def forked(self) -> list[Key]:
        """Units that have started processes of their own (which may hold the clock)."""
        return [k for k, m in self.members.items() if m.forked]

    def _waits_on_others(self, key: Key, outside: frozenset[Key]) -> bool:
        """Does the unit wait for another one (a collective, a message, a slow writer's
        turn), not for the clock? ``outside``: units that wait outside the world (in the
        kernel, on a process of their own), which only another unit can end."""
        member = self.members[key]
        return key in outside or member.idle and (
            member.wake is None or _until_others(member))

    def held_back(self, key: Key, outside: frozenset[Key] = frozenset()) -> bool:
        """Is the unit a slow writer some other unit still runs or polls beside?"""
        return _until_others(self.members[key]) and not all(
            self._waits_on_others(k, outside) for k in self.members if k != key)

    def next_wake(self, extra: int | None = None, outside: frozenset[Key] = frozenset()) -> int:
        """The earliest time anything is due: a unit's wake-up, ``extra`` (a held write's
        publication), or the deadline. A slow writer held back is not due."""
        times = [m.wake for k, m in self.members.items()
                 if m.idle and m.wake is not None and not self.held_back(k, outside)]
        if extra is not None:
            times.append(extra)
        return max(self.now, min(times + [self.deadline]))

    def advance(self, to: int, outside: frozenset[Key] = frozenset()) -> list[Key]:
        """Move to ``to`` (never back); returns the units to wake now, marked woken: of
        those due earliest, every one that waits in a sleep or a timeout, and of those
        whose turn is due, in an order the seed draws, each whose operation conflicts with
        none before it (``conflict``: they commute, so together they are as one after the
        other). A slow writer's turn is due only once every other unit waits on another
        (``held_back``; ``outside``: units that wait outside the world). The caller moves the
        clock again only once no unit computes (the ones woken wait again, or wait outside
        the world). At the deadline the world ends: nothing due then runs."""
        self.now = max(self.now, min(to, self.deadline))
        self.went_on = []
        if self.passed:
            return []
        due = [(m.wake, k) for k, m in self.members.items()
               if m.idle and m.wake is not None and m.wake <= self.now
               and not self.held_back(k, outside)]
        if not due:
            return []
        first = min(due)[0]
        woken = sorted(k for wake, k in due if wake == first and self.members[k].turn is None)
        turns = sorted(k for wake, k in due if wake == first and self.members[k].turn is not None)
        if len(turns) > 1:
            self._order.shuffle(turns)
        doing: list[dict[str, str]] = []  # the turns before, in the seed's order
        self.granted = []
        for key in turns:
            op = self.members[key].turn
            assert op is not None
            if not any(conflict(op, other) for other in doing):
                woken.append(key)
                self.granted.append(op)
            doing.append(op)
        self.went_on = [k for k in woken if _until_others(self.members[k])]
        for key in woken:
            self.woke(key)
        return woken

    @property
    def passed(self) -> bool:
        """Has the world's deadline come?"""
        return self.now >= self.deadline

    def waiting(self) -> dict[Key, int | None]:
        """Each idle unit's wake-up (None: it waits for another unit, or forever)."""
        return {k: m.wake for k, m in self.members.items() if m.idle}
