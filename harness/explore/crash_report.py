"""What ``harness explore --crash-states`` found, and how it is written and shown: each crash
state's result, the vulnerabilities (states that fail through one operation: ALICE's report
lines), the scenario files that replay them, and the report as text and JSON.

``crash_model`` says which states a crash can leave; ``crash`` tries them in worlds; this
module holds what came of it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from harness.explore.crash_model import CrashState, FileOp, Pattern
from harness.runner.replay import Replay
from harness.vocabulary import NOT_EXERCISED, PASS
from harness.world.fates import one_line


@dataclass
class StateResult:
    """One crash state and what its recovery world showed."""

    state: CrashState
    faults: list[dict[str, Any]]  # the recovery world's, as a scenario writes them
    outcome: str = ""  # of the recovery world ("" when not run)
    detail: str = ""
    duration_s: float = 0.0
    worlds: int = 0

    @property
    def vulnerable(self) -> bool:
        return bool(self.outcome) and self.outcome not in (PASS, NOT_EXERCISED)

    def to_dict(self) -> dict[str, Any]:
        return {**self.state.to_dict(), "faults": self.faults, "outcome": self.outcome,
                "detail": self.detail, "duration_s": round(self.duration_s, 3)}


@dataclass
class Vulnerability:
    """States that fail through one operation: ALICE's report line."""

    depends: FileOp
    crash: str
    consistency: str
    states: list[StateResult]
    scenario_name: str = ""
    scenario_yaml: str = ""
    replay: str = ""  # what the report shows: ``replay_of`` rendered
    replay_of: Replay | None = None
    protocol: str = ""  # what the operations show of the file's protocol (``Pattern``), if any
    #: the creations the failure also needs (an earlier state with the same damage passed
    #: without those files): ALICE's ordering dependency, e.g. a flag file made too early
    needs: list[FileOp] = field(default_factory=list)
    ordering: str = ""
    #: what its scenario gave when run once more, as ``harness run --scenario`` will: a
    #: target racing with its own restart may not fail twice
    again: tuple[str, str] = ("", "")
    path: str = ""  # where ``write_scenarios`` wrote the scenario ("": not written)

    @property
    def reproduced(self) -> bool:
        return self.again[0] == self.first.outcome

    @property
    def first(self) -> StateResult:
        return self.states[0]

    @property
    def occurrences(self) -> list[int]:
        return sorted({s.state.depends.nth for s in self.states if s.state.depends})

    @property
    def file(self) -> str:
        return self.depends.path

    def headline(self) -> str:
        """``a crash during write 2 of `ckpt.json` leaves a torn file, and the restart: <what
        the recovery saw>``."""
        return f"{self.first.state.why}, and the restart: {self.first.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.depends.op, "file": self.file, "occurrences": self.occurrences,
                "crash": self.crash, "consistency": self.consistency,
                "line": self.depends.line, "why": self.first.state.why,
                "protocol": self.protocol, "ordering": self.ordering,
                "reproduced": self.reproduced,
                "again": {"outcome": self.again[0], "detail": self.again[1]},
                "needs": [op.to_dict() for op in self.needs],
                "detail": self.first.detail, "outcome": self.first.outcome,
                "faults": self.first.faults, "scenario": self.scenario_yaml,
                "scenario_name": self.scenario_name, "replay": self.replay, "path": self.path,
                "states": [s.to_dict() for s in self.states]}


@dataclass
class CrashReport:
    target: str
    workload: str
    seed: int
    topology: str = ""
    baseline_outcome: str = ""
    baseline_detail: str = ""
    baseline_raised_at: str | None = None
    writers: list[int] = field(default_factory=list)
    operations: int = 0
    states: list[StateResult] = field(default_factory=list)
    vulnerabilities: list[Vulnerability] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)
    confirmed: bool = True  # the states were tried in worlds (the baseline passed)
    note: str = ""
    worlds: int = 0
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "workload": self.workload, "seed": self.seed,
                "topology": self.topology,
                "baseline": {"outcome": self.baseline_outcome, "detail": self.baseline_detail,
                             "raised_at": self.baseline_raised_at},
                "writers": self.writers, "operations": self.operations,
                "confirmed": self.confirmed, "note": self.note,
                "vulnerabilities": [v.to_dict() for v in self.vulnerabilities],
                "patterns": [p.to_dict() for p in self.patterns],
                "states": [s.to_dict() for s in self.states],
                "worlds": self.worlds, "duration_s": round(self.duration_s, 3)}


def write_scenarios(report: CrashReport, directory: str) -> list[str]:
    """Write each vulnerability's replay scenario into ``directory``; their paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for v in report.vulnerabilities:
        path = os.path.join(directory, f"{v.scenario_name}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(v.scenario_yaml)
        paths.append(path)
        v.path = path
        if v.replay_of is not None:
            v.replay = str(dataclasses.replace(v.replay_of, scenario=path))
    return paths


# -- the report as text ------------------------------------------------------------------

def render_crash_report(report: CrashReport) -> str:
    """The report as plain text lines, ALICE's way: one paragraph per vulnerability."""
    ranks = ", ".join(map(str, report.writers))
    states = f"{len(report.states)} crash states of rank{'s' if len(report.writers) > 1 else ''} " \
        f"{ranks}, from {report.operations} file operations" if report.writers else \
        f"{report.operations} file operations, no crash point"
    lines = [f"crash states of {report.target} ({report.workload}, {report.topology}, "
             f"seed {report.seed}): {states}; {report.worlds} "
             f"world{'s' if report.worlds != 1 else ''} in {report.duration_s:.1f} s"]
    lines.append(f"fault-free run: {report.baseline_outcome}"
                 + (f" ({report.baseline_detail})" if report.baseline_outcome != PASS else ""))
    if report.note:
        lines.append(report.note)
    if report.confirmed and report.states:
        if not report.vulnerabilities:
            lines.append(f"no vulnerability: every one of the {len(report.states)} crash states "
                         "recovers as the fault-free run does")
        for i, v in enumerate(report.vulnerabilities, 1):
            lines += ["", f"{i}. {v.protocol or v.first.state.why}"]
            if v.protocol:
                lines.append(f"   {v.first.state.why}")
            if v.ordering:
                lines.append(f"   ordering: {v.ordering}")
            lines += [
                f"   recovery ({v.first.outcome}): {v.first.detail}",
                f"   operation: {v.depends.op} of {v.file} (the {_nth(v.occurrences)} time it ran, "
                f"rank {v.first.state.rank}) at {v.depends.line or 'an unknown line'}",
                f"   crash: {v.crash} ({v.consistency} mount); {len(v.states)} state(s) fail this "
                "way",
                f"   faults: {_flow(v.first.faults)}",
            ]
            if not v.again[0]:
                lines.append(f"   not run again: {one_line(v.again[1])[:200]}")
            elif not v.reproduced:
                lines.append(f"   NOT reproduced: run again from its scenario, the recovery ended "
                             f"{v.again[0]} ({one_line(v.again[1])[:200]}): its outcome depends "
                             "on timing (the target races with its own restart)")
            lines += [f"   scenario: {v.path}", f"   replay: {v.replay}"] if v.path else \
                [f"   replay: save the scenario as {v.scenario_name}.yaml, then {v.replay}"]
        not_tried = [s for s in report.states if not s.outcome]
        if not_tried:
            lines.append(f"{len(not_tried)} state(s) could not be tried: {not_tried[0].detail}")
    if report.patterns and not report.confirmed:
        lines.append("")
        lines.append("unconfirmed (from the operations alone, no world judged them):")
        for p in report.patterns:
            lines.append(f"- {p.text}: {p.op.describe()} at {p.op.line or 'an unknown line'} "
                         f"(rank {p.rank})")
    return "\n".join(lines)


def _nth(numbers: list[int]) -> str:
    def suffix(n: int) -> str:
        return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")

    words = [f"{n}{suffix(n)}" for n in numbers]
    return " and ".join([", ".join(words[:-1]), words[-1]]) if len(words) > 1 else words[0]


def _flow(faults: list[dict[str, Any]]) -> str:
    text = yaml.safe_dump(faults, default_flow_style=True, width=10_000, sort_keys=False).strip()
    return text if len(text) <= 400 else text[:397] + "..."
