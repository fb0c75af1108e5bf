"""The command line after the main install alone: no pytest, and ``harness replay`` still works.

The replay command is printed under every failing cell, so it must run where only
``pip install .`` was done. These tests hide pytest behind a module that refuses to
import, placed first on the path, and run the CLI in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys

from support import Cli

NAIVE = "harness.workloads.config_sync.naive:run"  # naive-sync, but not a built-in: nothing known


def test_pytest_is_really_hidden(without_pytest: dict[str, str]) -> None:
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    done = subprocess.run([sys.executable, "-c", "import pytest"], env=without_pytest,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "No module named 'pytest'" in done.stderr


def test_the_cli_imports_nothing_that_imports_pytest(without_pytest: dict[str, str]) -> None:
    code = ("import sys, harness.cli, harness.reports.diagnosis, harness.runner.run; "
            "assert 'pytest' not in sys.modules and '_pytest' not in sys.modules")
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    done = subprocess.run([sys.executable, "-c", code], env=without_pytest, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_list_works_without_pytest(bare_cli: Cli) -> None:
    done = bare_cli("list")
    assert done.returncode == 0, done.stderr
    assert "isolated-tmp" in done.stdout and "robust-sync" in done.stdout


def test_replay_of_a_passing_cell_exits_0_without_pytest(bare_cli: Cli) -> None:
    done = bare_cli("replay", "--scenario", "baseline", "--target", "robust-sync",
                   "--seed", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("baseline[robust-sync] on single-host-8, seed 0: PASS "
                                  "(expected pass, verdict ok)")


def test_replay_of_a_known_failure_prints_its_diagnosis_and_exits_0(bare_cli: Cli) -> None:
    """Exit 1 means "something failed that was not expected to" (``ExitCode.FAILED``): a known
    failure is not."""
    done = bare_cli("replay", "--scenario", "isolated-tmp", "--target", "naive-sync")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "isolated-tmp[naive-sync] on v4-64, seed 0: ERROR (expected pass, verdict known)" in out
    assert "  ranks 1-7 (hosts 1-7): ERROR, exit 1: FileNotFoundError" in out
    assert "--- traceback of ranks 1-7 ---" in out
    assert "replay: harness replay --scenario isolated-tmp --target naive-sync --seed 0" in out


def test_a_cell_run_under_python_isolation_prints_a_replay_under_it(bare_cli: Cli) -> None:
    """A new user's python-isolation run printed a replay without --isolation, which then
    ran under kernel isolation and passed where the run had failed."""
    done = bare_cli("replay", "--scenario", "isolated-tmp", "--target", "naive-sync",
                    "--isolation", "python")
    assert ("replay: harness replay --scenario isolated-tmp --target naive-sync --seed 0 "
            "--isolation python") in done.stdout, done.stdout + done.stderr


def test_replay_of_an_unexpected_failure_prints_its_diagnosis_and_exits_1(bare_cli: Cli) -> None:
    done = bare_cli("replay", "--scenario", "isolated-tmp", "--target", NAIVE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"isolated-tmp[{NAIVE}] on v4-64, seed 0: ERROR (expected pass, verdict unexpected)" \
        in done.stdout
    assert "ranks 1-7 raised FileNotFoundError" in done.stdout
    assert "No module named" not in done.stdout + done.stderr


def test_replay_of_a_cell_of_a_campaign_over_seeds_names_the_seed(bare_cli: Cli, tmp_path) -> None:
    done = bare_cli("run", "-s", "partial-write", "-T", "naive-sync", "--seeds", "0,3",
                    "--format", "json", "--report-dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = str(tmp_path / "latest" / "matrix.json")
    both = bare_cli("replay", report, "--cell", "partial-write[naive-sync]")
    assert both.returncode == 2
    assert "has partial-write[naive-sync] at seeds 0, 3: name one, as --cell " \
           "'partial-write[naive-sync] seed 0'" in both.stderr
    one = bare_cli("replay", report, "--cell", "partial-write[naive-sync] seed 3")
    assert one.returncode == 0, one.stdout + one.stderr
    assert one.stdout.startswith("partial-write[naive-sync] on single-host-8, seed 3:")
