"""``--config FILE``: the config-sync scenarios hand a team's own config to its own target, so
that a sync validating its own schema is judged on its config, not the seed project's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from harness.workloads.config_sync.workload import ConfigSyncInputs, _another_run

from support import USER_TARGETS_DIR, run_cli, run_cli_here

OWN = USER_TARGETS_DIR / "own_config"
TARGET = f"{OWN / 'strict_sync.py'}:sync_config"


def test_a_strict_schema_is_judged_on_its_own_config_and_another_run_changes_its_own_keys(
        tmp_path: Path) -> None:
    args = ("run", "--target", TARGET, "-s", "baseline", "-s", "concurrent-jobs",
            "--report-dir", str(tmp_path), "--format", "json")
    sample = run_cli(*args, cwd=tmp_path)  # the seed's config fails its schema on rank 0
    assert not re.search(r"^baseline +PASS ✓", sample.stdout, flags=re.M), sample.stdout
    own = run_cli(*args, "--config", str(OWN / "train.yaml"), cwd=tmp_path)
    assert own.returncode == 1, own.stdout + own.stderr
    assert re.search(r"^baseline +PASS ✓", own.stdout, flags=re.M), own.stdout
    assert "all 8 ranks hold another run's config: batch_size 65 (this run's: 64)" in own.stdout
    replay = next(line.split("replay: ", 1)[1] for line in own.stdout.splitlines()
                  if "replay: " in line and "concurrent-jobs" in line)
    assert shlex.split(replay)[-2:] == ["--config", str(OWN / "train.yaml")]
    again = run_cli(*shlex.split(replay)[1:], cwd=tmp_path)
    assert "FAIL" in again.stdout and "batch_size 65" in again.stdout, again.stdout


def test_another_run_changes_the_keys_a_config_has_and_adds_none_it_lacks() -> None:
    own = ConfigSyncInputs(config={"model": {"name": "x"}, "batch_size": 64, "warmup": 1})
    assert _another_run(own).config == {"model": {"name": "x"}, "batch_size": 65, "warmup": 1}
    named = ConfigSyncInputs(config={"run_name": "a", "lr": 0.5})
    assert _another_run(named).config == {"run_name": "a-previous", "lr": 5.0}
    sample = ConfigSyncInputs()
    other = _another_run(sample).config
    assert (other["lr"], other["seed"]) == (sample.config["lr"] * 10, sample.config["seed"] + 1)


@pytest.mark.parametrize("content,words", [
    (None, "No such file or directory"),
    ("- a\n- b\n", "a config must be a mapping of keys to values, not a list"),
    ("model: [unclosed\n", "not valid YAML"),
])
def test_a_config_that_is_not_one_is_refused_naming_the_file(tmp_path: Path, content, words) -> None:
    path = tmp_path / "cfg.yaml"
    if content is not None:
        path.write_text(content)
    done = run_cli_here("run", "--target", TARGET, "-s", "baseline", "--config", str(path),
                        cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "--config" in said and words in said and "cfg.yaml" in said


def test_config_is_for_your_own_target_and_the_config_sync_scenarios(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"batch_size": 8}')
    builtin = run_cli_here("run", "--target", "naive-sync", "--config", str(cfg), cwd=tmp_path)
    assert builtin.returncode == 2 and "for your own target" in (builtin.stdout + builtin.stderr)
    other = run_cli_here("run", "--target", TARGET, "-s", "uneven-shards", "--config", str(cfg),
                         cwd=tmp_path)
    said = other.stdout + other.stderr
    assert other.returncode == 2 and "hands a config over" in said, said


def test_catalog_cases_hands_the_config_beside_the_test_file(tmp_path: Path) -> None:
    """pytest from another directory: the target and its config are found beside the test."""
    import shutil
    import subprocess
    import sys

    mine = tmp_path / "repo"
    mine.mkdir()
    shutil.copy(OWN / "strict_sync.py", mine / "strict_sync.py")
    shutil.copy(OWN / "train.yaml", mine / "train.yaml")
    (mine / "test_sync.py").write_text(
        "import pytest\nfrom harness.pytest_plugin import catalog_cases, check_cell\n\n"
        "@pytest.mark.parametrize('case', catalog_cases('strict_sync.py:sync_config', "
        "['baseline', 'divergent-input'], config='train.yaml'))\n"
        "def test_sync(case):\n    check_cell(case)\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "repo/test_sync.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr
