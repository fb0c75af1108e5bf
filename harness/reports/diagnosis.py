"""One diagnosis of a failing run, which every face renders.

``harness exec`` and ``harness replay``, the pytest plugin, JUnit, Markdown, HTML
and the terminal report all show a run from a ``Diagnosis``: the one line, how each
group of ranks ended, the faults fired, the mismatches, the tracebacks and the stacks
of hung ranks, the replay command. A report's ``Cell`` (read back from JSON) and a
live ``WorldResult`` are first read into the same rows (``RankRow``, ``FaultRow``),
so both are diagnosed by the same code. Nothing here judges: the outcome, verdict
and one-line detail are copied from what the world, the checker and the runner said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.frames import own_frame
from harness.history import dropped_line, format_ranks, ranks_phrase
from harness.printable import printable_fields
from harness.reports._common import took
from harness.runner.cells import Cell, FaultRow, RankRow
from harness.vocabulary import PASS
from harness.world.fates import exit_text, one_line, result_text
from harness.world.result import WorldResult

#: How many distinct tracebacks the plain-text diagnosis prints (the reports keep them all).
TEXT_TRACEBACKS = 1
#: How a rank that returned is shown inside a cell that did not pass: its value may be the
#: wrong one, so it is not called PASS.
RETURNED = "returned"

_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line \d+, in ')


class WorldFailed(AssertionError):
    """A world that should have passed did not; the message is the full diagnosis."""


class CellFailed(AssertionError):
    """A cell whose verdict is unexpected; the message is the full diagnosis."""


def hide_own_frames(text: str) -> str:
    """A traceback or a stack that starts and ends at the user's code, as pytest hides its own
    frames: the harness's frames before the first frame outside it and after the last are
    dropped. In a chain (``During handling of the above exception ...``), a link made of the
    harness's frames alone is a fault raising inside the view (a real ENOSPC raises from C,
    with no Python frame): it is shown as Python shows a frameless one, its exception line
    alone. A traceback of the harness's frames alone (its own bug) is left whole. The JSON
    report keeps the raw text."""
    items: list[tuple[str | None, list[str]]] = []  # (frame path or None, lines)
    for line in text.splitlines(keepends=True):
        match = _FRAME.match(line)
        if match:
            items.append((match["path"], [line]))
        elif items and items[-1][0] is not None and line.startswith("    "):
            items[-1][1].append(line)  # the frame's source line and its carets
        else:
            items.append((None, [line]))
    users = any(path is not None and not own_frame(path) for path, _ in items)
    out: list[str] = []
    run: list[tuple[str, list[str]]] = []

    def flush() -> None:
        own = [own_frame(path) for path, _ in run]
        if run and all(own) and users:  # a frameless link of the chain
            if out and out[-1].startswith("Traceback (most recent call last)"):
                out.pop()
            run.clear()
        elif not all(own):
            first, last = own.index(False), len(own) - own[::-1].index(False)
            del run[last:], run[:first]
        out.extend(line for _, lines in run for line in lines)
        run.clear()

    for path, lines in items:
        if path is None:
            flush()
            out.extend(lines)
        else:
            run.append((path, lines))
    flush()
    return "".join(out)


@dataclass
class RankGroup:
    """Ranks (or exec-mode launchers) that ended the same way: outcome, exit, error or value."""

    ranks: list[int]
    hosts: list[int]
    outcome: str
    exit: str
    result: str
    noun: str = "rank"

    @property
    def rank_text(self) -> str:
        return format_ranks(self.ranks)

    @property
    def host_text(self) -> str:
        return format_ranks(self.hosts)

    @property
    def label(self) -> str:
        """``ranks 1-7 (hosts 1-7)``."""
        return f"{ranks_phrase(self.ranks, self.noun)} ({ranks_phrase(self.hosts, 'host')})"


@dataclass
class Trace:
    """One distinct text (a traceback, a stack, captured output) and the ranks that left it."""

    ranks: list[int]
    text: str
    noun: str = "rank"
    passed: bool = False  # every rank that left it returned

    @property
    def label(self) -> str:
        return ranks_phrase(self.ranks, self.noun)


@dataclass
class Diagnosis:
    """What a person needs to act on a world or a cell, ready to render."""

    title: str  # ``isolated-tmp[naive-sync]`` or ``world 3f2a``
    outcome: str
    topology: str
    seed: int
    duration_s: float
    detail: str
    replay: str = ""
    world_time_s: float | None = None  # on the world's own clock (None: not recorded)
    verdict: str = ""  # a cell's; a bare world has none
    expected: str = ""
    finding: str = ""
    roles: dict[str, str] = field(default_factory=dict)  # role -> what it resolved to
    checker: str = ""  # what judged each rank's value
    groups: list[RankGroup] = field(default_factory=list)  # launchers first, then ranks
    faults: list[FaultRow] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    tracebacks: list[Trace] = field(default_factory=list)
    stacks: list[Trace] = field(default_factory=list)  # of ranks still blocked at the deadline
    stdout: list[Trace] = field(default_factory=list)
    stderr: list[Trace] = field(default_factory=list)
    dropped: str = ""  # what a long run's bounded history left out
    #: what the history says of a file some ranks could not find (``unseen_writes``)
    hints: list[str] = field(default_factory=list)
    #: races between ranks on a file, each one sentence (``world/races.py``): a cell says
    #: them whatever its outcome, as a PASS may hold only at this seed's order
    races: list[str] = field(default_factory=list)

    #: a bare world's text comes straight from its ranks: made printable here, as a cell's is
    __post_init__ = printable_fields

    @property
    def headline(self) -> str:
        judged = f" (expected {self.expected}, verdict {self.verdict})" if self.verdict else ""
        return (f"{self.title} on {self.topology}, seed {self.seed}: {self.outcome}{judged} "
                f"in {took(self.duration_s, self.world_time_s)}")


def rank_groups(rows: list[RankRow], noun: str = "rank") -> list[RankGroup]:
    """Group rows by how they ended, in order of their lowest rank."""
    groups: dict[tuple[str, str, str], RankGroup] = {}
    for row in sorted(rows, key=lambda r: r.rank):
        key = (row.outcome, exit_text(row), result_text(row))
        group = groups.get(key)
        if group is None:
            groups[key] = RankGroup([row.rank], [row.host], *key, noun=noun)
        else:
            group.ranks.append(row.rank)
            if row.host not in group.hosts:
                group.hosts.append(row.host)
    return list(groups.values())


def text_groups(rows: list[RankRow], attr: str, noun: str = "rank") -> list[Trace]:
    """Distinct non-empty values of a row's text field (traceback, stack, stdout...)."""
    seen: dict[str, Trace] = {}
    for row in sorted(rows, key=lambda r: r.rank):
        text = getattr(row, attr) or ""
        if attr in ("traceback", "stack"):
            text = hide_own_frames(text)
        if text.strip():
            trace = seen.setdefault(text, Trace([], text, noun, passed=True))
            trace.ranks.append(row.rank)
            trace.passed = trace.passed and row.outcome == PASS
    return list(seen.values())


def _assemble(head: Diagnosis, ranks: list[RankRow], launchers: list[RankRow],
              history: Iterable[Any] = ()) -> Diagnosis:
    """Fill in the parts read from the rows; launchers come first, as they start the ranks.
    What is said once is not said again: a launcher's traceback that ends as a rank's (it
    re-raised the rank's error) and the tracebacks in a rank's stderr are left out."""
    both = ((launchers, "launcher"), (ranks, "rank"))
    for rows, noun in both:
        groups = rank_groups(rows, noun)
        if head.outcome != PASS:
            for group in groups:
                if group.outcome == PASS:
                    group.outcome = RETURNED
        head.groups += groups
        head.tracebacks += text_groups(rows, "traceback", noun)
        head.stacks += text_groups(rows, "stack", noun)
        head.stdout += text_groups(rows, "stdout", noun)
        for trace in text_groups(rows, "stderr", noun):
            trace.text = without_tracebacks(trace.text)
            if trace.text:
                head.stderr.append(trace)
    endings = {_last_line(t.text) for t in head.tracebacks if t.noun == "rank"}
    head.tracebacks = [t for t in head.tracebacks
                       if t.noun == "rank" or _last_line(t.text) not in endings]
    history = list(history)
    head.hints = unseen_writes(history, ranks)
    head.races = races_of(history)
    return head


def races_of(history: Iterable[Any]) -> list[str]:
    """What the world's race finder named (``world/races.py``), in the order it found them."""
    out = []
    for e in history:
        kind, detail = (e.get("kind"), e.get("detail") or {}) if isinstance(e, dict) else \
            (e.kind, e.detail)
        if kind == "race" and detail.get("message"):
            out.append(str(detail["message"]))
    return out


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


_CHAINING = ("The above exception was the direct cause of the following exception:",
             "During handling of the above exception, another exception occurred:")


def without_tracebacks(text: str) -> str:
    """``text`` (a rank's stderr) without its Python tracebacks, which the diagnosis shows
    apart and cleaned: what else the rank printed is kept."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if "Traceback (most recent call last):" in line:
            inside = True
        elif inside:
            inside = line[:1] in (" ", "\t")  # a frame; the exception's own line ends it
        elif line.strip() not in _CHAINING:
            out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


_NOT_FOUND = re.compile(r"No such file or directory: '([^']+)'")


def unseen_writes(history: Iterable[Any], ranks: list[RankRow]) -> list[str]:
    """For a file some ranks could not find that other ranks wrote on other hosts only:
    where it was written (``'/tmp/x' was written on host 0 only (by rank 0); ranks 1-7 on
    hosts 1-7 looked for it there``). Read from the history's file events."""
    host_of = {r.rank: r.host for r in ranks}
    missing: dict[str, list[int]] = {}
    for r in ranks:
        m = _NOT_FOUND.search(r.error or "")
        if m:
            missing.setdefault(m.group(1), []).append(r.rank)
    if not missing:
        return []
    writers: dict[str, set[int]] = {}
    for e in history:
        kind, rank, op, detail = (e.get("kind"), e.get("rank"), e.get("op"),
                                  e.get("detail") or {}) if isinstance(e, dict) else \
            (e.kind, e.rank, e.op, e.detail)
        if kind != "file" or rank is None or not detail.get("ok"):
            continue
        path = detail.get("dst") if op == "rename" else detail.get("path") \
            if op == "open-write" else None
        if path in missing:
            writers.setdefault(path, set()).add(rank)
    hints = []
    for path, lost in missing.items():
        wrote = sorted(writers.get(path, ()))
        wrote_on = sorted({host_of[w] for w in wrote if w in host_of})
        lost_on = sorted({host_of[r] for r in lost})
        if wrote and not set(wrote_on) & set(lost_on):
            hints.append(f"'{path}' was written on {ranks_phrase(wrote_on, 'host')} only (by "
                         f"{ranks_phrase(wrote)}); {ranks_phrase(lost)} on "
                         f"{ranks_phrase(lost_on, 'host')} looked for it on their own host, "
                         "where no rank wrote it")
    return hints


def diagnose(subject: Cell | WorldResult, seeded: bool = False) -> Diagnosis:
    """The diagnosis of a cell (live or read from a report) or of a bare world; ``seeded``:
    the cell is one of several seeds of its (scenario, target), and its title says which."""
    if isinstance(subject, WorldResult):
        head = Diagnosis(title=f"world {subject.world_id}", outcome=subject.outcome,
                         topology=f"{subject.topology} ({subject.profile})", seed=subject.seed,
                         duration_s=subject.duration_s, world_time_s=subject.world_time_s,
                         detail=subject.detail(),
                         faults=FaultRow.fired(subject.history),
                         mismatches=list(subject.mismatches),
                         dropped=dropped_line(subject.history) or "")
        return _assemble(head, [RankRow.of(r) for r in subject.ranks],
                         [RankRow.of(r) for r in subject.hosts], subject.history)
    title = f"{subject.scenario}[{subject.target}]" + (f" seed {subject.seed}" if seeded else "")
    head = Diagnosis(title=title, outcome=subject.outcome,
                     topology=subject.topology, seed=subject.seed, duration_s=subject.duration_s,
                     world_time_s=subject.world_time_s, detail=subject.detail,
                     replay=subject.replay, verdict=subject.verdict,
                     expected=subject.expected, finding=subject.finding,
                     roles=dict(subject.roles), checker=subject.checker,
                     faults=list(subject.faults_fired), mismatches=list(subject.mismatches),
                     dropped=dropped_line(subject.history) or "")
    return _assemble(head, list(subject.ranks), [], subject.history)


def group_line(group: RankGroup) -> str:
    """``ranks 1-7 (hosts 1-7): ERROR, exit 1: FileNotFoundError: ...``; ``rank 0 (host 0):
    returned, exit 0: 'run-3f2a'``. No word is said twice (``HANG, HANG``)."""
    result = group.result
    if result.lower().startswith(group.outcome.lower()):  # "returned 'x'" after "returned"
        result = result[len(group.outcome):].lstrip(" :,")
    parts = [group.outcome]
    if group.exit not in ("", "-") and group.exit.lower() != group.outcome.lower():
        parts.append(group.exit)
    line = f"{group.label}: {', '.join(parts)}"
    return line + (f": {one_line(result)}" if result else "")


@dataclass
class FaultGroup:
    """Firings of one fault that say the same thing (a poll loop that meets EACCES 600 times
    on each of seven ranks): the first, the ranks, how many."""

    first: FaultRow
    ranks: list[int]  # empty: the world's own
    count: int


def fault_groups(faults: list[FaultRow]) -> list[FaultGroup]:
    """The faults fired, each distinct (kind, op, path, message) once, in order of first
    firing; the JSON report keeps every firing."""
    groups: dict[tuple[str, str | None, str | None, str], FaultGroup] = {}
    for f in faults:
        key = (f.fault, f.op, f.path, f.message)
        group = groups.get(key)
        if group is None:
            groups[key] = FaultGroup(f, [] if f.rank is None else [f.rank], 1)
            continue
        group.count += 1
        if f.rank is not None and f.rank not in group.ranks:
            group.ranks.append(f.rank)
    return list(groups.values())


def fault_line(fault: FaultRow | FaultGroup) -> str:
    """``fault eio fired on rank 0 at 0.0 ms: EIO on read``; a group: ``fault
    permission-denied fired 4,231 times on ranks 1-7, first at 0.0 ms: ...``."""
    group = fault if isinstance(fault, FaultGroup) else FaultGroup(fault, [] if fault.rank
                                                                   is None else [fault.rank], 1)
    who = ranks_phrase(group.ranks) if group.ranks else "the world"
    times = f" {group.count:,} times" if group.count > 1 else ""
    at = ", first at" if group.count > 1 else " at"
    return (f"fault {group.first.fault} fired{times} on {who}{at} "
            f"{group.first.t * 1000:.1f} ms: {group.first.message}")


def render_text(d: Diagnosis) -> str:
    """The diagnosis as plain text: what ``harness replay``, a failing pytest and JUnit show."""
    lines = [d.headline, f"  {d.detail or '(no detail recorded)'}"]
    lines += [f"  {hint}" for hint in d.hints]
    lines += [f"  {race}" for race in d.races]
    if d.finding:
        lines.append(f"  seed finding: {d.finding}")
    lines += [f"  role {role} = {what}" for role, what in d.roles.items()]
    if d.checker:
        lines.append(f"  checker: {d.checker}")
    lines += [f"  {group_line(g)}" for g in d.groups]
    lines += [f"  {fault_line(g)}" for g in fault_groups(d.faults)]
    lines += [f"  mismatch: {m}" for m in d.mismatches]
    lines += [f"  history: {d.dropped}"] if d.dropped else []
    for trace in d.tracebacks[:TEXT_TRACEBACKS]:
        lines.append(f"--- traceback of {trace.label} ---\n{trace.text.rstrip()}")
    others = [r for t in d.tracebacks[TEXT_TRACEBACKS:] for r in t.ranks]
    if others:
        lines.append(f"(other tracebacks: {ranks_phrase(others)}; every one is in a run's "
                     "matrix.json and matrix.txt)")
    for trace in d.stacks:
        lines.append(f"--- stack of {trace.label}, still blocked at the deadline ---\n"
                     f"{trace.text.rstrip()}")
    if d.replay:
        lines.append(f"replay: {d.replay}")
    return "\n".join(lines)


def describe(subject: Cell | WorldResult) -> str:
    """The whole diagnosis of a cell or a world, as plain text."""
    return render_text(diagnose(subject))
