"""Every report format renders a saved matrix exactly as before.

``golden/matrix.json.gz`` holds 14 cells of a real catalog run (one per outcome, verdict and
workload); ``golden/report.FORMAT.gz`` is what ``harness report --format FORMAT`` printed for
it before the command line and the vocabulary were restructured (issue 23), so a change of
wording or layout in any renderer shows here. After a change made on purpose, write them again:

    zcat tests/unit/golden/matrix.json.gz > /tmp/golden.json
    python -m harness report /tmp/golden.json --format FMT | gzip -n > tests/unit/golden/report.FMT.gz

(a report is read from a regular file only, never a pipe).
"""

from __future__ import annotations

import gzip
import os

import pytest

import harness
from harness.reports import render
from harness.reports.json_report import load
from harness.vocabulary import FORMATS

from support import TESTS

GOLDEN = TESTS / "unit" / "golden"
#: Where the golden files say the harness was (a placeholder, no machine's path): its frames
#: in the tracebacks are the harness's own (hidden by the reports) only where the harness
#: is, so the saved paths are moved to this checkout's before rendering, and in what the
#: renderers printed.
RECORDED_AT = "/checkout/harness/"
HERE = os.path.dirname(os.path.realpath(harness.__file__)) + os.sep


def _golden(name: str) -> str:
    return gzip.decompress((GOLDEN / name).read_bytes()).decode().replace(RECORDED_AT, HERE)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("golden") / "matrix.json"
    path.write_text(_golden("matrix.json.gz"))
    return load(str(path))


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_saved_matrix_renders_as_it_always_did(matrix, fmt):
    expected = _golden(f"report.{fmt}.gz")
    rendered = render(matrix, fmt) + "\n"  # as `harness report` prints it
    if rendered != expected:
        first = next(i for i, (a, b) in enumerate(zip(rendered, expected)) if a != b)
        raise AssertionError(f"{fmt} differs from golden/report.{fmt}.gz at character {first}:\n"
                             f"now:    {rendered[max(0, first - 80):first + 80]!r}\n"
                             f"before: {expected[max(0, first - 80):first + 80]!r}")


def test_the_golden_matrix_has_every_outcome_a_world_can_end_with(matrix):
    outcomes = {c.outcome for c in matrix.cells}
    assert {"PASS", "ERROR", "HANG", "FAIL", "NOT-EXERCISED"} <= outcomes


def test_the_html_grid_is_one_per_workload_with_no_cell_of_another_workload(matrix):
    """A catalog of three workloads is three small grids, not one 10 x 7 grid whose cells
    are mostly empty (a phone then scrolls a grid, never the page)."""
    import re

    page = render(matrix, "html")
    grids = re.findall(r'<table class="matrix">(.*?)</table>', page, re.S)
    assert re.findall(r"<h3>([^<]+)</h3>", page) == ["config-sync", "data-sharding",
                                                    "checkpoint-resume"]
    assert len(grids) == 3
    for workload, body in zip(("config-sync", "data-sharding", "checkpoint-resume"), grids):
        targets = re.findall(r'<th scope="col">([^<]+)</th>', body)[1:]
        assert {c.workload for c in matrix.cells if c.target in targets} == {workload}
    assert "@media (max-width: 640px)" in page


def test_a_histories_calls_of_one_step_are_one_row_and_a_snapshot_shows_names_not_contents():
    """What makes an HTML report large: eight ranks' same event (a call of one rendezvous) is one row
    (``0-7``), and a snapshot's files are listed by name and size (the contents are in the
    JSON report)."""
    from harness.reports._common import event_message
    from harness.reports.html import history_rows

    calls = [{"t": 0.001 * r, "kind": "call", "rank": r, "op": "rendezvous", "tag": "cfg",
              "step": 0, "site": "sync.py:9 in fn", "detail": {"payload_bytes": 0}}
             for r in (0, 2, 1, 3)]
    odd = {**calls[0], "rank": 4, "site": "sync.py:12 in fn"}  # another line: its own row
    done = {"t": 0.01, "kind": "complete", "op": "rendezvous", "tag": "cfg", "step": 0}
    rows = history_rows([*calls, odd, done])
    assert [(ev["kind"], ranks) for ev, ranks in rows] == [("call", [0, 2, 1, 3]),
                                                            ("call", [4]), ("complete", [])]
    snapshot = {"kind": "snapshot", "rank": 0, "detail": {
        "message": "2 watched file(s) as rank 0 left them", "life": 0,
        "files": {"/b/a.jsonl": "x" * 5000, "/b/c.json": "{}"}}}
    assert event_message(snapshot) == ("2 watched file(s) as rank 0 left them · "
                                       "files=/b/a.jsonl (5000 chars) and 1 more · life=0")
    fault = {"kind": "fault", "rank": 0, "detail": {"message": "rank 0 killed at write /t/x",
                                                    "op": "write", "path": "/t/x", "index": 0}}
    assert event_message(fault) == "rank 0 killed at write /t/x · index=0"  # nothing said twice
