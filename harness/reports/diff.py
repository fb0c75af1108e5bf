"""What changed between two reports: simulator versus pod, before versus after a fix.

Cells are matched by (scenario, target); a cell is a change if its outcome or
its verdict differs, or if it is in one report only. Each change shows both
cells' details, since the outcomes alone do not say what went wrong; and two
reports run with different seeds are said to be so, since the seed decides
where faults fire and a cell can change with the seed and not the code.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.runner.cells import Cell, Matrix

CHANGED, ADDED, REMOVED = "changed", "added", "removed"


@dataclass(frozen=True)
class Change:
    """One cell that differs; ``before``/``after`` are None for a cell in one report only."""

    scenario: str
    target: str
    before: Cell | None
    after: Cell | None

    @property
    def name(self) -> str:
        return f"{self.scenario}[{self.target}]"

    @property
    def kind(self) -> str:
        if self.before is None:
            return ADDED
        if self.after is None:
            return REMOVED
        return CHANGED

    def describe(self, a_label: str = "A", b_label: str = "B") -> str:
        """``isolated-tmp[naive-sync]: ERROR -> PASS``, with the verdicts when they changed."""
        if self.before is None:
            assert self.after is not None
            return f"{self.name}: only in {b_label} ({self.after.outcome}, {self.after.verdict})"
        if self.after is None:
            return f"{self.name}: only in {a_label} ({self.before.outcome}, {self.before.verdict})"
        line = f"{self.name}: {self.before.outcome} -> {self.after.outcome}"
        if self.before.verdict != self.after.verdict:
            line += f" ({self.before.verdict} -> {self.after.verdict})"
        return line

    def details(self, a_label: str = "A", b_label: str = "B") -> list[str]:
        """Each side's detail, labelled by its report: what went wrong before and after."""
        return [f"{label}: {cell.detail or '(no detail)'}"
                for label, cell in ((a_label, self.before), (b_label, self.after))
                if cell is not None]


def diff(a: Matrix, b: Matrix) -> list[Change]:
    """Cells whose outcome or verdict changed from ``a`` to ``b``, then cells in one report only."""
    after = {c.key: c for c in b.cells}
    before = {c.key: c for c in a.cells}
    changes = []
    for cell in a.cells:
        other = after.get(cell.key)
        if other is None:
            changes.append(Change(cell.scenario, cell.target, cell, None))
        elif (cell.outcome, cell.verdict) != (other.outcome, other.verdict):
            changes.append(Change(cell.scenario, cell.target, cell, other))
    changes += [Change(c.scenario, c.target, None, c) for c in b.cells if c.key not in before]
    return changes


def seed_note(a: Matrix, b: Matrix, a_label: str = "A", b_label: str = "B") -> str | None:
    """A warning line when the two reports ran with different seeds, else None."""
    if a.seed == b.seed:
        return None
    return (f"the reports ran with different seeds ({a_label}: {a.seed}, {b_label}: {b.seed}): "
            "faults fire at other points, so a cell may change with the seed, not the code")


def render_diff(changes: list[Change], a_label: str = "A", b_label: str = "B",
                note: str | None = None) -> str:
    """The ``note`` (see ``seed_note``) first; then per change a line and each side's detail
    indented under it; a single line saying so when nothing changed."""
    lines = [note] if note else []
    if not changes:
        lines.append("no cell changed its outcome or verdict")
    for change in changes:
        lines.append(change.describe(a_label, b_label))
        lines += [f"    {d}" for d in change.details(a_label, b_label)]
    return "".join(line + "\n" for line in lines)
