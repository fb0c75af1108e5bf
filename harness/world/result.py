"""What a world gives back: every rank's fate and the world's outcome."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from harness.history import Dropped, Event
from harness.rank.values import decode
from harness.vocabulary import CRASH, ERROR, FAIL, HANG, PASS, SEVERITY  # noqa: F401 - the words a world ends with
from harness.world import fates
from harness.world.fates import NEVER_STARTED

_UNSET = object()


@dataclass
class RankResult:
    rank: int
    host: int
    outcome: str
    pid: int | None = None
    returned: bool = False
    value_pickle: bytes | None = field(default=None, repr=False)
    value_repr: str | None = None
    invalid: str | None = None  # what the world's checker refused in the value it returned
    value_note: str | None = None  # how the value was sent when not as it is (values.encode)
    error: dict[str, Any] | None = None  # type, message, traceback
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stack: str | None = None
    killed_by_fault: bool = False  # the fault plan killed it: checkers judge its survivors
    restarts: int = 0  # times it came back after a pre-emption
    _value: Any = field(default=_UNSET, repr=False, compare=False)

    @property
    def value(self) -> Any:
        """The target's return value, read as plain data on first use (``harness.rank.values``:
        never by running the target's code); raises ``UnreadableValue`` for a forged one."""
        if self._value is _UNSET:
            self._value = decode(self.value_pickle) if self.value_pickle is not None else None
        return self._value

    @property
    def never_started(self) -> bool:
        """No process of this rank ever ran (its launcher ended, or the world, first)."""
        return bool(self.error) and self.error.get("type") == NEVER_STARTED

    @property
    def exit_description(self) -> str:
        return fates.exit_description(self.signal, self.exit_code)

    def summary(self) -> str:
        """How this rank ended, as the one-line detail says it (``harness.world.fates``)."""
        return fates.summary(self)


@dataclass
class WorldResult:
    world_id: str
    topology: str
    profile: str
    seed: int
    outcome: str
    ranks: list[RankResult]
    history: list[Event]
    mismatches: list[str]
    hang_report: str | None
    duration_s: float  # wall seconds the world took on this machine
    hosts: list[RankResult] = field(default_factory=list)  # exec mode launchers
    leftovers: int = 0  # processes the leader had to kill after the ranks ended
    files: dict[int, dict[str, str]] = field(default_factory=dict)  # watched, per rank, at the end
    #: record_files: modules the ranks imported after the fork (sorted union): a later
    #: world of the same target can pass them as ``preload=``
    imported: list[str] = field(default_factory=list)
    #: what the bounded history left out of a long run (also a ``dropped`` event in it)
    dropped: Dropped | None = None
    #: exec mode: hosts whose launcher ran its function as a world of one (``nprocs=1``)
    single_hosts: list[int] = field(default_factory=list)
    #: seconds on the world's own clock from its start to its end (``world/clock.py``);
    #: None where time is the machine's (a pod)
    world_time_s: float | None = None
    #: the walls the world had (``harness.world.isolation``): ``python`` or ``kernel``, and
    #: why not the one asked for ("" when it was)
    isolation: str = "python"
    isolation_note: str = ""
    #: the world's read-only mounts (a scenario's): an EROFS under one is the scenario's,
    #: any other under kernel isolation is the read-only machine's (``fates``)
    read_only: tuple[str, ...] = ()
    #: ranks that started a process of their own (a subprocess) in a sandboxed world: under
    #: python isolation it saw the machine's files, not the view's (``fates``)
    forked: list[int] = field(default_factory=list)
    #: ranks that used an IP socket under python isolation, where every host shares the
    #: machine's network (``fates.shared_network``)
    networked: list[int] = field(default_factory=list)

    @property
    def values(self) -> list[Any]:
        return [r.value for r in self.ranks]

    def detail(self) -> str:
        """One line a person can act on (``harness.world.fates``)."""
        return fates.world_detail(self)


def decode_status(status: int) -> tuple[int | None, int | None]:
    """``waitpid`` status -> (exit code, signal)."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None


def world_outcome(ranks: list[RankResult]) -> str:
    return max((r.outcome for r in ranks), key=SEVERITY.__getitem__, default=PASS)
