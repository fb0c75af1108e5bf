"""What the commands share once their options are read: inputs turned into typed values
(or a usage error naming the option), and the matrix printed.

Everything heavy is imported inside the function that needs it: a command pays for
what it runs, and ``harness --help`` for nothing.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from harness.vocabulary import (
    CRASH,
    ERROR,
    FAIL,
    FORMATS,
    HANG,
    INFRA,
    MAX_SEED,
    NOT_EXERCISED,
    PASS,
    ExitCode,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from harness.runner.cells import Matrix

#: How the terminal colours each outcome.
COLOURS = {PASS: "green", FAIL: "red", ERROR: "red", HANG: "magenta", CRASH: "red",
           NOT_EXERCISED: "yellow", INFRA: "blue"}


def styled(outcome: str) -> Text:
    from rich.text import Text

    return Text(outcome, style=f"bold {COLOURS.get(outcome, 'white')}")


def need(module: str) -> None:
    """Before a command makes anything: ``module`` of an optional extra is installed, or the
    ``ModuleNotFoundError`` that ``main`` turns into exit 2 naming the extra."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def load_report(path: str) -> Any:
    """A saved report, or a ``ReportError`` naming the file, the line and the field (exit 2)."""
    from harness.reports.json_report import load

    return load(path)


def replay_from(report: str, name: str) -> Any:
    """The replay of the cell ``name`` (``scenario[target]``, or ``... seed N`` in a
    campaign) of a saved report, read back with ``Replay.parse`` and checked to be that
    cell's: a crafted report cannot make ``harness replay`` run another cell, a shell,
    or itself. A usage error naming the file and the cell otherwise."""
    from pathlib import Path

    from harness.runner.replay import REPLAY, Replay

    matrix = load_report(report)
    named = [c for c in matrix.cells if name in (f"{c.scenario}[{c.target}]",
                                                 f"{c.scenario}[{c.target}] seed {c.seed}")]
    if not named:
        raise click.UsageError(f"{report} has no cell {name}")
    if len(named) > 1:
        seeds = ", ".join(str(c.seed) for c in named)
        raise click.UsageError(f"{report} has {name} at seeds {seeds}: name one, as "
                               f"--cell '{name} seed {named[0].seed}'")
    cell = named[0]
    if matrix.mode == "pod":
        here = Replay(cell.scenario, cell.target, seed=cell.seed)
        raise click.UsageError(f"{report}: {name} ran on a pod; rerun it there with "
                               f"{cell.replay}, or in the simulator with {here}")
    try:
        replay = Replay.parse(cell.replay)
        if replay.command != REPLAY:
            raise ValueError(f"is not a '{' '.join(REPLAY)}' command")
    except ValueError as exc:
        raise click.UsageError(f"{report}: the replay of {name} {exc}: {cell.replay!r}") from None
    scenario_of = Path(replay.scenario).stem if replay.scenario.endswith((".yaml", ".yml")) \
        else replay.scenario
    from harness.refs import same_target

    theirs = (scenario_of, replay.target, replay.seed or 0)
    if (theirs[0], theirs[2]) != (cell.scenario, cell.seed) or \
            not same_target(replay.target, cell.target):
        raise click.UsageError(f"{report}: the replay of {name} reruns another cell, "
                               f"{theirs[0]}[{theirs[1]}] seed {theirs[2]}, not this one at "
                               f"seed {cell.seed}: {cell.replay!r}")
    return replay


def scenarios_from(names: tuple[str, ...], data: str | None = None,
                   config: str | None = None, mounts: tuple[str, ...] = ()) -> list[Any]:
    """``--scenario`` values (names, globs, files), or the whole catalog; a name not in the
    catalog is a usage error that says which names were probably meant. With ``--data``,
    the scenarios that read a dataset read that one (``Scenario.with_data``); with
    ``--config``, the ones that hand a config over hand that one (``Scenario.with_config``)."""
    from harness.scenarios import UnknownScenario, catalog, select
    from harness.workloads.registry import WORKLOADS

    try:
        chosen = select(names) if names else catalog()
    except UnknownScenario as exc:
        raise click.BadParameter(str(exc), param_hint="'--scenario'") from None
    if config is not None:
        chosen = _with_config(chosen, config)
    if mounts:
        chosen = [s.with_mounts(mount_list(mounts)) for s in chosen]
    if data is None:
        return chosen
    reading = [s for s in chosen if "data" in WORKLOADS[s.workload].inputs_model.model_fields]
    if not reading:
        raise click.BadParameter("none of the chosen scenarios reads a dataset (the "
                                 "data-sharding workload's do)", param_hint="'--data'")
    try:
        with_data = {id(s): s.with_data(data) for s in reading}
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--data'") from None
    return [with_data.get(id(s), s) for s in chosen]


def mount_list(texts: tuple[str, ...]) -> list[Any]:
    """``--mount`` values as mounts; a usage error naming the bad one."""
    from harness.scenarios import MountSpec

    try:
        mounts = [MountSpec.parse_option(t) for t in texts]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--mount'") from None
    paths = [m.normalized() for m in mounts]
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        raise click.BadParameter(f"{', '.join(twice)} given twice", param_hint="'--mount'")
    return mounts


def _with_config(chosen: list[Any], config: str) -> list[Any]:
    from harness.scenarios import read_config
    from harness.workloads.registry import WORKLOADS

    handing = [s for s in chosen if "config" in WORKLOADS[s.workload].inputs_model.model_fields]
    if not handing:
        raise click.BadParameter("none of the chosen scenarios hands a config over (the "
                                 "config-sync workload's do)", param_hint="'--config'")
    try:
        read_config(config)  # once, at the edge: a bad file is one error, not one per scenario
        given = {id(s): s.with_config(config) for s in handing}
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--config'") from None
    return [given.get(id(s), s) for s in chosen]


def known_workload(workload: str) -> None:
    from harness.workloads.registry import check_workload

    try:
        check_workload(workload)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--workload'") from None


def target_from(spec: str, workload: str, checker: Any = None) -> Any:
    """One ``--target``: a built-in name or a reference, checked to define its function."""
    from harness.workloads.registry import target

    try:
        return target(spec, workload, checker)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--target'") from None


def targets_from(specs: tuple[str, ...], workload: str, checker: str | None = None,
                 data: str | None = None, config: str | None = None) -> list[Any]:
    """``--target`` values (or the built-in targets), with ``--checker`` read once; with
    ``--data``, your own target is wanted: the built-in loaders read the harness's layout."""
    from harness.rank.validator import validator
    from harness.workloads.registry import BUILTIN_TARGETS

    known_workload(workload)
    judge: Any = None
    if checker is not None:
        if not specs:
            raise click.UsageError("--checker judges your own target: give it with --target")
        try:  # read once, at the edge: every target shares it
            judge = validator(checker)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--checker'") from None
    if data is not None and (not specs or any(t in BUILTIN_TARGETS for t in specs)):
        raise click.UsageError("--data is your own dataset, for your own loader: give it with "
                               "--target (the built-in loaders read the harness's own layout)")
    if config is not None and (not specs or any(t in BUILTIN_TARGETS for t in specs)):
        raise click.UsageError("--config is your own config, for your own target: give it with "
                               "--target (the built-in targets validate the seed's schema)")
    if not specs:
        return list(BUILTIN_TARGETS.values())
    return [target_from(t, workload, judge) for t in specs]


def new_run_dir(report_dir: str) -> Path:
    """This run's own directory under ``--report-dir``, made before any world starts: a
    report dir that cannot hold it is a usage error now, not an internal one after the run."""
    from harness.reports.store import ReportDirError
    from harness.reports.store import new_run_dir as make

    try:
        return make(report_dir)
    except ReportDirError as exc:
        raise click.BadParameter(str(exc), param_hint="'--report-dir'") from None


def known_from(baseline: str | None) -> frozenset:
    """``--baseline``: the keys of the cells that already failed there."""
    if not baseline:
        return frozenset()
    from harness.runner.run import known_from_baseline

    return known_from_baseline(load_report(baseline))


def print_matrix(matrix: Matrix, verbose: bool) -> None:
    """The terminal report on stdout: in colour at the terminal's width on a terminal,
    plain text at a fixed width in a pipe or a CI log."""
    from rich.console import Console

    from harness.reports import render_terminal_text
    from harness.reports.terminal import render_matrix

    console = Console()
    if console.is_terminal:
        render_matrix(matrix, console, verbose=verbose)
    else:
        click.echo(render_terminal_text(matrix, verbose=verbose), nl=False)


def report_formats(formats: tuple[str, ...]) -> list[str]:
    """``--format`` values (each once, in the order given), or every format."""
    return list(dict.fromkeys(formats or FORMATS))


def print_paths(paths: dict[str, Any]) -> None:
    for fmt, path in paths.items():
        click.echo(f"{'text' if fmt == 'terminal' else fmt:>9}: {path}")


def nothing_ran(plans: list[Any], seed: int) -> Matrix:
    """The matrix of a run the user stopped before its first cell: empty, interrupted, so
    that even then a report says what was planned and that nothing ran."""
    import datetime

    from harness import __version__
    from harness.runner.cells import Matrix

    return Matrix(cells=[], seed=seed, harness_version=__version__, interrupted=True,
                  created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  planned=len(plans))


def exit_for(matrix: Matrix, require_exercised: bool = False) -> None:
    """A run's exit status, the same for ``run`` and ``pod run``: Ctrl-C, then a pod that
    failed, then an unexpected cell."""
    if matrix.harness_bugs:
        from harness.printable import printable

        debug = bool(os.environ.get("HARNESS_DEBUG"))
        for bug, traceback in matrix.harness_bugs:
            click.echo(printable(f"harness: internal error in {bug}"), err=True)
            if debug:
                click.echo(printable(traceback), err=True)
        if not debug:
            click.echo("(set HARNESS_DEBUG=1 for the ranks' tracebacks)", err=True)
        sys.exit(ExitCode.INTERNAL)
    if matrix.interrupted:
        from harness.cli import stop

        sys.exit(stop.status())
    if any(c.outcome == INFRA for c in matrix.cells):
        sys.exit(ExitCode.POD_FAILED)
    sys.exit(ExitCode.FAILED if matrix.failing(require_exercised) else ExitCode.OK)


def seed_list(spec: str) -> list[int]:
    """``--seeds``: ``0-24`` or ``0,3,7-9``, each a world's seed; a usage error otherwise."""
    seeds: list[int] = []
    for part in spec.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            lo, hi = int(first), int(last if dash else first)
        except ValueError:
            raise click.BadParameter(f"{part.strip()!r} is not a seed or a range of seeds "
                                     "(give 0-24 or 0,3,7-9)", param_hint="'--seeds'") from None
        if lo > hi:
            raise click.BadParameter(f"{part.strip()!r}: the range runs backwards",
                                     param_hint="'--seeds'")
        for n in (lo, hi):
            if not 0 <= n <= MAX_SEED:
                raise click.BadParameter(f"{n} is not a seed (0 to {MAX_SEED})",
                                         param_hint="'--seeds'")
        seeds += range(lo, hi + 1)
    return list(dict.fromkeys(seeds))


def connect(address: str) -> Any:
    """A connected cluster, or a usage error saying what to install or that nobody answered."""
    from harness.runner.cluster import Cluster, ClusterError

    try:
        return Cluster(address)
    except ClusterError as exc:
        raise click.BadParameter(str(exc), param_hint="'--cluster'") from None


def run_with_progress(plans: list[Any], jobs: int | None, seed: int, known: frozenset,
                      console: Console, run: Any = None, check_determinism: bool = False) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from harness.runner.run import run_matrix

    if run is None:
        run = partial(run_matrix, jobs=jobs, check_determinism=check_determinism)
    if not console.is_terminal:
        return run(plans, seed=seed, known=known)
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task("cells", total=len(plans))
        return run(plans, seed=seed, known=known, on_cell=lambda cell: progress.advance(task))
