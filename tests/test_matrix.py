"""The catalog x the reference targets, one test per cell (``pytest -m faults``).

Cells run in parallel once per session (only those selected), then each test
asserts its own cell's verdict: ``ok``, or ``known`` for the seed's recorded
failures. A failure prints the per-rank diagnosis and the replay command.
"""

from __future__ import annotations

import pytest

from harness.pytest_plugin import check_cell
from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import catalog
from harness.workloads.registry import BUILTIN_TARGETS

PLANS = {f"{p.scenario.name}-{p.target.name}": p
         for p in plan_cells(catalog(), BUILTIN_TARGETS.values(), seed=0)}


@pytest.fixture(scope="session")
def matrix_cells(request):
    wanted = [item.callspec.params["cell_id"] for item in request.session.items
              if getattr(item, "callspec", None) and "cell_id" in item.callspec.params]
    plans = [PLANS[w] for w in wanted if w in PLANS]
    matrix = run_matrix(plans)
    return {f"{c.scenario}-{c.target}": c for c in matrix.cells}


@pytest.mark.faults
@pytest.mark.parametrize("cell_id", list(PLANS))
def test_matrix(cell_id, matrix_cells):
    check_cell(matrix_cells[cell_id])
