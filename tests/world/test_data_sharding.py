"""Data sharding: the builder, the checker, and both reference loaders in real worlds.

The checker is tried on synthetic results first (each invariant broken on its
own), then on real cells: the reference loaders, and a few user-style loaders
at the bottom of this file, which the ranks load as
``tests/world/test_data_sharding.py:name``.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from harness.checkers.sharding import Epoch, check, check_values
from harness.runner.cells import KNOWN, OK, UNEXPECTED
from harness.runner.run import plan_cells, run_cell
from harness.scenarios import catalog, find
from harness.topology import get_topology
from harness.workloads.base import Target
from harness.workloads.data_sharding import PRELOAD, TARGETS
from harness.workloads.data_sharding.dataset import (
    DIVERGENT_ID_START,
    EXPECTED_PATH,
    build,
    npy_data_offset,
)
from harness.workloads.data_sharding.workload import DataShardingInputs
from harness.workloads.registry import BUILTIN_TARGETS, WORKLOADS
from harness.workloads.registry import target as resolve_target
from harness.world.result import ERROR, FAIL, HANG, PASS, WorldResult
from harness.world.world import run_world

import support
from support import REPO

HERE = Path(__file__).resolve()
SEEDS = (0, 1, 7)
SCENARIOS = ("uneven-shards", "missing-data-on-host", "divergent-dataset", "corrupt-npy",
             "readonly-data-mount", "divergent-seed", "uneven-groups", "truncated-data-on-host",
             "baseline-sharding")
WORKLOAD = WORKLOADS["data-sharding"]


def helper(name: str) -> str:
    return f"{HERE}:{name}"


def world(scenario_name: str, ref: str, cell_seed: int = 0,
          faults: list[dict[str, Any]] | None = None, **overrides: Any):
    """Run ``ref`` under a catalog scenario as the runner does: (WorldResult, Judgement).

    ``overrides`` change the scenario's inputs (``seed`` there is the config's seed);
    ``faults`` are added to the scenario's.
    """
    scenario = find(scenario_name)
    topology = get_topology(scenario.topology)
    inputs = WORKLOAD.inputs({**scenario.inputs, **overrides}, topology)
    result = run_world(ref, topology=topology, timeout=scenario.timeout, seed=cell_seed,
                       args=(inputs.for_target(),), mounts=scenario.mount_list(os.path.expanduser("~")),
                       faults=[*scenario.faults, *(faults or [])], preload=PRELOAD,
                       cwd=str(REPO),
                       files=WORKLOAD.setup(inputs, topology, cell_seed),
                       watch=WORKLOAD.watch(inputs))
    return result, WORKLOAD.checker(result)


def cell(scenario_name: str, target: Target, seed: int = 0):
    (plan,) = plan_cells([find(scenario_name)], [target], seed)
    return run_cell(plan)


def user_target(name: str) -> Target:
    return Target(name, helper(name), "data-sharding", preload=PRELOAD)


# -- the checker on synthetic results -------------------------------------------

EPOCH = Epoch(frozenset(range(20)), global_batch_size=4, where="/mnt/data/t")  # 20 mod 4 = 0
UNEVEN = Epoch(frozenset(range(22)), global_batch_size=4, where="/mnt/data/t")  # 2 left over


def sharded(ids: list[int], world: int, gbs: int) -> dict[int, dict[str, Any]]:
    """Each rank's slice of every full global batch of ``ids``: a correct loader's result."""
    local = gbs // world
    full = len(ids) // gbs * gbs
    values = {}
    for rank in range(world):
        batches = [ids[s + rank * local:s + (rank + 1) * local] for s in range(0, full, gbs)]
        values[rank] = {"batches": batches, "restart": [list(b) for b in batches]}
    return values


def test_a_correct_epoch_passes_and_says_what_was_dropped():
    order = list(np.random.default_rng(3).permutation(22))
    judgement = check_values(sharded(order, 2, 4), UNEVEN)
    assert judgement.outcome == PASS, judgement.detail
    assert "2 ranks x 5 batches" in judgement.detail
    assert f"2 samples, e.g. {min(order[20:])}, {max(order[20:])}" in judgement.detail


def test_unequal_batch_counts_are_caught_and_the_ranks_named():
    values = sharded(list(range(20)), 4, 4)
    values[3]["batches"].pop()
    values[3]["restart"].pop()
    judgement = check_values(values, EPOCH)
    assert judgement.outcome == FAIL
    assert "unequal batch counts: ranks 0-2 5 batches, rank 3 4 batches" in judgement.detail
    # The batch rank 3 skipped is named as never read, with its ids.
    assert "1 of 20 samples never read by any rank (e.g. 19)" in judgement.detail


def test_overlapping_shards_are_caught_with_the_sample_and_both_ranks():
    values = sharded(list(range(20)), 2, 4)
    values[1]["batches"][2] = list(values[0]["batches"][2])  # rank 1 read rank 0's slice
    values[1]["restart"] = [list(b) for b in values[1]["batches"]]
    judgement = check_values(values, EPOCH)
    assert judgement.outcome == FAIL
    assert "2 samples read more than once, by ranks 0-1 (e.g. sample 8 in rank 0 batch 2 and " \
        "rank 1 batch 2; sample 9 in rank 0 batch 2 and rank 1 batch 2)" in judgement.detail
    assert "never read by any rank (e.g. 10, 11)" in judgement.detail


def test_a_sample_read_twice_by_the_same_rank_is_an_overlap_too():
    values = sharded(list(range(20)), 2, 4)
    values[0]["batches"][4] = [0, 1]
    values[0]["restart"] = [list(b) for b in values[0]["batches"]]
    judgement = check_values(values, EPOCH)
    assert "read more than once, by rank 0 (e.g. sample 0 in rank 0 batch 0 and rank 0 batch 4" \
        in judgement.detail


def test_ids_from_outside_the_dataset_are_named():
    values = sharded(list(range(20)), 2, 4)
    values[1]["batches"][0] = [1_000_002, 1_000_003]
    values[1]["restart"] = [list(b) for b in values[1]["batches"]]
    judgement = check_values(values, EPOCH)
    assert judgement.outcome == FAIL
    assert judgement.detail.startswith(
        "rank 1 trained on 2 sample ids that are not in /mnt/data/t (e.g. 1000002, 1000003)")


def test_losing_more_than_the_last_partial_batch_fails():
    values = sharded(list(range(22)), 2, 4)
    for v in values.values():  # every rank ends one batch early: 6 samples lost, 2 allowed
        v["batches"].pop()
        v["restart"].pop()
    judgement = check_values(values, UNEVEN)
    assert judgement.outcome == FAIL
    assert "6 of 22 samples never read by any rank (e.g. 16, 17, 18, 19, ...)" in judgement.detail
    assert "(22 mod 4 = 2)" in judgement.detail
    # With nothing left over, not one sample may be lost.
    values = sharded(list(range(20)), 2, 4)
    values[0]["batches"][1] = [4]
    values[0]["restart"][1] = [4]
    assert "1 of 20 samples never read by any rank (e.g. 5)" in check_values(values, EPOCH).detail


def test_reported_drops_must_be_the_samples_actually_dropped():
    values = sharded(list(range(22)), 2, 4)
    for v in values.values():
        v["dropped"] = [20, 21]
    assert check_values(values, UNEVEN).outcome == PASS
    for v in values.values():
        v["dropped"] = [3]
    judgement = check_values(values, UNEVEN)
    assert judgement.outcome == FAIL
    assert "2 never read and not reported as dropped (e.g. 20, 21)" in judgement.detail
    assert "1 reported as dropped but read or not in the data (e.g. 3)" in judgement.detail


def test_a_different_order_from_a_fresh_loader_is_caught():
    values = sharded(list(range(20)), 2, 4)
    values[1]["restart"][3] = values[1]["restart"][3][::-1]
    judgement = check_values(values, EPOCH)
    assert judgement.outcome == FAIL
    assert judgement.detail == ("a fresh loader with the same seed gives another order: rank 1 at "
                                "batch 3: [14, 15] then [15, 14]")
    del values[0]["restart"]
    assert "rank 0 returned no 'restart' pass" in check_values(values, EPOCH).detail


def test_a_rank_that_returns_no_batches_fails():
    values = sharded(list(range(20)), 2, 4)
    values[1] = None
    assert check_values(values, EPOCH).detail.startswith(
        "rank 1 returned None, not the data-sharding contract's dict with 'batches'")
    values[1] = {"batches": [[1.5]]}
    assert check_values(values, EPOCH).outcome == FAIL


def _result(values: dict[int, Any], outcomes: dict[int, str] | None = None) -> WorldResult:
    ranks = [support.rank(r, (outcomes or {}).get(r, PASS), value) for r, value in values.items()]
    hung = any(r.outcome == HANG for r in ranks)
    return support.world(ranks, hang_report="ranks 0 blocked in all_reduce (step 4)" if hung else None)


def test_check_reads_the_world_result_and_a_hang_comes_first():
    values = sharded(list(range(20)), 2, 4)
    assert check(_result(values), EPOCH).outcome == PASS
    values[1]["batches"].pop()
    assert check(_result(values), EPOCH).outcome == FAIL
    hung = check(_result(values, {0: HANG}), EPOCH)
    assert hung.outcome == HANG and "blocked in all_reduce" in hung.detail
    assert check(_result(sharded(list(range(20)), 2, 4)), None).outcome == FAIL


# -- the builder -------------------------------------------------------------------

def _files(leftovers, host: int) -> dict[str, bytes]:
    return {Path(f.path).name: f.content for f in leftovers
            if f.path.startswith("/mnt/data/") and (f.hosts is None or host in f.hosts)}


def _inputs(**changes: Any) -> DataShardingInputs:
    return WORKLOAD.inputs(changes)


def test_the_dataset_is_valid_deterministic_and_records_its_checksums():
    topo = get_topology("2x2")
    a, again, other = (build(_inputs(num_samples=12), topo, s) for s in (3, 3, 4))
    assert a == again and a != other
    files = _files(a, 0)
    assert set(files) == {"inputs.npy", "labels.npy", "puzzle_indices.npy", "dataset.json"}
    inputs = np.load(io.BytesIO(files["inputs.npy"]))
    labels = np.load(io.BytesIO(files["labels.npy"]))
    assert inputs.shape == (12, 1 + DataShardingInputs().seq_len) and inputs.dtype == np.int32
    assert sorted(inputs[:, 0]) == list(range(12)) and list(inputs[:, 0]) != list(range(12))
    assert (labels[:, 0] == inputs[:, 0]).all()
    manifest = json.loads(files["dataset.json"])
    import hashlib
    for name in ("inputs.npy", "labels.npy", "puzzle_indices.npy"):
        assert manifest["files"][name]["sha256"] == hashlib.sha256(files[name]).hexdigest()
    expected = json.loads(next(f.content for f in a if f.path == EXPECTED_PATH))
    assert expected == {"data_dir": "/mnt/data/puzzles", "version": "v1", "id_start": 0,
                        "num_samples": 12, "global_batch_size": 8}


def test_per_host_variants_missing_divergent_and_corrupt():
    topo = get_topology("4x1")
    leftovers = build(_inputs(missing_on_hosts=[3], divergent_on_hosts=[2],
                              corrupt_file="inputs.npy", corrupt_on_hosts=[1]), topo, 0)
    good, corrupt, divergent = _files(leftovers, 0), _files(leftovers, 1), _files(leftovers, 2)
    assert _files(leftovers, 3) == {}
    v2 = np.load(io.BytesIO(divergent["inputs.npy"]))
    assert v2.shape == np.load(io.BytesIO(good["inputs.npy"])).shape
    assert v2[:, 0].min() == DIVERGENT_ID_START
    assert json.loads(divergent["dataset.json"])["version"] == "v2"
    # Corrupt rows behind an intact header: np.load works, ids changed, the manifest did not.
    assert corrupt["dataset.json"] == good["dataset.json"]
    offset = npy_data_offset(good["inputs.npy"])
    assert corrupt["inputs.npy"][:offset] == good["inputs.npy"][:offset]
    before, after = (np.load(io.BytesIO(f["inputs.npy"])) for f in (good, corrupt))
    changed = np.nonzero((before != after).any(axis=1))[0]
    assert len(changed) == 2 and (before[changed, 0] != after[changed, 0]).all()


def test_a_corrupt_header_makes_np_load_raise():
    leftovers = build(_inputs(corrupt_file="labels.npy", corrupt_where="header"),
                      get_topology("1x2"), 5)
    with pytest.raises(ValueError):
        np.load(io.BytesIO(_files(leftovers, 0)["labels.npy"]))


@pytest.mark.parametrize("changes,field,message", [
    ({"missing_on_hosts": [4]}, "missing_on_hosts", "4 is not a host of 4x1"),
    ({"num_samples": 10, "examples_per_puzzle": 4}, "num_samples",
     "not a multiple of examples_per_puzzle"),
    ({"corrupt_file": "nope.npy"}, "corrupt_file", "'inputs.npy', 'labels.npy' or"),
    ({"num_samples": 0}, "num_samples", "greater than or equal to 1"),
])
def test_bad_builder_inputs_are_refused_before_the_builder_runs(changes, field, message):
    with pytest.raises(ValidationError) as refused:
        WORKLOAD.inputs(changes, get_topology("4x1"))
    error = refused.value.errors()[0]
    assert error["loc"][0] == field and message in error["msg"]


# -- the catalog and the registry ----------------------------------------------------

def test_the_catalog_has_the_nine_data_sharding_scenarios_with_their_expectations():
    scenarios = {s.name: s for s in catalog() if s.workload == "data-sharding"}
    assert list(scenarios) == list(SCENARIOS)
    expect = {name: s.expect for name, s in scenarios.items()}
    assert expect == {"uneven-shards": "pass", "missing-data-on-host": "fail-loudly",
                      "divergent-dataset": "fail-loudly", "corrupt-npy": "fail-loudly",
                      "readonly-data-mount": "pass", "divergent-seed": "pass",
                      "uneven-groups": "pass", "truncated-data-on-host": "fail-loudly",
                      "baseline-sharding": "pass"}
    assert all("seed 00" in s.finding for s in scenarios.values())


def test_both_loaders_are_registered_builtin_targets_of_the_workload():
    for name, ref in TARGETS.items():
        target = BUILTIN_TARGETS[name]
        assert (target.ref, target.workload, target.builtin) == (ref, "data-sharding", True)
    assert BUILTIN_TARGETS["robust-loader"].known_failures == frozenset()
    assert BUILTIN_TARGETS["seed-loader"].known_failures == {
        "missing-data-on-host", "divergent-dataset", "corrupt-npy", "divergent-seed",
        "uneven-groups", "truncated-data-on-host"}


# -- robust-loader in real worlds ------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_robust_loader_meets_every_expectation(scenario, seed):
    done = cell(scenario, BUILTIN_TARGETS["robust-loader"], seed)
    assert done.verdict == OK, f"{done.outcome}: {done.detail}"
    if find(scenario).expect == "pass":
        assert done.outcome == PASS
    else:  # the same DatasetError, on every rank, naming what is wrong
        assert done.outcome == ERROR
        errors = {r.error for r in done.ranks}
        assert len(errors) == 1 and next(iter(errors)).startswith(
            "harness.workloads.data_sharding.robust.DatasetError: dataset /mnt/data/puzzles")


def test_robust_loader_names_the_host_and_the_fault():
    missing = cell("missing-data-on-host", BUILTIN_TARGETS["robust-loader"])
    assert "unusable: rank 3 (worker 3): missing /mnt/data/puzzles/dataset.json" in missing.detail
    divergent = cell("divergent-dataset", BUILTIN_TARGETS["robust-loader"])
    assert "not the same on every host: ranks 0-1,3 (worker 0, worker 1, worker 3) see version " \
           "v1, 96 samples" in divergent.detail
    assert "rank 2 (worker 2) sees version v2, 96 samples" in divergent.detail
    corrupt = cell("corrupt-npy", BUILTIN_TARGETS["robust-loader"])
    assert "/mnt/data/puzzles/inputs.npy is corrupt: sha256" in corrupt.detail


def test_robust_loader_drops_exactly_the_last_partial_batch_and_repeats_its_order():
    result, judgement = world("uneven-shards", TARGETS["robust-loader"], cell_seed=1)
    assert judgement.outcome == PASS, judgement.detail
    values = result.values
    assert [len(v["batches"]) for v in values] == [12] * 4  # 101 // 8
    assert all(len(b) == 2 for v in values for b in v["batches"])
    dropped = values[0]["dropped"]
    assert len(dropped) == 5 and all(v["dropped"] == dropped for v in values)
    read = sorted(i for v in values for b in v["batches"] for i in b)
    assert sorted(read + dropped) == list(range(101))
    # The order comes from the config's seed: another seed, another order, same guarantees.
    other, judged = world("uneven-shards", TARGETS["robust-loader"], cell_seed=1, seed=5)
    assert judged.outcome == PASS
    assert other.values[0]["batches"] != values[0]["batches"]


def test_robust_loader_reads_through_a_transient_eio_and_names_a_lasting_one():
    """Found by harness explore: one EIO on the manifest's first open ended the job. A read of
    read-only data is safe to repeat; an error that lasts still fails loudly, everywhere."""
    path = "/mnt/data/puzzles/*"
    result, judgement = world("uneven-shards", TARGETS["robust-loader"],
                              faults=[{"kind": "eio", "path": path, "count": 2}])
    assert judgement.outcome == PASS, judgement.detail
    assert sum(e.kind == "fault" for e in result.history) >= 2 * 4  # it fired on every rank
    result, judgement = world("uneven-shards", TARGETS["robust-loader"],
                              faults=[{"kind": "eio", "path": path, "count": 1000}])
    assert judgement.outcome == ERROR and judgement.loud
    assert "cannot read /mnt/data/puzzles/dataset.json after 3 attempts: OSError: [Errno 5] " \
        "Input/output error" in judgement.detail


def test_robust_loader_also_refuses_a_header_it_cannot_parse():
    result, judgement = world("corrupt-npy", TARGETS["robust-loader"], corrupt_where="header")
    assert judgement.outcome == ERROR and judgement.loud
    assert "inputs.npy is not a readable .npy file" in judgement.detail


# -- seed-loader in real worlds ----------------------------------------------------------

def test_seed_loader_cells_are_ok_or_known_as_registered():
    target = BUILTIN_TARGETS["seed-loader"]
    for scenario in SCENARIOS:
        done = cell(scenario, target)
        assert done.verdict in (OK, KNOWN), f"{scenario}: {done.outcome}: {done.detail}"
        assert (done.verdict == KNOWN) == (scenario in target.known_failures)


def test_seed_loader_drops_the_last_partial_batch_the_same_on_every_rank():
    result, judgement = world("uneven-shards", TARGETS["seed-loader"])
    assert judgement.outcome == PASS, judgement.detail
    assert [len(v["batches"]) for v in result.values] == [12] * 4
    assert "covering 96 of 101 samples (the last partial global batch dropped: 5 samples" \
        in judgement.detail


def test_seed_loader_leaves_the_others_blocked_when_one_host_has_no_data():
    result, judgement = world("missing-data-on-host", TARGETS["seed-loader"])
    assert judgement.outcome == HANG
    assert judgement.detail.startswith("rank 3 raised FileNotFoundError")  # the cause first
    assert "; ranks 0-2 wait in all_reduce (step 0)" in judgement.detail


def test_seed_loader_trains_silently_on_another_version_or_garbled_rows():
    _, divergent = world("divergent-dataset", TARGETS["seed-loader"])
    assert divergent.outcome == FAIL
    assert divergent.detail.startswith("rank 2 trained on 24 sample ids that are not in "
                                       "/mnt/data/puzzles (e.g. 1000")
    _, corrupt = world("corrupt-npy", TARGETS["seed-loader"], cell_seed=7)
    assert corrupt.outcome == FAIL
    assert "sample ids that are not in /mnt/data/puzzles" in corrupt.detail
    assert "2 of 96 samples never read by any rank" in corrupt.detail


@pytest.mark.parametrize("seed", SEEDS)
def test_seed_loader_overlaps_when_ranks_draw_from_their_own_generators(seed):
    _, judgement = world("divergent-seed", TARGETS["seed-loader"], seed)
    assert judgement.outcome == FAIL
    assert "read more than once, by ranks" in judgement.detail
    # One example per puzzle leaves the global generator nothing to decide: no overlap.
    _, flat = world("divergent-seed", TARGETS["seed-loader"], seed, examples_per_puzzle=1)
    assert flat.outcome == PASS, flat.detail


def test_seed_loader_draws_its_examples_from_each_ranks_own_generator():
    # No fault: every rank's generators start apart, as a pod's fresh processes' do, so the
    # loader (which picks a puzzle's example with them) reads overlapping samples, and a
    # fresh loader with the same seed reorders them.
    _, judgement = world("uneven-shards", TARGETS["seed-loader"], num_samples=96,
                         examples_per_puzzle=4)
    assert judgement.outcome == FAIL
    assert judgement.detail.startswith("26 samples read more than once, by ranks 0-3 ")
    assert "a fresh loader with the same seed gives another order: " in judgement.detail


# -- users' loaders: the checker catches them in real cells ----------------------------------

def test_a_loader_that_keeps_the_last_partial_batch_hangs_its_last_step():
    done = cell("uneven-shards", user_target("keep_last_loader"))
    assert (done.outcome, done.verdict) == (HANG, UNEXPECTED)
    # Rank 3 runs out one step early in each pass: its restart's first step pairs with the
    # others' last, so the world stalls at the end, two steps short (12 + 12 against 13 + 13).
    assert "ranks 0-2 wait in all_reduce (step 24)" in done.detail
    assert "rank 3 returned" in done.detail


def test_unequal_batch_counts_without_a_collective_are_caught_by_the_checker():
    result, judgement = world("uneven-shards", helper("keep_last_no_step"))
    assert result.outcome == PASS  # every rank returned
    assert judgement.outcome == FAIL
    assert "unequal batch counts: ranks 0-2 13 batches, rank 3 12 batches" in judgement.detail


def test_a_loader_that_ignores_its_rank_gives_overlapping_shards():
    done = cell("readonly-data-mount", user_target("unsharded_loader"))
    assert (done.outcome, done.verdict) == (FAIL, UNEXPECTED)
    assert "samples read more than once, by ranks 0-7" in done.detail
    assert "never read by any rank" in done.detail


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_a_loader_shuffling_with_the_global_generator_breaks_under_divergent_seeds(seed):
    done = cell("divergent-seed", user_target("global_rng_loader"), seed)
    assert (done.outcome, done.verdict) == (FAIL, UNEXPECTED)
    assert "read more than once, by ranks" in done.detail


def test_a_loader_that_writes_a_cache_next_to_the_data_fails_on_a_read_only_mount():
    done = cell("readonly-data-mount", user_target("cache_writing_loader"))
    assert (done.outcome, done.verdict) == (ERROR, UNEXPECTED)
    assert "OSError: [Errno 30] Read-only file system" in done.detail
    # The same loader passes where the data disk is writable.
    _, judgement = world("readonly-data-mount", helper("cache_writing_loader"),
                         data_dir="/srv/data/puzzles")
    assert judgement.outcome == PASS, judgement.detail


def test_the_cli_runs_uneven_shards(tmp_path, cli):
    done = cli("run", "--scenario", "uneven-shards", "--report-dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "latest" / "matrix.json").read_text())
    cells = {c["target"]: (c["outcome"], c["verdict"]) for c in report["cells"]}
    assert cells == {"seed-loader": (PASS, OK), "robust-loader": (PASS, OK)}


STRANGER_LOADER = """\
import json, os
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

class Puzzles(Dataset):
    def __init__(self, root):
        with open(os.path.join(root, "dataset.json")) as f:
            self.meta = json.load(f)
        self.inputs = np.load(os.path.join(root, "inputs.npy"))
    def __len__(self):
        return len(self.inputs)
    def __getitem__(self, i):
        return torch.from_numpy(self.inputs[i].copy())

def build(data_dir, rank, world_size, global_batch_size, seed=0):
    ds = Puzzles(data_dir)
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, seed=seed,
                                 drop_last=True)
    return DataLoader(ds, batch_size=global_batch_size // world_size, sampler=sampler,
                      drop_last=True)
"""


def test_a_strangers_torch_loader_is_preloaded_and_runs_in_the_scenarios_deadline(tmp_path, cli):
    """Its ranks run the workload's adapter, which imports the loader inside the rank: the
    fork server must preload what the loader's own source imports, or four ranks importing
    torch at once on two cores outlast uneven-shards' 5 s and every cell is a HANG."""
    (tmp_path / "my_loader.py").write_text(STRANGER_LOADER)
    done = cli("run", "--target", "my_loader.py:build", "--workload", "data-sharding",
               "--scenario", "uneven-shards", "--report-dir", str(tmp_path / "reports"),
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "reports" / "latest" / "matrix.json").read_text())
    assert [(c["outcome"], c["verdict"]) for c in report["cells"]] == [(PASS, OK)]


def test_a_user_loaders_own_imports_are_preloaded(tmp_path, monkeypatch):
    from harness.workloads.registry import target

    (tmp_path / "my_loader.py").write_text(STRANGER_LOADER)
    monkeypatch.chdir(tmp_path)
    made = target("my_loader.py:build", "data-sharding")
    assert made.ref.startswith("harness.workloads.data_sharding.adapter:")
    assert {"torch", "torch.utils.data", "numpy"} <= set(made.preload or ())


# -- user-style loaders, run by the ranks -------------------------------------------------------

def _user_epoch(inputs: dict[str, Any], *, keep_last: bool = False, step: bool = True,
                use_rank: bool = True, global_rng: bool = False, cache: bool = False) -> dict:
    import torch
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    rank, world_size = xr.global_ordinal(), xr.world_size()
    root = inputs["data_dir"]
    data = np.load(f"{root}/inputs.npy", mmap_mode="r")
    if cache:  # an index file next to the data, as some loaders keep
        np.save(f"{root}/index-cache.npy", np.arange(len(data)))
    gbs = inputs["global_batch_size"]
    local = gbs // world_size

    def one_pass() -> list[list[int]]:
        if global_rng:
            order = np.random.permutation(len(data))
        else:
            order = np.random.default_rng(inputs["seed"]).permutation(len(data))
        batches = []
        for start in range(0, len(order), gbs):
            chunk = order[start:start + gbs]
            if len(chunk) < gbs and not keep_last:
                break
            lo = rank * local if use_rank else 0
            mine = chunk[lo:lo + local]
            if len(mine) == 0:
                break  # nothing left for this rank
            batches.append([int(i) for i in data[mine, 0]])
            if step:
                xm.all_reduce(xm.REDUCE_SUM, torch.tensor([float(len(mine))]))
        return batches

    state = np.random.get_state()
    first = one_pass()
    np.random.set_state(state)  # a restart: the process's generators start over as they were
    return {"batches": first, "restart": one_pass()}


def keep_last_loader(inputs: dict[str, Any]) -> dict:
    return _user_epoch(inputs, keep_last=True)


def keep_last_no_step(inputs: dict[str, Any]) -> dict:
    return _user_epoch(inputs, keep_last=True, step=False)


def unsharded_loader(inputs: dict[str, Any]) -> dict:
    return _user_epoch(inputs, use_rank=False)


def global_rng_loader(inputs: dict[str, Any]) -> dict:
    return _user_epoch(inputs, global_rng=True)


def cache_writing_loader(inputs: dict[str, Any]) -> dict:
    return _user_epoch(inputs, cache=True)


# -- groups of different sizes (uneven-groups) -----------------------------------------

def test_the_built_puzzles_have_the_sizes_asked_for_and_the_last_takes_what_is_left():
    from harness.workloads.data_sharding.dataset import puzzle_bounds

    assert puzzle_bounds(20, 1, (1, 4, 2, 5, 3)).tolist() == [0, 1, 5, 7, 12, 15, 16, 20]
    assert puzzle_bounds(8, 2).tolist() == [0, 2, 4, 6, 8]
    with pytest.raises(Exception, match="examples_per_puzzle or puzzle_sizes, not both"):
        WORKLOAD.inputs({"examples_per_puzzle": 2, "puzzle_sizes": [1, 2], "num_samples": 8})


def test_a_loader_dealing_whole_puzzles_to_ranks_runs_unequal_steps_on_uneven_groups():
    dealer = resolve_target(str(REPO / "tests" / "user_targets" / "own_data" / "puzzle_dealer.py")
                            + ":deal", "data-sharding")
    done = cell("uneven-groups", dealer)
    assert done.outcome == HANG, done.detail
    assert done.detail.startswith("ranks 0-1 wait in all_reduce (step 22)")
    assert "(ranks 2-3 returned after 11 batches an epoch: the ranks still waiting have more " \
           "batches" in done.detail
    assert cell("uneven-shards", dealer).outcome == PASS  # groups of one: equal shares


def test_seed_loader_builds_different_global_batches_from_its_ranks_generators():
    _, judged = world("uneven-groups", TARGETS["seed-loader"])
    assert judged.outcome == FAIL
    assert "samples read more than once, by ranks" in judged.detail
