"""The history of a world: every collective call, mismatch, fault and exit, in order."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, overload

#: A long run keeps the first ``HISTORY_HEAD`` and the last ``HISTORY_TAIL`` of its
#: repetitive events (``DROPPABLE``); the rest are counted, not kept, so that the
#: harness's memory and the report stay bounded however many collectives a target makes.
HISTORY_HEAD = 5_000
HISTORY_TAIL = 5_000
#: The kinds a long run repeats: collective calls and completions, file operations.
#: Faults, exits, mismatches, warnings, publications, snapshots, restarts and the
#: hang report are what a diagnosis needs, and are never dropped.
DROPPABLE = frozenset({"call", "complete", "file", "clock", "step"})
#: How a dropped kind is named in the one line that says what was dropped.
_KIND_WORDS = {"call": "collective", "complete": "collective", "file": "file",
               "clock": "world clock", "step": "training step"}


@dataclass(frozen=True)
class Event:
    """One thing that happened. ``t`` is seconds since the world started."""

    t: float
    kind: str  # call | complete | mismatch | warning | exit | fault | hang
    rank: int | None = None
    op: str | None = None
    tag: str | None = None
    step: int | None = None
    site: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    #: the world's decision its rank acts in (``world/clock.py``): ranks acting in one
    #: decision ran side by side, so their events are listed by rank (``in_world_order``)
    stamp: int = field(default=0, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The fields that say something (not None, not an empty detail), copied as
        ``asdict`` would copy them (``plain``): never the event's own detail."""
        out: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is not None and value != {}:
                out[name] = plain(value)
        return out

    def describe(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else "world"
        what = self.op or ""
        if self.tag:
            what += f" {self.tag!r}"
        step = f" step {self.step}" if self.step is not None else ""
        extra = self.detail.get("message") or ""
        site = f" at {self.site}" if self.site else ""
        return f"{self.t * 1000:9.1f} ms  {who:>9}  {self.kind:<8} {what}{step}{site} {extra}".rstrip()


_FIELDS = tuple(f.name for f in fields(Event) if f.name != "stamp")
_ATOMS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` copied as ``dataclasses.asdict`` copies what a dataclass holds (a dataclass
    as a dict of its fields), by hand for what reports hold most: ``asdict`` passes every
    value through ``copy.deepcopy``, and a report holds thousands of events."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {plain(k): plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return kind(plain(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    return asdict(_Held(value)).popitem()[1]  # anything else (a namedtuple...): asdict's way


@dataclass
class _Held:
    value: Any


@dataclass
class Dropped:
    """What a bounded history left out: how many events of which kinds, and when."""

    count: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    first_t: float | None = None
    last_t: float | None = None

    def add(self, event: Event) -> None:
        self.count += 1
        self.kinds[event.kind] = self.kinds.get(event.kind, 0) + 1
        if self.first_t is None:
            self.first_t = event.t
        self.last_t = event.t

    def message(self) -> str:
        """``118,000 events dropped (collective 117,990, file 10) between 1.2 s and 9.8 s ...``"""
        words: dict[str, int] = {}
        for kind, n in self.kinds.items():
            word = _KIND_WORDS.get(kind, kind)
            words[word] = words.get(word, 0) + n
        parts = ", ".join(f"{word} {n:,}" for word, n in words.items())
        return (f"{self.count:,} event{'s' if self.count != 1 else ''} dropped ({parts}) between "
                f"{self.first_t or 0:.1f} s and {self.last_t or 0:.1f} s: the history keeps the "
                f"first {HISTORY_HEAD:,} and the last {HISTORY_TAIL:,} collective, file and clock events, "
                "and every other event")

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "kinds": dict(self.kinds), "first_t": self.first_t,
                "last_t": self.last_t}

    def event(self) -> Event:
        """The event that stands in the history where the dropped ones were."""
        return Event(t=self.last_t or 0.0, kind="dropped",
                     detail={**self.to_dict(), "message": self.message()})


class History:
    """The history of a world, bounded: the head and the tail of its repetitive events,
    every event of the other kinds, and one ``dropped`` event between them.

    Events are appended in order. Once ``head`` repetitive events are kept, later ones
    go to the tail; when the tail holds more than ``tail`` repetitive events its oldest
    one is dropped (counted in ``dropped``), and the events of other kinds before it
    move to ``_kept`` (they are never dropped). Read back, the order is head, kept,
    the ``dropped`` event, tail: still the order of time, since everything kept in
    the middle came before the last dropped event and the tail after it.
    """

    def __init__(self, head: int = HISTORY_HEAD, tail: int = HISTORY_TAIL) -> None:
        self._head: list[Event] = []
        self._head_room = head
        self._kept: list[Event] = []
        self._tail: deque[Event] = deque()
        self._tail_room = tail
        self._tail_droppable = 0
        self.dropped = Dropped()

    def append(self, event: Event) -> None:
        droppable = event.kind in DROPPABLE
        if self._head_room > 0:
            self._head.append(event)
            self._head_room -= droppable
            return
        self._tail.append(event)
        if not droppable:
            return
        self._tail_droppable += 1
        while self._tail_droppable > self._tail_room:
            oldest = self._tail.popleft()
            if oldest.kind in DROPPABLE:
                self.dropped.add(oldest)
                self._tail_droppable -= 1
            else:
                self._kept.append(oldest)

    def __iter__(self) -> Iterator[Event]:
        yield from self._head
        yield from self._kept
        if self.dropped.count:
            yield self.dropped.event()
        yield from self._tail

    def __len__(self) -> int:
        return len(self._head) + len(self._kept) + bool(self.dropped.count) + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        return list(self)[index]


def in_world_order(events: Iterable[Event]) -> list[Event]:
    """``events`` in the world's own order: by world time, then by the decision of the
    world their rank acted in (its clock's wakes and collectives' completions, in order:
    ``Event.stamp``), then by rank, each rank's in its own order; the world's own events
    (a completion, a hang) after the ranks' of their decision. Ranks acting in one
    decision ran side by side, their operations commuting (``world/clock.py``): the
    machine's order of them does not show, so that the same seed gives the same history
    on every machine."""
    return sorted(events, key=lambda e: (e.t, e.stamp, e.rank is None, e.rank or 0))


def dropped_line(history: Iterable[Event | dict[str, Any]]) -> str | None:
    """The message of a history's ``dropped`` event (a live one or one read back from a
    report), or None when nothing was dropped."""
    for e in history:
        kind, detail = (e.get("kind"), e.get("detail") or {}) if isinstance(e, dict) \
            else (e.kind, e.detail)
        if kind == "dropped":
            return str(detail.get("message", ""))
    return None


def format_ranks(ranks: Iterable[int]) -> str:
    """``[1,2,3,5]`` -> ``'1-3,5'``: the compact form people read in a report."""
    ranks = sorted(set(ranks))
    if not ranks:
        return "none"
    parts, start, prev = [], ranks[0], ranks[0]
    for r in ranks[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(parts)


def ranks_phrase(ranks: Iterable[int], noun: str = "rank") -> str:
    """``[0]`` -> ``'rank 0'``, ``[1,2,3,5]`` -> ``'ranks 1-3,5'``: the one way every
    message and report names a set of ranks (or of hosts, workers, launchers: ``noun``)."""
    ranks = set(ranks)
    return f"{noun}{'' if len(ranks) == 1 else 's'} {format_ranks(ranks)}"
