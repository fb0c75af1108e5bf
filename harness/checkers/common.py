"""What every workload's checker decides first: did the world end, and how.

A rank the fault plan killed is not judged; its survivors are. Only when every
judged rank returned a value its checker (if any: ``harness.rank.validator``)
accepts does a workload's own oracle look at the values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.history import ranks_phrase
from harness.vocabulary import CRASH, ERROR, FAIL, HANG
from harness.world.fates import fates_phrase, walls_note
from harness.world.result import RankResult, WorldResult


@dataclass(frozen=True)
class Judgement:
    outcome: str
    detail: str
    loud: bool = False  # every judged rank raised a clear error before the deadline
    #: an ERROR that is not loud: why ("rank 0 raised with no message"), said by a cell
    #: whose scenario expects a loud failure
    quiet: str = ""
    #: why the scenario's change could not have reached the target, though it was made (a
    #: host whose copy was cut never read that file): a cell that met its expectation is
    #: then NOT-EXERCISED, never PASS
    unexercised: str | None = None


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


def canonical(value: Any) -> str:
    """A text two values share only when they are the same value of the same type: ``1``
    and ``True``, ``0.0`` and ``-0.0``, ``(1, 2)`` and ``[1, 2]`` differ (on a pod, code
    downstream sees the difference), key order does not. Raises ``RecursionError`` for a
    value that holds itself or is nested too deep."""
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, dict):
        items = sorted(f"{canonical(k)}:{canonical(v)}" for k, v in value.items())
        return f"{name}{{{','.join(items)}}}"
    if isinstance(value, (list, tuple)):
        return f"{name}[{','.join(canonical(v) for v in value)}]"
    if isinstance(value, (set, frozenset)):
        return f"{name}{{{','.join(sorted(canonical(v) for v in value))}}}"
    array = array_of(value)
    if array is not None:  # every element, not the shortened repr of a large array
        return f"{name}({array.dtype},{array.shape}):" \
               f"{hashlib.sha256(array.tobytes()).hexdigest()}"
    return f"{name}:{value!r}"  # a float's repr keeps its sign and its NaN


def array_of(value: Any) -> Any:
    """A numpy array or a torch tensor as a contiguous numpy array; None for anything else."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        try:
            value = value.detach().cpu().contiguous().numpy()
        except (TypeError, RuntimeError):  # bfloat16 has no numpy type: its repr then
            return None
    if hasattr(value, "tobytes") and hasattr(value, "dtype") and hasattr(value, "shape"):
        import numpy as np

        return np.ascontiguousarray(value)
    return None


def judged(result: WorldResult) -> list[RankResult]:
    return [r for r in result.ranks if not r.killed_by_fault]


def _killed_note(result: WorldResult) -> str:
    killed = [r.rank for r in result.ranks if r.killed_by_fault and r.signal is not None]
    left = [r.rank for r in result.ranks if r.killed_by_fault and r.signal is None]
    parts = ([f"{ranks_phrase(killed)} killed by the fault plan"] if killed else []) + \
        ([f"{ranks_phrase(left)} left after the fault plan's pre-emption notice"] if left else [])
    return f" ({'; '.join(parts)})" if parts else ""


def why_not_loud(errors: list[RankResult], returned: Sequence[int] = ()) -> str:
    """Why ranks that raised (``errors``) are not the loud failure a ``fail-loudly`` scenario
    asks for ("" when they are): some returned instead, or an error says nothing (a bare
    ``queue.Empty`` from a wait whose cause was lost in a thread)."""
    mute = [r.rank for r in errors if not (r.error and str(r.error.get("message", "")).strip())]
    return "; ".join(part for part in (
        f"{ranks_phrase(list(returned))} returned" if returned else "",
        f"{ranks_phrase(mute)} raised with no message" if mute else "") if part)


def end_of_world(result: WorldResult) -> Judgement | None:
    """HANG, CRASH or ERROR if the judged ranks did not all return; None if they did."""
    ranks = judged(result)
    why = _killed_note(result) + walls_note(result)
    if any(r.outcome == HANG for r in ranks):
        return Judgement(HANG, (result.hang_report or "the deadline passed") + why)
    crashed = [r for r in ranks if r.outcome == CRASH]
    if crashed:
        return Judgement(CRASH, fates_phrase(crashed) + why)
    errors = [r for r in ranks if r.outcome == ERROR]
    if errors:
        returned = [r.rank for r in ranks if r.outcome != ERROR]
        quiet = why_not_loud(errors, returned)
        note = f"; {ranks_phrase(returned)} returned" if returned else ""
        return Judgement(ERROR, fates_phrase(errors) + note + why, loud=not quiet, quiet=quiet)
    if not ranks:
        return Judgement(FAIL, "the fault plan killed every rank: nothing to judge")
    refused = [r for r in ranks if r.invalid]
    if refused:  # the world's checker (run in each rank) said what is wrong
        return Judgement(FAIL, fates_phrase(refused) + why)
    return None
