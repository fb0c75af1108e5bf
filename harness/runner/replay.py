"""The command that reruns one cell, built once as a structure and rendered for people.

Every face that prints a replay (a cell of ``harness run``, a pod's cell, a plan found by
``harness explore``, a crash state) builds a ``Replay``; a saved report keeps it as the
text it renders to. ``harness replay REPORT --cell`` reads that text back with ``parse``,
the inverse of ``argv``: only the options a replay has, each once, never through a shell;
the command line then checks that it is its cell's and runs what it parsed.
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
#: Each option a replay writes, and the field it holds.
_OPTIONS = {"--scenario": "scenario", "--target": "target", "--seed": "seed",
            "--workload": "workload", "--checker": "checker", "--data": "data", "--config": "config",
            "--topology": "topology", "--timeout": "timeout", "--isolation": "isolation"}


@dataclass(frozen=True)
class Replay:
    scenario: str  # a catalog name, or a scenario file's path
    target: str  # a built-in target's name or the reference the user gave
    seed: int | None = None  # None: the command's default (0)
    workload: str | None = None  # only for a user's target of another workload
    checker: str | None = None
    data: str | None = None  # the user's own dataset, as DIR:PATH
    config: str | None = None  # the user's own config file
    topology: str | None = None  # only when the run overrode the scenario's
    timeout: float | None = None  # likewise
    #: "python" where the run chose it: the same cell under kernel isolation can differ
    isolation: str | None = None
    mounts: tuple[str, ...] = ()  # --mount: what paths are on the user's pod
    command: tuple[str, ...] = REPLAY

    def argv(self) -> list[str]:
        args = [*self.command, "--scenario", self.scenario, "--target", self.target]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        if self.workload is not None and self.workload != DEFAULT_WORKLOAD:
            args += ["--workload", self.workload]
        if self.data is not None:
            args += ["--data", self.data]
        if self.config is not None:
            args += ["--config", self.config]
        if self.checker is not None:
            args += ["--checker", self.checker]
        if self.topology is not None:
            args += ["--topology", self.topology]
        for mount in self.mounts:
            args += ["--mount", mount]
        if self.timeout is not None:
            args += ["--timeout", f"{self.timeout:g}"]
        if self.isolation is not None:
            args += ["--isolation", self.isolation]
        return args

    def __str__(self) -> str:
        return shlex.join(self.argv())

    @classmethod
    def parse(cls, text: str) -> Replay:
        """The replay ``text`` says (as ``__str__`` writes it); ``ValueError`` saying what
        in it is not a replay. ``text`` is always a string here: ``shlex.split(None)``
        would read standard input."""
        if not isinstance(text, str):
            raise ValueError(f"is a {type(text).__name__}, not a command")
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise ValueError(f"cannot be read as a command ({exc})") from None
        command = tuple(words[:2])
        if command not in (REPLAY, RUN):
            raise ValueError(f"is not a '{shlex.join(REPLAY)}' command")
        values: dict[str, str] = {}
        mounts: list[str] = []
        rest = words[2:]
        for i in range(0, len(rest), 2):
            option = rest[i]
            if option == "--mount" and i + 1 < len(rest):  # the one option given once per path
                mounts.append(rest[i + 1])
                continue
            field = _OPTIONS.get(option)
            if field is None or i + 1 == len(rest):
                raise ValueError(f"has {option!r}, which is not an option of a replay "
                                 f"({', '.join(_OPTIONS)}, each with its value, and --mount)")
            if field in values:
                raise ValueError(f"gives {option} twice")
            values[field] = rest[i + 1]
        for needed in ("--scenario", "--target"):
            if _OPTIONS[needed] not in values:
                raise ValueError(f"has no {needed}")
        try:
            seed = int(values.pop("seed")) if "seed" in values else None
            timeout = float(values.pop("timeout")) if "timeout" in values else None
        except ValueError as exc:
            raise ValueError(f"has a seed or timeout that is not a number ({exc})") from None
        return cls(**values, seed=seed, timeout=timeout, mounts=tuple(mounts),  # type: ignore[arg-type]
                   command=command)

    def on_pod(self, pod: tuple[str, ...]) -> Replay:
        """The same cell on the same pod: ``pod`` says how to reach it (``harness pod run
        --local 8``); the topology is the pod's own, and so is its isolation (real machines)."""
        return dataclasses.replace(self, command=pod, topology=None, isolation=None)
