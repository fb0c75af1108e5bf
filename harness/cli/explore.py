"""``harness explore``: search fault plans for one target, shrink each failure,
write it as a scenario file, and print how to replay it.

Exit codes: 0 no failing plan found, 1 some found, 2 a usage error, 3 an internal error,
130 interrupted.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from harness.cli import common, stop
from harness.cli.options import (
    CLUSTER,
    ISOLATION_OPTION,
    MOUNT_OPTION,
    SEED,
    TIMEOUT_HELP,
    Duration,
    Seconds,
    check_topologies,
    target_option,
)
from harness.vocabulary import DEFAULT_WORKLOAD, ExitCode

if TYPE_CHECKING:
    from rich.console import Console

#: How long a search runs unless told (``--budget``).
DEFAULT_BUDGET_S = 300.0


@click.command("explore")
@target_option(multiple=False, required=True)
@click.option("--workload", "-w", default=DEFAULT_WORKLOAD, show_default=True,
              help="The workload your own target implements (a built-in keeps its own).")
@click.option("--scenario", "-s", "base", default=None,
              help="The scenario plans start from (its inputs, mounts and deadline; its faults "
                   "are dropped): a catalog name or a file. Default: the workload's baseline.")
@click.option("--budget", type=Duration(), default=None,
              help="How long to search (90s, 5m, 1h30m). Default: 5m, unless --examples is given.")
@click.option("--examples", type=click.IntRange(min=1), default=None,
              help="How many worlds to run at most.")
@click.option("--seed", default=0, show_default=True, type=SEED,
              help="The same seed draws the same plans and finds the same failures.")
@click.option("--out", "out_dir", default="found", show_default=True,
              type=click.Path(file_okay=False), help="Where each failing plan is written.")
@click.option("--kinds", default=None, metavar="KIND,KIND",
              help="Draw only these fault kinds; 'none': fault-free plans, which vary the "
                   "topology and the order of the ranks at one instant (a race) only. "
                   "Default: every kind the target can meet.")
@click.option("--topology", "-t", "topologies", multiple=True, callback=check_topologies,
              help="Topologies to draw from, simplest first (repeatable).")
@MOUNT_OPTION
@click.option("--timeout", default=None, type=Seconds(),
              help=f"Every world's deadline: {TIMEOUT_HELP}. Default: the base scenario's.")
@click.option("--database", default=None, type=click.Path(file_okay=False),
              help="Hypothesis's example database: findings saved here are tried first next "
                   "time. Default: .harness_cache/explore (HARNESS_CACHE_DIR).")
@click.option("--no-database", is_flag=True, default=False,
              help="Keep no example database (start from nothing, save nothing).")
@click.option("--format", "fmt", default="text", show_default=True,
              type=click.Choice(["text", "json"]), help="The report on stdout.")
@ISOLATION_OPTION
@click.option("--crash-states", is_flag=True, default=False,
              help="Instead of drawing plans: enumerate the states a crash can leave on disk at "
                   "each of the target's file operations (process and host crashes, per mount), "
                   "try each, and report the operations the recovery depends on.")
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(min=1),
              help="With --crash-states: worlds run at once.")
@click.option("--lanes", default=None, type=click.IntRange(min=1, max=10_000),
              help="Split the search into this many independent searches (each its own "
                   "draws, the worlds' seed kept), run one after another here or side by side "
                   "with --cluster. Default: 1, or the cluster's threads.")
@click.option("--check-determinism", is_flag=True, default=False,
              help="Run each plan's world twice with its seed: a plan whose two runs differ "
                   "(a rank's fate or value, an event of its history) is a finding, shrunk "
                   "as any other, its detail naming the first difference.")
@CLUSTER
def explore_command(target_spec: str, workload: str, base: str | None, budget: float | None,
                    examples: int | None, seed: int, out_dir: str, kinds: str | None,
                    topologies: tuple[str, ...], mount_texts: tuple[str, ...],
                    timeout: float | None, database: str | None,
                    no_database: bool, fmt: str, crash_states: bool, jobs: int,
                    lanes: int | None, cluster: str | None, check_determinism: bool) -> None:
    """Search fault plans that break TARGET, shrink each to the smallest that still
    fails, and write it as a scenario file (``harness run --scenario`` replays it)."""
    from rich.console import Console

    from harness.explore import found
    from harness.explore.lanes import Lanes, pack
    from harness.explore.search import default_database, explore
    from harness.scenarios import base_scenario, without_faults

    common.known_workload(workload)
    chosen = common.target_from(target_spec, workload)
    workload = chosen.workload or workload
    if base is not None:
        from harness.scenarios import UnknownScenario, find
        try:
            start = without_faults(find(base))
        except UnknownScenario as exc:
            raise click.BadParameter(str(exc), param_hint="'--scenario'") from None
        if start.workload != workload:
            raise click.BadParameter(f"scenario {start.name} belongs to workload {start.workload}, "
                                     f"target {chosen.name} to {workload}",
                                     param_hint="'--scenario'")
    else:
        start = base_scenario(workload)
    if mount_texts:
        start = start.with_mounts(common.mount_list(mount_texts))
    kind_list = [k.strip() for k in kinds.split(",") if k.strip()] if kinds else None
    if kind_list == ["none"]:
        kind_list = []
    elif kind_list is not None:
        from harness.faults.kinds import KINDS
        unknown = [k for k in kind_list if k not in KINDS]
        if unknown or not kind_list:
            raise click.BadParameter(f"unknown fault kind {unknown[0] if unknown else kinds!r}: "
                                     f"use some of {', '.join(KINDS)}", param_hint="'--kinds'")
    if budget is None and examples is None:
        budget = DEFAULT_BUDGET_S
    db = None if no_database else Path(database) if database else default_database()
    out = Path(out_dir)
    made = _writable(out)

    if crash_states:
        _crash_states(chosen, workload, seed, jobs, out, made, fmt)
    err = Console(stderr=True)
    written: list[found.Written] = []

    def on_finding(search: Any, finding: Any) -> None:
        written.append(found.write(search, finding, out))
        if not err.is_terminal:
            click.echo(f"found: {finding.outcome} {finding.plan.describe()}", err=True)

    if cluster is not None or (lanes or 1) > 1:
        spec = Lanes(target_spec, workload, base, seed, lanes or 1, budget, examples, kind_list,
                     list(topologies) or None, timeout, pack(db), mount_texts, check_determinism)
        result = _in_lanes(chosen, start, spec, cluster, db, on_finding, err,
                           lanes_given=lanes is not None)
    else:
        with _progress(err, chosen.name) as show:
            result = explore(chosen, start, seed=seed, budget_s=budget, max_worlds=examples,
                             database=db, topologies=list(topologies) or None, kinds=kind_list,
                             timeout=timeout, on_progress=show, on_finding=on_finding,
                             check_determinism=check_determinism)
    if made and not written:
        out.rmdir()  # nothing found: leave nothing behind
    if fmt == "json":
        click.echo(json.dumps(found.to_dict(result, written), indent=2))
    else:
        click.echo(found.render(result, written), nl=False)
    if result.stopped == "interrupted":
        sys.exit(stop.status())
    sys.exit(ExitCode.FAILED if written else ExitCode.OK)


def _in_lanes(chosen: Any, start: Any, spec: Any, cluster: str | None, db: Path | None,
              on_finding: Any, err: Console, lanes_given: bool) -> Any:
    """The search split into lanes, here or on a cluster; their findings merged here."""
    import dataclasses
    import time

    from harness.explore.lanes import database_at, merge, run_here, run_lane
    from harness.explore.search import Exploration, Search
    from harness.world.world import ABORT

    started = time.monotonic()
    search = Search.start(chosen, start, seed=spec.seed, kinds=spec.kinds,
                          topologies=spec.topologies, timeout=spec.timeout,
                          check_determinism=spec.check_determinism)
    results: list[dict[str, Any]] = []
    campaign = None
    interrupted = False
    try:
        if cluster is None:
            err.print(f"explore {chosen.name}: {spec.count} lanes, one after another")
            results = [r for _, r in run_here(spec.items())]
        else:
            from harness.runner.cluster import ClusterError

            try:
                with common.connect(cluster) as engine:
                    if not lanes_given:
                        spec = dataclasses.replace(spec, count=engine.threads)
                    err.print(f"explore {chosen.name}: {spec.count} lanes on {cluster} "
                              f"({engine.threads} threads)")
                    results = [r for _, r in engine.map(run_lane, spec.items())]
                    campaign = engine.campaign()
            except ClusterError as exc:  # a lane lost with its worker
                raise click.BadParameter(str(exc), param_hint="'--cluster'") from None
    except KeyboardInterrupt:
        ABORT.set()
        interrupted = True
    findings = merge(search, results, database_at(db), on_finding)
    reasons = sorted({r["stopped"] for r in results})
    stopped = "interrupted" if interrupted else ("exhausted" if reasons == ["exhausted"] else
                                                 next((r for r in reasons if r != "exhausted"),
                                                      "exhausted"))
    return Exploration(chosen, start.workload, spec.seed, search.space, findings,
                       worlds=sum(r["worlds"] for r in results) + search.progress.worlds,
                       duration_s=time.monotonic() - started, stopped=stopped,
                       discovery=search.discovery, lanes=spec.count, campaign=campaign)


def _crash_states(chosen: Any, workload: str, seed: int, jobs: int, out: Path, made: bool,
                  fmt: str) -> None:
    from rich.console import Console

    from harness.explore.crash import CrashError, explore_crash_states
    from harness.explore.crash_report import render_crash_report, write_scenarios

    err = Console(stderr=True)
    status = err.status(f"crash states of {chosen.name}: recording its fault-free run") \
        if err.is_terminal else None
    tried = [0]

    def on_state(state: Any) -> None:
        tried[0] += 1
        if status is not None:
            status.update(f"crash states of {chosen.name}: {tried[0]} states tried")

    try:
        with status if status is not None else contextlib.nullcontext():
            report = explore_crash_states(chosen, workload, seed=seed, jobs=jobs,
                                          on_state=on_state)
    except CrashError as exc:
        raise click.BadParameter(str(exc), param_hint="'--workload'") from None
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(stop.status())
    write_scenarios(report, str(out))
    if made and not report.vulnerabilities:
        out.rmdir()
    # a target whose fault-free run fails has its crash-prone operations listed unconfirmed:
    # still something to fix
    flawed = bool(report.vulnerabilities) or (not report.confirmed and bool(report.patterns))
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(render_crash_report(report))
    sys.exit(ExitCode.FAILED if flawed else ExitCode.OK)


def _writable(out: Path) -> bool:
    """Findings are written as they are made: a directory that cannot take them is a usage
    error now, not an internal error after the first finding. True: it was made here."""
    if out.exists() and not out.is_dir():
        raise click.BadParameter(f"{out} is not a directory", param_hint="'--out'")
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise click.BadParameter(f"cannot write scenario files under {out}: "
                                 f"{exc.strerror or exc}", param_hint="'--out'") from None
    return made


class _progress:
    """A live line on a terminal's stderr: worlds run, failures found, time left."""

    def __init__(self, console: Console, name: str) -> None:
        self.console, self.name, self.live = console, name, None

    def __enter__(self) -> Any:
        if self.console.is_terminal:
            self.live = self.console.status(f"explore {self.name}: starting")
            self.live.__enter__()
        return self.show

    def show(self, progress: Any) -> None:
        if self.live is None:
            return
        left = progress.left_s
        budget = f", {left:.0f} s left" if left is not None else \
            f", {progress.max_worlds - progress.worlds} worlds left"
        self.live.update(f"explore {self.name}: {progress.worlds} worlds, "
                         f"{progress.findings} failing plans found{budget}")

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
