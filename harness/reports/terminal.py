"""The terminal report: the grid first, then what to do about each failing cell.

Everything is built from ``rich.text.Text`` so that a ``[target]`` in a cell
name or a bracket in an error message is never read as rich markup.
"""

from __future__ import annotations

import textwrap

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.reports._common import attention_cells, marker, seconds, summary_parts
from harness.reports.diagnosis import diagnose
from harness.runner.cells import KNOWN, OK, UNEXERCISED, UNEXPECTED, Cell, Matrix

VERDICT_STYLES = {OK: "green", KNOWN: "yellow dim", UNEXPECTED: "bold red", UNEXERCISED: "bold yellow"}


def verdict_style(verdict: str) -> str:
    return VERDICT_STYLES.get(verdict, "magenta")


def cell_text(cell: Cell | None) -> Text:
    """``ERROR ~``: the outcome and the verdict's marker, coloured by the verdict."""
    if cell is None:
        return Text("·", style="dim")
    return Text(f"{cell.outcome} {marker(cell.verdict)}", style=verdict_style(cell.verdict))


def grid(matrix: Matrix, scenarios: list[str] | None = None,
         targets: list[str] | None = None) -> Table:
    """Rows are scenarios, columns are targets; a missing combination is a dim dot."""
    scenarios = scenarios or matrix.scenarios
    targets = targets or matrix.targets
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, header_style="bold")
    table.add_column("scenario", no_wrap=True)
    for target in targets:
        table.add_column(target, justify="left", no_wrap=True, overflow="ellipsis")
    for scenario in scenarios:
        table.add_row(Text(scenario), *(cell_text(matrix.cell(scenario, t)) for t in targets))
    return table


def grids(matrix: Matrix) -> list[Table]:
    """One grid per workload: its scenarios against the targets that ran them, so a
    catalog of several workloads is not a sparse grid of dots."""
    workloads: dict[str, tuple[list[str], list[str]]] = {}
    for cell in matrix.cells:
        scenarios, targets = workloads.setdefault(cell.workload or "", ([], []))
        if cell.scenario not in scenarios:
            scenarios.append(cell.scenario)
        if cell.target not in targets:
            targets.append(cell.target)
    if len(workloads) <= 1:
        return [grid(matrix)]
    return [grid(matrix, scenarios, targets) for scenarios, targets in workloads.values()]


def legend() -> Text:
    text = Text("  ")
    for verdict, words in ((OK, "meets its expectation"), (KNOWN, "known failure"),
                           (UNEXPECTED, "unexpected"), (UNEXERCISED, "fault could not happen")):
        text.append(marker(verdict), style=verdict_style(verdict))
        text.append(f" {words}   ", style="dim")
    return text.rstrip() or text


def print_attention(cell: Cell, console: Console) -> None:
    """One failing cell: its name and state, the one-line detail, the replay command.

    Lines are wrapped here, with a hanging indent, rather than by rich; the
    replay command is never wrapped so that it stays one line to copy.
    """
    d = diagnose(cell)
    width = max(console.width, 40)
    head = Text()
    head.append(f"{marker(d.verdict)} {d.outcome:<5} ", style=verdict_style(d.verdict))
    head.append(d.title, style="bold")
    meta = f"{d.verdict} · expected {d.expected} · {seconds(d.duration_s)}"
    if len(head) + 2 + len(meta) <= width:
        head.append(f"  {meta}", style="dim")
        console.print(head, soft_wrap=True)
    else:
        console.print(head, soft_wrap=True)
        console.print(Text(" " * 8 + meta, style="dim"), soft_wrap=True)
    detail = textwrap.fill(d.detail or "(no detail recorded)", width=width,
                           initial_indent=" " * 4, subsequent_indent=" " * 6)
    console.print(Text(detail), soft_wrap=True)
    replay = Text("    replay: ", style="dim")
    replay.append(d.replay or "(none)", style="cyan")
    console.print(replay, soft_wrap=True)


def summary_lines(matrix: Matrix) -> list[Text]:
    """The counts of outcomes, then of verdicts with the bottom line; each fits 80 columns."""
    outcomes, verdicts = summary_parts(matrix)
    first = Text()
    first.append(f"{len(matrix.cells)} cells", style="bold")
    first.append(f" in {seconds(matrix.duration_s)} (seed {matrix.seed})")
    if outcomes:
        first.append(": " + ", ".join(f"{n} {o}" for o, n in outcomes))
    second = Text()
    for i, (v, n) in enumerate(verdicts):
        if i:
            second.append(", ")
        second.append(f"{n} {v}", style=verdict_style(v))
    unexpected = len(matrix.unexpected)
    if matrix.interrupted:
        second.append(f" · interrupted: {len(matrix.cells)} of {matrix.planned} cells ran",
                      style="bold red")
    elif unexpected:
        second.append(" · the run fails", style="bold red")
    elif matrix.unexercised:
        second.append(f" · no unexpected cell; {len(matrix.unexercised)} tested nothing "
                      "(--require-exercised fails them)", style="bold yellow")
    else:
        second.append(" · no unexpected cell: the run passes", style="bold green")
    return [first, second]


def render_matrix(matrix: Matrix, console: Console) -> None:
    """Print the matrix to ``console``: grid, legend, failing cells, summary."""
    if not matrix.cells:
        why = (f"interrupted: 0 of {matrix.planned} cells ran" if matrix.interrupted
               else "the matrix is empty: no cell was run")
        console.print(Text(why, style="bold red" if matrix.interrupted else "yellow"))
        return
    for i, table in enumerate(grids(matrix)):
        if i:
            console.print()
        console.print(table)
    console.print(legend())
    cells = attention_cells(matrix)
    if cells:
        console.print()
        for i, cell in enumerate(cells):
            if i:
                console.print()
            print_attention(cell, console)
    console.print()
    for line in summary_lines(matrix):
        console.print(line)
