"""Cells and matrices: what a run produced, in the shape every report renders.

A ``Matrix`` round-trips through the JSON report (schema ``harness.matrix/1``)
so that ``harness report`` and ``harness diff`` work from a saved file and a
renderer never needs a live run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.history import plain
from harness.printable import printable_fields

if TYPE_CHECKING:
    from harness.history import Event
    from harness.world.result import RankResult

from harness.vocabulary import (  # noqa: F401 - a cell's words, re-exported for its readers
    INFRA,
    KNOWN,
    NOT_EXERCISED,
    OK,
    UNEXERCISED,
    UNEXPECTED,
    VERDICTS,
)

SCHEMA = "harness.matrix/1"

#: Where a report's cells ran: the simulator on one machine, or real TPU VMs over SSH.
MODES = ("sim", "pod")


@dataclass
class RankRow:
    rank: int
    host: int
    outcome: str
    exit_code: int | None
    error: str | None  # "Type: message"
    signal: int | None = None
    killed_by_fault: bool = False
    traceback: str | None = None
    stack: str | None = None
    value: str | None = None  # repr of what the rank returned
    invalid: str | None = None  # what the cell's checker refused in it
    stdout: str = ""
    stderr: str = ""

    __post_init__ = printable_fields  # what a target wrote, safe in every report

    @classmethod
    def of(cls, r: RankResult, output_limit: int | None = None) -> RankRow:
        """A live rank's fate in the report's shape (its output's tail, if limited, marked
        where it was cut)."""
        def tail(text: str) -> str:
            if not output_limit or len(text) <= output_limit:
                return text
            return f"[... output cut: {len(text) - output_limit} characters before ...]\n" + \
                text[-output_limit:]

        return cls(rank=r.rank, host=r.host, outcome=r.outcome, exit_code=r.exit_code,
                   error=f"{r.error['type']}: {r.error['message']}" if r.error else None,
                   signal=r.signal, killed_by_fault=r.killed_by_fault,
                   traceback=r.error.get("traceback") if r.error else None, stack=r.stack,
                   value=r.value_repr if not r.value_note else f"{r.value_repr} [{r.value_note}]",
                   invalid=r.invalid, stdout=tail(r.stdout), stderr=tail(r.stderr))


@dataclass
class FaultRow:
    t: float
    rank: int | None
    fault: str
    op: str | None
    path: str | None
    message: str

    __post_init__ = printable_fields  # what a target wrote, safe in every report

    @classmethod
    def fired(cls, history: list[Event]) -> list[FaultRow]:
        """Faults fired, rank by rank: each rank's sequence is fixed by the seed, while
        the interleaving of different ranks is the scheduler's."""
        rows = [cls(t=e.t, rank=e.rank, fault=e.op or "?", op=e.detail.get("op"),
                    path=e.detail.get("path"), message=e.detail.get("message", ""))
                for e in history if e.kind == "fault"]
        return sorted(rows, key=lambda f: (-1 if f.rank is None else f.rank, f.t))


@dataclass
class Cell:
    scenario: str
    target: str
    topology: str
    seed: int
    outcome: str  # PASS FAIL ERROR HANG CRASH
    expected: str  # pass | fail-loudly
    verdict: str  # ok | known | unexpected
    duration_s: float
    detail: str
    replay: str
    ranks: list[RankRow] = field(default_factory=list)
    faults_fired: list[FaultRow] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    finding: str = ""  # the seed finding the scenario tests
    workload: str = ""
    met: bool = False  # the outcome meets the expectation
    roles: dict[str, str] = field(default_factory=dict)  # role -> what it resolved to
    checker: str = ""  # what judged each rank's value ("": nothing but the workload's checks)
    #: seconds on the world's own clock (``duration_s`` is the wall time this machine took);
    #: None: a report written before the world clock, or a pod's cell (real time)
    world_time_s: float | None = None
    #: the walls the world had (``harness.world.isolation``): ``kernel`` or ``python``, with
    #: why not kernel when it was asked for ("python (kernel refused: ...)"); "": not said
    #: (a report written before isolation modes, a pod's cell)
    isolation: str = ""

    __post_init__ = printable_fields  # what a target wrote, safe in every report

    @property
    def key(self) -> tuple[str, str]:
        return (self.scenario, self.target)

    def to_dict(self) -> dict[str, Any]:
        data = plain(self)
        if not data["isolation"]:
            del data["isolation"]  # a report that never said re-renders as it was
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        data = dict(data)
        data["ranks"] = [RankRow(**r) for r in data.get("ranks", [])]
        data["faults_fired"] = [FaultRow(**f) for f in data.get("faults_fired", [])]
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Matrix:
    cells: list[Cell]
    seed: int
    created: str
    harness_version: str
    duration_s: float = 0.0
    #: the user stopped the run (Ctrl-C): ``cells`` holds only those that finished
    interrupted: bool = False
    planned: int | None = None  # cells the run meant to run (None: as many as it holds)
    mode: str = "sim"
    #: mode "pod": the pod's name, accelerator type and workers, and the scenarios that
    #: do not run on a pod with why (``not_run``: {scenario: reason})
    pod: dict[str, Any] | None = None
    #: a campaign sent to a cluster: its address, workers, and the cells a dead worker held
    #: that ran again (``retried``: [{"scenario", "target", "seed", "worker", "attempt"}])
    campaign: dict[str, Any] | None = None
    #: cells the harness itself failed in (``HarnessBug``: what failed, the rank's
    #: traceback): no verdict, and the run exits 3. Not in the report's files: they hold
    #: verdicts, and these cells have none.
    harness_bugs: list[tuple[str, str]] = field(default_factory=list)

    __post_init__ = printable_fields  # what a target wrote, safe in every report

    @property
    def seeds(self) -> list[int]:
        """The seeds the cells ran with, in order; several in a campaign over seeds."""
        return sorted({c.seed for c in self.cells}) or [self.seed]

    @property
    def isolation(self) -> str:
        """The isolation the cells ran under, once (``kernel``, ``python``, both joined by
        ``/`` if they differ); "" where no cell says."""
        return " / ".join(sorted({c.isolation for c in self.cells if c.isolation}))

    @property
    def several_seeds(self) -> bool:
        """Cells of the same (scenario, target) at different seeds: every report names
        each cell with its seed."""
        return len(self.seeds) > 1

    @property
    def scenarios(self) -> list[str]:
        return list(dict.fromkeys(c.scenario for c in self.cells))

    @property
    def targets(self) -> list[str]:
        return list(dict.fromkeys(c.target for c in self.cells))

    def cell(self, scenario: str, target: str) -> Cell | None:
        return next((c for c in self.cells if c.key == (scenario, target)), None)

    def cells_of(self, scenario: str, target: str) -> list[Cell]:
        """The (scenario, target) cells, one per seed."""
        return [c for c in self.cells if c.key == (scenario, target)]

    def summary(self) -> dict[str, Any]:
        outcomes: dict[str, int] = {}
        verdicts = {v: 0 for v in VERDICTS}
        for c in self.cells:
            outcomes[c.outcome] = outcomes.get(c.outcome, 0) + 1
            verdicts[c.verdict] += 1
        out = {"cells": len(self.cells), "outcomes": outcomes, "verdicts": verdicts,
               "duration_s": round(self.duration_s, 3)}
        if self.interrupted:
            out["interrupted"] = True
            out["planned"] = self.planned
        return out

    @property
    def unexpected(self) -> list[Cell]:
        return [c for c in self.cells if c.verdict == UNEXPECTED]

    @property
    def unexercised(self) -> list[Cell]:
        return [c for c in self.cells if c.verdict == UNEXERCISED]

    def failing(self, require_exercised: bool = False) -> list[Cell]:
        """The cells that make a run fail: unexpected ones, and unexercised ones when the
        run requires every fault to happen (as pytest skips, they are shown, not failed)."""
        return self.unexpected + (self.unexercised if require_exercised else [])

    def to_dict(self) -> dict[str, Any]:
        out = {"schema": SCHEMA, "harness_version": self.harness_version, "seed": self.seed,
               "created": self.created, "cells": [c.to_dict() for c in self.cells],
               "summary": self.summary(), "mode": self.mode}
        if self.several_seeds:  # additive: "seed" stays the first, for older readers
            out["seeds"] = self.seeds
        if self.pod is not None:
            out["pod"] = self.pod
        if self.campaign is not None:
            out["campaign"] = self.campaign
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Matrix:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} report (schema: {data.get('schema')!r})")
        summary = data.get("summary", {})
        return cls(cells=[Cell.from_dict(c) for c in data["cells"]], seed=data["seed"],
                   created=data["created"], harness_version=data["harness_version"],
                   duration_s=summary.get("duration_s", 0.0),
                   interrupted=bool(summary.get("interrupted", False)),
                   planned=summary.get("planned"), mode=data.get("mode", "sim"),
                   pod=data.get("pod"), campaign=data.get("campaign"))
