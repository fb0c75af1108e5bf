"""The ``harness`` command line: a thin face over the runner and the world.

Exit codes (DESIGN.md): 0 nothing unexpected, 1 something failed that was not
expected to (or a cell's fault could not happen to the target, with
``--require-exercised``), 2 a usage or scenario-file error, 3 an internal error.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from functools import partial
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import __version__
from harness.options import SEED, TIMEOUT_HELP, Seconds
from harness.scenarios import DEFAULT_TIMEOUT, ScenarioError
from harness.topology import PROFILES, TOPOLOGIES, get_topology
from harness.world.result import PASS, WorldResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
_PYTHONS = ("python", "python3", os.path.basename(sys.executable))
_COLOURS = {"PASS": "green", "FAIL": "red", "ERROR": "red", "HANG": "magenta", "CRASH": "red"}
_SHOWN_TRACEBACKS = 3  # of a whole script's world; the rest are one line each in the table


def _topology(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        get_topology(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="harness")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
def cli(verbose: int) -> None:
    """Fault-injection test harness for distributed PyTorch/XLA bootstrap code."""
    logging.basicConfig(level=logging.WARNING - 10 * verbose,
                        format="%(levelname)s %(name)s: %(message)s")


@cli.command("exec", context_settings={"ignore_unknown_options": True,
                                       "allow_interspersed_args": False})
@click.option("--topology", "-t", default="v4-64", show_default=True, callback=_topology,
              help=f"One of {', '.join(TOPOLOGIES)}, or HxR (hosts x ranks per host).")
@click.option("--timeout", default=DEFAULT_TIMEOUT, show_default=True, type=Seconds(),
              help=f"The world's deadline: {TIMEOUT_HELP}.")
@click.option("--profile", type=click.Choice(PROFILES), default="legacy", show_default=True,
              help="torch_xla API: legacy (2.0: get_ordinal, xla_dist), 2.7, 2.8 or current (2.9).")
@click.option("--seed", default=0, show_default=True, type=SEED, help="Seed of the world.")
@click.option("--output/--no-output", default=False,
              help="Print every rank's captured stdout/stderr, not only failing ranks'.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def exec_command(topology: str, timeout: float, profile: str, seed: int, output: bool,
                 command: tuple[str, ...]) -> None:
    """Run a whole training script on every host of a world, with the shim active.

    \b
    harness exec --topology v4-64 -- python train.py --config baseline
    harness exec -t v4-64 -- python -m torch_xla.distributed.xla_dist --tpu=x -- python train.py

    Each host runs the script once, as its launcher; the script's own
    xmp.spawn (or the legacy xla_dist launcher) starts the ranks.
    """
    argv = list(command)
    if argv and os.path.basename(argv[0]) in _PYTHONS:
        argv = argv[1:]
    if not argv:
        raise click.UsageError("nothing to run: give the command after --, e.g. -- python train.py")
    if argv[0] != "-m" and not os.path.isfile(argv[0]):
        raise click.UsageError(f"no such script: {argv[0]}")
    import contextlib

    from harness.world.world import run_world

    # On a terminal, a status line on stderr says where the world is while it runs.
    err = Console(stderr=True)
    status = err.status("harness exec: starting the world") if err.is_terminal else None
    with status if status is not None else contextlib.nullcontext():
        result = run_world(
            argv=tuple(argv), topology=topology, timeout=timeout, profile=profile, seed=seed,
            progress=(lambda p: status.update(f"harness exec: {p.describe()}")) if status else None)
    render_world(result, Console(), show_output=output)
    sys.exit(EXIT_OK if result.outcome == PASS else EXIT_FAILED)


# -- the matrix -----------------------------------------------------------------

def _load(path: str) -> Any:
    """A saved report, or a usage error naming the file (exit 2)."""
    from harness.reports.json_report import load

    try:
        return load(path)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _scenarios(names: tuple[str, ...]) -> list[Any]:
    """``--scenario`` values (names, globs, files), or the whole catalog; a name not in the
    catalog is a usage error that says which names were probably meant."""
    from harness.scenarios import UnknownScenario, catalog, select
    try:
        return select(names) if names else catalog()
    except UnknownScenario as exc:
        raise click.BadParameter(str(exc), param_hint="'--scenario'") from None


def _known_workload(workload: str) -> None:
    from harness.workloads.registry import WORKLOADS
    if workload not in WORKLOADS:
        raise click.BadParameter(f"unknown workload {workload!r}: use one of "
                                 f"{', '.join(WORKLOADS)}", param_hint="--workload")


def _targets(specs: tuple[str, ...], workload: str, checker: str | None = None) -> list[Any]:
    from harness.checkers.validator import validator
    from harness.workloads.registry import BUILTIN_TARGETS, target
    _known_workload(workload)
    if checker is not None:
        if not specs:
            raise click.UsageError("--checker judges your own target: give it with --target")
        try:  # read once, at the edge: every target shares it
            checker = validator(checker)  # type: ignore[assignment]
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--checker") from None
    try:
        return [target(t, workload, checker) for t in specs] if specs else \
            list(BUILTIN_TARGETS.values())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--target") from None


#: The width ``harness list`` cuts its rows to when stdout is not a terminal and COLUMNS is
#: unset: a pipe or a log has no width, and 80 would leave the description a few characters.
LIST_WIDTH = 120
#: However narrow the width, this much of the last column is kept (the row runs past the width).
_MIN_LAST = 20


@cli.command("list")
@click.option("--workload", "-w", default=None,
              help="Only this workload's scenarios and built-in targets.")
@click.option("--format", "fmt", default="table", show_default=True,
              type=click.Choice(["table", "json"]),
              help="json: a list of scenarios and one of targets, for scripts.")
def list_command(workload: str | None, fmt: str) -> None:
    """The scenario catalog and the built-in targets.

    One line per scenario, cut to the width, so that the catalog fits a screen and
    ``harness list | grep NAME`` finds whole rows.
    """
    import json
    import shutil

    from harness.scenarios import catalog
    from harness.workloads.registry import BUILTIN_TARGETS

    if workload is not None:
        _known_workload(workload)
    scenarios = [s for s in catalog() if workload in (None, s.workload)]
    targets = [t for t in BUILTIN_TARGETS.values() if workload in (None, t.workload)]
    if fmt == "json":
        from harness.pod.matrix import off_pod

        click.echo(json.dumps({
            "scenarios": [{"name": s.name, "workload": s.workload, "topology": s.topology,
                           "expect": s.expect, "description": s.description,
                           "finding": s.finding or None, "source": s.source,
                           "off_pod": off_pod(s)} for s in scenarios],
            "targets": [{"name": t.name, "workload": t.workload, "function": t.ref}
                        for t in targets]}, indent=2))
        return
    # One line per scenario, on a terminal or in a pipe: a name is never broken, and only
    # the description is cut to the width (``--format json`` has it whole).
    console = Console()
    width = console.width if console.is_terminal else shutil.get_terminal_size((LIST_WIDTH, 24)).columns
    rows = [("name", "workload", "topology", "expect", "what happens")] + [
        (s.name, s.workload, s.topology, s.expect, s.description) for s in scenarios]
    if _room(rows, width) < _MIN_LAST:  # a narrow screen: the workload column goes first
        rows = [row[:1] + row[2:] for row in rows]
    click.echo(_plain_rows(rows, width))
    click.echo()
    click.echo(_plain_rows([("target", "workload", "function")]
                           + [(t.name, t.workload or "", t.ref) for t in targets], None))
    click.echo("A target of your own: --target module.path:function or path/to/file.py:function")


def _room(rows: list[tuple[str, ...]], width: int) -> int:
    """What ``width`` leaves the last column once the others are aligned."""
    return width - sum(max(len(r[i]) for r in rows) + 2 for i in range(len(rows[0]) - 1))


def _plain_rows(rows: list[tuple[str, ...]], width: int | None) -> str:
    """Rows as aligned plain lines; only the last column is cut (with an ellipsis) to fit,
    down to ``_MIN_LAST`` characters (past that a row runs over rather than lose it all).
    With no width nothing is cut: a target's function is copied, not skimmed."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    room = max(_room(rows, width), _MIN_LAST) if width else None
    lines = []
    for row in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  "
        last = " ".join(row[-1].split())
        if room is not None and len(last) > room:
            last = last[:room - 1] + "…"
        lines.append((line + last).rstrip())
    return "\n".join(lines)


_run_options = [
    click.option("--scenario", "-s", "scenarios", multiple=True,
                 help="A catalog name, a glob over the names ('divergent-*') or a scenario file "
                      "(repeatable). Default: the catalog."),
    click.option("--target", "-T", "targets", multiple=True,
                 help="A built-in target, module.path:function or file.py:function "
                      "(repeatable). Default: the built-in targets."),
    click.option("--workload", "-w", default="config-sync", show_default=True,
                 help="The workload your own targets implement: they run only its scenarios."),
    click.option("--checker", "-c", default=None, metavar="REF",
                 help="Judges each rank's value of your own targets, inside the rank: a pydantic "
                      "model or a function check(value) -> None | str (file.py:Name or "
                      "module:Name), or a JSON schema file (schema.json)."),
    click.option("--topology", "-t", default=None, callback=lambda c, p, v: v and _topology(c, p, v),
                 help="Override every scenario's topology."),
    click.option("--seed", default=0, show_default=True, type=SEED, help="The seed of every cell."),
    click.option("--timeout", default=None, type=Seconds(),
                 help=f"Override every scenario's deadline: {TIMEOUT_HELP}."),
    click.option("--require-exercised", is_flag=True, default=False,
                 help="A cell whose fault could not happen to the target (NOT-EXERCISED) "
                      "fails the run."),
]


def _apply(options: list[Any]) -> Any:
    def decorate(fn: Any) -> Any:
        for option in reversed(options):
            fn = option(fn)
        return fn
    return decorate


@cli.command("run")
@_apply(_run_options)
@click.option("--jobs", "-j", default=None, type=click.IntRange(min=1),
              help="Cells run in parallel. Default: the number of cores.")
@click.option("--report-dir", default="reports", show_default=True, type=click.Path(file_okay=False),
              help="Each run writes its reports into a new directory here; "
                   "REPORT_DIR/latest points to the newest.")
@click.option("--format", "formats", multiple=True,
              type=click.Choice(["terminal", "json", "junit", "markdown", "html"]),
              help="Reports to write (repeatable). Default: all of them.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A saved JSON report whose failing cells count as known.")
@click.option("--verbose", "-v", is_flag=True, default=False,
              help="Each failing cell's whole detail and how each group of its ranks ended, "
                   "not one line (matrix.txt and the HTML report always have them).")
@click.option("--seeds", "seed_spec", default=None, metavar="SEEDS",
              help="A campaign over several seeds: every cell at each seed, as 0-24 or 0,3,7-9 "
                   "(instead of --seed).")
@click.option("--cluster", default=None, metavar="ADDRESS",
              help="Run the cells on a Dask cluster: its scheduler (tcp://HOST:PORT), or local:N "
                   "to start N local worker processes. Needs the 'cluster' extra.")
@click.pass_context
def run_command(ctx: click.Context, scenarios: tuple[str, ...], targets: tuple[str, ...],
                workload: str, checker: str | None, topology: str | None, seed: int,
                timeout: float | None, require_exercised: bool, jobs: int | None, report_dir: str,
                formats: tuple[str, ...], baseline: str | None, verbose: bool,
                seed_spec: str | None, cluster: str | None) -> None:
    """Run scenarios x targets and write the matrix's reports.

    With no arguments: the whole catalog against the built-in targets.

    \b
    harness run --seeds 0-24 --cluster local:2          # 2,025 cells on 2 local workers
    harness run --seeds 0-24 --cluster tcp://sched:8786  # on an existing Dask cluster
    """
    from harness.reports import FORMATS, write_run
    from harness.runner.run import known_from_baseline, plan_cells

    seeds = [seed]
    if seed_spec is not None:
        if ctx.get_parameter_source("seed") is not click.core.ParameterSource.DEFAULT:
            raise click.UsageError("give either --seed or --seeds, not both")
        seeds = _seed_list(seed_spec)
    if cluster is not None and jobs is not None:
        raise click.UsageError("--jobs is the cluster's threads with --cluster: leave it out")
    known = known_from_baseline(_load(baseline)) if baseline else frozenset()
    scenario_list, target_list = _scenarios(scenarios), _targets(targets, workload, checker)
    plans = [p for s in seeds for p in plan_cells(scenario_list, target_list, s, topology, timeout)]
    if not plans:
        raise click.UsageError("no cell to run: no target belongs to these scenarios' workloads")
    # The terminal report is always printed; it is also written (matrix.txt, every detail in
    # full) beside the other files, but alone it makes no report directory.
    files = list(dict.fromkeys(formats or FORMATS))
    if files == ["terminal"]:
        files = []
    run_dir = _new_run_dir(report_dir) if files else None
    console = Console(stderr=True)
    if cluster is None:
        matrix = _run_with_progress(plans, jobs, seeds[0], known, console)
    else:
        with _connect(cluster) as engine:
            click.echo(f"harness: {len(plans)} cells on {cluster} ({engine.threads} threads)",
                       err=True)
            matrix = _run_with_progress(plans, jobs, seeds[0], known, console, engine.run_matrix)
    paths = write_run(matrix, run_dir, files) if run_dir else {}
    _print_matrix(matrix, verbose)
    for fmt, path in paths.items():
        click.echo(f"{'text' if fmt == 'terminal' else fmt:>9}: {path}")
    if matrix.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(EXIT_FAILED if matrix.failing(require_exercised) else EXIT_OK)


def _print_matrix(matrix: Any, verbose: bool) -> None:
    """The terminal report on stdout: in colour at the terminal's width on a terminal,
    plain text at a fixed width in a pipe or a CI log."""
    from harness.reports import render_terminal_text
    from harness.reports.terminal import render_matrix

    console = Console()
    if console.is_terminal:
        render_matrix(matrix, console, verbose=verbose)
    else:
        click.echo(render_terminal_text(matrix, verbose=verbose), nl=False)


def _new_run_dir(report_dir: str) -> Path:
    """This run's own directory under ``--report-dir``, made before any world starts: a
    report dir that cannot hold it is a usage error now, not an internal one after the run."""
    from harness.reports.store import ReportDirError, new_run_dir

    try:
        return new_run_dir(report_dir)
    except ReportDirError as exc:
        raise click.BadParameter(str(exc), param_hint="'--report-dir'") from None


def _seed_list(spec: str) -> list[int]:
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
            if not 0 <= n <= 2**32 - 1:
                raise click.BadParameter(f"{n} is not a seed (0 to {2**32 - 1})",
                                         param_hint="'--seeds'")
        seeds += range(lo, hi + 1)
    return list(dict.fromkeys(seeds))


def _connect(address: str) -> Any:
    """A connected cluster, or a usage error saying what to install or that nobody answered."""
    from harness.runner.cluster import Cluster, ClusterError

    try:
        return Cluster(address)
    except ClusterError as exc:
        raise click.UsageError(str(exc)) from None


def _run_with_progress(plans: list[Any], jobs: int | None, seed: int, known: frozenset,
                       console: Console, run: Any = None) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from harness.runner.run import run_matrix

    if run is None:
        run = partial(run_matrix, jobs=jobs)
    if not console.is_terminal:
        return run(plans, seed=seed, known=known)
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task("cells", total=len(plans))
        return run(plans, seed=seed, known=known, on_cell=lambda cell: progress.advance(task))


@cli.command("replay")
@_apply(_run_options)
@click.argument("report", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--cell", default=None, help="With REPORT: the cell to replay, as scenario[target].")
def replay_command(scenarios: tuple[str, ...], targets: tuple[str, ...], workload: str,
                   checker: str | None, topology: str | None, seed: int, timeout: float | None,
                   require_exercised: bool, report: str | None, cell: str | None) -> None:
    """Rerun exactly one cell, from its replay command or from a saved report.

    \b
    harness replay --scenario isolated-tmp --target naive-sync --seed 0
    harness replay reports/latest/matrix.json --cell 'isolated-tmp[naive-sync]'
    harness replay reports/latest/matrix.json --cell 'isolated-tmp[naive-sync] seed 7'
    """
    import shlex

    from harness.reports.diagnosis import describe
    from harness.runner.run import plan_cells, run_cell

    if report:
        if not cell:
            raise click.UsageError("with a report, name the cell: --cell 'scenario[target]'")
        matrix = _load(report)
        # a campaign over seeds names its cells 'scenario[target] seed N'; without the seed,
        # the name must be one cell's
        named = [c for c in matrix.cells if cell in (f"{c.scenario}[{c.target}]",
                                                     f"{c.scenario}[{c.target}] seed {c.seed}")]
        if not named:
            raise click.UsageError(f"{report} has no cell {cell}")
        if len(named) > 1:
            seeds = ", ".join(str(c.seed) for c in named)
            raise click.UsageError(f"{report} has {cell} at seeds {seeds}: name one, as "
                                   f"--cell '{cell} seed {named[0].seed}'")
        saved = named[0]
        args = shlex.split(saved.replay)[2:]
        return replay_command.main(args, standalone_mode=False)
    chosen = _scenarios(scenarios) if scenarios else []
    if len(chosen) != 1 or len(targets) != 1:  # a glob may name several
        raise click.UsageError("replay runs one cell: give one --scenario and one --target")
    plans = plan_cells(chosen, _targets(targets, workload, checker), seed, topology, timeout)
    if not plans:
        raise click.UsageError("this target does not belong to the scenario's workload")
    result = run_cell(plans[0])
    click.echo(describe(result))
    failing = ("unexpected", "unexercised") if require_exercised else ("unexpected",)
    sys.exit(EXIT_FAILED if result.verdict in failing else EXIT_OK)


@cli.command("report")
@click.argument("report", type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", default="terminal", show_default=True,
              type=click.Choice(["terminal", "json", "junit", "markdown", "html"]))
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write here instead of stdout.")
def report_command(report: str, fmt: str, output: str | None) -> None:
    """Render a saved JSON report again, in any format."""
    from harness.reports import render
    from harness.reports.store import atomic_write_text

    text = render(_load(report), fmt)
    if output:
        atomic_write_text(output, text)  # a reader never sees half a report
        click.echo(f"wrote {output}")
    else:
        click.echo(text)


@cli.command("diff")
@click.argument("before", type=click.Path(exists=True, dir_okay=False))
@click.argument("after", type=click.Path(exists=True, dir_okay=False))
@click.option("--expected", "expected_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="A reviewed YAML file of the differences that are expected, "
              "each with its reason; exit 1 only for differences it does not list.")
@click.option("--allow-infra", is_flag=True,
              help="Cells the pod itself failed (INFRA) do not fail the diff (exit 4 otherwise).")
@click.option("--format", "fmt", default="text", show_default=True,
              type=click.Choice(["text", "json"]), help="json: the groups as one object.")
def diff_command(before: str, after: str, expected_file: str | None, allow_infra: bool,
                 fmt: str) -> None:
    """Compare two saved reports cell by cell: a simulator run with a pod run (or before
    with after a fix). Cells that differ, cells only one side ran, cells the pod failed.

    \b
    harness diff reports/sim/matrix.json reports/pod/matrix.json --expected expected.yaml

    Exit 0 when every difference is listed in --expected, 1 when some is not, 2 for a bad
    report or expected file, 4 when the pod failed in some cell (unless --allow-infra).
    """
    import json

    from harness.reports.diff import check_pod, compare, render_text, sides, to_json_dict
    from harness.reports.expected import load_expected

    a, b = _load(before), _load(after)
    for path, matrix in ((before, a), (after, b)):
        problem = check_pod(matrix)
        if problem:
            raise click.UsageError(f"{path}: {problem}")
    expected = None
    if expected_file is not None:
        try:
            expected = load_expected(expected_file)
        except ScenarioError as exc:
            raise click.BadParameter(str(exc), param_hint="'--expected'") from None
    comparison = compare(*sides(a, b, before, after), expected)
    if fmt == "json":
        click.echo(json.dumps(to_json_dict(comparison, allow_infra), indent=2, ensure_ascii=False))
    else:
        click.echo(render_text(comparison, allow_infra), nl=False)
    sys.exit(comparison.exit_code(allow_infra))


def render_world(result: WorldResult, console: Console, show_output: bool = False) -> None:
    """A world as a person reads it: its ranks grouped by how they ended, then what went wrong.

    Run text goes in as ``Text``, never as markup: a ``[x]`` in an error stays itself.
    """
    from harness.history import ranks_phrase
    from harness.reports._common import took
    from harness.reports.diagnosis import diagnose, fault_line

    d = diagnose(result)
    table = Table(title=f"{d.title} · {d.topology} · seed {d.seed} · "
                        f"{took(d.duration_s, d.world_time_s)}",
                  title_justify="left")
    for col in ("ranks", "hosts", "outcome", "exit", "what happened"):
        table.add_column(col)
    for g in d.groups:
        table.add_row(ranks_phrase(g.ranks, g.noun), g.host_text, _styled(g.outcome), Text(g.exit),
                      Text(g.result))
    console.print(table)
    console.print(_styled(d.outcome) + Text(f": {d.detail}"))
    for note in d.mismatches:
        console.print(Text(f"! {note}", style="yellow"))
    for fault in d.faults:
        console.print(Text(fault_line(fault), style="dim"))
    blocks = [(f"traceback of {t.label}", t) for t in d.tracebacks[:_SHOWN_TRACEBACKS]]
    blocks += [(f"stack of {t.label}, still blocked at the deadline", t) for t in d.stacks]
    blocks += [(f"{stream} of {t.label}", t) for stream, found in (("stdout", d.stdout),
                                                                    ("stderr", d.stderr))
               for t in found if show_output or not t.passed]
    for title, trace in blocks:
        console.rule(Text(title))
        console.print(Text(trace.text.rstrip()))


def _styled(outcome: str) -> Text:
    return Text(outcome, style=f"bold {_COLOURS.get(outcome, 'white')}")


def _add_pod() -> None:
    from harness.pod.cli import pod

    cli.add_command(pod)


_add_pod()


def _add_explore() -> None:
    from harness.explore.cli import explore_command

    cli.add_command(explore_command)


_add_explore()


def main() -> None:
    """Console-script entry: internal errors exit 3 with a short message, never a bare traceback."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        # A Ctrl-C outside a run's cells, or a second one while they end: at once. The
        # worker threads are not waited for; the reaper ends what they started.
        click.echo("interrupted", err=True)
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except ScenarioError as exc:
        click.echo(f"harness: scenario error: {exc}", err=True)
        sys.exit(EXIT_USAGE)

    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 - the harness's own bug, reported as such
        click.echo(f"harness: internal error: {type(exc).__name__}: {exc}", err=True)
        if os.environ.get("HARNESS_DEBUG"):
            traceback.print_exc()
        else:
            click.echo("(set HARNESS_DEBUG=1 for the traceback)", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
