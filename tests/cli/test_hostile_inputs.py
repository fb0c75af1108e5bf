"""No input loses a run: every file the command line reads is bounded and checked, every
report is written whatever text a target produced, and ``harness replay`` runs only the
cell a report names.

Each bad input must end in exit 2 (naming the file, and the line and field where there is
one) or in a complete report: never an internal error (exit 3), never a hang.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.reports.json_report import to_json
from harness.runner.cells import Cell, Matrix, RankRow

from support import run_cli, run_cli_here

#: A scenario no catalog has: a report whose replay is whole still runs no world.
ELSEWHERE = "no-such-scenario"


def a_cell(scenario: str = ELSEWHERE, target: str = "naive-sync", seed: int = 0, **kw) -> Cell:
    fields = dict(topology="v4-8", outcome="ERROR", expected="pass", verdict="unexpected",
                  duration_s=0.5, detail="ranks 1-7 raised FileNotFoundError",
                  replay=f"harness replay --scenario {scenario} --target {target} --seed {seed}",
                  ranks=[RankRow(rank=0, host=0, outcome="PASS", exit_code=0, error=None)])
    fields.update(kw)
    return Cell(scenario=scenario, target=target, seed=seed, **fields)


def a_report(tmp_path: Path, *cells: Cell, name: str = "matrix.json", **kw) -> Path:
    matrix = Matrix(cells=list(cells) or [a_cell()], seed=0, created="2026-11-27T00:00:00+00:00",
                    harness_version="0.1.0", **kw)
    path = tmp_path / name
    path.write_text(to_json(matrix))
    return path


def refused(done, *words: str) -> str:
    """The command refused its input (exit 2) with ``words`` in what it said."""
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    for word in words:
        assert word in said, said
    return said


# -- files that are not small regular files -----------------------------------------------

def commands_reading(path: str, good: str) -> dict[str, list[str]]:
    """Every command that reads a file a user names, with ``path`` in that place."""
    return {
        "--scenario": ["run", "--scenario", path, "--target", "naive-sync"],
        "--baseline": ["run", "--scenario", "baseline", "--baseline", path],
        "--expected": ["diff", good, good, "--expected", path],
        "report": ["report", path],
        "diff": ["diff", path, good],
        "replay": ["replay", path, "--cell", f"{ELSEWHERE}[naive-sync]"],
    }


@pytest.mark.parametrize("where", ["--scenario", "--baseline", "--expected", "report", "diff",
                                   "replay"])
def test_a_fifo_is_refused_never_waited_on(tmp_path: Path, where: str) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    good = str(a_report(tmp_path))
    # A subprocess, so that a command that did open the FIFO for reading blocks only it:
    # the timeout turns that hang into this test's failure (a TimeoutExpired).
    done = run_cli(*commands_reading(str(fifo), good)[where], cwd=tmp_path, timeout=60)
    refused(done, "pipe.json", "a FIFO")


@pytest.mark.parametrize("where", ["--scenario", "--baseline", "--expected", "report", "diff",
                                   "replay"])
def test_dev_zero_is_refused_unread(tmp_path: Path, where: str) -> None:
    good = str(a_report(tmp_path))
    done = run_cli_here(*commands_reading("/dev/zero", good)[where], cwd=tmp_path)
    refused(done, "/dev/zero", "a character device")


@pytest.mark.parametrize("where", ["--scenario", "--expected", "report", "diff"])
def test_a_directory_is_refused(tmp_path: Path, where: str) -> None:
    good = str(a_report(tmp_path))
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    done = run_cli_here(*commands_reading(str(folder), good)[where], cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "folder.yaml" in said, said


@pytest.mark.parametrize("where", ["report", "diff", "--baseline", "--scenario"])
def test_a_500_mb_file_is_refused_before_it_is_read(tmp_path: Path, where: str) -> None:
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as f:
        f.truncate(500 << 20)  # sparse: the size is what the check reads
    good = str(a_report(tmp_path))
    done = run_cli_here(*commands_reading(str(huge), good)[where], cwd=tmp_path)
    refused(done, "huge.yaml", "500 MiB", "larger than")


def test_json_nested_100000_deep_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for args in (["report", str(deep)], ["diff", str(deep), str(deep)]):
        refused(run_cli_here(*args), "deep.json:1", "nested deeper than 200 levels")


# -- reports with a field of the wrong shape ------------------------------------------------

def report_text(tmp_path: Path) -> str:
    return a_report(tmp_path, a_cell("baseline"), a_cell("isolated-tmp")).read_text()


@pytest.mark.parametrize("change, field, words", [
    (lambda d: d["cells"][1].update(duration_s="0.5"), "cells.1.duration_s",
     ["valid number", '"0.5"']),
    (lambda d: d["cells"][1].update(replay=7), "cells.1.replay", ["valid string", "not 7"]),
    (lambda d: d["cells"][1].update(replay=None), "cells.1.replay", ["valid string", "null"]),
    (lambda d: d["cells"][1].update(seed=1.5), "cells.1.seed", ["valid integer"]),
    (lambda d: d["cells"][1].update(verdict="fine"), "cells.1.verdict", ["'fine'"]),
    (lambda d: d["cells"][1].update(ranks={}), "cells.1.ranks", ["valid array", "not a JSON object"]),
    (lambda d: d["cells"][1]["ranks"][0].pop("exit_code"), "cells.1.ranks.0.exit_code",
     ["missing field 'exit_code'"]),
    (lambda d: d["cells"][1]["ranks"][0].update(rank="0"), "cells.1.ranks.0.rank",
     ["valid integer"]),
    (lambda d: d["cells"][1].update(world_time_s=True), "cells.1.world_time_s", ["valid number"]),
    (lambda d: d.update(seed="0"), "seed", ["valid integer"]),
    (lambda d: d.update(cells="all"), "cells", ["valid array", '"all"']),
    (lambda d: d.update(mode="cloud"), "mode", ["'sim' or 'pod'"]),
])
def test_each_malformed_field_is_exit_2_naming_the_file_the_line_and_the_field(
        tmp_path: Path, change, field: str, words: list[str]) -> None:
    data = json.loads(report_text(tmp_path))
    change(data)
    path = tmp_path / "crafted.json"
    text = json.dumps(data, indent=2)
    path.write_text(text)
    for args in (["report", str(path)], ["diff", str(path), str(a_report(tmp_path))],
                 ["replay", str(path), "--cell", "isolated-tmp[naive-sync]"]):
        said = refused(run_cli_here(*args), f"(field '{field}')", *words)
        line = int(re.search(r"crafted\.json:(\d+):", said)[1])
        # the line is where the field is (or, for a missing one, where its object starts)
        key = field.rsplit(".", 1)[-1]
        shown = text.splitlines()[line - 1]
        assert f'"{key}"' in shown or shown.strip() in ("{", "},", "}"), (line, shown)


def test_a_nan_duration_is_refused_and_a_nan_in_a_history_is_written_as_valid_json(
        tmp_path: Path) -> None:
    crafted = tmp_path / "nan.json"
    crafted.write_text(report_text(tmp_path).replace('"duration_s": 0.5', '"duration_s": NaN', 1))
    refused(run_cli_here("report", str(crafted)), "nan.json:", "a duration of nan seconds")
    cell = a_cell(history=[{"t": 0.1, "kind": "note", "detail": {"loss": float("nan")}}])
    done = run_cli_here("report", str(a_report(tmp_path, cell)), "--format", "json")
    assert done.returncode == 0
    json.loads(done.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))


# -- replay: only the cell the report names ---------------------------------------------------

@pytest.mark.parametrize("replay, words", [
    ("harness replay --scenario baseline --target robust-sync --seed 0", ["another cell"]),
    ("harness replay --scenario isolated-tmp --target naive-sync --seed 3", ["another cell"]),
    ("harness replay matrix.json --cell 'isolated-tmp[naive-sync]'", ["'matrix.json'"]),
    ("harness replay --scenario 'isolated-tmp --target naive-sync", ["No closing quotation"]),
    ("harness replay --scenario isolated-tmp --target naive-sync; touch /tmp/owned",
     ["not an option of a replay"]),
    ("sh -c 'touch /tmp/owned'", ["is not a 'harness replay' command"]),
    ("harness run --scenario isolated-tmp --target naive-sync", ["'harness replay'"]),
    ("harness replay --target naive-sync", ["has no --scenario"]),
    ("harness replay --scenario isolated-tmp --scenario x --target naive-sync", ["twice"]),
    ("", ["is not a 'harness replay' command"]),
])
def test_a_replay_that_is_not_its_cells_is_refused(tmp_path: Path, replay: str,
                                                   words: list[str]) -> None:
    report = a_report(tmp_path, a_cell("isolated-tmp", replay=replay))
    said = refused(run_cli_here("replay", str(report), "--cell", "isolated-tmp[naive-sync]"),
                   "matrix.json", *words)
    assert not Path("/tmp/owned").exists(), said


def test_a_replay_of_a_pod_cell_says_where_to_rerun_it(tmp_path: Path) -> None:
    pod_replay = "harness pod run --local 8 --scenario isolated-tmp --target naive-sync --seed 0"
    report = a_report(tmp_path, a_cell("isolated-tmp", replay=pod_replay), mode="pod",
                      pod={"name": "nightly"})
    refused(run_cli_here("replay", str(report), "--cell", "isolated-tmp[naive-sync]"),
            "ran on a pod", pod_replay,
            "harness replay --scenario isolated-tmp --target naive-sync --seed 0")


def test_a_replay_that_is_its_cells_runs_it(tmp_path: Path) -> None:
    """The replay passed every check, so it ran: here the scenario is no catalog's, and the
    run itself says so (proof it got as far as choosing the scenario)."""
    report = a_report(tmp_path)
    refused(run_cli_here("replay", str(report), "--cell", f"{ELSEWHERE}[naive-sync]"),
            f"unknown scenario '{ELSEWHERE}'")


def test_cell_without_a_report_is_refused() -> None:
    refused(run_cli_here("replay", "--cell", "isolated-tmp[naive-sync]"), "--cell")


# -- latest ----------------------------------------------------------------------------------

@pytest.mark.parametrize("link", ["/", "..", "elsewhere", "20261127T000000.000Z-1-abcdef/.."])
def test_a_latest_the_harness_did_not_make_is_refused_and_kept(tmp_path: Path, link: str) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "latest").symlink_to(link)
    done = run_cli_here("run", "--scenario", "baseline", "--target", "naive-sync",
                        "--report-dir", str(reports))
    refused(done, "latest", f"a symlink to {link}", "never replaced")
    assert os.readlink(reports / "latest") == link
    assert sorted(p.name for p in reports.iterdir()) == ["latest"]  # no run began


# -- a fuzz of matrix files -------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=6)


def _paths(value, prefix=()):
    """Every (path, container) of a JSON value, to pick a place to change."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@st.composite
def crafted_reports(draw) -> str:
    """A real report with a few of its values replaced, removed or retyped; now and then
    cut short, or not JSON at all."""
    cells = [a_cell(), a_cell("isolated-tmp", seed=3, history=[{"t": 0.1, "kind": "op"}])]
    data = json.loads(to_json(Matrix(cells=cells, seed=0, created="x", harness_version="0")))
    for _ in range(draw(st.integers(1, 3))):
        places = [p for p in _paths(data) if p]
        path = draw(st.sampled_from(places))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(JSON_VALUES)
    text = json.dumps(data)
    cut = draw(st.sampled_from([None, None, None, "cut", "bytes"]))
    if cut == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    elif cut == "bytes":
        text = text.replace('"', draw(st.sampled_from(["\x00", "\\ud800", "'", "\udcff"])), 1)
    return text


# 60 examples in the suite (about 6 s); HARNESS_FUZZ_EXAMPLES=1500 for a longer hunt (2.5 min)
@settings(max_examples=int(os.environ.get("HARNESS_FUZZ_EXAMPLES", 60)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=crafted_reports())
def test_fuzzed_matrix_files_are_exit_0_or_2_for_report_diff_and_replay(tmp_path: Path,
                                                                        text: str) -> None:
    path = tmp_path / "fuzzed.json"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    good = a_report(tmp_path)
    for args in (["report", str(path)], ["report", str(path), "--format", "html"],
                 ["diff", str(path), str(path)], ["diff", str(path), str(good)],
                 ["diff", str(good), str(path)],
                 ["replay", str(path), "--cell", f"{ELSEWHERE}[naive-sync]"],
                 ["replay", str(path), "--cell", "isolated-tmp[naive-sync] seed 3"]):
        done = run_cli_here(*args)  # an internal error raises here
        # exit 1 is diff's answer "they differ": only against another report
        allowed = (0, 1, 2) if args[0] == "diff" and args[1] != args[2] else (0, 2)
        assert done.returncode in allowed, \
            (args, done.returncode, done.stdout[-500:], done.stderr[-500:])


# -- what a target wrote, written whatever it is ------------------------------------------------

def test_surrogates_and_escape_codes_in_any_text_are_written_in_every_format(
        tmp_path: Path) -> None:
    """Read back from a report: a lone surrogate (a file name that is not UTF-8) and terminal
    escape codes in a detail, an error, output and a history."""
    nasty = "cfg-\udcff.yaml \x1b[2J\x1b[31mred\x07\r\u202e"
    cell = a_cell(detail=f"ranks 1-7 raised FileNotFoundError: {nasty}",
                  ranks=[RankRow(rank=0, host=0, outcome="ERROR", exit_code=1,
                                 error=f"OSError: {nasty}", stdout=nasty, stderr=nasty)],
                  history=[{"t": 0.1, "kind": "op", "detail": {"path": nasty, nasty: 1}}])
    report = a_report(tmp_path, cell)
    for fmt in ("terminal", "json", "junit", "markdown", "html"):
        done = run_cli_here("report", str(report), "--format", fmt,
                            "-o", str(tmp_path / f"out.{fmt}"))
        assert done.returncode == 0, done.stderr
        text = (tmp_path / f"out.{fmt}").read_bytes().decode("utf-8")  # strict: it is UTF-8
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e\ud800-\udfff]", text), fmt
        assert "cfg-\\udcff.yaml" in text.replace("\\\\", "\\"), fmt
    ET.fromstring((tmp_path / "out.junit").read_bytes())  # valid XML
    json.loads((tmp_path / "out.json").read_text())


# -- a Ctrl-C never loses the reports ----------------------------------------------------------

def test_a_ctrl_c_before_the_first_cell_still_writes_an_interrupted_report(tmp_path: Path,
                                                                          monkeypatch) -> None:
    from harness.cli import common

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(common, "run_with_progress", interrupted)
    done = run_cli_here("run", "--scenario", "baseline", "--target", "naive-sync",
                        "--report-dir", str(tmp_path), "--format", "json")
    assert done.returncode == 130, done.stderr
    summary = json.loads((tmp_path / "latest" / "matrix.json").read_text())["summary"]
    assert summary["interrupted"] is True and summary["planned"] == 1 and summary["cells"] == 0


def test_a_ctrl_c_while_the_reports_are_written_waits_for_them(tmp_path: Path,
                                                               monkeypatch) -> None:
    import signal

    from harness import reports
    from harness.runner.cells import Matrix as M

    real = reports.write_run

    def write_run(matrix, run_dir, formats):
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, mid-write
        return real(matrix, run_dir, formats)

    monkeypatch.setattr(reports, "write_run", write_run)
    from harness.cli import common

    monkeypatch.setattr(common, "run_with_progress", lambda *a, **k: M(
        cells=[a_cell()], seed=0, created="x", harness_version="0"))
    done = run_cli_here("run", "--scenario", "baseline", "--target", "naive-sync",
                        "--report-dir", str(tmp_path), "--format", "json")
    assert done.returncode == 130, done.stderr
    assert json.loads((tmp_path / "latest" / "matrix.json").read_text())["cells"]


@pytest.mark.parametrize("flag", ["-T", "-c"])
def test_a_target_or_checker_file_is_read_with_a_bound_and_never_blocks(tmp_path: Path,
                                                                          flag: str) -> None:
    """A link to /proc/kmsg blocked the command forever (a regular file to stat, a read that
    waits for the kernel's next message); a 50 GiB sparse file ended in MemoryError, exit 3.
    Both are usage errors now, as a scenario file that is neither would be."""
    kmsg = tmp_path / "kmsg.py"
    kmsg.symlink_to("/proc/kmsg")
    huge = tmp_path / "huge.py"
    with open(huge, "wb") as f:
        f.truncate(50 << 30)  # sparse: no disk
    for path, said in ((kmsg, "/proc/kmsg, a kernel interface"),
                       (huge, "50 GiB long, larger than the 16 MiB the harness reads")):
        args = (["-T", f"{path}:sync"] if flag == "-T" else
                ["-T", "naive-sync", "-c", f"{path}:Config"])
        # the machine's time: a bound, so a command that blocks fails the test instead
        done = run_cli("run", *args, "-s", "baseline", "--report-dir", str(tmp_path / "r"),
                       cwd=tmp_path, timeout=120)
        assert done.returncode == 2, done.stdout + done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr
