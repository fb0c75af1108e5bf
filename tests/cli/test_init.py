"""``harness init``: a stranger's repository gets a target that runs as it is, a pytest file
that runs the catalog on it, and a workflow that calls the harness with options it has."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from support import run_cli, run_cli_here


def test_init_writes_a_starting_point_whose_first_run_is_green(tmp_path: Path) -> None:
    done = run_cli_here("init", str(tmp_path))
    assert done.returncode == 0, done.stderr
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [".github/workflows/harness.yml", "harness_target.py",
                       "test_harness_catalog.py"]
    assert f"next: edit {tmp_path}/harness_target.py: make sync_config(inputs) call your " \
           "own config sync" in done.stdout
    # the stand-in is correct: every cell meets its expectation or tested nothing
    run = run_cli("run", "--target", "harness_target.py:sync_config", "--report-dir",
                  str(tmp_path / "reports"), cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no unexpected cell" in run.stdout
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "test_harness_catalog.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert tests.returncode == 0 and "passed" in tests.stdout, tests.stdout + tests.stderr


def test_the_workflow_it_writes_calls_the_harness_with_options_the_harness_has(tmp_path: Path):
    import click

    from harness.cli import cli

    assert run_cli_here("init", str(tmp_path), "--workload", "data-sharding").returncode == 0
    workflow = yaml.safe_load((tmp_path / ".github/workflows/harness.yml").read_text())
    runs = [step["run"] for step in workflow["jobs"]["catalog"]["steps"] if "run" in step]
    calls = [shlex.split(line)[1:] for text in runs for line in text.splitlines()
             if line.strip().startswith("harness ")]
    assert calls == [["run", "--target", "harness_target.py:ShardedLoader", "--workload",
                      "data-sharding", "--report-dir", "reports", "--format", "json",
                      "--format", "html"]]
    command = cli.commands["run"]
    assert isinstance(command, click.Command)
    known = {o for p in command.params for o in p.opts}
    assert {w for w in calls[0] if w.startswith("--")} <= known


def test_init_never_overwrites_and_says_what_is_there(tmp_path: Path) -> None:
    (tmp_path / "harness_target.py").write_text("# mine\n")
    done = run_cli_here("init", str(tmp_path))
    assert done.returncode == 2
    assert f"{tmp_path}/harness_target.py is there already: nothing written (--force " \
           "replaces them)" in done.stderr
    assert (tmp_path / "harness_target.py").read_text() == "# mine\n"
    assert not (tmp_path / "test_harness_catalog.py").exists()
    assert run_cli_here("init", str(tmp_path), "--force").returncode == 0
    assert "def sync_config(inputs):" in (tmp_path / "harness_target.py").read_text()


def test_each_workloads_starting_target_runs_its_workload(tmp_path: Path) -> None:
    for workload, name, scenario in (("data-sharding", "ShardedLoader", "uneven-shards"),
                                     ("checkpoint-resume", "process_stream", "stream-missing")):
        where = tmp_path / workload
        assert run_cli_here("init", str(where), "--workload", workload).returncode == 0
        run = run_cli("run", "--target", f"harness_target.py:{name}", "--workload", workload,
                      "-s", scenario, "--report-dir", str(where / "reports"), cwd=where)
        assert run.returncode == 0 and "no unexpected cell" in run.stdout, run.stdout + run.stderr


def test_the_next_step_installs_pytest_where_the_environment_has_none(monkeypatch) -> None:
    """`pip install torch .` brings no pytest: the line init prints must run as printed."""
    import importlib.util

    from harness.cli.init import _pytest

    assert _pytest() == ""  # this environment has pytest
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pytest" else real(name, *a))
    assert _pytest() == "pip install pytest && "


def test_the_workflow_never_installs_whatever_pypi_calls_harness(tmp_path: Path) -> None:
    """Another project owns the name `harness` on PyPI: without PIP_HARNESS the job stops,
    saying what to set, instead of installing it; and torch is pinned to the CPU build."""
    assert run_cli_here("init", str(tmp_path)).returncode == 0
    text = (tmp_path / ".github/workflows/harness.yml").read_text()
    job = yaml.safe_load(text)["jobs"]["catalog"]
    assert job["env"]["PIP_HARNESS"] == "${{ vars.PIP_HARNESS }}"
    install = next(s["run"] for s in job["steps"] if s.get("name", "").startswith("Install"))
    assert 'if [ -z "$PIP_HARNESS" ]' in install and "::error::" in install
    assert "torch==" in install and "download.pytorch.org/whl/cpu" in install
