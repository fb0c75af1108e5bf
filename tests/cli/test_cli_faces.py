"""What a person reads first: ``harness list`` in a pipe and on a terminal, its filter and
its JSON, and ``--scenario`` by glob or by a name typed wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.scenarios import catalog
from harness.workloads.registry import BUILTIN_TARGETS

from support import run_cli


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "TERM")}
    env.update(extra)
    return env


def test_list_in_a_pipe_is_one_line_per_scenario_within_the_width() -> None:
    done = run_cli("list", env=_env(COLUMNS="80"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines if not line.startswith(tuple(BUILTIN_TARGETS)))
    names = [s.name for s in catalog()]
    rows = {line.split()[0]: line for line in lines if line.strip()}
    assert set(names) <= set(rows)  # every name whole, first on its own row
    assert rows["stale-leftover"].split()[1:3] == ["single-host-8", "pass"]
    assert rows["isolated-tmp"].split()[1] == "v4-64"
    assert rows["isolated-tmp"].endswith("…")  # the description, cut to fit
    # the header, the scenarios, a blank line, the header and the targets, the hint
    assert len(lines) == 1 + len(names) + 1 + 1 + len(BUILTIN_TARGETS) + 1


def test_list_in_a_wide_pipe_keeps_the_workload_column() -> None:
    done = run_cli("list", env=_env(COLUMNS="160"))
    row = next(ln for ln in done.stdout.splitlines() if ln.startswith("stale-leftover "))
    assert row.split()[1:4] == ["config-sync", "single-host-8", "pass"]


def test_list_on_a_terminal_never_breaks_a_name() -> None:
    done = run_cli("list", env=_env(FORCE_COLOR="1", COLUMNS="80", TERM="xterm"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name in (s.name for s in catalog()):
        assert any(line.split()[:1] == [name] for line in lines), name
    assert "stale-leftove\n" not in done.stdout


def test_list_filters_by_workload() -> None:
    done = run_cli("list", "--workload", "data-sharding", env=_env(COLUMNS="200"))
    assert done.returncode == 0, done.stderr
    firsts = {ln.split()[0] for ln in done.stdout.splitlines() if ln.strip()}
    assert "uneven-shards" in firsts and "seed-loader" in firsts
    assert "isolated-tmp" not in firsts and "naive-sync" not in firsts


def test_list_refuses_an_unknown_workload() -> None:
    done = run_cli("list", "--workload", "config-synk")
    assert done.returncode == 2
    assert "unknown workload 'config-synk'" in done.stderr


def test_list_as_json() -> None:
    done = run_cli("list", "--format", "json", "-w", "config-sync")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    scenarios = {s["name"]: s for s in data["scenarios"]}
    assert set(scenarios) == {s.name for s in catalog() if s.workload == "config-sync"}
    stale = scenarios["stale-leftover"]
    assert set(stale) == {"name", "workload", "topology", "expect", "description", "finding",
                          "source", "off_pod"}
    # why a scenario does not run on a pod (null: it does)
    assert scenarios["isolated-tmp"]["off_pod"] is None
    assert "only the simulator's coordinator sees" in stale["off_pod"]
    assert stale["expect"] == "pass" and stale["source"].endswith("stale-leftover.yaml")
    assert "\n" not in json.dumps(stale["description"])  # whole, not cut
    assert [t["name"] for t in data["targets"]] == ["naive-sync", "seed-fix-sync", "robust-sync"]
    assert data["targets"][0]["function"] == "harness.workloads.config_sync.naive:run"


# -- --scenario: globs and names typed wrong ---------------------------------------------------

def test_a_glob_runs_every_catalog_scenario_it_matches_once(tmp_path) -> None:
    done = run_cli("run", "-s", "divergent-*", "-s", "divergent-seed", "-T", "naive-sync",
                   "-T", "seed-loader", "--format", "json", "--report-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    cells = json.loads((tmp_path / "latest" / "matrix.json").read_text())["cells"]
    assert [(c["scenario"], c["target"]) for c in cells] == [
        ("divergent-slugs", "naive-sync"), ("divergent-input", "naive-sync"),
        ("divergent-dataset", "seed-loader"), ("divergent-seed", "seed-loader")]


def test_a_glob_that_matches_nothing_is_a_usage_error(tmp_path) -> None:
    done = run_cli("run", "-s", "divergent-*", "-s", "nothing-*", "--report-dir", str(tmp_path))
    assert done.returncode == 2
    assert "no scenario matches 'nothing-*'; the catalog has: baseline" in done.stderr
    assert not (tmp_path / "latest").exists()


def test_a_name_typed_wrong_suggests_the_nearest(tmp_path) -> None:
    done = run_cli("run", "-s", "stale-lefover", "--report-dir", str(tmp_path))
    assert done.returncode == 2
    assert "unknown scenario 'stale-lefover'; did you mean stale-leftover?" in done.stderr
    assert "Traceback" not in done.stderr


def test_replay_refuses_a_glob_of_several_scenarios() -> None:
    done = run_cli("replay", "-s", "divergent-*", "-T", "naive-sync")
    assert done.returncode == 2
    assert "replay runs one cell" in done.stderr


# -- tracebacks start at the user's code -------------------------------------------------------

def test_a_real_traceback_starts_at_the_target_and_the_report_keeps_it_whole(tmp_path) -> None:
    done = run_cli("replay", "-s", "isolated-tmp", "-T", "naive-sync")
    assert done.returncode == 0, done.stderr
    shown = done.stdout.split("--- traceback of ranks 1-7 ---\n", 1)[1]
    assert shown.splitlines()[1].startswith('  File "') and "config_sync/naive.py" in shown.splitlines()[1]
    assert "rank/bootstrap.py" not in done.stdout and "filesystem/" not in done.stdout
    assert "  rank 0 (host 0): returned, exit 0: {" in done.stdout
    ran = run_cli("run", "-s", "isolated-tmp", "-T", "naive-sync", "--format", "json",
                  "--report-dir", str(tmp_path))
    assert ran.returncode == 0, ran.stderr
    cell = json.loads((tmp_path / "latest" / "matrix.json").read_text())["cells"][0]
    assert "rank/bootstrap.py" in cell["ranks"][1]["traceback"]


def test_catalog_cases_take_globs_as_the_cli_does() -> None:
    from harness.pytest_plugin import catalog_cases

    cases = catalog_cases("harness.workloads.config_sync.naive:run", ["divergent-*"])
    assert [c.id for c in cases] == ["divergent-slugs", "divergent-input"]


def test_catalog_cases_refuse_a_workload_that_does_not_exist() -> None:
    """A typo would parametrize nothing, and a test module that collects no case passes."""
    from harness.pytest_plugin import catalog_cases

    with pytest.raises(ValueError, match="unknown workload 'config-synk': use one of config-sync"):
        catalog_cases("naive-sync", workload="config-synk")


def test_a_test_file_in_a_subdirectory_finds_its_target_beside_it_and_fails_in_few_lines(
        tmp_path: Path) -> None:
    """``pytest mycode/test_sync.py`` from the parent directory: the target named relative
    to the test file is found there; a failing cell is its diagnosis, not the plugin's source
    nor the whole scenario's repr."""
    code = tmp_path / "mycode"
    code.mkdir()
    (code / "sync_json.py").write_text(
        "import json, os\nimport torch_xla.core.xla_model as xm\n\n"
        "def fn(inputs):\n"
        "    if xm.get_ordinal() == 0:\n"
        "        os.makedirs('/tmp/myjob', exist_ok=True)\n"
        "        with open('/tmp/myjob/cfg.json', 'w') as f:\n"
        "            json.dump(inputs, f)\n"
        "    xm.rendezvous('cfg')\n"
        "    with open('/tmp/myjob/cfg.json') as f:\n"
        "        return json.load(f)\n")
    (code / "test_sync.py").write_text(
        "import pytest\nfrom harness.pytest_plugin import catalog_cases, check_cell\n\n"
        "@pytest.mark.parametrize('case', catalog_cases('sync_json.py:fn', "
        "['baseline', 'isolated-tmp']))\n"
        "def test_sync(case):\n    check_cell(case)\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "mycode/test_sync.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    out = done.stdout
    assert done.returncode == 1 and "1 failed, 1 passed" in out, out + done.stderr
    assert f"case = CellPlan(isolated-tmp[{code}/sync_json.py:fn] on v4-64, seed 0)" in out
    assert "ranks 1-7 raised FileNotFoundError: [Errno 2] No such file or directory: " \
           "'/tmp/myjob/cfg.json'; rank 0 returned" in out
    assert "def check_cell" not in out and "description=" not in out
    assert "seed finding" not in out  # the seeds' code, not this one's
    assert len(out.splitlines()) < 40, out
