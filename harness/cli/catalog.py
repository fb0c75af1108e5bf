"""``harness list``: the scenario catalog and the built-in targets."""

from __future__ import annotations

import click

from harness.cli.common import known_workload

#: The width ``harness list`` cuts its rows to when stdout is not a terminal and COLUMNS is
#: unset: a pipe or a log has no width, and 80 would leave the description a few characters.
LIST_WIDTH = 120
#: However narrow the width, this much of the last column is kept (the row runs past the width).
_MIN_LAST = 20


@click.command("list")
@click.option("--workload", "-w", default=None,
              help="Only this workload's scenarios and built-in targets.")
@click.option("--format", "fmt", default="table", show_default=True,
              type=click.Choice(["table", "json"]),
              help="json: a list of scenarios and one of targets, for scripts.")
def list_command(workload: str | None, fmt: str) -> None:
    """The scenario catalog and the built-in targets.

    One line per scenario, cut to the width, so that the catalog fits a screen and
    ``harness list | grep NAME`` finds whole rows.
    """
    import json
    import shutil

    from rich.console import Console

    from harness.scenarios import catalog
    from harness.workloads.registry import BUILTIN_TARGETS

    if workload is not None:
        known_workload(workload)
    scenarios = [s for s in catalog() if workload in (None, s.workload)]
    targets = [t for t in BUILTIN_TARGETS.values() if workload in (None, t.workload)]
    if fmt == "json":
        from harness.pod.matrix import off_pod

        click.echo(json.dumps({
            "scenarios": [{"name": s.name, "workload": s.workload, "topology": s.topology,
                           "expect": s.expect, "description": s.description,
                           "finding": s.finding or None, "source": s.source,
                           "off_pod": off_pod(s)} for s in scenarios],
            "targets": [{"name": t.name, "workload": t.workload, "function": t.ref}
                        for t in targets]}, indent=2))
        return
    # One line per scenario, on a terminal or in a pipe: a name is never broken, and only
    # the description is cut to the width (``--format json`` has it whole).
    console = Console()
    width = console.width if console.is_terminal else shutil.get_terminal_size((LIST_WIDTH, 24)).columns
    rows = [("name", "workload", "topology", "expect", "what happens")] + [
        (s.name, s.workload, s.topology, s.expect, s.description) for s in scenarios]
    if _room(rows, width) < _MIN_LAST:  # a narrow screen: the workload column goes first
        rows = [row[:1] + row[2:] for row in rows]
    click.echo(_plain_rows(rows, width))
    click.echo()
    click.echo(_plain_rows([("target", "workload", "function")]
                           + [(t.name, t.workload or "", t.ref) for t in targets], None))
    click.echo("A target of your own: --target module.path:function or path/to/file.py:function")


def _room(rows: list[tuple[str, ...]], width: int) -> int:
    """What ``width`` leaves the last column once the others are aligned."""
    return width - sum(max(len(r[i]) for r in rows) + 2 for i in range(len(rows[0]) - 1))


def _plain_rows(rows: list[tuple[str, ...]], width: int | None) -> str:
    """Rows as aligned plain lines; only the last column is cut (with an ellipsis) to fit,
    down to ``_MIN_LAST`` characters (past that a row runs over rather than lose it all).
    With no width nothing is cut: a target's function is copied, not skimmed."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    room = max(_room(rows, width), _MIN_LAST) if width else None
    lines = []
    for row in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  "
        last = " ".join(row[-1].split())
        if room is not None and len(last) > room:
            last = last[:room - 1] + "…"
        lines.append((line + last).rstrip())
    return "\n".join(lines)
