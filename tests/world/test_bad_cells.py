"""One bad cell is that cell's result, never the run's: the run goes on and reports it.

Before: a value the checker could not digest (mixed key types, ``10**5000``, a cycle) or a
checker that raised propagated out of ``run_matrix`` (exit 3, no report at all).
"""

from __future__ import annotations

import pytest

from harness.checkers import config_sync
from harness.runner import run as runner
from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import find
from harness.workloads.base import Workload
from harness.workloads.registry import target
from harness.world.result import ERROR, FAIL, PASS

import support

CYCLE: dict = {"lr": 0.1}
CYCLE["self"] = CYCLE


@pytest.mark.parametrize(("config", "why"), [
    ({"lr": 10 ** 5000}, "ValueError: Exceeds the limit"),
    (CYCLE, "RecursionError: it holds itself, or is nested deeper than"),
], ids=["huge-int", "cycle"])
def test_a_config_that_cannot_be_compared_fails_and_says_why(config, why):
    ranks = [support.rank(0, PASS, config, value_repr="..."), support.rank(1, PASS, {"lr": 0.1})]
    judged = config_sync.check(support.world(ranks))
    assert judged.outcome == FAIL
    assert judged.detail.startswith(f"rank 0 returned a config that cannot be compared ({why}")


def test_configs_with_keys_of_mixed_types_are_compared():
    """Keys that do not sort together (``1`` and ``"b"``) are still told apart."""
    same = [support.rank(r, PASS, {1: "a", "b": 2}) for r in range(2)]
    assert config_sync.check(support.world(same)).outcome == PASS
    other = [support.rank(0, PASS, {1: "a", "b": 2}), support.rank(1, PASS, {"1": "a", "b": 2})]
    judged = config_sync.check(support.world(other))
    # in the same order in every process, whatever the hash of "1" there
    assert judged.outcome == FAIL
    assert judged.detail == "rank 1 differs from rank 0: 1 'a' != <missing>, 1 <missing> != 'a'"


def _two_cells():
    return plan_cells([find("baseline"), find("divergent-slugs")], [target("robust-sync")], seed=0)


def test_a_checker_that_raises_is_its_cells_error_and_the_run_goes_on(monkeypatch):
    real = Workload.judge

    def judge(self, result, baseline=None, inputs=None):
        if result.history and any(e.kind == "fault" for e in result.history):
            raise RuntimeError("checker bug")
        return real(self, result, baseline, inputs)

    monkeypatch.setattr(Workload, "judge", judge)
    cells = {c.scenario: c for c in run_matrix(_two_cells(), jobs=1).cells}
    assert cells["baseline"].outcome == PASS
    broken = cells["divergent-slugs"]
    assert (broken.outcome, broken.verdict) == (ERROR, "unexpected")
    assert broken.detail.startswith("the cell could not be judged: RuntimeError: checker bug")
    assert broken.ranks, "the ranks' fates are still reported"


def test_a_cell_the_harness_cannot_run_is_its_error_and_the_run_goes_on(monkeypatch):
    real = runner.run_cell

    def run_cell(plan, *args, **kwargs):
        if plan.scenario.name == "baseline":
            raise OSError(24, "Too many open files")
        return real(plan, *args, **kwargs)

    monkeypatch.setattr(runner, "run_cell", run_cell)
    cells = {c.scenario: c for c in run_matrix(_two_cells(), jobs=1).cells}
    assert cells["divergent-slugs"].outcome == PASS
    assert cells["baseline"].outcome == ERROR
    assert cells["baseline"].detail == ("the harness could not run this cell: OSError: [Errno 24] "
                                        "Too many open files (the run went on)")
    assert cells["baseline"].replay.startswith("harness replay --scenario baseline")
