"""The search: Hypothesis draws plans, worlds judge them, failures shrink.

Each finding is one ``hypothesis.find``: the first plan whose cell fails and is
not explained by a finding already made, shrunk to the smallest plan that still
is. A failing plan is *explained* by a finding when it holds everything the
finding needed (its fault kinds that fired, several hosts, a mount's
consistency) and ends the same way: a torn write that breaks the readers
explains every plan with a torn write in it that breaks them the same way, so
the next search looks for something else. Searches go on until the budget (time
or worlds) is spent or Hypothesis has nothing new to draw.

The same ``seed`` draws the same plans in the same order; every world's outcome
is itself fixed by the seed, so an exploration finds the same plans. Each world
is run once (a plan drawn twice is judged from memory), so a shrink never meets a
world that changed its mind. The example database (Hypothesis's own) keeps each
shrunk finding under a key naming the target, the space and the findings made
before it: the next run replays it first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from harness.explore.space import Plan, Space
from harness.faults.kinds import KINDS
from harness.faults.kinds._base import Placed
from harness.runner.cells import Cell
from harness.runner.determinism import twice
from harness.runner.discovery import Discovery, cache_dir, discover
from harness.runner.run import CellPlan, run_cell
from harness.scenarios import Scenario, ScenarioError, load_scenario
from harness.topology import get_topology
from harness.vocabulary import NOT_EXERCISED, UNEXPECTED
from harness.workloads.base import Target
from harness.workloads.registry import WORKLOADS
from harness.world.world import ABORT

log = logging.getLogger(__name__)

#: Plans drawn for one kind alone before the search moves on to the next.
FOCUS_EXAMPLES = 25
#: Plans drawn with no fault at all (topologies and the handoff directory's mounts).
SHAPES_EXAMPLES = 10


def default_database() -> Path:
    """Beside the discovery cache (``HARNESS_CACHE_DIR``, default ``.harness_cache``)."""
    return cache_dir().parent / "explore"


@dataclass(frozen=True)
class Finding:
    """A failing plan, shrunk, and the cell that shows how it fails."""

    plan: Plan
    cell: Cell
    needs: frozenset[str]  # what the failure needed (see ``needs_of``)
    worlds: int  # worlds run when it was found
    first_faults: int  # faults in the first failing plan, before shrinking

    @property
    def outcome(self) -> str:
        return self.cell.outcome

    def explains(self, needs: frozenset[str], outcome: str) -> bool:
        return self.needs <= needs and self.outcome == outcome


@dataclass
class Progress:
    """What a progress display shows."""

    worlds: int = 0
    findings: int = 0
    started: float = field(default_factory=time.monotonic)
    budget_s: float | None = None
    max_worlds: int | None = None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def left_s(self) -> float | None:
        return None if self.budget_s is None else max(0.0, self.budget_s - self.elapsed)

    def spent(self) -> bool:
        left = self.left_s
        return (left is not None and left <= 0) or \
            (self.max_worlds is not None and self.worlds >= self.max_worlds)


@dataclass
class Exploration:
    """What a search did and found."""

    target: Target
    workload: str
    seed: int
    space: Space
    findings: list[Finding] = field(default_factory=list)
    worlds: int = 0
    duration_s: float = 0.0
    #: why it stopped: "budget" (time), "examples" (worlds), "exhausted" (nothing new to
    #: draw) or "interrupted"
    stopped: str = ""
    discovery: Discovery | None = None
    lanes: int = 1  # searches it was split into (``harness.explore.lanes``)
    campaign: dict[str, Any] | None = None  # the cluster the lanes ran on, and its retries


class _Spent(BaseException):
    """The budget ran out before this search found anything: end it (not a failure)."""


def needs_of(plan: Plan, cell: Cell, base: Scenario) -> frozenset[str]:
    """What a failing cell had that a plain world lacks: the fault kinds that fired (a
    placed file counts as fired), several hosts, a shared handoff directory."""
    fired = {row.fault.split("#")[0] for row in cell.faults_fired}
    fired |= {f["kind"] for f in plan.faults if issubclass(KINDS[f["kind"]], Placed)}
    if get_topology(plan.topology).hosts > 1 and get_topology(base.topology).hosts == 1:
        fired.add("several hosts")
    if plan.shared_handoff is not None:
        fired.add(f"shared handoff-dir ({plan.shared_handoff})")
    return frozenset(fired)


def failed(cell: Cell) -> bool:
    """The plan broke the target: its faults happened and the cell missed its expectation."""
    return cell.verdict == UNEXPECTED and cell.outcome != NOT_EXERCISED


class Search:
    """One exploration of one target: the world runner, its memory and its findings."""

    def __init__(self, target: Target, space: Space, discovery: Discovery | None, seed: int,
                 progress: Progress, timeout: float | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 check_determinism: bool = False) -> None:
        self.target, self.space, self.discovery, self.seed = target, space, discovery, seed
        #: each plan's world runs twice: two that differ make the plan a finding
        self.check_determinism = check_determinism
        self.run_cell = twice(run_cell) if check_determinism else run_cell
        self.progress, self.timeout, self.on_progress = progress, timeout, on_progress
        self.findings: list[Finding] = []
        self._memory: dict[str, Cell | None] = {}  # plan key -> its failing cell (None: passed)
        self._work = Path(tempfile.mkdtemp(prefix="harness-explore-"))
        weakref.finalize(self, shutil.rmtree, self._work, True)  # the plans' scenario files
        self._pending = False
        self._first_faults = 0

    @classmethod
    def start(cls, target: Target, base: Scenario, *, seed: int = 0,
              progress: Progress | None = None, topologies: list[str] | None = None,
              kinds: list[str] | None = None, timeout: float | None = None,
              use_cache: bool = True,
              on_progress: Callable[[Progress], None] | None = None,
              check_determinism: bool = False) -> Search:
        """A search for ``target`` around ``base``: its fault-free run learned (its roles
        are what the plans aim at; another run's files are what a stale leftover holds)."""
        workload = WORKLOADS[base.workload]
        discovery = discover(target, workload, previous=True, use_cache=use_cache,
                             learning=workload.learning_for(base.workload_inputs))
        space = Space.of(base, discovery.roles, topologies, kinds,
                         collectives=discovery.collectives > 0)
        return cls(target, space, discovery, seed, progress or Progress(), timeout, on_progress,
                   check_determinism)

    # -- one world per plan -------------------------------------------------------------
    def failure(self, plan: Plan) -> Cell | None:
        """The plan's cell if it failed (None if the target survived or the faults did not
        happen): run once, then remembered (a passing cell's history is not kept)."""
        key = plan.key()
        if key not in self._memory:
            scenario = self.load(plan, f"plan-{key}", self._work)
            cell_plan = CellPlan(scenario, self.target, plan.seed(self.seed), scenario.topology,
                                 self.timeout or scenario.timeout,
                                 timeout_overridden=self.timeout is not None)
            cell = self.run_cell(cell_plan, discovery=self.discovery)
            self._memory[key] = cell if failed(cell) else None
            self.progress.worlds += 1
            if self.on_progress is not None:
                self.on_progress(self.progress)
        return self._memory[key]

    def load(self, plan: Plan, name: str, where: Path, description: str = "",
             finding: str = "") -> Scenario:
        """The plan as a scenario file in ``where``, loaded as ``harness run`` loads it."""
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{name}.yaml"
        data = plan.scenario(self.space.base, name, description or f"plan {plan.describe()}",
                             finding)
        path.write_text(yaml.safe_dump(data, sort_keys=False, width=100))
        return load_scenario(path)

    # -- the condition Hypothesis searches for --------------------------------------------
    def interesting(self, plan: Plan) -> bool:
        if plan.key() not in self._memory and self.progress.spent():
            if self._pending:
                return False  # shrinking: keep the smallest failure found so far
            raise _Spent
        try:
            cell = self.failure(plan)
        except ScenarioError as exc:  # a plan the space should not have drawn
            log.warning("plan %s is not a valid scenario: %s", plan.describe(), exc)
            return False
        if cell is None:
            return False
        needs = needs_of(plan, cell, self.space.base)
        if any(f.explains(needs, cell.outcome) for f in self.findings):
            return False
        if not self._pending:
            self._pending, self._first_faults = True, len(plan.faults)
        return True

    def next_finding(self, rng: random.Random, database: ExampleDatabase | None,
                     examples: int = 100_000) -> Finding | None:
        """The next failure not explained by the findings so far, shrunk (None: none in
        ``examples`` drawn plans)."""
        self._pending = False
        config = settings(database=database, deadline=None, max_examples=examples,
                          phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
                          suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                          report_multiple_bugs=False, print_blob=False)
        plan = _find(self.space.plans(), self.interesting, config, rng.getrandbits(64),
                     self.database_key())
        if plan is None:
            return None
        cell = self._memory[plan.key()]
        assert cell is not None  # the condition held for it
        finding = Finding(plan, cell, needs_of(plan, cell, self.space.base),
                          self.progress.worlds, self._first_faults)
        self.findings.append(finding)
        self.progress.findings = len(self.findings)
        return finding

    def database_key(self) -> bytes:
        """The target, the space, and what was already found: a finding is saved under
        the search that made it, and replayed first by the same search next time."""
        made = sorted([sorted(f.needs), f.outcome] for f in self.findings)
        blob = json.dumps([self.target.ref, self.space.fingerprint(), made]).encode()
        return b"harness-explore:" + hashlib.sha256(blob).hexdigest().encode()


class _Found(Exception):  # noqa: N818 - not an error: the search's way out
    """The condition held: Hypothesis shrinks the plan and raises this once more."""


def _find(strategy: st.SearchStrategy[Plan], condition: Callable[[Plan], bool],
          config: settings, seed: int, key: bytes) -> Plan | None:
    """``hypothesis.find`` with both a seed and the example database: ``find`` given a
    ``random`` runs under ``@seed``, which turns the database off. The two attributes set
    here are the ones ``@seed`` and ``find`` themselves set (Hypothesis is pinned in CI;
    tests/world/test_explore.py checks that the database is written and replayed)."""
    last: list[Plan] = []

    @config
    @given(strategy)
    def probe(plan: Plan) -> None:
        if condition(plan):
            last[:] = [plan]
            raise _Found

    probe._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    probe._hypothesis_internal_database_key = key  # type: ignore[attr-defined]
    try:
        probe()
    except _Found:
        return last[0]
    return None


def explore(target: Target, base: Scenario, *, seed: int = 0, budget_s: float | None = None,
            max_worlds: int | None = None, database: Path | ExampleDatabase | None = None,
            topologies: list[str] | None = None, kinds: list[str] | None = None,
            timeout: float | None = None, use_cache: bool = True,
            on_progress: Callable[[Progress], None] | None = None,
            on_finding: Callable[[Search, Finding], None] | None = None,
            draw_seed: int | None = None, check_determinism: bool = False) -> Exploration:
    """Search fault plans for ``target`` around ``base`` until the budget is spent.

    ``seed`` is every world's; the plans are drawn from ``draw_seed`` (default: ``seed``),
    so that lanes draw apart while their findings replay with the same ``--seed``.
    ``database``: Hypothesis's example database, or its directory (None: none kept).
    ``check_determinism``: each plan's world runs twice, and two that differ are a finding.
    """
    progress = Progress(budget_s=budget_s, max_worlds=max_worlds)
    search = Search.start(target, base, seed=seed, progress=progress, topologies=topologies,
                          kinds=kinds, timeout=timeout, use_cache=use_cache,
                          on_progress=on_progress, check_determinism=check_determinism)
    space = search.space
    result = Exploration(target, base.workload, seed, space, discovery=search.discovery)
    db = DirectoryBasedExampleDatabase(str(database)) if isinstance(database, Path) else database
    rng = random.Random(seed if draw_seed is None else draw_seed)
    ABORT.clear()
    try:
        for drawn, examples in passes(space):
            search.space = replace(space, kinds=drawn)
            while (finding := search.next_finding(rng, db, examples)) is not None:
                if on_finding is not None:
                    on_finding(search, finding)
        result.stopped = "exhausted"
    except _Spent:
        result.stopped = "budget" if progress.left_s == 0 else "examples"
    except KeyboardInterrupt:
        ABORT.set()
        result.stopped = "interrupted"
    result.findings = list(search.findings)
    result.worlds = progress.worlds
    result.duration_s = progress.elapsed
    return result


def passes(space: Space) -> list[tuple[tuple[str, ...], int]]:
    """The searches, in order, with the plans each may draw: the topologies and mounts
    alone, then each kind alone (as Jepsen runs each nemesis alone before it mixes
    them), then every kind at once, swarm-style, until the budget is spent."""
    alone = [((), SHAPES_EXAMPLES)] + [((kind,), FOCUS_EXAMPLES) for kind in space.kinds]
    return [*alone, (space.kinds, 1_000_000)]
