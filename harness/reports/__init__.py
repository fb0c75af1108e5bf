"""Renderers of a matrix: terminal, JSON, JUnit XML, Markdown, HTML. They never recompute a verdict.

Every renderer reads only what a ``Cell`` says, so a matrix loaded from a
saved JSON report (``harness report``) renders exactly like a live run. What
a failing cell shows (its ranks, faults, traces, replay) comes from the one
diagnosis in ``diagnosis.py``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console

from harness.reports.store import atomic_write_text, point_latest
from harness.runner.cells import Matrix
from harness.vocabulary import FORMATS  # noqa: F401 - re-exported

#: The file each format is written to by ``write_reports``.
FILENAMES = {"terminal": "matrix.txt", "json": "matrix.json", "junit": "matrix.xml",
             "markdown": "matrix.md", "html": "matrix.html"}
#: The width of the terminal report when it is written to a file (wider where its grid
#: needs it: a file is not a terminal, and a name cut with "…" is a name lost).
TEXT_WIDTH = 100
#: A grid cell's widest text ("NOT-EXERCISED ○ x3") and the space between columns.
_CELL, _GAP = 18, 3


def file_width(matrix: Matrix) -> int:
    """The width at which the saved text report's grids show every name whole."""
    scenario = max((len(s) for s in matrix.scenarios), default=8)
    columns = sum(max(len(t), _CELL) + _GAP for t in matrix.targets)
    return max(TEXT_WIDTH, scenario + _GAP + columns)


def render_terminal_text(matrix: Matrix, width: int = TEXT_WIDTH, verbose: bool = False) -> str:
    """The terminal report as plain text (no colour), as a file or a log shows it."""
    from harness.reports.terminal import render_matrix

    console = Console(record=True, width=width, file=io.StringIO(), color_system=None,
                      highlight=False, emoji=False, force_terminal=False)
    render_matrix(matrix, console, verbose=verbose)
    return "".join(line.rstrip() + "\n" for line in console.export_text(styles=False).splitlines())


def render(matrix: Matrix, fmt: str) -> str:
    """The matrix in one of ``FORMATS``, as text."""
    if fmt == "terminal":
        return render_terminal_text(matrix)
    if fmt == "json":
        from harness.reports.json_report import to_json
        return to_json(matrix)
    if fmt == "junit":
        from harness.reports.junit import to_junit
        return to_junit(matrix)
    if fmt == "markdown":
        from harness.reports.markdown import to_markdown
        return to_markdown(matrix)
    if fmt == "html":
        from harness.reports.html import to_html
        return to_html(matrix)
    raise ValueError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")


def write_reports(matrix: Matrix, directory: str | Path,
                  formats: Iterable[str] = FORMATS) -> dict[str, Path]:
    """Write each format to its file in ``directory`` (created if needed); return format -> path.

    Each file is written atomically under a unique temporary name, so concurrent
    writers never fail and readers never see an empty or cut report.
    """
    formats = list(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format {unknown[0]!r} (choose from {', '.join(FORMATS)})")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for fmt in formats:
        # The text file is read after the run, not watched scrolling: every detail in full.
        text = render_terminal_text(matrix, file_width(matrix), verbose=True) \
            if fmt == "terminal" else render(matrix, fmt)
        written[fmt] = atomic_write_text(directory / FILENAMES[fmt], text)
    return written


def write_run(matrix: Matrix, run_dir: Path, formats: Iterable[str] = FORMATS) -> dict[str, Path]:
    """Write a run's reports into its own directory (``store.new_run_dir``), then point
    ``latest`` at it: ``latest`` only ever shows a run whose reports are all written."""
    written = write_reports(matrix, run_dir, formats)
    point_latest(run_dir)
    return written


__all__ = ["FORMATS", "FILENAMES", "render", "render_terminal_text", "write_reports", "write_run"]
