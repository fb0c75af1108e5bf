"""``harness exec``: a whole training script on every host of a world, with the shim."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from harness.cli import stop
from harness.cli.common import styled
from harness.cli.options import ISOLATION_OPTION, SEED_OPTION, TIMEOUT_HELP, Seconds, check_topology
from harness.topology import PROFILES, TOPOLOGIES, get_topology
from harness.vocabulary import DEFAULT_TIMEOUT, FORMATS, NOT_EXERCISED, PASS, ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from harness.runner.script import Verdict
    from harness.world.result import WorldResult

_PYTHONS = ("python", "python3", os.path.basename(sys.executable))
_SHOWN_TRACEBACKS = 3  # of a whole script's world; the rest are one line each in the table


@click.command("exec", context_settings={"ignore_unknown_options": True,
                                         "allow_interspersed_args": False})
@click.option("--topology", "-t", default="v4-64", show_default=True, callback=check_topology,
              help=f"One of {', '.join(TOPOLOGIES)}, or HxR (hosts x ranks per host).")
@click.option("--timeout", default=DEFAULT_TIMEOUT, show_default=True, type=Seconds(),
              help=f"The world's deadline: {TIMEOUT_HELP}.")
@click.option("--profile", type=click.Choice(PROFILES), default="legacy", show_default=True,
              help="torch_xla API: legacy (2.0: get_ordinal, xla_dist), 2.7, 2.8 or current (2.9).")
@SEED_OPTION
@ISOLATION_OPTION
@click.option("--output/--no-output", default=False,
              help="Print every rank's captured stdout/stderr, not only failing ranks'.")
@click.option("--require-exercised", is_flag=True, default=False,
              help="A script that started no rank (NOT-EXERCISED: a test file that skipped "
                   "itself) fails (exit 1).")
@click.option("--scenario", "-s", "scenario_name", default=None, metavar="NAME",
              help="Apply a scenario's faults and mounts (a catalog name or a scenario file), "
                   "on its topology, deadline and profile unless given; the run passes when "
                   "the script meets the scenario's expectation.")
@click.option("--report-dir", default=None, type=click.Path(file_okay=False),
              help="Also write the run's reports (one cell: the script) into a new directory "
                   "here, as harness run does; REPORT_DIR/latest points to the newest.")
@click.option("--format", "formats", multiple=True, type=click.Choice(FORMATS),
              help="Reports to write with --report-dir (repeatable). Default: all of them.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.pass_context
def exec_command(ctx: click.Context, topology: str, timeout: float, profile: str, seed: int,
                 output: bool, require_exercised: bool, scenario_name: str | None,
                 report_dir: str | None, formats: tuple[str, ...],
                 command: tuple[str, ...]) -> None:
    """Run a whole training script on every host of a world, with the shim active.

    \b
    harness exec --topology v4-64 -- python train.py --config baseline
    harness exec -t v4-64 -- python -m torch_xla.distributed.xla_dist --tpu=x -- python train.py
    harness exec --scenario partial-write -- python train.py

    Each host runs the script once, as its launcher; the script's own
    xmp.spawn (or the legacy xla_dist launcher) starts the ranks.
    """
    import contextlib

    from harness.world import pool

    pool.begin()  # torch's import beside the rest of the harness's start-up
    from rich.console import Console
    from rich.text import Text

    from harness.world.world import run_world

    argv = list(command)
    if argv and os.path.basename(argv[0]) in _PYTHONS:
        argv = argv[1:]
    if not argv:
        raise click.UsageError("nothing to run: give the command after --, e.g. -- python train.py")
    from harness.rank import torchrun

    if torchrun.is_torchrun(argv):
        try:
            launch = torchrun.parse(argv)
            if topology is not None:
                shape = get_topology(topology)
                torchrun.check(launch, shape.hosts, shape.ranks_per_host)
        except torchrun.TorchrunError as exc:
            raise click.UsageError(str(exc)) from None
        script = launch.program[0]
        if not launch.module and not os.path.isfile(script):
            raise click.UsageError(f"no such script: {script} (torchrun's training script)")
    elif argv[0] != "-m" and not os.path.isfile(argv[0]):
        raise click.UsageError(f"no such script: {argv[0]}")
    if formats and report_dir is None:
        raise click.UsageError("--format says which reports --report-dir writes: add --report-dir")
    from harness.cli import common

    run_dir = common.new_run_dir(report_dir) if report_dir is not None else None
    scenario = None
    if scenario_name is not None:
        from harness.cli.common import scenarios_from

        chosen = scenarios_from((scenario_name,))
        if len(chosen) != 1:
            raise click.BadParameter(f"{scenario_name!r} names {len(chosen)} scenarios: give one",
                                     param_hint="'--scenario'")
        scenario = chosen[0]
    if profile == "legacy" and topology is not None and get_topology(topology).spmd and \
            ctx.get_parameter_source("profile") is click.core.ParameterSource.COMMANDLINE:
        raise click.BadParameter(f"topology {topology} runs SPMD, which torch_xla 2.0 (the "
                                 "legacy profile) cannot: use --profile current",
                                 param_hint="'--profile'")
    given = {name: value for name, value in (("topology", topology), ("timeout", timeout),
                                             ("profile", profile))
             if scenario is None or ctx.get_parameter_source(name)
             is not click.core.ParameterSource.DEFAULT}
    # On a terminal, a status line on stderr says where the world is while it runs.
    err = Console(stderr=True)
    status = err.status("harness exec: starting the world") if err.is_terminal else None
    progress = (lambda p: status.update(f"harness exec: {p.describe()}")) if status else None
    from harness.runner.script import apply, judge

    with status if status is not None else contextlib.nullcontext():
        if scenario is None:
            # the file operations go into the history: what a diagnosis says of a file one
            # host wrote and the others looked for comes from there
            result = run_world(argv=tuple(argv), seed=seed, progress=progress,
                               record_files=True, **given)
            applied = None
        else:
            applied = apply(tuple(argv), scenario, seed, progress=progress, **given)
            result = applied.result
    verdict = judge(result) if applied is None else applied.verdict
    console = Console()
    render_world(result, console, show_output=output, verdict=verdict)
    if applied is None:
        failed = verdict.outcome not in (PASS, NOT_EXERCISED) or (
            require_exercised and verdict.outcome == NOT_EXERCISED)
    else:
        console.print(Text(applied.describe()))
        failed = not applied.met if applied.unexercised is None else (
            require_exercised or verdict.outcome != PASS)
    if run_dir is not None:
        _write_reports(run_dir, list(command), result, verdict, applied, seed, formats)
    sys.exit(ExitCode.FAILED if failed else ExitCode.OK)


def _write_reports(run_dir: Any, command: list[str], result: WorldResult, verdict: Verdict,
                   applied: Any, seed: int, formats: tuple[str, ...]) -> None:
    """The script's world as a one-cell run report, as ``harness run`` writes one."""
    import datetime
    import shlex

    from harness import __version__
    from harness.cli import common
    from harness.reports import write_run
    from harness.runner.cells import Matrix
    from harness.runner.script import cell_of

    replay = "harness exec " + " ".join(shlex.quote(a) for a in (
        "-t", result.topology, "--seed", str(seed),
        *(("--scenario", applied.scenario.name) if applied is not None else ()), "--", *command))
    cell = cell_of(tuple(command), result, verdict, applied, seed, replay)
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    matrix = Matrix(cells=[cell], seed=seed, created=created, harness_version=__version__,
                    duration_s=result.duration_s)
    with stop.held():
        paths = write_run(matrix, run_dir, [f for f in common.report_formats(formats)
                                            if f != "terminal"] or ["json"])
    common.print_paths(paths)


def render_world(result: WorldResult, console: Console, show_output: bool = False,
                 verdict: Verdict | None = None) -> None:
    """A world as a person reads it: its ranks grouped by how they ended, then what went wrong
    (``verdict``: a script's, when it is not the world's own outcome).

    Run text goes in as ``Text``, never as markup: a ``[x]`` in an error stays itself.
    """
    from rich.table import Table
    from rich.text import Text

    from harness.history import ranks_phrase
    from harness.reports._common import took
    from harness.reports.diagnosis import diagnose, fault_groups, fault_line

    d = diagnose(result)
    table = Table(title=f"{d.title} · {d.topology} · seed {d.seed} · "
                        f"{took(d.duration_s, d.world_time_s)}",
                  title_justify="left")
    for col in ("ranks", "hosts", "outcome", "exit", "what happened"):
        table.add_column(col)
    for g in d.groups:
        table.add_row(ranks_phrase(g.ranks, g.noun), g.host_text, styled(g.outcome), Text(g.exit),
                      Text(g.result))
    console.print(table)
    outcome, detail = (verdict.outcome, verdict.detail) if verdict else (d.outcome, d.detail)
    console.print(styled(outcome) + Text(f": {detail}"), soft_wrap=True)
    for hint in d.hints:
        console.print(Text(hint), soft_wrap=True)
    for note in d.mismatches:
        console.print(Text(f"! {note}", style="yellow"))
    for group in fault_groups(d.faults):
        console.print(Text(fault_line(group), style="dim"))
    blocks = [(f"traceback of {t.label}", t) for t in d.tracebacks[:_SHOWN_TRACEBACKS]]
    blocks += [(f"stack of {t.label}, still blocked at the deadline", t) for t in d.stacks]
    blocks += [(f"{stream} of {t.label}", t) for stream, found in (("stdout", d.stdout),
                                                                    ("stderr", d.stderr))
               for t in found if show_output or not t.passed]
    for title, trace in blocks:
        console.rule(Text(title))
        console.print(Text(trace.text.rstrip()), soft_wrap=True)  # a path is never cut
