"""The ``harness`` command line: a thin face over the runner and the world.

Exit codes (DESIGN.md): 0 nothing unexpected, 1 something failed that was not
expected to, 2 a usage or scenario-file error, 3 an internal error.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback

import click
from rich.console import Console
from rich.table import Table

from harness import __version__
from harness.topology import PROFILES, TOPOLOGIES, get_topology
from harness.world.result import PASS, WorldResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
_PYTHONS = ("python", "python3", os.path.basename(sys.executable))
_COLOURS = {"PASS": "green", "FAIL": "red", "ERROR": "red", "HANG": "magenta", "CRASH": "red"}


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
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds before the watchdog reports a hang and ends the world.")
@click.option("--profile", type=click.Choice(PROFILES), default="legacy", show_default=True,
              help="torch_xla API: legacy (get_ordinal, xla_dist) or current (2.9).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the world.")
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
    from harness.world.world import run_world

    result = run_world(argv=tuple(argv), topology=topology, timeout=timeout, profile=profile,
                       seed=seed)
    render_world(result, Console(), show_output=output)
    sys.exit(EXIT_OK if result.outcome == PASS else EXIT_FAILED)


def render_world(result: WorldResult, console: Console, show_output: bool = False) -> None:
    """A world as a person reads it: one line per rank, then what went wrong."""
    table = Table(title=f"world {result.world_id} · {result.topology} · {result.profile} "
                        f"· seed {result.seed} · {result.duration_s:.2f}s",
                  title_justify="left")
    for col in ("rank", "host", "outcome", "exit", "what happened"):
        table.add_column(col)
    for r in result.hosts:
        table.add_row(f"launcher {r.rank}", str(r.host), _styled(r.outcome),
                      r.exit_description, r.summary())
    for r in result.ranks:
        table.add_row(str(r.rank), str(r.host), _styled(r.outcome), r.exit_description,
                      r.summary())
    console.print(table)
    colour = _COLOURS.get(result.outcome, "white")
    console.print(f"[bold {colour}]{result.outcome}[/]: {result.detail()}", highlight=False)
    for note in result.mismatches:
        console.print(f"[yellow]! {note}[/]", highlight=False)
    shown = 0
    for r in [*result.hosts, *result.ranks]:
        name = f"launcher {r.rank}" if r in result.hosts else f"rank {r.rank}"
        if r.error and r.error.get("traceback") and shown < 3:
            console.rule(f"{name}: traceback")
            console.print(r.error["traceback"].rstrip(), markup=False, highlight=False)
            shown += 1
        if r.stack:
            console.rule(f"{name}: stack at the deadline")
            console.print(r.stack.rstrip(), markup=False, highlight=False)
        if (show_output or r.outcome != PASS) and (r.stdout or r.stderr):
            console.rule(f"{name}: output")
            console.print((r.stdout + r.stderr).rstrip(), markup=False, highlight=False)


def _styled(outcome: str) -> str:
    return f"[{_COLOURS.get(outcome, 'white')}]{outcome}[/]"


def main() -> None:
    """Console-script entry: internal errors exit 3 with a short message, never a bare traceback."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_FAILED)
    except click.ClickException as exc:
        exc.show()
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
