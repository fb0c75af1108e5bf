"""The pytest face: the ``faults`` marker, a fixture that runs a function
across a world, and a few lines to run your own target over the catalog.

    import pytest
    from harness.pytest_plugin import catalog_cases, check_cell

    @pytest.mark.faults
    @pytest.mark.parametrize("case", catalog_cases("mypkg/sync.py:load_config"))
    def test_config_sync_survives(case):
        check_cell(case)

A failing case prints every rank's fate, the faults fired, the stacks of hung
ranks and the command that replays it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

from harness.reports.diagnosis import describe
from harness.runner.cells import UNEXERCISED, UNEXPECTED, Cell
from harness.runner.run import CellPlan, plan_cells, run_cell
from harness.workloads.registry import DEFAULT_WORKLOAD
from harness.world.result import PASS, WorldResult
from harness.world.world import run_world


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: a harness fault-injection test (run with -m faults)")


class WorldFailed(AssertionError):
    """A world that should have passed did not; the message is the full diagnosis."""


class CellFailed(AssertionError):
    """A cell whose verdict is unexpected; the message is the full diagnosis."""


def assert_world_passed(result: WorldResult) -> None:
    if result.outcome != PASS:
        raise WorldFailed(describe(result))


@pytest.fixture
def harness_world() -> Callable[..., WorldResult]:
    """``harness_world(target, topology=..., timeout=..., **run_world_options)``."""

    def run(target: Any, **options: Any) -> WorldResult:
        options.setdefault("timeout", 30.0)
        return run_world(target, **options)

    return run


def catalog_cases(target: str, scenarios: Iterable[str] | None = None,
                  workload: str = DEFAULT_WORKLOAD, seed: int = 0, checker: Any = None) -> list[Any]:
    """``pytest.param`` per catalog scenario of ``workload`` for your ``target``,
    with readable ids (``isolated-tmp``). ``checker`` judges each rank's value inside
    the rank: a module-level pydantic model or ``check(value) -> None | str``, a JSON
    schema (a dict or a ``.json`` path), or a ``file.py:Name`` / ``module:Name``."""
    from harness.scenarios import catalog, select
    from harness.workloads.registry import target as named_target

    chosen = select(scenarios) if scenarios else \
        [s for s in catalog() if s.workload == workload]
    resolved = named_target(target, workload, checker)
    return [pytest.param(plan, id=plan.scenario.name)
            for plan in plan_cells(chosen, [resolved], seed)]


def check_cell(case: CellPlan | Cell) -> Cell:
    """Run (or take) a cell and fail the test if its verdict is unexpected; a cell
    whose fault could not happen to the target is skipped with the reason, never passed."""
    cell = case if isinstance(case, Cell) else run_cell(case)
    if cell.verdict == UNEXPECTED:
        raise CellFailed(describe(cell))
    if cell.verdict == UNEXERCISED:
        pytest.skip(cell.detail)
    return cell
