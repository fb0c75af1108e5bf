"""What every workload's checker decides first: did the world end, and how.

A rank the fault plan killed is not judged; its survivors are. Only when every
judged rank returned a value its checker (if any: ``harness.rank.validator``)
accepts does a workload's own oracle look at the values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.history import ranks_phrase
from harness.vocabulary import CRASH, ERROR, FAIL, HANG, PASS
from harness.world.fates import fates_phrase
from harness.world.result import RankResult, WorldResult


@dataclass(frozen=True)
class Judgement:
    outcome: str
    detail: str
    loud: bool = False  # every judged rank raised a clear error before the deadline


@dataclass(frozen=True)
class Baseline:
    """What rank 0 of the target returned in its fault-free runs (discovery), as JSON:
    with this cell's inputs, and with another run's (``Workload.another_run``). None
    where that run did not happen or returned nothing JSON can hold."""

    this_run: Any = None
    another_run: Any = None


def as_json(value: Any) -> Any:
    """``value`` as JSON holds it (tuples as lists), or None if JSON cannot."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        return None


def judged(result: WorldResult) -> list[RankResult]:
    return [r for r in result.ranks if not r.killed_by_fault]


def _killed_note(result: WorldResult) -> str:
    killed = [r.rank for r in result.ranks if r.killed_by_fault]
    return f" ({ranks_phrase(killed)} killed by the fault plan)" if killed else ""


def end_of_world(result: WorldResult) -> Judgement | None:
    """HANG, CRASH or ERROR if the judged ranks did not all return; None if they did."""
    ranks = judged(result)
    if any(r.outcome == HANG for r in ranks):
        return Judgement(HANG, (result.hang_report or "the deadline passed") + _killed_note(result))
    crashed = [r for r in ranks if r.outcome == CRASH]
    if crashed:
        return Judgement(CRASH, fates_phrase(crashed) + _killed_note(result))
    errors = [r for r in ranks if r.outcome == ERROR]
    if errors:
        clear = all(r.error and r.error.get("message", "").strip() for r in errors)
        loud = len(errors) == len(ranks) and clear
        passed = [r.rank for r in ranks if r.outcome == PASS]
        note = f"; {ranks_phrase(passed)} returned" if passed and not loud else ""
        return Judgement(ERROR, fates_phrase(errors) + note + _killed_note(result), loud=loud)
    if not ranks:
        return Judgement(FAIL, "the fault plan killed every rank: nothing to judge")
    refused = [r for r in ranks if r.invalid]
    if refused:  # the world's checker (run in each rank) said what is wrong
        return Judgement(FAIL, fates_phrase(refused) + _killed_note(result))
    return None
