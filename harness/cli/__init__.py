"""The ``harness`` command line: a thin face over the runner and the world.

One module per command (``run``/``replay``, ``exec``, ``list``, ``report``/``diff``,
``explore``, ``pod``); the options they share are spelled once in ``options``, the
inputs they share are read once in ``common``. A command module imports click and
the vocabulary only; what it runs is imported when it runs, so that ``harness --help``
starts at once.

What each command exits with is ``harness.vocabulary.ExitCode`` (each status says when).
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import NoReturn

import click

from harness import __version__
from harness.cli import stop
from harness.cli.catalog import list_command
from harness.cli.exec import exec_command, render_world
from harness.cli.explore import explore_command
from harness.cli.init import init_command
from harness.cli.pod import pod
from harness.cli.run import replay_command, run_command
from harness.cli.saved import diff_command, report_command
from harness.printable import printable
from harness.vocabulary import EXTRAS, ExitCode, HarnessError

__all__ = ["cli", "main", "render_world"]


class _Harness(click.Group):
    """The group that maps the harness's own errors to their exit status, once: for
    ``main`` and for click's test runner alike."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except HarnessError as exc:
            click.echo(printable(f"harness: {exc.label}: {exc}"), err=True)
            sys.exit(exc.exit_code)  # not ctx.exit: click's main would return its code


@click.group(cls=_Harness, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="harness")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
def cli(verbose: int) -> None:
    """Fault-injection test harness for distributed PyTorch/XLA bootstrap code."""
    logging.basicConfig(level=logging.WARNING - 10 * verbose,
                        format="%(levelname)s %(name)s: %(message)s")


for _command in (exec_command, list_command, run_command, replay_command, report_command,
                 diff_command, pod, explore_command, init_command):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry: click's errors, Ctrl-C and the harness's own bugs mapped to
    their exit status (the group maps a ``HarnessError``); an internal error exits 3 with
    a short message, never a bare traceback."""
    stop.install()  # Ctrl-C, SIGTERM and SIGHUP stop a run alike (harness/cli/stop.py)
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        # A Ctrl-C outside a run's cells, or a second one while they end: at once. The
        # worker threads are not waited for; the reaper ends what they started.
        click.echo("interrupted", err=True)
        sys.stderr.flush()
        os._exit(stop.status())
    except click.ClickException as exc:
        exc.message = printable(exc.message)  # a file name may be a target's: any bytes
        exc.show()
        sys.exit(ExitCode.USAGE)
    except SystemExit:
        raise
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            _internal(exc)
        click.echo(f"harness: this needs {exc.name}, which is not installed: it comes with "
                   f"the harness's extra '{extra}' (from a checkout: pip install '.[{extra}]', "
                   "or '.[all]')", err=True)
        sys.exit(ExitCode.USAGE)
    except Exception as exc:  # noqa: BLE001 - the harness's own bug, reported as such
        if stop.came():  # a stop's KeyboardInterrupt that a library wrapped in its own
            click.echo("interrupted", err=True)  # error (pydantic building a model class
            sys.stderr.flush()  # at import: SchemaError ... KeyboardInterrupt)
            os._exit(stop.status())
        _internal(exc)


def _internal(exc: BaseException) -> NoReturn:
    """The harness's own bug: one line, exit 3 (the traceback with HARNESS_DEBUG=1)."""
    click.echo(printable(f"harness: internal error: {type(exc).__name__}: {exc}"), err=True)
    if os.environ.get("HARNESS_DEBUG"):
        traceback.print_exception(exc)
    else:
        click.echo("(set HARNESS_DEBUG=1 for the traceback)", err=True)
    sys.exit(ExitCode.INTERNAL)


if __name__ == "__main__":
    main()
