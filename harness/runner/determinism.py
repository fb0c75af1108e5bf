"""``--check-determinism``: each cell runs twice with its seed, and the two must agree.

Inside a world time and order are the world's (``world/clock.py``): the same seed
gives the same faults, the same order of ranks at every instant and so the same
history, on a quiet laptop and on a loaded runner. What can still differ is what
the world does not decide: a target that reads ``/dev/urandom`` or the machine's
state, a rank whose processes of their own run at the machine's pace, a spin that
held its turn past the world's patience. The check names the first thing that
differs: a rank's fate or value, then the first event of the history.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from harness.runner.cells import Cell, RankRow
from harness.vocabulary import UNEXPECTED
from harness.world.fates import one_line

#: What a rank row says that must be the same in two runs (its output, stack and traceback
#: are words about it, which may name a pid or an address).
_RANK_FIELDS = ("outcome", "exit_code", "error", "signal", "killed_by_fault", "value", "invalid")
_SHOWN = 120


def _short(value: Any) -> str:
    return one_line(repr(value), limit=_SHOWN)


def _where_they_part(x: Any, y: Any) -> tuple[str, str]:
    """Two texts from where they start to differ (a few characters before it kept)."""
    if not (isinstance(x, str) and isinstance(y, str)):
        return _short(x), _short(y)
    i = next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), min(len(x), len(y)))
    start = max(0, i - 20)
    cut = "…" if start else ""
    return _short(cut + x[start:]), _short(cut + y[start:])


def _rank_difference(a: RankRow, b: RankRow) -> str | None:
    for name in _RANK_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x != y:
            x, y = _where_they_part(x, y)
            return f"rank {a.rank}'s {name}: {x} in the first run, {y} in the second"
    return None


def _event_text(event: dict[str, Any]) -> str:
    who = f"rank {event['rank']}" if event.get("rank") is not None else "world"
    what = " ".join(str(event[k]) for k in ("kind", "op", "tag") if event.get(k) is not None)
    message = (event.get("detail") or {}).get("message")
    return one_line(f"t={event.get('t')} s {who} {what}" + (f": {message}" if message else ""),
                    limit=_SHOWN)


def first_difference(first: Cell, second: Cell) -> str | None:
    """Where two runs of one cell differ, said in a line; None: they agree."""
    ranks_b = {r.rank: r for r in second.ranks}
    for a in first.ranks:
        b = ranks_b.get(a.rank)
        if b is None:
            return f"rank {a.rank} has a result in the first run only"
        said = _rank_difference(a, b)
        if said is not None:
            return said
    for i, (x, y) in enumerate(zip(first.history, second.history)):
        if x != y:
            return (f"event {i + 1} of the history: {_event_text(x)} in the first run, "
                    f"{_event_text(y)} in the second")
    if len(first.history) != len(second.history):
        longer, which = ((first, "first") if len(first.history) > len(second.history)
                         else (second, "second"))
        extra = longer.history[min(len(first.history), len(second.history))]
        return f"the {which} run's history goes on: {_event_text(extra)}"
    if (first.outcome, first.detail) != (second.outcome, second.detail):
        return (f"the outcome: {first.outcome} ({_short(first.detail)}) in the first run, "
                f"{second.outcome} ({_short(second.detail)}) in the second")
    return None


def twice(run_one: Callable[..., Cell]) -> Callable[..., Cell]:
    """A cell runner that runs each cell twice with its seed: the first run's cell, and
    if the second differs, an unexpected verdict that says where."""
    def run(plan: Any, *args: Any, **kwargs: Any) -> Cell:
        first = run_one(plan, *args, **kwargs)
        second = run_one(plan, *args, **kwargs)
        difference = first_difference(first, second)
        if difference is None:
            return first
        return dataclasses.replace(
            first, verdict=UNEXPECTED, met=False,
            detail=f"not deterministic: two runs of seed {first.seed} differ at {difference} "
                   f"(the first run: {first.outcome}: {first.detail or 'no detail'})")
    return run
