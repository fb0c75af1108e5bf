"""The catalog on a pod: which scenarios can run there, and their cells, judged as the simulator's.

Every scenario runs at the pod's own topology (its workers x chips), as
``harness run --topology`` would; a scenario that needs what only the
simulator has (its filesystem view for file faults, its mounts, its world's
restarts) is not run and says why (``Matrix.pod['not_run']``), never a PASS.
The roles every target's cells clean between cells come from the target's
fault-free run in the simulator (the roles are the code's, not the pod's).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import posixpath
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from harness import __version__
from harness.filesystem.mounts import is_under
from harness.runner.cells import Cell, Matrix, RankRow
from harness.runner.discovery import Discovery, discover
from harness.runner.run import CellPlan, finding_of, learning_key, plan_cells, replay_of, run_cell, run_matrix
from harness.scenarios import Scenario
from harness.topology import TOPOLOGIES
from harness.vocabulary import INFRA, NOT_EXERCISED, POD_DEADLINE, UNEXERCISED
from harness.workloads.base import Target
from harness.workloads.registry import WORKLOADS

from .controller import NotPlaced, Pod, PodFailure
from .mounts import KINDS, PodMount, describe_kind, unprovided

log = logging.getLogger(__name__)


def off_pod(scenario: Scenario, mounts: tuple[PodMount, ...] = ()) -> str | None:
    """Why ``scenario`` cannot run on a pod whose own filesystems are ``mounts`` (None: it
    can)."""
    missing = unprovided(scenario.mounts, mounts)
    if missing:
        what = ", ".join(m.path or f"role {m.role}" for m in missing)
        needs = [f"--mount {m.path}={describe_kind(m)}" for m in missing
                 if m.path and describe_kind(m) in KINDS]
        hint = (f": if this pod has it, say so ({' '.join(needs)})" if needs and
                len(needs) == len(missing) else "")
        return (f"it mounts {what} with the simulator's filesystems; a pod's filesystems "
                f"are its own{hint}")
    for fault in scenario.faults:
        why = fault.off_pod()
        if why is not None:
            return f"fault {fault.kind}: {why}"
    return None


def aimed(scenario: Scenario, mounts: tuple[PodMount, ...], scratch: str = "") -> Scenario:
    """``scenario`` on the pod's own filesystems: a mount no pod mount stands for moves to
    the pod's one mount of the kind it needs (a bucket at /mnt/checkpoints for a scenario's
    /mnt/bucket), and one on a writable pod mount moves into the run's ``scratch``
    directory there (``PodMount.scratch``)."""
    for m in list(scenario.mounts):
        if m.path is None:
            continue
        m = next((x for x in scenario.mounts if x.path == m.path), m)
        pod = next((p for p in mounts if p.provides(m)), None)
        old = m.normalized()
        if pod is None:
            kind = [p for p in mounts if p.kind == describe_kind(m)]
            if len(kind) != 1 or not kind[0].provides(m.model_copy(update={"path": kind[0].path})):
                continue
            pod, rel = kind[0], ""
        else:
            rel = posixpath.relpath(old, pod.path)
        new = pod.scratch(scratch) if pod.writable and scratch else pod.path
        new = posixpath.normpath(posixpath.join(new, rel))
        if new != old:
            scenario = scenario.moved(old, new)
    return scenario


def topology_name(hosts: int, ranks_per_host: int) -> str:
    """The catalog's name for a pod's shape (``v4-64`` for 8x1), else ``HxR``; never an SPMD
    topology's (its processes would answer ``use_spmd`` as SPMD ones)."""
    for name, topo in TOPOLOGIES.items():
        if not topo.spmd and (topo.hosts, topo.ranks_per_host) == (hosts, ranks_per_host):
            return name
    return f"{hosts}x{ranks_per_host}"




def plan_pod(scenarios: list[Scenario], targets: list[Target], seed: int, topology: str,
             timeout: float | None, mounts: tuple[PodMount, ...] = (), scratch: str = ""
             ) -> tuple[list[CellPlan], dict[str, str]]:
    """The cells a pod runs (every scenario at the pod's topology, its deadline at most
    ``POD_DEADLINE`` unless ``timeout`` is given) and the scenarios it cannot, with why.
    A scenario's mounts are aimed at the pod's own (``aimed``)."""
    scenarios = [aimed(s, mounts, scratch) for s in scenarios]
    not_run = {s.name: why for s in scenarios if (why := off_pod(s, mounts)) is not None}
    runnable = [s for s in scenarios if s.name not in not_run]
    plans = plan_cells(runnable, targets, seed, topology, timeout)
    return [p if p.timeout_overridden else replace(p, timeout=min(p.timeout, POD_DEADLINE))
            for p in plans], not_run


def run_on_pod(pod: Pod, plans: list[CellPlan], seed: int, not_run: dict[str, str],
               known: frozenset[tuple[str, str]] = frozenset(),
               replay: tuple[str, ...] = ("harness", "pod", "run"),
               on_cell: Callable[[Cell], None] | None = None) -> Matrix:
    """Every planned cell on ``pod``, one at a time (a pod runs one world at a time)."""
    learned: dict[tuple[str, str], Discovery] = {}

    def one(plan: CellPlan, known: frozenset[tuple[str, str]],
            discovery: Discovery | None) -> Cell:
        if discovery is None:
            key = learning_key(plan)
            discovery = learned.get(key)
            if discovery is None:
                workload = WORKLOADS[plan.scenario.workload]
                discovery = learned[key] = discover(
                    plan.target, workload, False,
                    learning=workload.learning_for(plan.scenario.workload_inputs))
        clean = written_files(discovery)
        try:
            cell = run_cell(plan, known, discovery, execute=partial(pod.run_world, clean=clean))
        except PodFailure as failure:
            cell = infra_cell(plan, failure)
        except NotPlaced as exc:
            cell = unplaced_cell(plan, str(exc))
        cell.replay = str(replay_of(plan).on_pod(replay))
        return cell

    matrix = run_matrix(plans, jobs=1, seed=seed, known=known, on_cell=on_cell, cell_runner=one)
    matrix.mode = "pod"
    matrix.pod = {**pod.report(), "not_run": dict(not_run)}
    return matrix


def written_files(discovery: Discovery) -> tuple[str, ...]:
    """The files the target's ranks write (its handoffs, outputs and states, and the names it
    stages them under): what an earlier cell may have left, removed before each cell.
    Never a directory, never an input: a pod's other files are not the harness's."""
    uses = [u for role in ("handoff", "output", "state") for u in discovery.roles.of(role)]
    home = os.path.expanduser("~")  # the simulator's home is this machine's; a worker has its own
    return tuple(dict.fromkeys("~" + p[len(home):] if is_under(p, home) else p
                               for u in uses for p in (u.path, *u.staging)))


def infra_cell(plan: CellPlan, failure: PodFailure) -> Cell:
    """A cell the pod failed: INFRA, never the target's outcome; what the other hosts'
    ranks did is kept as they left it."""
    partial_result = failure.partial
    ranks = [RankRow.of(r, output_limit=4000) for r in partial_result.ranks] \
        if partial_result is not None else []
    kept = f"; kept: {failure.kept()}" if failure.kept() else ""
    return Cell(scenario=plan.scenario.name, target=plan.target.name, topology=plan.topology,
                seed=plan.seed, outcome=INFRA, expected=plan.scenario.expect,
                verdict=UNEXERCISED, duration_s=partial_result.duration_s if partial_result else 0.0,
                detail=f"{failure.describe()}{kept}",
                replay="", ranks=ranks, workload=plan.scenario.workload,
                finding=finding_of(plan))


def unplaced_cell(plan: CellPlan, why: str) -> Cell:
    """A cell whose files this pod's read-only disk does not hold: its fault could not
    happen here, and it proves nothing (never a PASS)."""
    return Cell(scenario=plan.scenario.name, target=plan.target.name, topology=plan.topology,
                seed=plan.seed, outcome=NOT_EXERCISED, expected=plan.scenario.expect,
                verdict=UNEXERCISED, duration_s=0.0, detail=why, replay="", ranks=[],
                workload=plan.scenario.workload, finding=finding_of(plan))


def infra_matrix(plans: list[CellPlan], failure: PodFailure, seed: int, pod: Pod,
                 not_run: dict[str, str]) -> Matrix:
    """The run's report when the pod failed before its first cell: every cell INFRA."""
    cells = [infra_cell(p, failure) for p in plans]
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return Matrix(cells=cells, seed=seed, created=created, harness_version=__version__,
                  mode="pod", pod={**pod.report(), "not_run": dict(not_run)})



