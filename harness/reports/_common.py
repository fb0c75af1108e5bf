"""What every renderer shares: markers, anchors, the order of cells and of events.

Presentation only: nothing here judges a run. A cell's diagnosis (its ranks,
faults, traces) is in ``diagnosis.py``.
"""

from __future__ import annotations

import re
from typing import Any

from harness.history import ranks_phrase
from harness.runner.cells import Cell, Matrix
from harness.vocabulary import (
    EXPECTABLE_OUTCOMES,
    KNOWN,
    OK,
    PASS,
    UNEXERCISED,
    UNEXPECTED,
    VERDICT_ORDER,
    plural,  # noqa: F401 - the reports' one word for counts
)

OUTCOMES = EXPECTABLE_OUTCOMES

#: One character per verdict, the same in every text report.
MARKERS = {OK: "✓", KNOWN: "~", UNEXPECTED: "✗", UNEXERCISED: "○"}


def marker(verdict: str) -> str:
    """The verdict's marker; ``?`` for a verdict this version does not know."""
    return MARKERS.get(verdict, "?")


def cell_name(cell: Cell, seeded: bool = False) -> str:
    """``scenario[target]``: the name a cell has in every report and in pytest ids; in a
    matrix of several seeds (``seeded``), ``scenario[target] seed 7``."""
    return f"{cell.scenario}[{cell.target}]" + (f" seed {cell.seed}" if seeded else "")


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"


def anchor(cell: Cell, seeded: bool = False) -> str:
    """A link target for the cell, the same in the Markdown and the HTML report."""
    return f"cell-{_slug(cell.scenario)}--{_slug(cell.target)}" + \
        (f"--seed-{cell.seed}" if seeded else "")


def seeds_text(matrix: Matrix) -> str:
    """``seed 0``, or a campaign's ``seeds 0-24`` (runs of consecutive seeds joined)."""
    seeds = matrix.seeds
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    runs: list[list[int]] = []
    for s in seeds:
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return "seeds " + ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def seed_group(matrix: Matrix, scenario: str, target: str) -> tuple[Cell | None, str]:
    """What a grid shows for (scenario, target): its cell, or over several seeds the most
    urgent one and how many seeds ended that way (``3/25``; "" when every seed agrees)."""
    cells = matrix.cells_of(scenario, target)
    if not cells:
        return None, ""
    worst = min(cells, key=lambda c: (VERDICT_ORDER.get(c.verdict, -1), c.outcome == PASS))
    same = sum((c.outcome, c.verdict) == (worst.outcome, worst.verdict) for c in cells)
    return worst, "" if same == len(cells) else f"{same}/{len(cells)}"


def workload_grids(matrix: Matrix) -> list[tuple[str, list[str], list[str]]]:
    """``(workload, scenarios, targets)`` per workload, in the order the cells came: every
    face draws one grid each, so a catalog of several workloads is not one sparse grid of
    dots. One group (named "" when the cells say no workload) when there is one workload."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for cell in matrix.cells:
        scenarios, targets = groups.setdefault(cell.workload or "", ([], []))
        if cell.scenario not in scenarios:
            scenarios.append(cell.scenario)
        if cell.target not in targets:
            targets.append(cell.target)
    if len(groups) <= 1:
        return [(next(iter(groups), ""), matrix.scenarios, matrix.targets)]
    return [(w, sorted(ss, key=matrix.scenarios.index), sorted(ts, key=matrix.targets.index))
            for w, (ss, ts) in groups.items()]


#: A pod worker's versions a heading names, in this order (``pod.stacks``' keys).
_STACK_NAMES = (("python", "Python"), ("torch", "torch"), ("torch_xla", "torch_xla"))


def setting_text(matrix: Matrix) -> str:
    """What every report's heading adds about where the cells ran: ``, kernel isolation``
    in the simulator; on a pod, each worker's Python and torch (``, Python 3.10.13, torch
    2.9.0 on workers 0-1``), since a pod's workers are machines of their own. "" when no
    cell or worker says."""
    if matrix.mode != "pod":
        return f", {matrix.isolation} isolation" if matrix.isolation else ""
    stacks = (matrix.pod or {}).get("stacks") or {}
    groups: dict[str, list[int]] = {}
    for worker, versions in stacks.items():
        said = ", ".join(f"{name} {versions[key]}" for key, name in _STACK_NAMES
                         if isinstance(versions, dict) and versions.get(key))
        if said and str(worker).isdigit():
            groups.setdefault(said, []).append(int(worker))
    return "".join(f", {said} on {ranks_phrase(workers, 'worker')}"
                   for said, workers in groups.items())


def needs_attention(cell: Cell) -> bool:
    """A cell a reader must look at: it did not pass, or its verdict is not ``ok``."""
    return cell.outcome != PASS or cell.verdict != OK


def attention_cells(matrix: Matrix) -> list[Cell]:
    """Cells that need a look, unexpected first, then known, then the rest, in matrix order."""
    cells = [c for c in matrix.cells if needs_attention(c)]
    return sorted(cells, key=lambda c: VERDICT_ORDER.get(c.verdict, -1))


def sorted_history(cell: Cell) -> list[dict[str, Any]]:
    """The history in time order (stable, so events at the same instant keep their order)."""
    def t_of(event: dict[str, Any]) -> float:
        t = event.get("t")
        return float(t) if isinstance(t, (int, float)) else 0.0
    return sorted(cell.history, key=t_of)


#: How many of a snapshot's files a history row names (the JSON report has them all).
SNAPSHOT_FILES = 1


def event_message(event: dict[str, Any]) -> str:
    """The event's message, then any other detail as ``key=value`` that the message does not
    already say (a snapshot's files by name and size, the first few: their contents are in
    the JSON report)."""
    detail = event.get("detail") or {}
    if not isinstance(detail, dict):
        return str(detail)
    message = str(detail.get("message") or "")
    parts = [message] if message else []
    for key, value in sorted(detail.items()):
        if key == "message":
            continue
        if key == "files" and isinstance(value, dict):  # a snapshot: what, not the contents
            shown = [f"{path} ({len(str(content))} chars)"
                     for path, content in list(value.items())[:SNAPSHOT_FILES]]
            more = len(value) - len(shown)
            value = ", ".join(shown) + (f" and {more} more" if more > 0 else "") or "none"
        elif len(str(value)) >= 3 and str(value) in message:
            continue  # `op=write`, `path=/tmp/x` after "killed at write /tmp/x"
        parts.append(f"{key}={value}")
    return " · ".join(parts)


def ms(t: Any) -> str:
    """Seconds since the world started, as milliseconds a person reads."""
    if not isinstance(t, (int, float)):
        return ""
    return f"{t * 1000:.1f}"


def seconds(s: float) -> str:
    return f"{s:.2f} s" if s < 100 else f"{s:.0f} s"


def took(wall: float, world: float | None) -> str:
    """How long a world took: wall seconds on this machine, and the seconds its own clock
    counted (``harness.world.clock``), which do not move with the machine's load."""
    if world is None:
        return seconds(wall)
    return f"{seconds(wall)} ({world:g} s of world time)"


def summary_parts(matrix: Matrix) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(outcome, count) and (verdict, count) pairs, in the design's order, zero counts dropped."""
    summary = matrix.summary()
    outcomes = summary["outcomes"]
    known_order = [o for o in OUTCOMES if o in outcomes] + sorted(o for o in outcomes if o not in OUTCOMES)
    verdicts = summary["verdicts"]
    return ([(o, outcomes[o]) for o in known_order],
            [(v, verdicts[v]) for v in (OK, KNOWN, UNEXPECTED, UNEXERCISED) if verdicts.get(v)])
