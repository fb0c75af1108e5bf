"""The terminal report: what to do about each failing cell, then the grid and the summary.

The grid and the summary come last so that they are what is on screen when a run
ends; the failing cells above them are one short block each (``verbose`` gives
each its full detail and how each group of ranks ended).

Everything is built from ``rich.text.Text`` so that a ``[target]`` in a cell
name or a bracket in an error message is never read as rich markup.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.reports._common import (
    attention_cells,
    marker,
    plural,
    seconds,
    seed_group,
    seeds_text,
    setting_text,
    summary_parts,
    took,
    workload_grids,
)
from harness.reports.diagnosis import diagnose, group_line, races_of
from harness.runner.cells import Cell, Matrix
from harness.vocabulary import KNOWN, OK, UNEXERCISED, UNEXPECTED
from harness.world.fates import one_line

VERDICT_STYLES = {OK: "green", KNOWN: "yellow dim", UNEXPECTED: "bold red", UNEXERCISED: "bold yellow"}


def verdict_style(verdict: str) -> str:
    return VERDICT_STYLES.get(verdict, "magenta")


def cell_text(cell: Cell | None, count: str = "") -> Text:
    """``ERROR ~``: the outcome and the verdict's marker, coloured by the verdict; over
    several seeds, how many ended so when they did not all agree (``ERROR ~ 3/25``)."""
    if cell is None:
        return Text("·", style="dim")
    return Text(f"{cell.outcome} {marker(cell.verdict)}" + (f" {count}" if count else ""),
                style=verdict_style(cell.verdict))


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
        table.add_row(Text(scenario), *(cell_text(*seed_group(matrix, scenario, t))
                                        for t in targets))
    return table


def grids(matrix: Matrix) -> list[Table]:
    """One grid per workload (``workload_grids``)."""
    return [grid(matrix, scenarios, targets) for _, scenarios, targets in workload_grids(matrix)]


def legend() -> Text:
    text = Text("  ")
    for verdict, words in ((OK, "meets its expectation"), (KNOWN, "known failure"),
                           (UNEXPECTED, "unexpected"), (UNEXERCISED, "fault could not happen")):
        text.append(marker(verdict), style=verdict_style(verdict))
        text.append(f" {words}   ", style="dim")
    return text.rstrip() or text


def cut(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters, cut with an ellipsis."""
    return one_line(text, limit=max(width, 8))


def print_attention(cell: Cell, console: Console, verbose: bool = False,
                    seeded: bool = False) -> None:
    """One failing cell: its state and name, the detail, the replay command.

    Compact (the default): the detail is cut to one line, so a catalog's worth of
    failing cells does not push the grid off the screen. Verbose: the whole detail
    and one line per group of ranks, wrapped with a hanging indent. The replay
    command is never wrapped so that it stays one line to copy.
    """
    d = diagnose(cell, seeded)
    width = max(console.width, 40)
    head = Text()
    head.append(f"{marker(d.verdict)} {d.outcome:<5} ", style=verdict_style(d.verdict))
    head.append(d.title, style="bold")
    meta = f"{d.verdict} · expected {d.expected} · {took(d.duration_s, d.world_time_s)}"
    if len(head) + 2 + len(meta) <= width:
        head.append(f"  {meta}", style="dim")
        console.print(head, soft_wrap=True)
    else:
        console.print(head, soft_wrap=True)
        console.print(Text(" " * 8 + meta, style="dim"), soft_wrap=True)
    detail = d.detail or "(no detail recorded)"
    if verbose:
        lines = [textwrap.fill(detail, width=width, initial_indent=" " * 4,
                               subsequent_indent=" " * 6)]
        lines += [textwrap.fill(group_line(g), width=width, initial_indent=" " * 4,
                                subsequent_indent=" " * 6) for g in d.groups]
    else:
        lines = ["    " + cut(detail, width - 4)]
    for line in lines:
        console.print(Text(line), soft_wrap=True)
    print_races(d.races, console, verbose)
    replay = Text("    replay: ", style="dim")
    replay.append(d.replay or "(none)", style="cyan")
    console.print(replay, soft_wrap=True)


def print_races(races: list[str], console: Console, verbose: bool = False) -> None:
    """A cell's races (``world/races.py``): the first on one line, all when verbose."""
    width = max(console.width, 40)
    shown = races if verbose else races[:1]
    for race in shown:
        line = Text("    ")
        line.append(cut(race, width - 4) if not verbose else race, style="yellow")
        console.print(line, soft_wrap=verbose)
    if len(races) > len(shown):
        console.print(Text(f"    (and {plural(len(races) - 1, 'race')} more: -v, matrix.txt)",
                           style="dim"))


def print_raced(cells: list[Cell], console: Console, verbose: bool, seeded: bool) -> None:
    """Cells that meet their expectation with a race in them: at another seed's order the
    outcome may differ (``harness explore`` varies it)."""
    for cell in cells:
        d = diagnose(cell, seeded)
        head = Text(f"{marker(d.verdict)} {d.outcome:<5} ", style=verdict_style(d.verdict))
        head.append(d.title, style="bold")
        head.append("  passes at this seed's order of ranks; with a race:", style="dim")
        console.print(head, soft_wrap=True)
        print_races(d.races, console, verbose)


def summary_lines(matrix: Matrix) -> list[Text]:
    """The counts of outcomes, then of verdicts with the bottom line; each fits 80 columns."""
    outcomes, verdicts = summary_parts(matrix)
    first = Text()
    first.append(plural(len(matrix.cells), "cell"), style="bold")
    first.append(f" in {seconds(matrix.duration_s)} ({seeds_text(matrix)}{setting_text(matrix)})")
    if outcomes:
        first.append(": " + ", ".join(f"{n} {o}" for o, n in outcomes))
    second = Text()
    for i, (v, n) in enumerate(verdicts):
        if i:
            second.append(", ")
        second.append(f"{n} {v}", style=verdict_style(v))
    unexpected = len(matrix.unexpected)
    if matrix.interrupted:
        second.append(f" · interrupted: {len(matrix.cells)} of {plural(matrix.planned, 'cell')} ran",
                      style="bold red")
    elif unexpected:
        second.append(" · the run fails", style="bold red")
    elif matrix.unexercised:
        second.append(f" · no unexpected cell; {len(matrix.unexercised)} tested nothing "
                      "(--require-exercised fails them)", style="bold yellow")
    else:
        second.append(" · no unexpected cell: the run passes", style="bold green")
    return [first, second]


def reading_order(cells: Iterable[Cell]) -> list[Cell]:
    """Failing cells with the most urgent last, right above the grid: known failures,
    then cells that tested nothing, then the unexpected ones."""
    urgency = {KNOWN: 0, UNEXERCISED: 1, UNEXPECTED: 2}
    return sorted(cells, key=lambda c: urgency.get(c.verdict, 3))  # stable: matrix order


def render_matrix(matrix: Matrix, console: Console, verbose: bool = False) -> None:
    """Print the matrix to ``console``: failing cells, then grid, legend and summary."""
    if not matrix.cells:
        why = (f"interrupted: 0 of {plural(matrix.planned, 'cell')} ran" if matrix.interrupted
               else "the matrix is empty: no cell was run")
        console.print(Text(why, style="bold red" if matrix.interrupted else "yellow"))
        return
    cells = reading_order(attention_cells(matrix))
    for i, cell in enumerate(cells):
        if i and verbose:
            console.print()
        print_attention(cell, console, verbose, matrix.several_seeds)
    raced = [c for c in matrix.cells if c not in cells and races_of(c.history)]
    print_raced(raced, console, verbose, matrix.several_seeds)
    if cells or raced:
        console.print()
    for i, table in enumerate(grids(matrix)):
        if i:
            console.print()
        console.print(table)
    console.print(legend())
    console.print()
    for line in summary_lines(matrix):
        console.print(line)
