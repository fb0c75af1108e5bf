"""Did the training job resume as it should after its pre-emption? (the trainer workload)

Judged against the fault-free run (``Baseline.this_run``: rank 0's value there, with every
step's state digest), from what every rank returned in the life that finished and from
the world's count of step markers before the job restarted:

1. the world ended with every rank returned (else its HANG, CRASH or ERROR: a rank that
   waits forever names the collective and the rank that left);
2. every rank resumed from the same step;
3. the state each loaded is the fault-free run's at that step (else what it loaded was
   not that step's complete checkpoint);
4. no more than ``save_every`` steps were lost: the step the job had reached before it
   restarted, minus the step it resumed from;
5. the run ends with the fault-free run's final state (the state it loaded, for a life
   that resumed at the last step: pre-empted there, it saved it and had nothing left).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.checkers.common import Baseline, Judgement, end_of_world
from harness.history import ranks_phrase
from harness.vocabulary import FAIL, PASS, plural
from harness.world.result import WorldResult

_KEYS = ("resumed_from", "resumed_state", "states", "step")


def check(result: WorldResult, save_every: int, baseline: Baseline | None = None) -> Judgement:
    judgement = _judge(result, save_every, baseline)
    cut = _cut_short(result)
    if not cut:
        return judgement
    left = f"the pre-empted life left {'; '.join(cut)} half-written"
    detail = (f"{judgement.detail} ({left}: it was not loaded)" if judgement.outcome == PASS
              else f"{left}; {judgement.detail}")  # the likely cause first: a line is cut
    return dataclasses.replace(judgement, detail=detail)


def _cut_short(result: WorldResult) -> list[str]:
    """Files a life of the job opened for writing and had not closed when it ended (the
    world's file events): a save the stop cut short, each with the ranks that left it."""
    writing: dict[int, dict[str, int]] = {}
    cut: dict[str, list[int]] = {}

    def ended(rank: int) -> None:
        for path, n in writing.pop(rank, {}).items():
            if n > 0:
                cut.setdefault(path, []).append(rank)

    for e in result.history:
        if e.kind == "file" and e.rank is not None and e.detail.get("ok", True):
            path = str(e.detail.get("path"))
            files = writing.setdefault(e.rank, {})
            if e.op == "open-write":
                files[path] = files.get(path, 0) + 1
            elif e.op == "close" and files.get(path):
                files[path] -= 1
        elif e.kind == "restart":
            for rank in ([e.rank] if e.rank is not None else list(writing)):
                ended(rank)
    return [f"{path} by {ranks_phrase(ranks)}" for path, ranks in sorted(cut.items())]


def _judge(result: WorldResult, save_every: int, baseline: Baseline | None) -> Judgement:
    ended = end_of_world(result)
    if ended is not None:
        return ended
    values = {r.rank: r.value for r in result.ranks}
    wrong = [r for r, v in values.items() if not (isinstance(v, dict) and set(_KEYS) <= v.keys())]
    if wrong:
        return Judgement(FAIL, f"{ranks_phrase(wrong)} returned {_shown(values[wrong[0]])}, not "
                               f"the trainer's dict ({', '.join(_KEYS)}; docs/reference/"
                               f"targets.md, \"Your trainer\")")
    resumed = {r: v["resumed_from"] for r, v in values.items()}
    if len(set(resumed.values())) > 1:
        by_step: dict[Any, list[int]] = {}
        for r, step in sorted(resumed.items()):
            by_step.setdefault(step, []).append(r)
        return Judgement(FAIL, "the ranks resumed from different steps: " + "; ".join(
            f"{ranks_phrase(rs)} from {_step(s)}" for s, rs in by_step.items()))
    step = resumed[0]
    reference = baseline.this_run if baseline is not None else None
    fault_free = reference.get("states") if isinstance(reference, dict) else None
    if step is not None and isinstance(fault_free, dict):
        expected = fault_free.get(str(step))
        off = [r for r, v in values.items() if v["resumed_state"] != expected]
        if off:
            return Judgement(FAIL, f"{ranks_phrase(off)} resumed from step {step} with a state "
                                   f"that is not the fault-free run's at step {step} (its "
                                   f"checkpoint was incomplete, or another step's): "
                                   f"{values[off[0]]['resumed_state']!r}, expected {expected!r}")
    reached = _reached(result)
    lost = None if reached is None else reached - (step or 0)
    if lost is not None and lost > save_every:
        return Judgement(FAIL, f"the job had reached step {reached} when it was pre-empted and "
                               f"resumed from {_step(step)}: {plural(lost, 'step')} lost, more "
                               f"than one save interval ({save_every})")
    last = {r: v["step"] for r, v in values.items()}
    # A life that resumed at the last step runs none: it ends with the state it loaded.
    end_states = {r: v["states"].get(str(v["step"]), v["resumed_state"] if v["step"] ==
                                     v["resumed_from"] else None) for r, v in values.items()}
    if isinstance(fault_free, dict):
        final = str(max(int(s) for s in fault_free)) if fault_free else None
        off = [r for r in values if str(last[r]) != final or end_states[r] != fault_free.get(final)]
        if off:
            return Judgement(FAIL, f"{ranks_phrase(off)} ended at step {last[off[0]]} with a "
                                   f"state that is not the fault-free run's at step {final}")
    said = ("the job never restarted" if reached is None else
            f"every rank resumed from {_step(step)} after the job had reached step {reached} "
            f"({plural(lost or 0, 'step')} lost, save interval {save_every})")
    checked = "" if isinstance(fault_free, dict) else \
        " (no fault-free run with these inputs to compare the states with)"
    return Judgement(PASS, f"{said}; the run ended at step {max(last.values())} with the "
                           f"fault-free run's state{checked}")


def _reached(result: WorldResult) -> int | None:
    """The highest step any rank completed in the first life, if the job restarted after it
    (the world's count of step markers); None if it never restarted."""
    if not any(r.restarts for r in result.ranks):
        return None
    counts: dict[int, int] = {}
    for e in result.history:
        if e.kind == "step" and e.rank is not None and e.detail.get("life") == 0:
            counts[e.rank] = counts.get(e.rank, 0) + 1
    return max(counts.values(), default=0)


def _step(step: Any) -> str:
    return "scratch" if step is None else f"step {step}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
