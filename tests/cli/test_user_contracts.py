"""Anyone's loader and worker: the data-sharding and checkpoint-resume contracts, driven from
the command line with code written as a user would write it (tests/user_targets/), not ours.

Each workload has no fault-free catalog scenario, so a ``baseline.yaml`` of that workload is
written next to the test; the catalog's fault scenarios are used as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import REPO, run_cli

LOADER = "tests/user_targets/shard_loader.py"
WORKER = "tests/user_targets/ckpt_worker.py:main"

DATA_BASELINE = """\
name: baseline
workload: data-sharding
description: no fault; one read-only data disk shared by every host
finding: "seed 000, Finding 3"
topology: 2x2
expect: pass
timeout: 10
mounts:
  - {path: /mnt/data, scope: shared, mode: ro}
"""

CKPT_BASELINE = """\
name: baseline
workload: checkpoint-resume
description: no fault; four workers, one shared bucket
finding: "seed 003"
topology: 4x1
expect: pass
timeout: 10
mounts:
  - {path: /mnt/bucket, scope: shared, consistency: object}
"""


def cells(tmp_path: Path, target: str, workload: str, *scenarios: str) -> dict[str, dict]:
    """``harness run`` of ``target`` on ``scenarios``; the JSON report's cells by scenario."""
    args = [a for s in scenarios for a in ("--scenario", s)]
    out = tmp_path / "out"
    done = run_cli("run", "--target", target, "--workload", workload, *args,
                   "--format", "json", "--report-dir", str(out))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stderr
    return {c["scenario"]: c for c in json.loads((out / "latest" / "matrix.json").read_text())["cells"]}


def baseline(tmp_path: Path, text: str) -> str:
    (tmp_path / "scenarios").mkdir(exist_ok=True)
    path = tmp_path / "scenarios" / "baseline.yaml"
    path.write_text(text)
    return str(path)


# -- data sharding ---------------------------------------------------------------------------

def test_a_users_dataset_class_passes_baseline_and_is_caught_on_another_data_version(tmp_path):
    got = cells(tmp_path, f"{LOADER}:ShardDataset", "data-sharding",
                baseline(tmp_path, DATA_BASELINE), "divergent-dataset", "uneven-shards")
    assert got["baseline"]["outcome"] == "PASS", got["baseline"]["detail"]
    assert "disjoint shards covering all 96 samples" in got["baseline"]["detail"]
    # Host 2's disk holds another version: the plain loader trains on it without a word.
    bad = got["divergent-dataset"]
    assert bad["outcome"] == "FAIL" and bad["verdict"] == "unexpected"
    assert "rank 2 trained on 24 sample ids that are not in /mnt/data/puzzles" in bad["detail"]
    # A strided shard of a shuffled order, read as a map-style dataset: every sample once.
    assert got["uneven-shards"]["outcome"] == "PASS", got["uneven-shards"]["detail"]


def test_a_users_loader_factory_hangs_on_uneven_shards(tmp_path):
    got = cells(tmp_path, f"{LOADER}:make_loader", "data-sharding",
                baseline(tmp_path, DATA_BASELINE), "uneven-shards")
    assert got["baseline"]["outcome"] == "PASS", got["baseline"]["detail"]
    # 101 samples strided over 4 ranks: rank 0 gets 26 (13 batches of 2), the others 25
    # (12 with drop_last): rank 0's 13th step waits in its all-reduce forever.
    hang = got["uneven-shards"]
    assert hang["outcome"] == "HANG", hang["detail"]
    assert "rank 0 waits in all_reduce" in hang["detail"]


def test_a_run_function_returning_the_dict_still_works_through_the_adapter(tmp_path):
    # The recommended loader named as a user names their own: module:function, not a built-in.
    got = cells(tmp_path, "harness.workloads.data_sharding.robust:run", "data-sharding",
                baseline(tmp_path, DATA_BASELINE), "divergent-dataset")
    assert got["baseline"]["outcome"] == "PASS", got["baseline"]["detail"]
    assert got["divergent-dataset"]["outcome"] == "ERROR", got["divergent-dataset"]["detail"]
    assert got["divergent-dataset"]["verdict"] == "ok"  # fail-loudly: the same error everywhere


VIOLATIONS = '''
import numpy as np

def returns_a_number(data_dir, rank, num_replicas, seed, global_batch_size):
    return 42

def needs_a_tokenizer(data_dir, rank, num_replicas, tokenizer):
    return []

def batches_without_ids(data_dir, rank, num_replicas):
    return [{"tokens": np.zeros((2, 4), dtype=np.int32)}]

def returns_a_list(inputs):
    return [[1, 2], [3, 4]]

def two_unknown_parameters(path, size):
    return []
'''


@pytest.mark.parametrize("name, words", [
    ("returns_a_number", "the factory returned a int, which is neither iterable"),
    ("batches_without_ids", "a batch is a dict with keys ['tokens']: none of sample_ids, ids"),
    ("returns_a_list", "returned a list, not the data-sharding contract's dict with 'batches'"),
])
def test_a_loader_that_breaks_the_contract_fails_naming_the_contract(tmp_path, name, words):
    (tmp_path / "bad.py").write_text(VIOLATIONS)
    got = cells(tmp_path, f"{tmp_path}/bad.py:{name}", "data-sharding",
                baseline(tmp_path, DATA_BASELINE))["baseline"]
    assert got["outcome"] == "FAIL", got["detail"]
    assert words in got["detail"], got["detail"]
    assert "data-sharding contract" in got["detail"]
    assert "KeyError" not in got["detail"] and "Traceback" not in got["detail"]


@pytest.mark.parametrize("name, words", [
    ("needs_a_tokenizer", "the loader factory requires 'tokenizer', which the harness does not "
                          "give"),
    ("two_unknown_parameters", "its parameters (path, size) are neither run(inputs) nor a "
                               "loader factory's"),
])
def test_a_loader_its_source_says_cannot_be_built_is_refused_up_front(tmp_path, name, words):
    """What the signature alone shows is a usage error before any world (exit 2), not a
    FAIL in every cell."""
    (tmp_path / "bad.py").write_text(VIOLATIONS)
    done = run_cli("run", "--target", f"{tmp_path}/bad.py:{name}", "--workload",
                   "data-sharding", "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert words in " ".join(done.stderr.split()), done.stderr
    assert not (tmp_path / "out").exists()


# -- checkpoint/resume -----------------------------------------------------------------------

def test_a_users_worker_passes_baseline_and_preemption_and_is_caught_on_a_flaky_bucket(tmp_path):
    got = cells(tmp_path, WORKER, "checkpoint-resume", baseline(tmp_path, CKPT_BASELINE),
                "preempt-mid-shard", "upload-failure", "duplicate-worker-id")
    # Its checkpoint is checkpoints/progress_N.json with its own keys: judged from the bucket.
    ok = got["baseline"]
    assert ok["outcome"] == "PASS", ok["detail"]
    assert "all 50 samples of 4 streams uploaded exactly once" in ok["detail"]
    assert "listed 'processed_sample_ids'" in ok["detail"]  # says what it could not judge
    # Chunks named by their position in the stream: a redone chunk replaces itself.
    assert got["preempt-mid-shard"]["outcome"] == "PASS", got["preempt-mid-shard"]["detail"]
    # One EIO on the bucket kills it (no retry), every worker loudly: not what `pass` wants.
    flaky = got["upload-failure"]
    assert flaky["outcome"] == "ERROR" and flaky["verdict"] == "unexpected"
    assert "Input/output error" in flaky["detail"]
    # It trusts TPU_WORKER_ID: host 1 redoes stream 0 and stream 1 is never processed.
    dup = got["duplicate-worker-id"]
    assert dup["outcome"] == "FAIL", dup["detail"]
    assert "worker 1 (rank 1): 13 samples lost" in dup["detail"]
    assert "rank 1 (host of worker 1) ran as worker 0" in dup["detail"]


ELSEWHERE = '''
import json, os

def main(inputs):
    worker = int(os.environ["TPU_WORKER_ID"])
    os.chdir(inputs["workdir"])
    with open(f"data/streams/stream_{worker:03d}.jsonl") as f:
        ids = [json.loads(line)["id"] for line in f if line.strip()]
    out = os.path.join(inputs["bucket"], "results")  # not activations/tpu_N/
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"worker{worker}.json"), "w") as f:
        json.dump(ids, f)
    return {"worker_id": worker}
'''


def test_a_worker_writing_outside_the_contracts_layout_is_told_where_outputs_go(tmp_path):
    (tmp_path / "elsewhere.py").write_text(ELSEWHERE)
    got = cells(tmp_path, f"{tmp_path}/elsewhere.py:main", "checkpoint-resume",
                baseline(tmp_path, CKPT_BASELINE))["baseline"]
    assert got["outcome"] == "FAIL", got["detail"]
    assert "50 samples lost" in got["detail"]
    assert ("4 objects in the bucket hold no record (results/worker0.json, results/worker1.json, "
            "results/worker2.json, results/worker3.json): a record is a line holding one "
            "sample's id") in got["detail"]


# -- the adapter's choice of shape, without a world --------------------------------------------

def test_the_shape_of_a_target_is_read_from_its_signature_or_its_declaration():
    from harness.workloads.data_sharding.adapter import ContractError, shape_of

    class Dataset:
        def __init__(self, root, rank, num_replicas):
            pass

    def run(inputs):
        return inputs

    def factory(data_dir, rank, world_size, seed=0):
        return []

    def declared(cfg):
        return []

    declared.harness_contract = "loader"
    assert shape_of(Dataset) == shape_of(factory) == shape_of(declared) == "loader"
    assert shape_of(run) == "run"
    with pytest.raises(ContractError, match="neither run"):
        shape_of(lambda a, b: None)


# -- your own data (--data) ----------------------------------------------------------------

OWN = Path(__file__).resolve().parents[1] / "user_targets" / "own_data"


def _npz_data(where: Path) -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_npz", OWN / "make_npz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    where.mkdir(parents=True)
    module.write(str(where))
    return where


def test_data_from_the_command_line_under_the_working_directory_is_each_hosts_copy(tmp_path):
    # The user's checkout (the working directory) under /tmp, the data inside it: under
    # kernel isolation each host has a /tmp of its own, the checkout is bound back into it,
    # and the data mounted inside that.
    data = _npz_data(tmp_path / "proj" / "data")
    out = tmp_path / "out"
    done = run_cli("run", "--target", f"{OWN / 'npz_shards.py'}:ShardedTokens", "--workload",
                   "data-sharding", "--data", "data", "--scenario", "uneven-shards",
                   "--scenario", "missing-data-on-host", "--format", "json",
                   "--report-dir", str(out), cwd=tmp_path / "proj")
    assert "Traceback" not in done.stderr, done.stderr
    got = {c["scenario"]: c for c in json.loads((out / "latest" / "matrix.json").read_text())["cells"]}
    assert got["uneven-shards"]["outcome"] == "PASS", got["uneven-shards"]["detail"]
    assert f"rank 3 raised FileNotFoundError: no shard-*.npz under {data}" \
        in got["missing-data-on-host"]["detail"]
    replay = got["uneven-shards"]["replay"]
    assert f"--data {data}" in replay and "--workload data-sharding" in replay
    again = run_cli(*replay.split()[1:], cwd=tmp_path)  # from anywhere: the path is absolute
    assert again.returncode == 0, again.stdout + again.stderr
    assert "PASS (expected pass" in again.stdout


def test_a_scenario_file_names_its_data_relative_to_itself_and_where_the_code_reads_it(tmp_path):
    _npz_data(tmp_path / "scenarios" / "sample")
    path = tmp_path / "scenarios" / "mine.yaml"
    path.write_text(DATA_BASELINE.replace("name: baseline", "name: mine")
                    + "data: sample:/srv/tokens\n")
    loader = tmp_path / "loader.py"
    loader.write_text((OWN / "npz_shards.py").read_text().replace(
        "def __init__(self, root,", "def __init__(self, root='/srv/tokens',"))
    got = cells(tmp_path, f"{loader}:ShardedTokens", "data-sharding", str(path))
    assert got["mine"]["outcome"] == "PASS", got["mine"]["detail"]
    assert f"--data {tmp_path / 'scenarios' / 'sample'}:/srv/tokens" not in got["mine"]["replay"]
    assert got["mine"]["replay"].split()[3] == str(path)  # the file says it: replayed from it


@pytest.mark.parametrize("args, words", [
    (["--data", "nowhere"], "does not exist"),
    (["--data", "{file}"], "is not a directory"),
    (["--data", "{empty}"], "holds no file"),
    (["--data", "{data}", "--scenario", "missing-file"],
     "none of the chosen scenarios reads a dataset"),
    (["--data", "{data}", "--target", "seed-loader"], "for your own loader"),
    (["--data", "{data}:/proc/x"], "the data cannot be mounted at /proc/x: cannot mount over "
                                   "the kernel's /proc"),
])
def test_data_that_cannot_be_a_worlds_dataset_is_refused_naming_it(tmp_path, args, words):
    from support import run_cli_here

    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text("{}\n")
    values = [a.format(file=tmp_path / "file", empty=tmp_path / "empty", data=tmp_path / "data")
              for a in args]
    mine = [] if "--target" in values else ["--target", f"{OWN / 'jsonl_docs.py'}:make_loader"]
    done = run_cli_here("run", *mine, "--workload", "data-sharding", *values, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert "--data" in done.stderr and words in done.stderr, done.stderr


def test_a_loader_naming_its_dropped_samples_by_strings_passes_where_its_twin_does(tmp_path):
    """``dropped_ids`` as the shards' own string ids (the contract takes any ids): the same
    cells as the same loader without them, every one a verdict, never the harness's crash."""
    import numpy as np

    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(3)
    for i in range(4):
        np.savez(data / f"shard_{i}.npz", x=rng.normal(size=(25 + i, 4)).astype("float32"))
    twin = tmp_path / "twin.py"
    twin.write_text(f"import sys\nsys.path.insert(0, {str(REPO / 'tests' / 'user_targets')!r})\n"
                    "from npz_strided import Sharded\n\n\nclass Twin(Sharded):\n"
                    "    def __init__(self, data_dir, rank, world_size, seed=0):\n"
                    "        super().__init__(data_dir, rank, world_size, seed)\n"
                    "        del self.dropped_ids\n")

    def outcomes(target: str) -> dict[str, str]:
        out = tmp_path / f"out-{target.rsplit(':', 1)[1]}"
        done = run_cli("run", "-T", target, "-w", "data-sharding", "--data", str(data),
                       "--format", "json", "--report-dir", str(out))
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
        cells = json.loads((out / "latest" / "matrix.json").read_text())["cells"]
        return {c["scenario"]: c["outcome"] for c in cells}

    named = outcomes(f"{REPO / 'tests' / 'user_targets' / 'npz_strided.py'}:Sharded")
    assert named == outcomes(f"{twin}:Twin")
    assert named["readonly-data-mount"] == named["baseline-sharding"] == "PASS", named
