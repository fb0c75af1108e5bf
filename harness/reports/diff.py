"""What changed between two reports: simulator versus pod, before versus after a fix.

Cells are matched by (scenario, target); a cell is a change if its outcome or
its verdict differs, or if it is in one report only.
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


def render_diff(changes: list[Change], a_label: str = "A", b_label: str = "B") -> str:
    """One line per change; a single line saying so when nothing changed."""
    if not changes:
        return "no cell changed its outcome or verdict\n"
    return "".join(c.describe(a_label, b_label) + "\n" for c in changes)
