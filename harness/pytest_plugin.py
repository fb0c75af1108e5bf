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
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from harness.runner.cells import Cell
    from harness.runner.run import CellPlan
    from harness.world.result import WorldResult

# Loaded by every pytest run in an environment that has the harness installed (its entry
# point): it imports nothing of the harness until a test asks for it, as Hypothesis's own
# plugin defers. ``benchmarks/bench_startup.py`` measures what it adds.


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: a harness fault-injection test (run with -m faults)")


def assert_world_passed(result: WorldResult) -> None:
    from harness.reports.diagnosis import WorldFailed, describe
    from harness.vocabulary import PASS

    if result.outcome != PASS:
        raise WorldFailed(describe(result))


@pytest.fixture
def harness_world() -> Callable[..., WorldResult]:
    """``harness_world(target, topology=..., timeout=..., **run_world_options)``."""

    def run(target: Any, **options: Any) -> WorldResult:
        from harness.world.world import run_world

        options.setdefault("timeout", 30.0)
        return run_world(target, **options)

    return run


def catalog_cases(target: str, scenarios: Iterable[str] | None = None,
                  workload: str | None = None, seed: int = 0, checker: Any = None,
                  config: str | None = None, mounts: Iterable[str] = ()) -> list[Any]:
    """``pytest.param`` per catalog scenario of ``workload`` for your ``target``,
    with readable ids (``isolated-tmp``). ``checker`` judges each rank's value inside
    the rank: a module-level pydantic model or ``check(value) -> None | str``, a JSON
    schema (a dict or a ``.json`` path), or a ``file.py:Name`` / ``module:Name``.
    ``config``: your own config file (YAML or JSON) the config-sync scenarios hand your
    target, as ``--config`` does; relative paths are found beside the test file too.
    ``mounts``: what paths are on your pod, as ``--mount`` spells them
    (``["/mnt/shared=shared"]``)."""
    from harness.runner.run import plan_cells
    from harness.scenarios import catalog, select
    from harness.workloads.registry import DEFAULT_WORKLOAD, check_workload
    from harness.workloads.registry import target as named_target

    workload = workload or DEFAULT_WORKLOAD
    check_workload(workload)  # a typo is an error, never an empty parametrization

    chosen = select(scenarios) if scenarios else \
        [s for s in catalog() if s.workload == workload]
    resolved = named_target(_beside_caller(target), workload, checker)
    if config is not None:
        path = _beside_test(str(config))
        chosen = [s.with_config(path) if "config" in s.workload_inputs.model_fields else s
                  for s in chosen]
    if mounts:
        from harness.scenarios import MountSpec

        given = [MountSpec.parse_option(m) for m in mounts]  # ValueError naming the bad one
        chosen = [s.with_mounts(given) for s in chosen]
    return [pytest.param(plan, id=plan.scenario.name)
            for plan in plan_cells(chosen, [resolved], seed)]


def _beside_caller(target: str) -> str:
    """A relative ``file.py:function`` found where the test file that names it is, when it
    is not under the working directory: ``pytest mycode/test_sync.py`` from the parent
    directory finds ``sync.py`` beside the test, as ``python mycode/test_sync.py`` would."""
    path, sep, function = target.partition(":")
    if not sep or not path.endswith(".py"):
        return target
    return f"{_beside_test(path)}:{function}"


def _beside_test(path: str) -> str:
    """``path`` as given when it is absolute or exists from here, else beside the test file
    that called the plugin (the first frame outside this module), where that file is."""
    import inspect
    import os

    if os.path.isabs(path) or os.path.exists(path):
        return path
    frame = inspect.currentframe()
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    where = frame.f_globals.get("__file__") if frame is not None else None
    beside = os.path.join(os.path.dirname(os.path.abspath(where)), path) if where else None
    return beside if beside and os.path.exists(beside) else path


def check_cell(case: CellPlan | Cell) -> Cell:
    """Run (or take) a cell and fail the test if its verdict is unexpected; a known
    failure (a baseline's, a reference target's recorded one) is an xfail saying how it
    failed, never a pass; a cell whose fault could not happen to the target is skipped
    with the reason, never passed."""
    __tracebackhide__ = True  # a failure shows the cell, not this function's source
    from harness.reports.diagnosis import CellFailed, describe
    from harness.runner.cells import Cell
    from harness.runner.run import run_cell
    from harness.vocabulary import KNOWN, UNEXERCISED, UNEXPECTED

    cell = case if isinstance(case, Cell) else run_cell(case)
    if cell.verdict == UNEXPECTED:
        raise CellFailed(describe(cell))
    if cell.verdict == UNEXERCISED:
        pytest.skip(cell.detail)
    if cell.verdict == KNOWN:
        pytest.xfail(f"known failure: {cell.outcome}: {cell.detail}")
    return cell


def __getattr__(name: str) -> Any:
    """``WorldFailed`` and ``CellFailed``, defined with the diagnosis that is their message
    (``harness.reports.diagnosis``), importable from here without importing it at load."""
    if name in ("WorldFailed", "CellFailed"):
        from harness.reports import diagnosis

        return getattr(diagnosis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
