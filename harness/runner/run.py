"""Run cells: one (scenario, target) world each, judged, in parallel.

Expectations and known failures are applied here, after the checker: the
checker says what happened (the outcome), the runner says whether that was
expected (the verdict).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from harness import __version__, refs
from harness.checkers.common import Baseline, Judgement
from harness.faults.plan import FaultPlan, PlanError, check_fits, make_plan
from harness.history import Event, ranks_phrase
from harness.rank.validator import Validator
from harness.runner.cells import Cell, FaultRow, Matrix, RankRow
from harness.runner.determinism import twice
from harness.runner.discovery import Discovery, discover
from harness.runner.hosts import per_host_note
from harness.runner.replay import Replay
from harness.scenarios import Scenario, ScenarioError, catalog_dir, validate_host_inputs, validate_inputs
from harness.topology import get_topology
from harness.vocabulary import ERROR, KNOWN, NOT_EXERCISED, OK, PASS, UNEXERCISED, UNEXPECTED, Expect
from harness.workloads.base import Learning, Target
from harness.workloads.registry import WORKLOADS
from harness.world import isolation, pool
from harness.world.fates import HARNESS_FAILED, one_line, shared_network
from harness.world.result import WorldResult
from harness.world.world import ABORT, run_world

log = logging.getLogger(__name__)


class HarnessBug(Exception):
    """The harness's own code failed inside a rank of a cell: no verdict on the target, a
    bug to report (the CLI exits 3). ``traceback`` is the rank's."""

    def __init__(self, message: str, traceback: str = "") -> None:
        super().__init__(message)
        self.traceback = traceback


def harness_bug(plan: CellPlan, result: WorldResult) -> HarnessBug | None:
    """The cell's ``HarnessBug`` if the harness failed inside one of its units."""
    failed = [r for r in result.ranks + result.hosts
              if r.error and r.error.get("type") == HARNESS_FAILED]
    if not failed:
        return None
    first = failed[0]
    unit = "rank" if first in result.ranks else "host"
    traceback = first.error.get("traceback") or ""
    lines = traceback.strip().splitlines()
    return HarnessBug(f"{plan.scenario.name}[{plan.target.name}] seed {plan.seed}: {unit} "
                      f"{first.rank} failed in the harness's own code "
                      f"({lines[-1] if lines else 'no traceback'}): this is a bug in the harness, "
                      f"not a verdict on the target (replay: {replay_of(plan)})", traceback)


@dataclass(frozen=True)
class CellPlan:
    scenario: Scenario
    target: Target
    seed: int
    topology: str
    timeout: float
    topology_overridden: bool = False
    timeout_overridden: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.scenario.name, self.target.name)

    def __repr__(self) -> str:
        """One line, as a failing test's header shows its case (not the whole scenario)."""
        return (f"CellPlan({self.scenario.name}[{self.target.name}] on {self.topology}, "
                f"seed {self.seed})")


def finding_of(plan: CellPlan) -> str:
    """What a cell's report says the scenario found in the seeds' code: said of the reference
    targets only. Of a team's own target it would name code it does not have (the seed's
    ``/tmp/temp_config.yaml``, its ``PretrainConfig``)."""
    return plan.scenario.finding if plan.target.builtin else ""


def plan_cells(scenarios: Iterable[Scenario], targets: Iterable[Target], seed: int,
               topology: str | None = None, timeout: float | None = None) -> list[CellPlan]:
    """Every (scenario, target) pair whose workloads agree, in catalog order.

    A topology given here replaces each scenario's: the scenario's faults and
    inputs are checked against it now, so that a trigger naming a rank the new
    topology lacks is a usage error before any cell runs, not a crash after.
    """
    targets = list(targets)
    plans = []
    for scenario in scenarios:
        if topology is not None:
            _check_against(scenario, topology, seed)
        for target in targets:
            if target.workload not in (None, scenario.workload):
                continue
            plans.append(CellPlan(scenario, target, seed, topology or scenario.topology,
                                  timeout or scenario.timeout, topology is not None,
                                  timeout is not None))
    return plans


def _check_against(scenario: Scenario, topology: str, seed: int) -> None:
    topo = get_topology(topology)
    where = scenario.source or scenario.name
    try:  # the faults were typed at load: only their ranks and hosts can fall outside
        check_fits(scenario.faults, world_size=topo.world_size, hosts=topo.hosts,
                   home=os.path.expanduser("~"))
    except PlanError as exc:
        raise ScenarioError(where, f"does not fit topology {topology}: {exc}",
                            field=".".join(str(p) for p in exc.loc)) from None
    try:  # the inputs naming hosts, against the new topology
        validate_inputs(scenario, topology, where)
        validate_host_inputs(scenario, topology, where)
    except ScenarioError as exc:
        raise ScenarioError(where, f"does not fit topology {topology}: {exc.message}",
                            field=exc.field) from None


def replay_of(plan: CellPlan) -> Replay:
    """The command that reruns exactly this cell (``harness replay``)."""
    scenario = plan.scenario
    from_catalog = scenario.source is not None and os.path.dirname(
        os.path.abspath(scenario.source)) == str(catalog_dir())
    target = plan.target
    return Replay(scenario.name if from_catalog else os.path.abspath(str(scenario.source)),
                  target.name if target.builtin else refs.absolute(target.name),
                  seed=plan.seed, workload=None if target.builtin else target.workload,
                  checker=target.checker.ref if target.checker is not None else None,
                  data=scenario.data_given, config=scenario.config_given,
                  mounts=scenario.mounts_given,
                  topology=plan.topology if plan.topology_overridden else None,
                  timeout=plan.timeout if plan.timeout_overridden else None,
                  isolation=isolation.PYTHON if isolation.default_mode() == isolation.PYTHON
                  else None)


def learning_key(plan: CellPlan) -> tuple[str, str]:
    """Which discovery a cell's target is learned by: one per target, and per dataset
    when a scenario gives its own (``Workload.learning``)."""
    learning = WORKLOADS[plan.scenario.workload].learning_for(plan.scenario.workload_inputs)
    return plan.target.name, learning.key if learning is not None else ""


def discover_targets(plans: Iterable[CellPlan], use_cache: bool = True,
                     jobs: int = 1) -> dict[tuple[str, str], Discovery]:
    """One discovery per target (and per ``learning_key``), whatever its workload (at most
    two worlds each: the fault-free run, and another run's when a scenario places what it
    leaves): its roles, and the modules its ranks import, which its cells' fork server
    preloads. A run given ``--timeout`` gives the fault-free run the same deadline."""
    wanted: dict[tuple[str, str], tuple[Target, str, bool, float | None, Learning | None]] = {}
    for p in plans:
        key = learning_key(p)
        _, _, previous, timeout, _ = wanted.get(key, (p.target, "", False, None, None))
        if p.timeout_overridden:
            timeout = max(timeout or 0.0, p.timeout)
        workload = WORKLOADS[p.scenario.workload]
        wanted[key] = (p.target, p.scenario.workload, previous or p.scenario.needs_another_run,
                       timeout, workload.learning_for(p.scenario.workload_inputs))
    workers = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="harness-discovery")
    try:
        futures = {key: workers.submit(discover, target, WORKLOADS[workload], previous, use_cache,
                                       timeout, learning)
                   for key, (target, workload, previous, timeout, learning) in wanted.items()}
        found = {}
        for key, future in futures.items():
            try:
                found[key] = future.result()
            except Exception:
                if ABORT.is_set():  # a Ctrl-C ended its world: what it raised says nothing
                    raise KeyboardInterrupt from None
                raise
        if ABORT.is_set():  # a Ctrl-C whose KeyboardInterrupt was swallowed on its way
            raise KeyboardInterrupt
        return found
    except KeyboardInterrupt:
        ABORT.set()  # before waiting for them: the worlds in flight end now
        raise
    finally:
        workers.shutdown(wait=True, cancel_futures=True)


def not_exercised(plan: FaultPlan, history: Iterable[Event], unresolved: list[str],
                  world_size: int) -> str | None:
    """Why a cell did not test what its scenario says (None: it did).

    A fault aimed at a role the target does not have cannot fire; so a cell is not
    exercised when nothing the scenario plans happened (no fault fired or placed its
    file, no role it mounts at resolved). Faults meant as alternatives ("at its first
    handoff write, or at its first collective") need only one to happen; but a file a
    fault must place and cannot (another run of the target leaves nothing there) always
    leaves the cell unexercised. A fault that fired but changed nothing any rank observed
    (``FaultKind.without_effect``) counts as not fired, and the reason says why.
    """
    named = {i: f"{plan.faults[i].name}: {why}" for i, why in sorted(plan.unresolved.items())}
    # a role that resolved to nothing is an alternative that could not be taken; any other
    # reason (the file another run would leave is not there) is a fault that could not happen
    hard = [text for i, text in named.items() if plan.faults[i].trigger.paths]
    if hard:
        return "; ".join(hard)
    history = list(history)
    fired, idle = set(), []
    for e in history:
        index = e.detail.get("index") if e.kind == "fault" else None
        if not isinstance(index, int) or not 0 <= index < len(plan.faults):
            continue
        fault = plan.faults[index]
        why = fault.spec.without_effect(e, history, world_size)
        if why is None:
            fired.add(index)
        else:
            idle.append(f"{fault.name} fired with no effect: {why}")
    placed = any(f.spec.leftovers(f, plan.roles) for f in plan.faults)
    if fired or placed:
        return None
    if idle:
        return "; ".join(dict.fromkeys(idle))
    soft = list(unresolved) + list(named.values())
    if not plan.faults:
        return "; ".join(soft) or None
    return "; ".join(soft) if soft else "no planned fault fired: " + "; ".join(
        f"{f.name} ({_aim(f)})" for f in plan.faults)


def _aim(fault: Any) -> str:
    t = fault.trigger
    where = fault.spec.role and f"role {fault.spec.role}" or t.path or t.tag or "any"
    ops = "/".join(t.op or fault.spec.ops)
    return f"at {ops} of {where}"


def run_cell(plan: CellPlan, known: frozenset[tuple[str, str]] = frozenset(),
             discovery: Discovery | None = None,
             execute: Callable[..., WorldResult] = run_world) -> Cell:
    """One cell: its world run by ``execute`` (the simulator's ``run_world``, or a pod's),
    judged by the workload's checker, its verdict from the scenario's expectation."""
    scenario, target = plan.scenario, plan.target
    workload = WORKLOADS[scenario.workload]  # the loader refused any other
    home = os.path.expanduser("~")
    inputs = scenario.workload_inputs  # validated at load, and against plan.topology when overridden
    topology = get_topology(plan.topology)
    learning = workload.learning_for(inputs)
    if discovery is None:  # a cell run on its own (pytest, replay)
        discovery = discover(target, workload, scenario.needs_another_run,
                             timeout=plan.timeout if plan.timeout_overridden else None,
                             learning=learning)
    roles = discovery.roles if discovery is not None else None
    files = workload.setup(inputs, topology, plan.seed, roles) if workload.setup else []
    watch = workload.watch(inputs) if workload.watch else []
    faults = make_plan(scenario.faults, seed=plan.seed, world_size=topology.world_size,
                       hosts=topology.hosts, home=home, roles=roles)
    preload = target.modules(discovery.imported if discovery is not None else ())
    checker = checker_of(scenario, target)
    recording = {"record_files": True} if workload.records_files(inputs) else {}
    mounts = scenario.mount_list(home, roles)
    result = execute(target.ref, topology=topology, timeout=plan.timeout, seed=plan.seed,
                       profile=scenario.profile, args=(inputs.for_target(),), checker=checker,
                       mounts=mounts, faults=faults,
                       preload=preload, files=files, watch=watch, reads=target.reads,
                       args_by_host={h: (i.for_target(),) for h, i in
                                     scenario.host_workload_inputs.items()} or None, **recording,
                       **workload.world_settings(inputs))
    bug = harness_bug(plan, result)
    if bug is not None:
        raise bug
    try:
        judgement = workload.judge(result, _baseline(scenario, discovery, learning), inputs)
    except Exception as exc:  # noqa: BLE001 - one cell's judgement, never the run's
        log.exception("cannot judge %s[%s]", scenario.name, target.name)
        judgement = Judgement(ERROR, f"the cell could not be judged: {_why(exc)} (the workload's "
                                     "checker failed on what the ranks returned; the run went on)")
    met, quiet = meets(scenario.expect, judgement)
    is_known = scenario.name in target.known_failures or plan.key in known
    detail, outcome = judgement.detail + quiet + _hard_stops(result.history), judgement.outcome
    shared = shared_network(result)  # a PASS through the machine's one loopback, above all
    detail += shared if shared not in detail else ""
    vacuous = not_exercised(faults, result.history, scenario.unresolved_mounts(home, roles),
                            topology.world_size) if scenario.uses_roles or scenario.faults else None
    if vacuous is not None and result.forked:
        vacuous += (f" ({ranks_phrase(result.forked)} started processes of their own: what "
                    "those do to files the harness does not see, nor aim a fault at)")
    vacuous = vacuous or judgement.unexercised
    if vacuous is not None and met:
        outcome, verdict, met = NOT_EXERCISED, UNEXERCISED, False
        detail = f"not exercised: {vacuous} (the world ended: {detail})"
    elif met and is_known:
        verdict, detail = UNEXPECTED, f"known failure now passes: {detail}"
    elif met:
        verdict = OK
    else:
        verdict = KNOWN if is_known else UNEXPECTED
    if outcome != PASS:
        note = per_host_note(roles, mounts, topology, result.ranks, home, os.getcwd(),
                             pod=execute is not run_world)
        detail = f"{note}; {detail}" if note else detail  # the cause first: a line is cut
    if not met and discovery is not None and discovery.outcome != PASS and not target.builtin:
        detail += (f" (the target's fault-free run, which learns its roles and imports, ended "
                   f"{discovery.outcome} too: it is not kept, and the next run learns again)")
    return Cell(
        scenario=scenario.name, target=target.name, topology=plan.topology, seed=plan.seed,
        outcome=outcome, expected=scenario.expect, verdict=verdict,
        duration_s=result.duration_s, detail=detail, replay=str(replay_of(plan)),
        ranks=[RankRow.of(r, output_limit=4000) for r in result.ranks],
        faults_fired=FaultRow.fired(result.history),
        history=[e.to_dict() for e in result.history], mismatches=list(result.mismatches),
        finding=finding_of(plan), workload=scenario.workload, met=met,
        roles=_roles_shown(scenario, discovery), checker=checker.ref if checker else "",
        world_time_s=result.world_time_s,
        isolation=result.isolation + (f" (kernel refused: {result.isolation_note})"
                                      if result.isolation_note else ""))


def _hard_stops(history: Iterable[Event]) -> str:
    """What a cell says of the ranks a notice's grace ran out on (SIGKILLed), whatever its
    outcome: a PASS that needed the hard stop says so."""
    stops = [str(e.detail.get("message", "")) for e in history if e.kind == "stop"]
    return f" ({'; '.join(stops)})" if stops else ""


def meets(expect: Expect, judgement: Judgement | None) -> tuple[bool, str]:
    """Does a world's judgement meet the scenario's expectation: a PASS, or, where the
    scenario asks for a loud failure, an ERROR on every rank with a message. The second is
    what a cell adds to its detail when an ERROR is not loud enough ("" otherwise)."""
    if judgement is None:
        return False, ""
    if judgement.outcome == PASS:
        return True, ""
    if expect != Expect.FAIL_LOUDLY or judgement.outcome != ERROR:
        return False, ""
    if judgement.loud:
        return True, ""
    return False, (f" (not the loud failure the scenario expects: {judgement.quiet})"
                   if judgement.quiet else "")


def _why(exc: BaseException) -> str:
    try:
        return one_line(f"{type(exc).__name__}: {exc}")
    except Exception:  # noqa: BLE001 - its str() may fail too
        return type(exc).__name__


def broken_cell(plan: CellPlan, exc: BaseException) -> Cell:
    """A cell the harness could not run or judge: its ERROR, so the run goes on."""
    return Cell(scenario=plan.scenario.name, target=plan.target.name, topology=plan.topology,
                seed=plan.seed, outcome=ERROR, expected=plan.scenario.expect, verdict=UNEXPECTED,
                duration_s=0.0, replay=str(replay_of(plan)), workload=plan.scenario.workload,
                detail=f"the harness could not run this cell: {_why(exc)} (the run went on)")


def checker_of(scenario: Scenario, target: Target) -> Validator | None:
    """What judges each rank's value: the target's own checker (``--checker``), else the
    scenario's (for a user's target: the built-ins keep the workload's), else the workload's."""
    workload = WORKLOADS[scenario.workload]
    if target.checker is None and not target.builtin and scenario.validator is not None:
        return scenario.validator
    return workload.validator_for(target)


def _baseline(scenario: Scenario, discovery: Discovery | None,
              learning: Learning | None = None) -> Baseline | None:
    """What the fault-free runs returned, when this cell's rank 0 got the same inputs (or
    whatever it got, when the run was a reference: the user's own data)."""
    if discovery is not None and learning is not None and learning.reference:
        return discovery.baseline
    if discovery is None or 0 in scenario.host_workload_inputs:
        return None
    plain = learning.inputs if learning is not None else WORKLOADS[scenario.workload].inputs()
    return discovery.baseline if scenario.workload_inputs == plain else None


def _roles_shown(scenario: Scenario, discovery: Discovery | None) -> dict[str, str]:
    """What each role the scenario names resolved to, for the report (and, when the
    target's fault-free run did not pass, that its roles come from a failing run)."""
    named = [f.role for f in scenario.faults if f.role] + [m.role for m in scenario.mounts if m.role]
    if discovery is None:
        return {role: "unknown (no fault-free run recorded)" for role in dict.fromkeys(named)}
    note = "" if discovery.outcome == PASS else \
        f" (learned from a fault-free run that ended {discovery.outcome}: {discovery.detail})"
    return {role: discovery.roles.describe(role) + note for role in dict.fromkeys(named)}


def run_matrix(plans: list[CellPlan], jobs: int | None = None, seed: int = 0,
               known: frozenset[tuple[str, str]] = frozenset(),
               on_cell: Callable[[Cell], None] | None = None, use_cache: bool = True,
               cell_runner: Callable[..., Cell] | None = None,
               check_determinism: bool = False) -> Matrix:
    """Run every planned cell, ``jobs`` at a time; cells come back in plan order.
    ``cell_runner`` runs one (``run_cell``; a pod run passes its own); with
    ``check_determinism`` each runs twice (``harness.runner.determinism``)."""
    jobs = max(1, jobs or os.cpu_count() or 1)
    start = time.monotonic()
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    cells: dict[int, Cell] = {}  # by plan index: a campaign over seeds repeats each key
    bugs: list[tuple[str, str]] = []
    ABORT.clear()
    workers = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="harness-cell")
    try:
        if cell_runner is None:  # this machine's fork server: its imports beside the learning
            pool.start(m for t in {p.target.name: p.target for p in plans}.values()
                       for m in t.modules())
        found = discover_targets(plans, use_cache, jobs)
        if cell_runner is None:  # all it will need, imported at once rather than mid-run
            pool.fork_server(tuple(dict.fromkeys(m for p in plans for m in p.target.modules(
                getattr(found.get(learning_key(p)), "imported", ())))))
        one = cell_runner or run_cell  # looked up now: a test may replace run_cell
        if check_determinism:
            one = twice(one)
        futures = {workers.submit(one, plan, known, found.get(learning_key(plan))): i
                   for i, plan in enumerate(plans)}
        for future in as_completed(futures):
            if ABORT.is_set():  # a Ctrl-C whose KeyboardInterrupt was swallowed on its way
                raise KeyboardInterrupt
            plan = plans[futures[future]]
            try:
                cell = future.result()
            except HarnessBug as exc:  # no verdict: the run says it is a bug, and goes on
                bugs.append((str(exc), exc.traceback))
                continue
            except Exception as exc:  # noqa: BLE001 - one cell, never the whole run's results
                log.exception("cell %s seed %d failed", plan.key, plan.seed)
                cell = broken_cell(plan, exc)
            cells[futures[future]] = cell
            if on_cell is not None:
                on_cell(cell)
        interrupted = False
    except KeyboardInterrupt:
        # The queue is cancelled and every world in flight ends now; the cells it had not
        # finished are left out (a world cut short says nothing of its target). A second
        # Ctrl-C while they end propagates at once.
        ABORT.set()
        workers.shutdown(wait=True, cancel_futures=True)
        interrupted = True
    finally:
        workers.shutdown(wait=False, cancel_futures=True)
    ordered = [cells[i] for i in range(len(plans)) if i in cells]
    return Matrix(cells=ordered, seed=seed, created=created, harness_version=__version__,
                  duration_s=time.monotonic() - start, interrupted=interrupted,
                  planned=len(plans), harness_bugs=bugs)


def known_from_baseline(matrix: Matrix) -> frozenset[tuple[str, str]]:
    """A saved report's failing cells, to be counted as known in a new run."""
    return frozenset(c.key for c in matrix.cells if not c.met)
