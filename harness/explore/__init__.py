"""Explore: search fault plans instead of listing them.

``harness explore`` (``harness.cli.explore``) draws plans from Hypothesis
strategies built from the fault kinds and the target's roles (``space``), runs
each as a world and shrinks every failure to the smallest plan (``search``),
and writes it as a scenario file with its replay command (``found``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from harness.explore.search import Search
from harness.explore.space import Plan
from harness.scenarios import base_scenario, without_faults

__all__ = ["PlanCase", "check_plan", "fault_plans"]


@dataclass(frozen=True)
class PlanCase:
    """One drawn plan and the search that runs it (what a property test receives)."""

    search: Search
    plan: Plan


def fault_plans(target: str, workload: str = "config-sync", *, scenario: str | None = None,
                kinds: Sequence[str] | None = None, topologies: Sequence[str] | None = None,
                seed: int = 0, timeout: float | None = None) -> st.SearchStrategy[PlanCase]:
    """Fault plans for ``target``, for a property test of your own::

        @settings(max_examples=30, deadline=None)
        @given(fault_plans("mypkg/sync.py:load_config", kinds=["torn-write", "eio"]))
        def test_survives(case):
            check_plan(case)

    The target's fault-free run (its roles) is learned at the first draw, not at import.
    """
    from harness.scenarios import find
    from harness.workloads.registry import target as named

    def space() -> st.SearchStrategy[PlanCase]:
        chosen = named(target, workload)
        base = without_faults(find(scenario)) if scenario else \
            base_scenario(chosen.workload or workload)
        search = Search.start(chosen, base, seed=seed, kinds=list(kinds) if kinds else None,
                              topologies=list(topologies) if topologies else None,
                              timeout=timeout)
        return search.space.plans().map(lambda plan: PlanCase(search, plan))

    return st.deferred(space)


def check_plan(case: PlanCase, found: str | Path = "found") -> None:
    """Run the plan's world and fail the test if the target did not survive it: the
    message has every rank's fate, and the plan is written to ``found`` with its replay.
    A plan whose faults could not happen to the target passes, as it tests nothing."""
    from harness.reports.diagnosis import CellFailed, describe

    cell = case.search.failure(case.plan)
    if cell is not None:
        from harness.explore.found import replay_of

        name = f"{case.search.target.name.rpartition('/')[2].replace('.py:', '-')}-plan-" \
               f"{case.plan.key()}".lower().replace("_", "-").replace(":", "-")
        scenario = case.search.load(case.plan, name, Path(found),
                                    f"Found by a property test: {case.plan.describe()}.")
        replay = replay_of(case.search, Path(scenario.source or ""),
                           case.plan.seed(case.search.seed))
        shown = dataclasses.replace(cell, scenario=name, replay=replay)
        raise CellFailed(f"{describe(shown)}\nplan: {case.plan.describe()}")
