"""What every renderer shares: markers, ordering and the grouping of ranks.

Presentation only: nothing here judges a run. Grouping ranks that ended the
same way keeps a 256-rank cell as readable as an 8-rank one.
"""

from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass
from typing import Any

from harness.history import format_ranks
from harness.runner.cells import KNOWN, OK, UNEXPECTED, Cell, Matrix, RankRow

PASS = "PASS"
OUTCOMES = ("PASS", "FAIL", "ERROR", "HANG", "CRASH")

#: One character per verdict, the same in every text report.
MARKERS = {OK: "✓", KNOWN: "~", UNEXPECTED: "✗"}
VERDICT_WORDS = {OK: "meets its expectation", KNOWN: "known failure", UNEXPECTED: "unexpected"}
_VERDICT_ORDER = {UNEXPECTED: 0, KNOWN: 1, OK: 2}


def marker(verdict: str) -> str:
    """The verdict's marker; ``?`` for a verdict this version does not know."""
    return MARKERS.get(verdict, "?")


def cell_name(cell: Cell) -> str:
    """``scenario[target]``: the name a cell has in every report and in pytest ids."""
    return f"{cell.scenario}[{cell.target}]"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"


def anchor(cell: Cell) -> str:
    """A link target for the cell, the same in the Markdown and the HTML report."""
    return f"cell-{_slug(cell.scenario)}--{_slug(cell.target)}"


def needs_attention(cell: Cell) -> bool:
    """A cell a reader must look at: it did not pass, or its verdict is not ``ok``."""
    return cell.outcome != PASS or cell.verdict != OK


def attention_cells(matrix: Matrix) -> list[Cell]:
    """Cells that need a look, unexpected first, then known, then the rest, in matrix order."""
    cells = [c for c in matrix.cells if needs_attention(c)]
    return sorted(cells, key=lambda c: _VERDICT_ORDER.get(c.verdict, -1))


def signal_name(signum: int | None) -> str | None:
    if signum is None:
        return None
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_text(row: RankRow) -> str:
    """How a rank ended, in words: ``exit 1``, ``SIGKILL``, ``running`` (a hung rank)."""
    if row.signal is not None:
        text = signal_name(row.signal) or ""
    elif row.exit_code is not None:
        text = f"exit {row.exit_code}"
    else:
        text = "running" if row.outcome == "HANG" else "-"
    if row.killed_by_fault:
        text += " (killed by the fault plan)"
    return text


def result_text(row: RankRow) -> str:
    """The rank's error, or what it returned, or nothing."""
    if row.error:
        return row.error
    if row.value is not None:
        return f"returned {row.value}"
    return ""


@dataclass
class RankGroup:
    """Ranks that ended the same way (same outcome, exit and error or value)."""

    ranks: list[int]
    hosts: list[int]
    outcome: str
    exit: str
    result: str

    @property
    def rank_text(self) -> str:
        return format_ranks(self.ranks)

    @property
    def host_text(self) -> str:
        return format_ranks(self.hosts)

    @property
    def label(self) -> str:
        return ("rank " if len(self.ranks) == 1 else "ranks ") + self.rank_text


def rank_groups(cell: Cell) -> list[RankGroup]:
    """Group the cell's ranks by how they ended, in order of their lowest rank."""
    groups: dict[tuple[str, str, str], RankGroup] = {}
    for row in sorted(cell.ranks, key=lambda r: r.rank):
        key = (row.outcome, exit_text(row), result_text(row))
        group = groups.get(key)
        if group is None:
            groups[key] = RankGroup([row.rank], [row.host], *key)
        else:
            group.ranks.append(row.rank)
            if row.host not in group.hosts:
                group.hosts.append(row.host)
    return list(groups.values())


def text_groups(cell: Cell, attr: str) -> list[tuple[list[int], str]]:
    """Distinct non-empty values of a rank text field (traceback, stack, stdout...) and their ranks."""
    seen: dict[str, list[int]] = {}
    for row in sorted(cell.ranks, key=lambda r: r.rank):
        text = getattr(row, attr) or ""
        if text.strip():
            seen.setdefault(text, []).append(row.rank)
    return [(ranks, text) for text, ranks in seen.items()]


def ranks_label(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + format_ranks(ranks)


def sorted_history(cell: Cell) -> list[dict[str, Any]]:
    """The history in time order (stable, so events at the same instant keep their order)."""
    def t_of(event: dict[str, Any]) -> float:
        t = event.get("t")
        return float(t) if isinstance(t, (int, float)) else 0.0
    return sorted(cell.history, key=t_of)


def event_message(event: dict[str, Any]) -> str:
    """The event's message, then any other detail as ``key=value``."""
    detail = event.get("detail") or {}
    if not isinstance(detail, dict):
        return str(detail)
    parts = [str(detail["message"])] if detail.get("message") else []
    parts += [f"{k}={v}" for k, v in sorted(detail.items()) if k != "message"]
    return " · ".join(parts)


def ms(t: Any) -> str:
    """Seconds since the world started, as milliseconds a person reads."""
    if not isinstance(t, (int, float)):
        return ""
    return f"{t * 1000:.1f}"


def seconds(s: float) -> str:
    return f"{s:.2f} s" if s < 100 else f"{s:.0f} s"


def summary_parts(matrix: Matrix) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(outcome, count) and (verdict, count) pairs, in the design's order, zero counts dropped."""
    summary = matrix.summary()
    outcomes = summary["outcomes"]
    known_order = [o for o in OUTCOMES if o in outcomes] + sorted(o for o in outcomes if o not in OUTCOMES)
    verdicts = summary["verdicts"]
    return ([(o, outcomes[o]) for o in known_order],
            [(v, verdicts[v]) for v in (OK, KNOWN, UNEXPECTED) if verdicts.get(v)])
