"""What every command spells the same way: the value types, and the option groups that
``run``, ``replay``, ``explore``, ``pod run`` and ``exec`` share.

One definition each, so that every command refuses the same bad value with the same
words. Nothing here imports more than click and the vocabulary: ``harness --help``
reads every command's options.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import click

from harness.durations import parse_duration
from harness.vocabulary import DEFAULT_WORKLOAD, FORMATS, MAX_SEED, MAX_TIMEOUT


class Seconds(click.FloatRange):
    """A deadline: a finite number of seconds, at most ``maximum`` (a world's: a day of its
    own clock)."""

    name = "seconds"

    def __init__(self, maximum: float = MAX_TIMEOUT) -> None:
        super().__init__(min=0.1, max=maximum)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):  # a range lets nan through: every comparison is false
            self.fail(f"{value!r} is not a number of seconds.", param, ctx)
        return seconds


class Duration(click.ParamType):
    """``90``, ``90s``, ``5m``, ``1h``, ``1h30m`` (``harness.durations``): seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


#: A world's seed (see ``harness.vocabulary.MAX_SEED``).
SEED = click.IntRange(0, MAX_SEED)

#: What ``--timeout`` means, said the same way by every command.
TIMEOUT_HELP = ("seconds of the world's own clock, which passes only while every rank waits "
                "(a sleep, a collective): a verdict never depends on this machine's load")


def check_topology(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A topology's name (``v4-64``, ``2x4``), or a usage error naming the option."""
    if value is None:
        return None
    from harness.topology import get_topology

    try:
        get_topology(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return value


def check_topologies(ctx: click.Context, param: click.Parameter,
                     values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        check_topology(ctx, param, value)
    return values


Decorator = Callable[[Any], Any]


def options(*groups: list[Decorator]) -> Decorator:
    """Apply option groups to a command, in the order they are listed in its ``--help``."""
    flat = [option for group in groups for option in group]

    def decorate(fn: Any) -> Any:
        for option in reversed(flat):
            fn = option(fn)
        return fn
    return decorate


def target_option(multiple: bool = True, required: bool = False) -> Decorator:
    return click.option(
        "--target", "-T", "targets" if multiple else "target_spec", multiple=multiple,
        required=required,
        help="A built-in target, module.path:function or file.py:function" +
             (" (repeatable). Default: the built-in targets." if multiple else "."))


#: What to run: scenarios and targets, and how a user's own targets are read.
SELECTION = [
    click.option("--scenario", "-s", "scenarios", multiple=True,
                 help="A catalog name, a glob over the names ('divergent-*') or a scenario file "
                      "(repeatable). Default: the catalog."),
    target_option(),
    click.option("--workload", "-w", default=DEFAULT_WORKLOAD, show_default=True,
                 help="The workload your own targets implement: they run only its scenarios."),
    click.option("--data", default=None, metavar="DIR[:PATH]",
                 help="Your own small dataset for the data-sharding scenarios: DIR is copied to "
                      "PATH (default: DIR itself, where your loader reads it) on every host, "
                      "and a sample is known by its content, against what a world of one rank "
                      "read."),
    click.option("--config", "config_file", default=None, metavar="FILE",
                 help="Your own config (a YAML or JSON mapping) for the config-sync scenarios "
                      "to hand your own targets, instead of the sample (the seed project's)."),
    click.option("--checker", "-c", default=None, metavar="REF",
                 help="Judges each rank's value of your own targets, inside the rank: a pydantic "
                      "model or a function check(value) -> None | str (file.py:Name or "
                      "module:Name), or a JSON schema file (schema.json)."),
]

#: The seed of every cell.
SEED_OPTION = click.option("--seed", default=0, show_default=True, type=SEED,
                           help="The seed of every cell: the same seed, the same faults.")

#: How the worlds of a simulated run are made: topology, seed, deadline.
def _isolation(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--isolation``: every world of this command, as ``$HARNESS_ISOLATION`` says it
    (``harness.world.isolation``), so that no layer between here and the world needs it."""
    if value is not None:
        os.environ["HARNESS_ISOLATION"] = value


ISOLATION_OPTION = click.option(
    "--isolation", type=click.Choice(["kernel", "python"]), default=None, expose_value=False,
    callback=_isolation,
    help="kernel: each host is a mount namespace and the world a PID namespace too, so "
         "subprocesses and C code keep to the host's /tmp and /dev/shm, the machine is "
         "read-only to them and no rank sees the harness (python where the machine refuses "
         "it, said once); python: the Python-level view alone. Default: $HARNESS_ISOLATION, "
         "else kernel.")

#: ``--mount``: what a path is on the user's pod (the same spelling as ``pod run --mount``).
MOUNT_OPTION = click.option(
    "--mount", "mount_texts", multiple=True, metavar="PATH=KIND[,CONSISTENCY]",
    help="What PATH is on your pod, where a scenario mounts nothing there (repeatable): shared "
         "(NFS, Filestore: one filesystem every host writes), host (each host's own disk: any "
         "path not mounted), ro (a read-only disk on every host) or gcsfuse (a bucket); shared "
         "and host take a consistency: local, close-to-open, delayed or object. "
         "E.g. --mount /mnt/shared=shared,close-to-open.")

WORLD = [
    click.option("--topology", "-t", default=None, callback=check_topology,
                 help="Override every scenario's topology."),
    MOUNT_OPTION,
    SEED_OPTION,
    click.option("--timeout", default=None, type=Seconds(),
                 help=f"Override every scenario's deadline: {TIMEOUT_HELP}."),
    ISOLATION_OPTION,
]

#: What makes a run fail.
VERDICT = [
    click.option("--require-exercised", is_flag=True, default=False,
                 help="A cell whose fault could not happen to the target (NOT-EXERCISED) "
                      "fails the run."),
]

#: Each cell twice: do the same seed's runs agree (``harness.runner.determinism``)?
CHECK_DETERMINISM = click.option(
    "--check-determinism", is_flag=True, default=False,
    help="Run each cell twice with its seed: a cell whose runs differ (a rank's fate or "
         "value, an event of its history) fails the run, naming the first difference.")

#: Where a run's reports go and what counts as known.
REPORTS = [
    click.option("--report-dir", default="reports", show_default=True,
                 type=click.Path(file_okay=False),
                 help="Each run writes its reports into a new directory here; "
                      "REPORT_DIR/latest points to the newest."),
    click.option("--format", "formats", multiple=True, type=click.Choice(FORMATS),
                 help="Reports to write (repeatable). Default: all of them."),
    click.option("--baseline", type=click.Path(exists=True, dir_okay=False), default=None,
                 help="A saved JSON report whose failing cells count as known."),
]

#: Where the cells run when not here.
CLUSTER = click.option(
    "--cluster", default=None, metavar="ADDRESS",
    help="Run on a Dask cluster: its scheduler (tcp://HOST:PORT), or local:N to start N local "
         "worker processes. Needs the 'cluster' extra.")
