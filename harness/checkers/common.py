"""What every workload's checker decides first: did the world end, and how.

A rank the fault plan killed is not judged; its survivors are. Only when every
judged rank returned does a workload's own oracle look at the values.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.history import ranks_phrase
from harness.world.result import CRASH, ERROR, FAIL, HANG, PASS, RankResult, WorldResult, fates_phrase


@dataclass(frozen=True)
class Judgement:
    outcome: str
    detail: str
    loud: bool = False  # every judged rank raised a clear error before the deadline


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
    return None
