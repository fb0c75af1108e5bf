"""What differs between two reports: the simulator against a pod, or before against after a fix.

Cells are matched by (scenario, target), and seed when a report ran several. A cell in both
reports whose outcome or verdict differs is a difference; so is a cell only one report ran,
unless the other report is a pod that says it does not run that scenario
(``Matrix.pod["not_run"]``: a topology it does not have, a fault kind that cannot act
there), which is listed but never a failure. A cell the pod itself failed (outcome
``INFRA``: a host unreachable, a key refused) is neither: it is its own group, since it says
nothing about the target, and it makes the comparison incomplete. A reviewed expected-
differences file (``harness.reports.expected``) lists the differences that are known, each
with why; the rest make ``harness diff`` fail.

The two sides are named by the reports' modes ("sim", "pod"), or by their file names when
both have the same mode; notes say first when the reports differ in seed (faults then fire
elsewhere), harness version or catalog.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, replace
from typing import Any

from harness.reports._common import seeds_text
from harness.reports.expected import Expected, Listed
from harness.runner.cells import Cell, Matrix
from harness.vocabulary import INFRA, ExitCode, plural

AGREE, DIFFER, ONLY, POD_FAILED = "agree", "differ", "only", "infra"
#: The width the text output keeps to: a CI log.
WIDTH = 100
#: Lines of one side's detail shown; the report has the rest.
DETAIL_LINES = 12
_NAMES_SHOWN = 8
#: A wrapped line's prefix up to this wide is hung under (``sim: ``); a longer one is not.
_HANG = 12


@dataclass(frozen=True)
class Side:
    """One report and the name it goes by in the output."""

    label: str
    file: str
    matrix: Matrix

    @property
    def not_run(self) -> dict[str, str]:
        """A pod's scenarios it does not run, with why; {} for the simulator."""
        pod = self.matrix.pod if self.matrix.mode == "pod" else None
        return dict((pod or {}).get("not_run") or {})

    @property
    def catalog(self) -> set[str]:
        """The scenarios the run was asked for: those it ran and those a pod cannot run."""
        return set(self.matrix.scenarios) | set(self.not_run)

    @property
    def where(self) -> str:
        """``the pod`` for a side labelled so, else its label."""
        return "the pod" if self.label == "pod" else self.label

    def describe(self) -> str:
        """``pod (pod.json: nightly, v4-64, 8 workers)``."""
        parts = []
        pod = self.matrix.pod if self.matrix.mode == "pod" else None
        if pod:
            workers = pod.get("workers")
            count = len(workers) if isinstance(workers, (list, dict)) else \
                workers if isinstance(workers, int) and not isinstance(workers, bool) else None
            parts += [str(pod[k]) for k in ("name", "accelerator") if pod.get(k)]
            if count:
                parts.append(plural(count, "worker"))
        if self.label == self.file:
            return self.file + (f" ({', '.join(parts)})" if parts else "")
        return f"{self.label} ({self.file}" + (f": {', '.join(parts)}" if parts else "") + ")"


def sides(a: Matrix, b: Matrix, a_file: str, b_file: str) -> tuple[Side, Side]:
    """The two reports labelled by mode, or by file name when both have the same mode (two
    simulator runs before and after a fix; two nights of the pod)."""
    if a.mode != b.mode:
        return Side(a.mode, a_file, a), Side(b.mode, b_file, b)
    if a_file == b_file:
        return Side(f"A ({a_file})", a_file, a), Side(f"B ({b_file})", b_file, b)
    return Side(a_file, a_file, a), Side(b_file, b_file, b)


def check_pod(matrix: Matrix) -> str | None:
    """What is wrong with a report's pod description for a comparison, or None: ``not_run``
    must map scenario names to reasons."""
    if matrix.pod is None:
        return None
    if not isinstance(matrix.pod, dict):
        return f"'pod' is a JSON {type(matrix.pod).__name__}, not an object"
    not_run = matrix.pod.get("not_run", {})
    if not_run is None:
        return None
    if not isinstance(not_run, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in not_run.items()):
        return "'pod.not_run' must map each scenario name to the reason it does not run"
    return None


@dataclass(frozen=True)
class Row:
    """One cell of either report: which group it is in, and what the expected file says."""

    scenario: str
    target: str
    a: Cell | None
    b: Cell | None
    group: str
    #: ONLY: why the side without it (a pod) does not run this scenario; None: it should have
    not_run: str | None = None
    #: the expected-differences entry naming this cell, and whether its outcomes are these
    listed: Listed | None = None
    expected: bool = False

    #: the cell's seed when a report ran several (its name says it), else None
    seed: int | None = None

    @property
    def name(self) -> str:
        return f"{self.scenario}[{self.target}]" + (f" seed {self.seed}" if self.seed is not None
                                                     else "")

    @property
    def is_difference(self) -> bool:
        """A difference of the target: differing cells, and cells one side should have run."""
        return self.group == DIFFER or (self.group == ONLY and self.not_run is None)

    @property
    def unlisted(self) -> bool:
        """A difference nobody explained: what makes the diff fail."""
        return self.is_difference and not self.expected


@dataclass
class Comparison:
    """Two reports compared cell by cell, in the first report's order, then the second's."""

    a: Side
    b: Side
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    expected: Expected | None = None
    #: (line or None, cell, message) about entries of the expected file that list nothing
    warnings: list[tuple[int | None, str, str]] = field(default_factory=list)

    def group(self, name: str) -> list[Row]:
        return [r for r in self.rows if r.group == name]

    @property
    def unlisted(self) -> list[Row]:
        return [r for r in self.rows if r.unlisted]

    @property
    def has_pod(self) -> bool:
        return "pod" in (self.a.matrix.mode, self.b.matrix.mode)

    def exit_code(self, allow_infra: bool = False) -> ExitCode:
        """1 for a difference not listed as expected (a finding, whatever else happened);
        else 4 when the pod failed in some cell, unless that is allowed; else 0."""
        if self.unlisted:
            return ExitCode.FAILED
        if self.group(POD_FAILED) and not allow_infra:
            return ExitCode.POD_FAILED  # as ``harness pod run`` exits
        return ExitCode.OK


def _outcome(cell: Cell | None) -> str | None:
    return cell.outcome if cell is not None else None


def compare(a: Side, b: Side, expected: Expected | None = None,
            common: bool = False) -> Comparison:
    """Group every cell of the two reports and hold each difference against ``expected``;
    with ``common``, only the cells both reports ran (a subset run against a full one).

    An expected entry's ``sim``/``pod`` are the outcomes of the report with that mode (the
    first and second report when both have the same mode).
    """
    sim_first = a.matrix.mode == "sim" or a.matrix.mode == b.matrix.mode
    seeded = a.matrix.several_seeds or b.matrix.several_seeds

    def key(c: Cell) -> tuple[Any, ...]:
        return (*c.key, c.seed) if seeded else c.key

    in_b = {key(c): c for c in b.matrix.cells}
    in_a = {key(c): c for c in a.matrix.cells}
    pairs = [(c, in_b.get(key(c))) for c in a.matrix.cells]
    pairs += [(None, c) for c in b.matrix.cells if key(c) not in in_a]
    left_out = 0
    if common:
        left_out = sum(ca is None or cb is None for ca, cb in pairs)
        pairs = [(ca, cb) for ca, cb in pairs if ca is not None and cb is not None]
    rows: list[Row] = []
    for ca, cb in pairs:
        some = ca if ca is not None else cb
        assert some is not None
        not_run = None
        if INFRA in (_outcome(ca), _outcome(cb)):
            group = POD_FAILED
        elif ca is None or cb is None:
            group = ONLY
            without = a if ca is None else b
            not_run = without.not_run.get(some.scenario)
        elif (ca.outcome, ca.verdict) != (cb.outcome, cb.verdict):
            group = DIFFER
        else:
            group = AGREE
        listed = expected.get(some.scenario, some.target) if expected else None
        sim, pod = (ca, cb) if sim_first else (cb, ca)
        row = Row(some.scenario, some.target, ca, cb, group, not_run, listed,
                  seed=some.seed if seeded else None)
        if row.is_difference and listed is not None and listed.matches(_outcome(sim), _outcome(pod)):
            row = replace(row, expected=True)
        rows.append(row)
    comparison = Comparison(a, b, rows, notes(a, b), expected)
    if left_out:
        comparison.notes.append(f"--common: {_count(left_out, 'cell', 'cells')} only one "
                                "report ran left out")
    if expected is not None:
        comparison.warnings = _stale(comparison, expected)
    return comparison


def _stale(comparison: Comparison, expected: Expected) -> list[tuple[int | None, str, str]]:
    """Entries that list no difference: a cell in neither report, cells that agree now, a
    scenario the pod does not run. They do not fail the diff; they should be removed."""
    by_name = {r.name: r for r in comparison.rows}
    out = []
    for entry in expected.entries:
        row = by_name.get(entry.name)
        if row is None:
            out.append((entry.line, entry.name, "listed but not in either report"))
        elif row.group == AGREE:
            out.append((entry.line, entry.name,
                        "listed as expected but the cells agree now: remove it"))
        elif row.group == ONLY and row.not_run is not None:
            without = comparison.a if row.a is None else comparison.b
            out.append((entry.line, entry.name, f"listed as expected but not a difference: "
                        f"not run on {without.where} ({row.not_run}): remove it"))
    return out


def notes(a: Side, b: Side) -> list[str]:
    """What the reader must know before trusting a cell's difference: another seed, another
    harness version, another catalog, a run that stopped early."""
    out = []
    note = seed_note(a.matrix, b.matrix, a.label, b.label)
    if note:
        out.append(note)
    if a.matrix.harness_version != b.matrix.harness_version:
        out.append(f"the reports come from different harness versions ({a.label}: "
                   f"{a.matrix.harness_version}, {b.label}: {b.matrix.harness_version})")
    only_a, only_b = sorted(a.catalog - b.catalog), sorted(b.catalog - a.catalog)
    if only_a or only_b:
        which = [f"only {s.label}: {_names(names)}" for s, names in ((a, only_a), (b, only_b))
                 if names]
        out.append(f"the reports ran different scenarios ({'; '.join(which)})")
    for side in (a, b):
        m = side.matrix
        if m.interrupted:
            out.append(f"{side.label} was interrupted: it holds {len(m.cells)} of the "
                       f"{m.planned if m.planned is not None else '?'} cells it planned")
    return out


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else "")


def seed_note(a: Matrix, b: Matrix, a_label: str = "A", b_label: str = "B") -> str | None:
    """A warning line when the two reports ran with different seeds, else None."""
    if a.seed == b.seed and a.seeds == b.seeds:
        return None
    one, two = (seeds_text(a), seeds_text(b)) if a.several_seeds or b.several_seeds else \
        (a.seed, b.seed)
    return (f"the reports ran with different seeds ({a_label}: {one}, {b_label}: {two}): "
            "faults fire at other points, so a cell may change with the seed, not the code")


# -- the text a person reads in a CI log ------------------------------------------------------

def _wrap(text: str, first: str, indent: int) -> list[str]:
    """``text`` after ``first``, wrapped at ``WIDTH`` with later lines under its start."""
    hang = " " * (len(first) if len(first) <= _HANG else indent + 2)
    lines: list[str] = []
    for i, para in enumerate(text.splitlines() or [""]):
        lines += textwrap.wrap(para, WIDTH, initial_indent=first if i == 0 else hang,
                               subsequent_indent=hang, break_on_hyphens=False) or \
            [(first if i == 0 else hang).rstrip()]
    return lines


def _detail(label: str, cell: Cell, indent: int = 4) -> list[str]:
    lines = _wrap(cell.detail or "(no detail)", " " * indent + f"{label}: ", indent)
    if len(lines) > DETAIL_LINES:
        more = len(lines) - DETAIL_LINES + 1
        lines = lines[:DETAIL_LINES - 1] + [" " * (indent + 2) +
                                            f"... {more} more lines in the report"]
    return lines


def _verdicts(row: Row, a: Side, b: Side) -> str:
    assert row.a is not None and row.b is not None
    if row.a.verdict == row.b.verdict:
        return ""
    return f" (verdicts: {a.label} {row.a.verdict}, {b.label} {row.b.verdict})"


def _listing(row: Row, comparison: Comparison) -> list[str]:
    """What the expected file says about a difference: why it is expected, or that its
    entry lists other outcomes."""
    if comparison.expected is None:
        return []
    entry = row.listed
    if entry is None:
        return [f"    not listed in {comparison.expected.path}"]
    where = f"{comparison.expected.path}:{entry.line}" if entry.line else comparison.expected.path
    if row.expected:
        return _wrap(entry.reason, "    expected: ", 4)
    return _wrap(f"listed at {where} as {entry.listed_outcomes()}, which is not this "
                 "difference: check the entry", "    ", 4)


def _row_lines(row: Row, comparison: Comparison) -> list[str]:
    a, b = comparison.a, comparison.b
    if row.group == DIFFER:
        assert row.a is not None and row.b is not None
        lines = [f"  {row.name}: {a.label} {row.a.outcome}, {b.label} {row.b.outcome}"
                 + _verdicts(row, a, b)]
        lines += _detail(a.label, row.a) + _detail(b.label, row.b)
        return lines + _listing(row, comparison)
    if row.group == ONLY:
        has, without = (a, b) if row.a is not None else (b, a)
        cell = row.a if row.a is not None else row.b
        assert cell is not None
        lines = [f"  {row.name}: only in {has.label} ({cell.outcome}, {cell.verdict})"]
        if row.not_run is not None:
            return lines + _wrap(row.not_run, f"    not run on {without.where}: ", 4)
        return lines + _detail(has.label, cell) + _listing(row, comparison)
    # POD_FAILED: each side that failed, and what the other side's cell was
    lines = []
    for side, cell, other_side, other in ((a, row.a, b, row.b), (b, row.b, a, row.a)):
        if cell is None or cell.outcome != INFRA:
            continue
        lines += _wrap(cell.detail or "(no detail)",
                       f"  {row.name}: {side.where} failed here: ", 4)
        if other is not None and other.outcome != INFRA:
            lines.append(f"    {other_side.label}: {other.outcome} ({other.verdict})")
    return lines


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def summary_line(comparison: Comparison) -> str:
    """``24 cells agree, 1 differs (listed as expected), 2 only in sim (not run on the pod),
    0 pod failures``."""
    parts = [_count(len(comparison.group(AGREE)), "cell agrees", "cells agree")]
    differ = comparison.group(DIFFER)
    text = _count(len(differ), "differs", "differ")
    if differ and comparison.expected is not None:
        text += f" ({_share(sum(r.expected for r in differ), len(differ), 'listed as expected')})"
    parts.append(text)
    only = comparison.group(ONLY)
    for side, present in ((comparison.a, lambda r: r.a is not None),
                          (comparison.b, lambda r: r.b is not None)):
        mine = [r for r in only if present(r)]
        if not mine:
            continue
        other = comparison.b if side is comparison.a else comparison.a
        why = []
        not_run = sum(r.not_run is not None for r in mine)
        if not_run:
            why.append(_share(not_run, len(mine), f"not run on {other.where}"))
        listed = sum(r.expected for r in mine)
        if listed:
            why.append(_share(listed, len(mine), "listed as expected"))
        parts.append(f"{len(mine)} only in {side.label}" + (f" ({', '.join(why)})" if why else ""))
    failed = len(comparison.group(POD_FAILED))
    if comparison.has_pod or failed:
        parts.append(_count(failed, "pod failure", "pod failures"))
    return ", ".join(parts)


def _share(n: int, of: int, what: str) -> str:
    return what if n == of else f"{n} {what}"


def render_text(comparison: Comparison, allow_infra: bool = False) -> str:
    """The comparison as a CI log shows it: which reports, notes, each group, warnings about
    the expected file, the summary, and why the diff fails if it does."""
    c = comparison
    lines = [f"comparing {c.a.describe()} with {c.b.describe()}"]
    lines += [line for note in c.notes for line in _wrap(note, "note: ", 0)]
    groups = ((DIFFER, "cells that differ"), (ONLY, "cells only one side ran"),
              (POD_FAILED, "cells the pod failed", "not the target's outcome, not compared"))
    for group, title, *why in groups:
        rows = c.group(group)
        if rows:
            lines += ["", f"{title} ({len(rows)})" + "".join(f", {w}" for w in why) + ":"]
            for row in rows:
                lines += _row_lines(row, c)
    if c.warnings:
        lines += ["", f"warnings about {c.expected.path if c.expected else 'the expected file'} "
                  f"({len(c.warnings)}):"]
        path = c.expected.path if c.expected else ""
        for line, name, message in c.warnings:
            where = f"{path}:{line}" if line else path
            lines += _wrap(f"{name}: {message}", f"  warning: {where}: ", 2)
    lines += [""] + textwrap.wrap(summary_line(c), WIDTH, break_on_hyphens=False)
    unlisted = c.unlisted
    if unlisted:
        where = f" in {c.expected.path}" if c.expected else " (--expected FILE lists reviewed ones)"
        lines.append(f"FAILED: {_count(len(unlisted), 'difference is', 'differences are')} "
                     f"not listed as expected{where}")
    failed = c.group(POD_FAILED)
    if failed:
        verdict = "accepted (--allow-infra)" if allow_infra else \
            "FAILED (--allow-infra accepts this)"
        lines.append(f"{verdict}: the pod failed in {_count(len(failed), 'cell', 'cells')}, "
                     "so the comparison is incomplete")
    return "".join(line + "\n" for line in lines)


# -- the JSON a nightly job uploads ------------------------------------------------------------

#: The schema of ``harness diff --format json``.
DIFF_SCHEMA = "harness.diff/1"


def _cell_json(cell: Cell | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {"outcome": cell.outcome, "verdict": cell.verdict, "detail": cell.detail,
            "replay": cell.replay}


def _row_json(row: Row) -> dict[str, Any]:
    out: dict[str, Any] = {"cell": row.name, "scenario": row.scenario, "target": row.target,
                           "a": _cell_json(row.a), "b": _cell_json(row.b)}
    if row.group == ONLY:
        out["not_run"] = row.not_run
    if row.group in (DIFFER, ONLY):
        out["difference"] = row.is_difference
        out["expected"] = row.expected
        if row.listed is not None:
            out["listed"] = {"line": row.listed.line, "sim": row.listed.sim,
                             "pod": row.listed.pod, "reason": row.listed.reason}
    return out


def to_json_dict(comparison: Comparison, allow_infra: bool = False) -> dict[str, Any]:
    """The groups as one JSON object: each side's report, the notes, the cells of each group
    with both sides' cells (``a``/``b``, labelled in ``reports``), warnings, a summary."""
    c = comparison

    def report(side: Side) -> dict[str, Any]:
        m = side.matrix
        return {"label": side.label, "file": side.file, "mode": m.mode, "seed": m.seed,
                "harness_version": m.harness_version, "created": m.created, "pod": m.pod,
                "cells": len(m.cells), "interrupted": m.interrupted}

    only = c.group(ONLY)
    return {
        "schema": DIFF_SCHEMA,
        "reports": {"a": report(c.a), "b": report(c.b)},
        "notes": list(c.notes),
        "expected_file": c.expected.path if c.expected else None,
        "differ": [_row_json(r) for r in c.group(DIFFER)],
        "only": [_row_json(r) for r in only],
        "pod_failed": [_row_json(r) for r in c.group(POD_FAILED)],
        "agree": [r.name for r in c.group(AGREE)],
        "warnings": [{"line": line, "cell": name, "message": message}
                     for line, name, message in c.warnings],
        "summary": {
            "agree": len(c.group(AGREE)), "differ": len(c.group(DIFFER)),
            "only_a": sum(r.a is not None for r in only),
            "only_b": sum(r.b is not None for r in only),
            "not_run": sum(r.not_run is not None for r in only),
            "pod_failed": len(c.group(POD_FAILED)),
            "listed_as_expected": sum(r.is_difference and r.expected for r in c.rows),
            "unlisted": len(c.unlisted),
            "text": summary_line(c),
        },
        "exit_code": c.exit_code(allow_infra),
    }
