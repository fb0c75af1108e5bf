"""The trainer workload means the same for a trainer its authors did not write: a stranger's
(``tests/user_targets/stranger_trainer.py``, written from the contract alone: its own model
and layout, checksummed files staged and replaced, a resume step every rank agrees on, and
training on after a notice until the hard stop) meets every scenario, for its own reasons."""

from __future__ import annotations

import pytest

from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import catalog
from harness.vocabulary import OK, PASS
from harness.workloads.registry import target as resolve_target

from support import REPO

STRANGER = f"{REPO / 'tests' / 'user_targets' / 'stranger_trainer.py'}:train"
#: what each cell must say: the stranger saves at its notice and trains on; its checkpoint
#: (about 8 KB) takes 16 s at the slow scenarios' 500 bytes per world second
SAYS = {
    "preempt-notice": "the job never restarted",  # 12 steps end before the 30 s grace
    "preempt-no-notice": "every rank resumed from scratch after the job had reached step 4 "
                         "(4 steps lost",
    "preempt-save-outlasts-grace": "still ran when its 5 s grace ended: SIGKILLed",
    "baseline-train": "the job never restarted; the run ended at step 12 with the fault-free",
}


@pytest.fixture(scope="module")
def cells():
    plans = plan_cells([s for s in catalog() if s.workload == "trainer"],
                       [resolve_target(STRANGER, "trainer")], seed=0)
    return {c.scenario: c for c in run_matrix(plans).cells}


@pytest.mark.parametrize("scenario", [s.name for s in catalog() if s.workload == "trainer"])
def test_a_strangers_trainer_meets_every_scenario(cells, scenario):
    cell = cells[scenario]
    assert (cell.outcome, cell.verdict) == (PASS, OK), cell.detail
    assert SAYS.get(scenario, "") in cell.detail, cell.detail
