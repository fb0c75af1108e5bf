"""Value types the command-line faces share (``harness``, ``harness explore``): one
definition each, so that every command refuses the same bad value with the same words."""

from __future__ import annotations

import math
from typing import Any

import click

from harness.scenarios import MAX_TIMEOUT


class Seconds(click.FloatRange):
    """A world's deadline: a finite number of seconds of its own clock, at most a scenario's
    longest (a day)."""

    def __init__(self) -> None:
        super().__init__(min=0.1, max=MAX_TIMEOUT)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):  # a range lets nan through: every comparison is false
            self.fail(f"{value!r} is not a number of seconds.", param, ctx)
        return seconds


#: A world's seed seeds numpy, whose seeds are 32-bit.
SEED = click.IntRange(0, 2**32 - 1)

#: What ``--timeout`` means, said the same way by every command.
TIMEOUT_HELP = ("seconds of the world's own clock, which passes only while every rank waits "
                "(a sleep, a collective): a verdict never depends on this machine's load")
