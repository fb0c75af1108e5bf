"""Races: two ranks' accesses to one file, at least one a write, that nothing orders.

Inside a world, ranks at one instant act one at a time in the seed's order
(``world/clock.py``), so a race between two ranks is decided the same way in
every run of a seed; this module says where one was decided at all. The order
the harness knows is happens-before through what the coordinator matches: a
collective orders everything each of its ranks did before it before everything
any of them does after it, and a message sent orders the sender's past before
the receiver's future. A poller's clock waits order nothing by themselves: a
reader that polls ``os.path.exists`` until rank 0's file appears races with
rank 0's write, whether or not the way it was written makes that benign.

Vector clocks, after FastTrack (Flanagan and Freund, PLDI 2009): each rank's
accesses between two synchronisations share an epoch; an access of rank ``i``
at epoch ``e`` happens before rank ``j``'s next access iff ``j``'s clock has
``i`` past ``e``. Pure state: the server feeds it what ranks said, in the
order the world decided.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from harness.history import Event

#: What changes a file (or its name) for a reader; everything else looks at it.
WRITES = frozenset({"open-write", "write", "close", "rename", "remove", "chmod", "link", "symlink",
                    "truncate", "utime"})
#: What a directory goes through: ``os.makedirs(exist_ok=True)`` on every rank is the idiom,
#: not a race, and a listing is not a file's content. Not counted.
DIRECTORY_OPS = frozenset({"mkdir", "rmdir", "listdir"})
#: At most this many races are named per world; the rest are counted.
NAMED = 20


@dataclass(frozen=True)
class Access:
    """One rank's access to a path, as it happened."""

    rank: int
    epoch: int
    op: str
    path: str
    line: str | None
    t: float
    where: str = "shared"  # whose file: ``shared``, or ``host-N`` (each host its own)

    @property
    def writes(self) -> bool:
        return self.op in WRITES

    def describe(self) -> str:
        where = f" at {self.line}" if self.line else ""
        return f"rank {self.rank}'s {self.op}{where}"


@dataclass(frozen=True)
class Race:
    """Two accesses to ``first.path`` that nothing the harness knows orders."""

    first: Access
    second: Access

    @property
    def ranks(self) -> tuple[int, int]:
        return self.first.rank, self.second.rank

    def describe(self) -> str:
        whose = f" (host {self.first.where[5:]}'s own)" if self.first.where.startswith("host-") \
            else ""
        return (f"race on {self.first.path}{whose} at t={self.second.t:g} s: "
                f"{self.first.describe()}, then {self.second.describe()}, nothing ordering them")


@dataclass
class _PathState:
    write: Access | None = None
    reads: dict[int, Access] | None = None  # since the last write: each rank's latest


def _first_of(race: Race) -> tuple:
    """Which of two races on one file comes first: by world time, then by rank."""
    a, b = race.first, race.second
    return (b.t, b.rank, a.t, a.rank, a.op, b.op)


class Races:
    """Finds the races of one world from its accesses and synchronisations."""

    def __init__(self, world_size: int) -> None:
        self._clocks = [[1 if i == j else 0 for i in range(world_size)]
                        for j in range(world_size)]
        self._paths: dict[tuple[str, str], _PathState] = {}  # (whose, path) -> its accesses
        self._first: dict[tuple[str, str], Race] = {}  # (whose, path) -> its first race

    def _ordered(self, before: Access, rank: int) -> bool:
        """Does ``before`` happen before what ``rank`` does now?"""
        return before.rank == rank or self._clocks[rank][before.rank] > before.epoch

    def access(self, rank: int, op: str, path: str, line: str | None, t: float,
               where: str = "shared") -> list[Race]:
        """Rank ``rank`` did ``op`` on ``path`` now; returns the races it completes.
        ``where``: whose file it is (one path on two hosts' own disks is two files). Ranks
        whose turns were granted together tell theirs in the machine's order: what is kept
        is decided by time, then rank (``found``), never by which came in first."""
        if not 0 <= rank < len(self._clocks) or op in DIRECTORY_OPS:
            return []
        now = Access(rank, self._clocks[rank][rank], op, path, line, t, where)
        state = self._paths.setdefault((where, path), _PathState())
        earlier = [state.write] if state.write is not None else []
        if now.writes:  # by rank: reads granted together came in the machine's order
            earlier += [a for _, a in sorted((state.reads or {}).items())]
        races = [Race(a, now) for a in earlier if not self._ordered(a, rank)]
        if now.writes:
            state.write, state.reads = now, None
        else:
            state.reads = {**(state.reads or {}), rank: now}
        for race in races:
            key = (race.first.where, race.first.path)
            kept = self._first.get(key)
            if kept is None or _first_of(race) < _first_of(kept):
                self._first[key] = race
        return races

    @property
    def found(self) -> list[Race]:
        """The first race on each file (seven pollers of one file are one race), earliest
        first, at most ``NAMED``."""
        return sorted(self._first.values(), key=_first_of)[:NAMED]

    @property
    def unnamed(self) -> int:
        """Files with a race past the ``NAMED`` first."""
        return max(0, len(self._first) - NAMED)

    def joined(self, ranks: list[int]) -> None:
        """A collective of ``ranks`` completed: each one's past is before all their futures."""
        ranks = [r for r in ranks if 0 <= r < len(self._clocks)]
        if not ranks or not self._paths:
            return  # nothing was accessed yet: nothing before it to order (a 256-rank loop)
        for r in ranks:
            self._clocks[r][r] += 1
        merged = [max(self._clocks[r][i] for r in ranks) for i in range(len(self._clocks))]
        for r in ranks:
            self._clocks[r] = list(merged)

    def delivered(self, sender: int, receiver: int) -> None:
        """A message of ``sender``'s reached ``receiver``: the sender's past is before
        the receiver's future (the sender's clock now: a later send at most hides a race)."""
        n = len(self._clocks)
        if not (0 <= sender < n and 0 <= receiver < n) or sender == receiver:
            return
        self._clocks[sender][sender] += 1
        self._clocks[receiver] = [max(a, b) for a, b in
                                  zip(self._clocks[receiver], self._clocks[sender])]


def with_races(history: list[Event], races: Races) -> list[Event]:
    """``history`` with a ``race`` event for each race named, each at its time (after the
    events of that time), and a warning for those past ``NAMED``."""
    out = list(history)
    for race in races.found:
        event = Event(t=round(race.second.t, 6), kind="race", rank=race.second.rank,
                      op=race.second.op, detail={"message": race.describe(),
                                                 "path": race.first.path,
                                                 "ranks": list(race.ranks)})
        out.insert(bisect.bisect_right([e.t for e in out], event.t), event)
    if races.unnamed:
        out.append(Event(t=out[-1].t if out else 0.0, kind="warning", detail={
            "message": f"{races.unnamed} more files had a race: the first {NAMED} are named"}))
    return out
