"""What a world gives back: every rank's fate and the world's outcome."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import Any

from harness.history import Dropped, Event, ranks_phrase
from harness.rank.values import decode
from harness.vocabulary import CRASH, ERROR, FAIL, HANG, PASS, SEVERITY  # noqa: F401 - the words a world ends with

#: The error type of a rank whose process never started (its outcome is still the world's
#: word for it: CRASH, or HANG when the deadline came first).
NEVER_STARTED = "NeverStarted"

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
        if self.signal is not None:
            return f"killed by {signal.Signals(self.signal).name}"
        if self.exit_code is not None:
            return f"exited with code {self.exit_code}"
        return "still running"

    def summary(self) -> str:
        if self.never_started:
            message = self.error["message"]
            return "never started" + ("" if message == "the process never started" else
                                      f": {one_line(message)}")
        if self.outcome == PASS:
            return "returned " + (self.value_repr or "None")
        if self.invalid:
            return "returned an invalid value: " + one_line(self.invalid)
        if self.outcome == ERROR and self.error:
            return f"raised {self.error['type']}: {one_line(self.error['message'])}"
        if self.outcome == CRASH:
            return self.exit_description + " without a Python exception"
        if self.outcome == HANG:
            return "still blocked at the deadline"
        return self.outcome


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

    @property
    def values(self) -> list[Any]:
        return [r.value for r in self.ranks]

    def detail(self) -> str:
        """One line a person can act on."""
        if self.outcome == HANG and self.hang_report:
            return self.hang_report
        if self.hosts and not self.ranks and self.outcome == PASS:
            launchers = ranks_phrase([h.rank for h in self.hosts], "launcher")
            if self.single_hosts:
                which = ("" if len(self.hosts) == 1 else "each " if len(self.single_hosts)
                         == len(self.hosts) else ranks_phrase(self.single_hosts, "launcher") + " ")
                return (f"no rank started: {launchers} ran the script to its end (exit 0), "
                        f"{which}running the function itself as a world of one "
                        "(xmp.spawn with nprocs=1)")
            return (f"no rank started: {launchers} ran the script to its end (exit 0) "
                    "without xmp.spawn or the XLA runtime")
        launchers, accounted = self._launchers_phrase()
        if launchers:
            others = [r for r in self.ranks if r.outcome != PASS and r.rank not in accounted]
            return "; ".join([launchers] + ([fates_phrase(others)] if others else []))
        if all(r.outcome == PASS for r in self.ranks):
            return f"all {len(self.ranks)} ranks returned"
        fates = fates_phrase([r for r in self.ranks if r.outcome != PASS])
        if self.hosts and all(h.outcome == PASS for h in self.hosts):
            fates += (f"; {ranks_phrase([h.rank for h in self.hosts], 'launcher')} exited 0 "
                      f"all the same ({CAUGHT})")
        return fates

    def _launchers_phrase(self) -> tuple[str, set[int]]:
        """Exec mode: the launchers that failed the run, and what became of their ranks
        (``launcher 0 raised ValueError: x before starting its ranks (ranks 0-7 never
        started)``), with the ranks that says all there is about. A launcher whose ranks
        failed is left to their fates (its spawn raised theirs), and one that is its host's
        rank (no ``xmp.spawn``) is judged as that rank."""
        as_rank = {r.pid for r in self.ranks if r.pid is not None}
        groups: dict[str, tuple[list[int], list[int]]] = {}
        for host in self.hosts:
            if host.outcome == PASS or (host.pid is not None and host.pid in as_rank):
                continue
            mine = [r for r in self.ranks if r.host == host.rank]
            if mine and all(r.never_started for r in mine):
                how = " before starting {its} {noun} ({ranks} never started)"
            elif mine and all(r.outcome == PASS for r in mine):
                how = " after {its} {ranks} returned"
            else:  # its ranks failed: it failed with them, and their fates say why
                continue
            launchers, ranks = groups.setdefault(host.summary() + how, ([], []))
            launchers.append(host.rank)
            ranks += [r.rank for r in mine]
        phrases = [f"{ranks_phrase(launchers, 'launcher')} " + what.format(
                       its="its" if len(launchers) == 1 else "their",
                       noun="rank" if len(ranks) == 1 else "ranks", ranks=ranks_phrase(ranks))
                   for what, (launchers, ranks) in groups.items()]
        return "; ".join(phrases), {r for _, ranks in groups.values() for r in ranks}


#: what a launcher that exits 0 after its ranks failed did: ``xmp.spawn`` re-raises the first
#: failure, so the script caught it (a test that expects a rank to raise, for one)
CAUGHT = "the script caught what its xmp.spawn raised"


def fates_phrase(ranks: list[RankResult]) -> str:
    """``ranks 1-7 raised FileNotFoundError: ...; rank 0 killed by SIGKILL ...``: the ranks
    grouped by how they ended, in order of their lowest rank."""
    groups: dict[str, list[int]] = {}
    for r in ranks:
        groups.setdefault(r.summary(), []).append(r.rank)
    return "; ".join(f"{ranks_phrase(rs)} {what}"
                     for what, rs in sorted(groups.items(), key=lambda kv: min(kv[1])))


def one_line(text: str, limit: int = 240) -> str:
    """A message as one line a report can show (multi-line errors are common)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def decode_status(status: int) -> tuple[int | None, int | None]:
    """``waitpid`` status -> (exit code, signal)."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None


def world_outcome(ranks: list[RankResult]) -> str:
    return max((r.outcome for r in ranks), key=SEVERITY.__getitem__, default=PASS)
