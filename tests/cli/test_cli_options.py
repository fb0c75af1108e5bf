"""The seed, the deadline and the target are checked where they are typed: every command
that takes them refuses a value a world cannot use with click's usage message, exit 2."""

from __future__ import annotations

import json
import os

import pytest

from support import run_cli_here

#: Each command with the arguments that make it otherwise valid.
COMMANDS = {
    "exec": ("exec", "{option}", "{value}", "python", "-c", "pass"),
    "run": ("run", "--scenario", "baseline", "{option}", "{value}"),
    "replay": ("replay", "--scenario", "baseline", "--target", "naive-sync", "{option}",
               "{value}"),
    "explore": ("explore", "-T", "naive-sync", "--examples", "1", "{option}", "{value}"),
}

BAD = [("--seed", "-1", "not in the range 0<=x<=4294967295"),
       ("--seed", "4294967296", "not in the range 0<=x<=4294967295"),
       ("--seed", "1.5", "not a valid integer"),
       ("--timeout", "nan", "is not a number of seconds"),
       ("--timeout", "inf", "not in the range 0.1<=x<=86400"),
       ("--timeout", "0", "not in the range"),
       ("--timeout", "-1", "not in the range"),
       ("--timeout", "86401", "not in the range")]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("option,value,words", BAD, ids=[f"{o}={v}" for o, v, _ in BAD])
def test_a_seed_or_timeout_a_world_cannot_use_is_a_usage_error(command, option, value, words):
    args = [a.format(option=option, value=value) for a in COMMANDS[command]]
    done = run_cli_here(*args)
    assert done.returncode == 2, done.stderr
    assert "Usage:" in done.stderr and f"Invalid value for '{option}'" in done.stderr
    assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


POD_BAD = [("--seed", "-1", "not in the range 0<=x<=4294967295"),
           ("--timeout", "nan", "is not a number of seconds"),
           ("--timeout", "601", "not in the range 0.1<=x<=600"),
           ("--timeout", "0", "not in the range")]


@pytest.mark.parametrize("option,value,words", POD_BAD, ids=[f"{o}={v}" for o, v, _ in POD_BAD])
def test_pod_run_refuses_what_run_refuses_in_the_same_words(option, value, words):
    """A pod's deadline is real time, at most 600 s; otherwise its options are run's."""
    done = run_cli_here("pod", "run", "--local", "1", "-T", "naive-sync", option, value)
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '{option}'" in done.stderr and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_pod_run_takes_the_short_options_run_takes():
    """-T, -s, -w, -c as run's: here the command gets as far as asking which pod."""
    done = run_cli_here("pod", "run", "-T", "naive-sync", "-s", "baseline", "-w", "config-sync")
    assert done.returncode == 2, done.stderr
    assert "say which pod" in done.stderr, done.stderr


def test_the_installed_command_refuses_in_the_same_words(cli):
    """The refusals above are parsed in-process; the command a user types says the same."""
    done = cli("run", "--scenario", "baseline", "--seed", "-1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "Invalid value for '--seed': -1 is not in the range 0<=x<=4294967295" in done.stderr


SEEDED = """
import numpy
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index):
    numpy.random.seed(4294967295)

if __name__ == "__main__":
    xmp.spawn(_mp_fn)
"""


def test_the_largest_seed_and_the_longest_timeout_run(cli, tmp_path):
    script = tmp_path / "seeded.py"
    script.write_text(SEEDED)
    done = cli("exec", "-t", "1x1", "--seed", "4294967295", "--timeout", "600",
               "python", str(script))
    assert done.returncode == 0, done.stderr


SYNC = """
import yaml
from pathlib import Path

if True:
    def sync_config(inputs):
        return inputs
"""


@pytest.mark.parametrize("command", ["run", "replay"])
@pytest.mark.parametrize("ref, words", [
    ("{dir}/absent.py:sync_config", "cannot read {dir}/absent.py: No such file or directory"),
    ("{dir}/sync.py:sync_confg", "{dir}/sync.py defines no 'sync_confg'"),
    ("{dir}/broken.py:sync_config", "{dir}/broken.py is not Python source"),
    ("{dir}/sync.py:", "expected module.path:function"),
    ("{dir}/fifo.py:sync_config", "{dir}/fifo.py is not a regular file"),  # reading it would block
])
def test_a_target_file_without_its_function_is_a_usage_error(tmp_path, command, ref, words):
    (tmp_path / "sync.py").write_text(SYNC)
    (tmp_path / "broken.py").write_text("def sync_config(:\n")
    os.mkfifo(tmp_path / "fifo.py")
    ref = ref.format(dir=tmp_path)
    out = ("--report-dir", str(tmp_path / "out")) if command == "run" else ()
    done = run_cli_here(command, "--scenario", "baseline", "--target", ref, *out)
    assert done.returncode == 2, done.stderr
    assert "Invalid value for '--target'" in done.stderr
    assert words.format(dir=tmp_path) in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()  # refused before any world started


MISFITS = """
def load_config():
    return {}

def sync(inputs, extra):
    return inputs

async def coroutine(inputs):
    return inputs

class Loader:
    def __init__(self, rank, num_replicas, tokenizer):
        self.rank = rank

class Sharded:
    def __init__(self, data_dir, rank, world_size, seed=0):
        self.rank = rank
"""


@pytest.mark.parametrize("name, workload, words", [
    ("load_config", "config-sync", "load_config() ({path}:2) does not fit the config-sync "
     "workload: every rank calls it with one argument, the scenario's inputs (it takes no "
     "argument). It expects def run(inputs: dict) -> dict, called on every rank"),
    ("sync", "checkpoint-resume", "sync(inputs, extra) ({path}:5) does not fit the "
     "checkpoint-resume workload: every rank calls it with one argument, the scenario's "
     "inputs (missing a required argument: 'extra')"),
    ("coroutine", "config-sync", "it is an async function: a rank would get a coroutine"),
    ("Loader", "data-sharding", "Loader(rank, num_replicas, tokenizer) ({path}:11) does not "
     "fit the data-sharding workload: the loader factory requires 'tokenizer', which the "
     "harness does not give"),
    ("load_config", "data-sharding", "its parameters (none) are neither run(inputs) nor a "
     "loader factory's"),
    # a loader given without its workload: the one it fits is named
    ("Sharded", "config-sync", "(missing a required argument: 'rank'). It expects def "
     "run(inputs: dict) -> dict, called on every rank. It fits the data-sharding workload: "
     "add --workload data-sharding."),
])
def test_a_target_its_workload_cannot_call_is_refused_before_any_world(tmp_path, name, workload,
                                                                      words):
    """Read from the source, never run: not a TypeError in every cell, baseline included."""
    path = tmp_path / "mine.py"
    path.write_text(MISFITS)
    done = run_cli_here("run", "--target", f"{path}:{name}", "--workload", workload,
                        "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert "Invalid value for '--target'" in done.stderr
    assert words.format(path=path) in " ".join(done.stderr.split()), done.stderr
    assert not (tmp_path / "out").exists()


def test_a_function_defined_under_an_if_is_found(cli, tmp_path):
    (tmp_path / "sync.py").write_text(SYNC)
    done = cli("run", "--scenario", "baseline", "--target", f"{tmp_path}/sync.py:sync_config",
               "--report-dir", str(tmp_path / "out"))
    assert "Invalid value" not in done.stderr and (tmp_path / "out" / "latest" / "matrix.json").exists()


@pytest.mark.parametrize("workload, ran", [(None, "baseline"),
                                           ("data-sharding", "uneven-shards")])
def test_a_users_target_runs_only_its_workloads_scenarios(cli, tmp_path, workload, ran):
    (tmp_path / "sync.py").write_text(SYNC)
    chosen = ("--workload", workload) if workload else ()
    done = cli("run", "--scenario", "baseline", "--scenario", "uneven-shards", "--target",
               f"{tmp_path}/sync.py:sync_config", *chosen, "--format", "json",
               "--report-dir", str(tmp_path / "out"))
    assert "Traceback" not in done.stderr, done.stderr
    cells = json.loads((tmp_path / "out" / "latest" / "matrix.json").read_text())["cells"]
    assert [c["scenario"] for c in cells] == [ran]
    replay = f"--seed 0 --workload {workload}" if workload else "--seed 0"
    # It returns its inputs: the same value on every rank is a user's config-sync answer
    # (its own schema, judged by agreement), and no loader's.
    assert cells[0]["verdict"] == ("ok" if workload is None else "unexpected")
    assert cells[0]["replay"] == (f"harness replay --scenario {ran} --target "
                                  f"{tmp_path}/sync.py:sync_config {replay}")


def test_an_unknown_workload_is_a_usage_error(cli, tmp_path):
    (tmp_path / "sync.py").write_text(SYNC)
    done = cli("run", "--target", f"{tmp_path}/sync.py:sync_config", "--workload", "config_sync",
               "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 2 and "Invalid value for '--workload'" in done.stderr
    assert "use one of config-sync, data-sharding, checkpoint-resume" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_report_dir_that_cannot_be_written_is_refused_before_any_world(tmp_path, monkeypatch,
                                                                         capsys):
    # In process, so that a world started anyway is seen: the refusal must come first.
    import sys

    import harness.cli
    import harness.runner.run

    started: list[object] = []
    monkeypatch.setattr(harness.runner.run, "run_matrix", lambda *a, **k: started.append(a))
    (tmp_path / "file").write_text("")
    report_dir = tmp_path / "file" / "reports"
    monkeypatch.setattr(sys, "argv", ["harness", "run", "--scenario", "baseline",
                                      "--target", "naive-sync", "--report-dir", str(report_dir)])
    with pytest.raises(SystemExit) as done:
        harness.cli.main()
    stderr = capsys.readouterr().err
    assert done.value.code == 2, stderr
    assert started == []
    assert "Invalid value for '--report-dir'" in stderr, stderr
    assert f"cannot write reports to {report_dir}: Not a directory" in stderr, stderr


def test_two_runs_into_one_report_dir_keep_both(cli, tmp_path):
    runs = [cli("run", "--scenario", "baseline", "--target", "naive-sync", "--format", "json",
                "--seed", str(seed), "--report-dir", str(tmp_path)) for seed in (1, 2)]
    assert [done.returncode for done in runs] == [0, 0], runs[-1].stderr
    dirs = sorted(p for p in tmp_path.iterdir() if p.name != "latest")
    assert [json.loads((d / "matrix.json").read_text())["seed"] for d in dirs] == [1, 2]
    assert (tmp_path / "latest").resolve() == dirs[1]
    assert f"json: {dirs[1]}/matrix.json" in runs[1].stdout


def test_run_prints_failing_cells_compactly_then_the_grid_and_verbose_in_full(cli, tmp_path):
    args = ("run", "-s", "isolated-tmp", "-T", "naive-sync", "--format", "json",
            "--report-dir", str(tmp_path))
    short, full = cli(*args), cli(*args, "-v")
    assert [short.returncode, full.returncode] == [0, 0], short.stderr + full.stderr
    for done in (short, full):
        out = done.stdout
        # the failing cell first, the grid and the summary after it
        assert out.index("isolated-tmp[naive-sync]") < out.index("scenario ") < out.index("1 cell in")
    assert "ranks 1-7 (hosts 1-7): ERROR, exit 1" not in short.stdout
    assert "ranks 1-7 (hosts 1-7): ERROR, exit 1" in full.stdout


def test_run_writes_the_text_report_with_every_detail_beside_the_others(cli, tmp_path):
    done = cli("run", "-s", "isolated-tmp", "-T", "naive-sync", "--format", "terminal",
               "--format", "json", "--report-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "latest" / "matrix.txt").read_text()
    assert "ranks 1-7 (hosts 1-7): ERROR, exit 1" in text
    assert f"text: {tmp_path / 'latest'}" not in done.stdout  # the run's own directory is named
    assert "     text: " in done.stdout and "matrix.txt" in done.stdout
    alone = cli("run", "-s", "baseline", "-T", "naive-sync", "--format", "terminal",
                "--report-dir", str(tmp_path / "none"))
    assert alone.returncode == 0, alone.stderr
    assert not (tmp_path / "none").exists()  # the terminal alone writes nothing
