"""The command that reruns one cell, built once as a structure and rendered for people.

Every face that prints a replay (a cell of ``harness run``, a pod's cell, a plan found by
``harness explore``, a crash state) builds a ``Replay``; a saved report keeps it as the
text it renders to. The text is for people and shells: the harness never reads one back
to decide what to run.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass

from harness.vocabulary import DEFAULT_WORKLOAD

#: ``harness replay``: one cell, judged as ``harness run`` judges it.
REPLAY = ("harness", "replay")
#: ``harness run``: a scenario file of one's own (what explore writes) against a target.
RUN = ("harness", "run")


@dataclass(frozen=True)
class Replay:
    scenario: str  # a catalog name, or a scenario file's path
    target: str  # a built-in target's name or the reference the user gave
    seed: int | None = None  # None: the command's default (0)
    workload: str | None = None  # only for a user's target of another workload
    checker: str | None = None
    topology: str | None = None  # only when the run overrode the scenario's
    timeout: float | None = None  # likewise
    command: tuple[str, ...] = REPLAY

    def argv(self) -> list[str]:
        args = [*self.command, "--scenario", self.scenario, "--target", self.target]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        if self.workload is not None and self.workload != DEFAULT_WORKLOAD:
            args += ["--workload", self.workload]
        if self.checker is not None:
            args += ["--checker", self.checker]
        if self.topology is not None:
            args += ["--topology", self.topology]
        if self.timeout is not None:
            args += ["--timeout", f"{self.timeout:g}"]
        return args

    def __str__(self) -> str:
        return shlex.join(self.argv())

    def on_pod(self, pod: tuple[str, ...]) -> Replay:
        """The same cell on the same pod: ``pod`` says how to reach it (``harness pod run
        --local 8``); the topology is the pod's own."""
        return dataclasses.replace(self, command=pod, topology=None)
