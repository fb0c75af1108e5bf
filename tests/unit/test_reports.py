"""Reports: every renderer shows what the cells say, escapes what the run produced, and reads back."""

from __future__ import annotations

import html
import io
import json
import os
import re
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.reports import FILENAMES, FORMATS, render, render_terminal_text, write_reports, write_run
from harness.reports.html import to_html
from harness.reports.json_report import load, to_json
from harness.reports.junit import to_junit
from harness.reports.markdown import to_markdown
from harness.reports.store import LATEST, ReportDirError, new_run_dir
from harness.reports.terminal import render_matrix
from harness.runner.cells import Cell, FaultRow, Matrix, RankRow

REPLAY = "harness replay --scenario {s} --target {t} --topology v4-64 --seed 7"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "naive_sync.py", line 41, in load_synced_config\n'
    '    with open("/tmp/temp_config.yaml") as f:\n'
    "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/temp_config.yaml'\n"
)
STACK = (
    'Thread 0x7f (most recent call first):\n  File "shim/xla_model.py", line 88 in rendezvous\n'
    '  File "naive_sync.py", line 37 in load_synced_config\n'
)
XSS = "<script>alert('x')</script>"


def rows(n: int, make) -> list[RankRow]:
    return [make(r) for r in range(n)]


def passing(r: int) -> RankRow:
    return RankRow(rank=r, host=r, outcome="PASS", exit_code=0, error=None, value="'run-3f2a'")


def cell(scenario: str, target: str, outcome: str, verdict: str, **kw) -> Cell:
    base = dict(scenario=scenario, target=target, topology="v4-64", seed=7, outcome=outcome,
                expected="pass", verdict=verdict, duration_s=0.25, detail=f"{outcome.lower()} detail",
                replay=REPLAY.format(s=scenario, t=target), ranks=rows(8, passing),
                workload="config-sync", met=verdict == "ok")
    base.update(kw)
    return Cell(**base)


def sample_matrix() -> Matrix:
    """PASS/ok, ERROR/known, HANG/unexpected with a stack, FAIL/unexpected with faults and a history."""
    error_ranks = [passing(0)] + [
        RankRow(rank=r, host=r, outcome="ERROR", exit_code=1,
                error="FileNotFoundError: [Errno 2] No such file or directory: '/tmp/temp_config.yaml'",
                traceback=TRACEBACK, stderr="warning: config missing\n") for r in range(1, 8)]
    hang_ranks = [RankRow(rank=0, host=0, outcome="CRASH", exit_code=None, error=None, signal=9,
                          killed_by_fault=True)] + [
        RankRow(rank=r, host=r, outcome="HANG", exit_code=None, error=None, stack=STACK) for r in range(1, 8)]
    fail_ranks = [passing(r) for r in range(4)] + [
        RankRow(rank=r, host=r, outcome="FAIL", exit_code=0, error=None, value="'run-9c1d'")
        for r in range(4, 8)]
    history = [
        {"t": 0.0021, "kind": "call", "rank": 0, "op": "rendezvous", "tag": "config_save", "step": 0},
        {"t": 0.0004, "kind": "fault", "rank": 4, "op": "open", "site": "naive_sync.py:33",
         "detail": {"message": "EIO on read of /tmp/temp_config.yaml"}},
        {"t": 0.0100, "kind": "mismatch", "op": "all_reduce",
         "detail": {"message": "digests differ", "ranks": "4-7"}},
        {"t": 0.0150, "kind": "exit", "rank": 7, "detail": {"message": "returned"}},
    ]
    cells = [
        cell("baseline", "naive-sync", "PASS", "ok", detail=""),
        cell("baseline", "robust-sync", "PASS", "ok", detail=""),
        cell("isolated-tmp", "naive-sync", "ERROR", "known", ranks=error_ranks,
             detail="ranks 1-7 raised FileNotFoundError on /tmp/temp_config.yaml: "
                    "/tmp is private to each host",
             finding="000: the config is synced through /tmp, which is per host on a v4-64"),
        cell("isolated-tmp", "robust-sync", "PASS", "ok", detail=""),
        cell("writer-killed", "naive-sync", "HANG", "unexpected", ranks=hang_ranks, expected="fail-loudly",
             duration_s=5.02,
             detail="ranks 1-7 still blocked in rendezvous('config_save') after rank 0 was killed"),
        cell("writer-killed", "robust-sync", "ERROR", "ok", expected="fail-loudly",
             detail="ranks 1-7 raised SyncTimeout within the deadline (fail-loudly met)"),
        cell("transient-eio", "naive-sync", "FAIL", "unexpected", ranks=fail_ranks, history=history,
             detail=f"ranks 4-7 ended with a different run name {XSS}",
             faults_fired=[FaultRow(t=0.0004, rank=4, fault="transient-eio", op="open",
                                    path="/tmp/temp_config.yaml", message="EIO on read (1 of 3)")],
             mismatches=["run_name: ranks 0-3 'run-3f2a', ranks 4-7 'run-9c1d'"]),
    ]
    return Matrix(cells=cells, seed=7, created="2026-05-09T12:00:00+00:00", harness_version="0.1.0",
                  duration_s=6.5)


@pytest.fixture
def matrix() -> Matrix:
    return sample_matrix()


# -- terminal -----------------------------------------------------------------------------------

@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.parametrize("width", [80, 120])
def test_terminal_fits_the_width_and_lists_every_failing_cell(matrix: Matrix, width: int,
                                                              verbose: bool) -> None:
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    render_matrix(matrix, console, verbose=verbose)
    out = console.export_text(styles=False)
    lines = out.splitlines()
    # Only the replay commands may run past the width (soft-wrapped, so they stay copyable).
    assert all(len(ln) <= width for ln in lines if "replay:" not in ln)
    header = next(i for i, ln in enumerate(lines) if ln.startswith("scenario "))
    assert "naive-sync" in lines[header] and "robust-sync" in lines[header]
    grid_rows = {ln.split()[0]: ln for ln in lines[header:header + 8] if ln.strip()}
    assert "HANG ✗" in grid_rows["writer-killed"] and "ERROR ✓" in grid_rows["writer-killed"]
    assert "ERROR ~" in grid_rows["isolated-tmp"]
    flat = " ".join(out.split())
    for c in matrix.cells:
        if c.outcome != "PASS":
            assert c.replay in out  # on one line, whatever the width
            assert (c.detail if verbose else c.detail[:30]) in flat
    assert "baseline[naive-sync]" not in out  # a PASS/ok cell is not in the list
    assert "7 cells in 6.50 s (seed 7): 3 PASS, 1 FAIL, 2 ERROR, 1 HANG" in out
    assert "4 ok, 1 known, 2 unexpected · the run fails" in out


def test_terminal_ends_with_the_grid_and_the_summary(matrix: Matrix) -> None:
    """The grid is what is on screen when a run ends: every failing cell is above it."""
    text = render_terminal_text(matrix, width=80)
    lines = text.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("scenario "))
    above, below = "\n".join(lines[:header]), "\n".join(lines[header:])
    for name in ("isolated-tmp[naive-sync]", "writer-killed[naive-sync]",
                 "transient-eio[naive-sync]"):
        assert name in above and name not in below
    assert lines[-1].endswith("the run fails")
    assert "replay:" not in below
    # The unexpected cells sit right above the grid; the known failure comes first.
    order = [ln.split()[2] for ln in lines[:header] if ln and ln[0] in "✗~○"]
    assert order == ["isolated-tmp[naive-sync]", "writer-killed[naive-sync]",
                     "transient-eio[naive-sync]"]


def test_terminal_cuts_a_long_detail_to_one_line_unless_verbose(matrix: Matrix) -> None:
    long = "ranks 1-7 raised FileNotFoundError: " + " ".join(f"word{i}" for i in range(200))
    matrix.cells[2].detail = long
    compact = render_terminal_text(matrix, width=80)
    block = compact[compact.index("isolated-tmp[naive-sync]"):].splitlines()[:3]
    assert block[1].startswith("    ranks 1-7 raised") and block[1].endswith("…")
    assert len(block[1]) <= 80
    assert block[2].startswith("    replay: ")
    assert "word199" not in compact and "exit 1" not in compact
    full = render_terminal_text(matrix, width=80, verbose=True)
    assert "word199" in full
    assert "ranks 1-7 (hosts 1-7): ERROR, exit 1: FileNotFoundError" in " ".join(full.split())


def test_the_text_file_has_every_detail(matrix: Matrix, tmp_path: Path) -> None:
    matrix.cells[2].detail = "the start " + "x " * 100 + "the end"
    write_reports(matrix, tmp_path, ["terminal"])
    assert "the end" in (tmp_path / "matrix.txt").read_text()


def test_terminal_does_not_read_brackets_as_markup(matrix: Matrix) -> None:
    matrix.cells[4].detail = "[bold red]not markup[/] [/oops]"
    text = render_terminal_text(matrix)
    assert "[bold red]not markup[/] [/oops]" in text
    assert "writer-killed[naive-sync]" in text


def test_terminal_in_colour_marks_unexpected_red(matrix: Matrix) -> None:
    console = Console(record=True, width=100, file=io.StringIO(), color_system="truecolor",
                      force_terminal=True)
    render_matrix(matrix, console)
    ansi = console.export_text(styles=True)
    assert re.search(r"\x1b\[1;31mHANG ✗", ansi)


# -- JSON ---------------------------------------------------------------------------------------

def test_json_round_trips_to_an_equal_dict(matrix: Matrix, tmp_path: Path) -> None:
    text = to_json(matrix)
    data = json.loads(text)
    assert list(data)[:5] == ["schema", "harness_version", "seed", "created", "cells"]
    assert data["schema"] == "harness.matrix/1"
    path = tmp_path / "m.json"
    path.write_text(text)
    again = load(path)
    assert again.to_dict() == data
    assert to_json(again) == text  # stable: the same bytes on a second write
    cell = data["cells"][6]
    for key in ("scenario", "target", "topology", "seed", "outcome", "expected", "verdict", "duration_s",
                "detail", "ranks", "faults_fired", "replay"):
        assert key in cell
    assert set(cell["ranks"][0]) >= {"rank", "host", "outcome", "exit_code", "error"}
    assert list(cell["history"][1])[:3] == ["t", "kind", "rank"]


@pytest.mark.parametrize("content, says", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "not an object"),
    ('{"schema": "other/2", "cells": []}', "harness.matrix/1"),
    ('{"schema": "harness.matrix/1", "harness_version": "0", "seed": 1, "created": "x", '
     '"cells": [{"scenario": "a", "target": "b"}]}', "missing field 'topology'"),
])
def test_a_bad_report_gives_a_value_error_naming_the_file(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "broken-report.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="broken-report.json") as info:
        load(path)
    assert says in str(info.value)


def test_a_missing_report_gives_a_value_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nowhere.json"):
        load(tmp_path / "nowhere.json")


# -- JUnit --------------------------------------------------------------------------------------

def test_junit_has_one_failure_per_unexpected_cell(matrix: Matrix) -> None:
    matrix.cells[6].ranks[4].stderr = "\x1b[31mred\x1b[0m \x00"  # not in any failure body, but...
    matrix.cells[4].detail += " \x1b[31m<&>\"'"  # ...a control character in an attribute must not break XML
    root = ET.fromstring(to_junit(matrix).encode())
    assert root.tag == "testsuite"
    cases = root.findall("testcase")
    assert len(cases) == len(matrix.cells)
    assert root.get("tests") == "7" and root.get("failures") == "2" and root.get("skipped") == "1"
    by_name = {c.get("name"): c for c in cases}
    assert set(by_name) == {f"{c.scenario}[{c.target}]" for c in matrix.cells}
    failures = root.findall("testcase/failure")
    assert len(failures) == len(matrix.unexpected) == 2
    hang = by_name["writer-killed[naive-sync]"]
    assert hang.get("classname") == "harness.config-sync"
    assert hang.get("time") == "5.020"
    failure = hang.find("failure")
    assert failure is not None
    assert failure.get("message").startswith("ranks 1-7 still blocked") and "<&>" in failure.get("message")
    assert "rank 0 (host 0): CRASH, SIGKILL (killed by the fault plan)" in failure.text
    assert "ranks 1-7 (hosts 1-7): HANG, running" in failure.text
    assert "in rendezvous" in failure.text  # the stack of the hung ranks
    assert matrix.cells[4].replay in failure.text
    skipped = by_name["isolated-tmp[naive-sync]"].find("skipped")
    assert skipped is not None and skipped.get("message").startswith("known failure: ")
    ok = by_name["baseline[naive-sync]"]
    assert list(ok) == []  # a passing case has no child at all
    assert by_name["writer-killed[robust-sync]"].find("failure") is None


# -- Markdown -----------------------------------------------------------------------------------

def test_markdown_table_has_one_row_per_scenario(matrix: Matrix) -> None:
    md = to_markdown(matrix)
    table = [ln for ln in md.splitlines() if ln.startswith("| `")]
    header = next(ln for ln in md.splitlines() if ln.startswith("| scenario"))
    assert header.count("|") == len(matrix.targets) + 2
    scenario_rows = [ln for ln in table if ln.split("|")[1].strip().strip("`") in matrix.scenarios]
    assert [ln.split("|")[1].strip().strip("`") for ln in scenario_rows] == matrix.scenarios
    assert all(ln.count("|") == len(matrix.targets) + 2 for ln in scenario_rows)
    assert "❌ **HANG**" in md and "⚠️ ERROR (known)" in md
    # a section per non-PASS cell, each with its replay in a code block
    for c in matrix.cells:
        if c.outcome != "PASS":
            assert f"`{c.scenario}[{c.target}]`" in md
            assert f"```sh\n{c.replay}\n```" in md
    assert "`baseline[naive-sync]`" not in md
    assert XSS not in md  # the detail's <script> is escaped
    assert "\\<script>" in md
    assert "| 1-7 | 1-7 | ERROR | exit 1 |" in md
    assert "transient-eio" in md and "EIO on read (1 of 3)" in md


# -- HTML ---------------------------------------------------------------------------------------

def test_html_is_one_self_contained_page(matrix: Matrix) -> None:
    page = to_html(matrix)
    assert page.startswith("<!DOCTYPE html>")
    for name in matrix.scenarios + matrix.targets:
        assert f">{name}</th>" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing loaded from outside
    assert "<link" not in page and "@import" not in page
    assert page.count('<details class="cell') == len(matrix.cells)
    assert page.count("<script>") == 1  # only the page's own script


def test_html_escapes_run_text(matrix: Matrix) -> None:
    page = to_html(matrix)
    assert XSS not in page
    assert html.escape(XSS, quote=False) in page


def test_html_shows_a_cells_detail(matrix: Matrix) -> None:
    page = to_html(matrix)
    fail = page[page.index('id="cell-transient-eio--naive-sync"'):]
    fail = fail[: fail.index("</details></details>") if "</details></details>" in fail else None]
    assert "EIO on read (1 of 3)" in fail  # the fault fired
    assert "run_name: ranks 0-3 'run-3f2a', ranks 4-7 'run-9c1d'" in fail  # the mismatch
    history = fail[fail.index('<pre class="history">'):]
    history = re.sub(r"<[^>]+>", "", history[:history.index("</pre>")]).splitlines()
    assert history[0].split() == ["t", "(ms)", "ranks", "kind", "op", "tag", "step", "site", "message"]
    times = [float(line.split()[0]) for line in history[1:]]
    assert times == sorted(times) and len(times) == 4  # the history in time order
    assert 'href="#cell-writer-killed--naive-sync"' in page  # the grid links to the detail
    hang = page[page.index('id="cell-writer-killed--naive-sync"'):]
    assert "SIGKILL (killed by the fault plan)" in hang[:4000]
    assert "line 88 in rendezvous" in hang[:6000]  # the hung ranks' stack
    assert html.escape(TRACEBACK.rstrip(), quote=False).replace('"', "&quot;") in page
    assert html.escape(matrix.cells[2].finding) in page
    assert "div.replay" in page and 'className = \'copy\'' in page  # the script adds Copy
    assert "warning: config missing" in page  # captured stderr


# -- formats and files --------------------------------------------------------------------------

def test_write_reports_writes_every_format(matrix: Matrix, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "reports"
    paths = write_reports(matrix, out)
    assert set(paths) == set(FORMATS)
    assert sorted(p.name for p in out.iterdir()) == sorted(FILENAMES.values())
    assert load(paths["json"]).to_dict() == matrix.to_dict() | {"summary": matrix.summary()}
    assert "writer-killed[naive-sync]" in paths["terminal"].read_text()
    assert write_reports(matrix, out, formats=["html"]) == {"html": out / "matrix.html"}
    with pytest.raises(ValueError, match="pdf"):
        write_reports(matrix, out, formats=["pdf"])
    with pytest.raises(ValueError, match="pdf"):
        render(matrix, "pdf")


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_empty_matrix_renders(fmt: str) -> None:
    empty = Matrix(cells=[], seed=0, created="2026-05-09T00:00:00+00:00", harness_version="0.1.0")
    assert render(empty, fmt).strip()


def test_a_known_failure_that_now_passes_is_shown_as_unexpected(matrix: Matrix) -> None:
    """PASS/unexpected: renderers show the verdict the cell carries, they do not recompute it."""
    matrix.cells[0].verdict = "unexpected"
    matrix.cells[0].detail = "baseline now passes but was recorded as a known failure"
    assert "baseline[naive-sync]" in render_terminal_text(matrix)
    root = ET.fromstring(to_junit(matrix))
    case = next(c for c in root.iter("testcase") if c.get("name") == "baseline[naive-sync]")
    assert case.find("failure") is not None
    assert "`baseline[naive-sync]`" in to_markdown(matrix)
    assert "❌ **PASS** (unexpected)" in to_markdown(matrix)
    page = to_html(matrix)
    section = page[: page.index("Passing cells")]
    assert 'id="cell-baseline--naive-sync"' in section  # among the cells that need a look


# -- where reports are written: one directory per run, atomic files, ``latest`` ----------------

def test_two_writers_of_one_report_never_collide(matrix: Matrix, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Forces the unlucky interleaving: the first writer has written its temporary file and is
    # about to rename it when a second writer writes the same report from start to end.
    real_replace = os.replace
    first_paused, second_done = threading.Event(), threading.Event()
    seen_while_paused: list[str] = []

    def replace(src: Any, dst: Any) -> None:
        if threading.current_thread().name == "first" and not first_paused.is_set():
            first_paused.set()
            second_done.wait(60)  # a bound on a broken test, not a timing assumption
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    errors: list[BaseException] = []

    def first() -> None:
        try:
            write_reports(matrix, tmp_path, formats=["json"])
        except BaseException as exc:  # noqa: BLE001 - the failure is the observation
            errors.append(exc)

    thread = threading.Thread(target=first, name="first")
    thread.start()
    assert first_paused.wait(60)
    try:
        write_reports(matrix, tmp_path, formats=["json"])
        seen_while_paused.append((tmp_path / "matrix.json").read_text())
    finally:
        second_done.set()
        thread.join(60)
    assert errors == []
    for text in seen_while_paused + [(tmp_path / "matrix.json").read_text()]:
        assert json.loads(text)["cells"]  # whole JSON, never empty or cut
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matrix.json"]  # no temporary left


def test_every_run_gets_its_own_directory_and_latest_follows(matrix: Matrix,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "reports"
    first = new_run_dir(out)
    second = new_run_dir(out)  # two runs at once: neither shares the other's directory
    assert first != second and first.parent == second.parent == out
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-\d+-[0-9a-f]{6}", first.name)
    write_run(matrix, first, ["json", "markdown"])
    assert os.readlink(out / LATEST) == first.name
    before = {p.name: p.read_bytes() for p in first.iterdir()}
    empty = Matrix(cells=[], seed=1, created="2026-05-09T00:00:00+00:00", harness_version="0.1.0")
    write_run(empty, second, ["json", "markdown"])
    assert os.readlink(out / LATEST) == second.name  # relative: the report dir can move
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before  # never overwritten
    assert load(out / LATEST / "matrix.json").seed == 1
    assert sorted(p.name for p in out.iterdir()) == sorted([first.name, second.name, LATEST])


def test_a_latest_the_harness_did_not_make_is_never_overwritten(matrix: Matrix,
                                                                 tmp_path: Path) -> None:
    (tmp_path / LATEST).write_text("a user's notes\n")
    with pytest.raises(ReportDirError, match="latest is not a symlink"):
        new_run_dir(tmp_path)
    assert (tmp_path / LATEST).read_text() == "a user's notes\n"


def test_a_report_dir_that_cannot_hold_a_run_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ReportDirError) as refused:
        new_run_dir(tmp_path / "file" / "reports")
    assert str(refused.value).startswith(f"cannot write reports to {tmp_path}/file/reports: ")
    assert "Not a directory" in str(refused.value)


def test_harness_report_output_replaces_the_old_file_whole(matrix: Matrix, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # ``harness report -o`` over an existing file: until the new one is whole, a reader still
    # sees the old one (an open-for-write would have truncated it first).
    import sys

    import harness.cli

    (tmp_path / "a.json").write_text(to_json(matrix))
    out = tmp_path / "matrix.md"
    out.write_text("the old report\n")
    seen: list[str] = []
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        seen.append(out.read_text())
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(sys, "argv", ["harness", "report", str(tmp_path / "a.json"),
                                      "--format", "markdown", "-o", str(out)])
    harness.cli.main()
    assert seen == ["the old report\n"]
    assert out.read_text() == to_markdown(matrix)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "matrix.md"]


def test_one_cell_is_one_cell_and_a_pods_workers_have_no_isolation_mode(matrix: Matrix) -> None:
    import dataclasses

    one = dataclasses.replace(matrix, cells=matrix.cells[:1])
    assert "1 cell in 6.50 s" in render_terminal_text(one, width=100)
    assert " 1 cell in 6.50 s" in to_markdown(one)
    kernel = dataclasses.replace(matrix, cells=[dataclasses.replace(c, isolation="kernel")
                                                for c in matrix.cells])
    assert "(seed 7, kernel isolation)" in render_terminal_text(kernel, width=100)
    on_pod = dataclasses.replace(kernel, mode="pod")
    assert "(seed 7)" in render_terminal_text(on_pod, width=100)  # real machines: no mode


def test_a_pods_heading_names_each_workers_python_and_torch(matrix: Matrix) -> None:
    """The pods' stack is the point of a pod run: every format's heading says what each
    worker ran, workers that agree named together."""
    import dataclasses

    stacks = {"0": {"python": "3.10.13", "torch": "2.9.0"}, "1": {"python": "3.10.13", "torch": "2.9.0"},
              "2": {"python": "3.11.7", "torch": "2.9.0", "torch_xla": "2.9.0"}, "x": "junk"}
    on_pod = dataclasses.replace(matrix, mode="pod", pod={"name": "p", "stacks": stacks})
    said = ("Python 3.10.13, torch 2.9.0 on workers 0-1, Python 3.11.7, torch 2.9.0, torch_xla "
            "2.9.0 on worker 2")
    assert f"(seed 7, {said})" in render_terminal_text(on_pod, width=300)
    assert f" · 7 cells in 6.50 s, {said}\n" in to_markdown(on_pod)
    assert f"seed <b>7</b> · 2026-05-09T12:00:00+00:00 · harness 0.1.0 · {said}</p>" in \
        to_html(on_pod)
    bare = dataclasses.replace(on_pod, pod={"name": "p"})  # an older report: no stacks
    assert "(seed 7)" in render_terminal_text(bare, width=300)


def test_a_ranks_stderr_is_shown_without_the_tracebacks_shown_apart():
    from harness.reports.diagnosis import without_tracebacks

    stderr = ("loading config\n"
              "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\n"
              "ValueError: inner\n\n"
              "The above exception was the direct cause of the following exception:\n\n"
              "Traceback (most recent call last):\n  File \"b.py\", line 2, in h\n"
              "RuntimeError: outer\n"
              "warning: retrying\n")
    assert without_tracebacks(stderr) == "loading config\n\nwarning: retrying"
    assert without_tracebacks("Traceback (most recent call last):\n  x\nE: y\n") == ""


def test_a_file_written_on_one_host_and_missing_on_the_others_is_said_so():
    from harness.reports.diagnosis import unseen_writes

    def row(rank: int, host: int, error: str | None = None) -> RankRow:
        return RankRow(rank, host, "ERROR" if error else "PASS", 1 if error else 0, error)

    missing = "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/c.json'"
    rows = [row(0, 0), row(1, 0), row(2, 1, missing), row(3, 1, missing)]
    wrote = [{"kind": "file", "rank": 0, "op": "open-write", "detail": {"path": "/tmp/c.json",
                                                                        "ok": True}},
             {"kind": "file", "rank": 2, "op": "open-write", "detail": {"path": "/tmp/c.json",
                                                                        "ok": False}}]
    assert unseen_writes(wrote, rows) == [
        "'/tmp/c.json' was written on host 0 only (by rank 0); ranks 2-3 on host 1 looked for "
        "it on their own host, where no rank wrote it"]
    renamed = [{"kind": "file", "rank": 1, "op": "rename",
                "detail": {"path": "/tmp/c.json.tmp", "dst": "/tmp/c.json", "ok": True}}]
    assert "by rank 1" in unseen_writes(renamed, rows)[0]
    # written on the failing ranks' own host too: not this story, nothing said
    same_host = [{"kind": "file", "rank": 3, "op": "open-write",
                  "detail": {"path": "/tmp/c.json", "ok": True}}]
    assert unseen_writes(wrote + same_host, rows) == []
    assert unseen_writes([], rows) == []  # no file events (a plain world): nothing guessed


def test_one_of_anything_is_said_in_the_singular() -> None:
    """``1 cell of 1 scenario and 1 target``, never ``1 cells``, in every report; ``the one rank``
    for a world of one rank."""
    from harness.checkers.config_sync import _all

    one = Matrix(cells=[cell("baseline", "naive-sync", "PASS", "ok")], seed=0,
                 created="2026-05-09T00:00:00+00:00", harness_version="0.1.0", duration_s=1.0)
    assert "<b>1</b> cell of 1 scenario and 1 target in" in to_html(one)
    assert "1 cell in" in render_terminal_text(one) and "1 cells" not in render_terminal_text(one)
    assert "1 cell in" in to_markdown(one) and "1 cells" not in to_markdown(one)
    assert _all([{}]) == "the one rank holds" and _all([{}, {}]) == "all 2 ranks hold"


def test_the_saved_text_report_shows_every_target_name_whole(tmp_path: Path) -> None:
    """At a terminal a grid too wide is cut with "…"; the saved matrix.txt is read later,
    wider than any terminal if it must: a name cut short is a cell a reader cannot find."""
    names = [f"team_project/loaders/sharded_dataset_variant_{i}.py:ShardedDataset" for i in range(4)]
    cells = [cell("baseline", t, "PASS", "ok") for t in names]
    matrix = Matrix(cells=cells, seed=0, created="2026-12-02T00:00:00+00:00", harness_version="0")
    written = write_reports(matrix, tmp_path, ["terminal"])["terminal"].read_text()
    grid_text = written.split("baseline", 1)[0]
    assert all(name in grid_text for name in names) and "…" not in grid_text
    assert "…" in render_terminal_text(matrix, width=100)  # what a terminal that narrow shows
