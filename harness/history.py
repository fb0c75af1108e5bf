"""The history of a world: every collective call, mismatch, fault and exit, in order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any


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

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, {})}

    def describe(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else "world"
        what = self.op or ""
        if self.tag:
            what += f" {self.tag!r}"
        step = f" step {self.step}" if self.step is not None else ""
        extra = self.detail.get("message") or ""
        site = f" at {self.site}" if self.site else ""
        return f"{self.t * 1000:9.1f} ms  {who:>9}  {self.kind:<8} {what}{step}{site} {extra}".rstrip()


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
