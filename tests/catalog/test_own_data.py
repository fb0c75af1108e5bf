"""Issue 27's acceptance: your own data and your own loader, unmodified.

Three loaders written as strangers would (``tests/user_targets/own_data/``), each with its
own on-disk format and no adapter, run against the data-sharding catalog with ``--data``:
their samples are known by content, against the epoch a world of one rank read.

- ``npz_shards``: .npz token shards, one permutation from the config's seed: passes every
  scenario a loader without checks can pass, and fails the rest the way the code would;
- ``jsonl_docs``: a JSONL file of documents, each rank shuffling with ``seed + rank``:
  unequal step counts, so the last step's collective hangs, named;
- ``grouped_puzzles``: a puzzle dataset picking a group's puzzle with an unseeded
  ``np.random``: FAIL with no fault at all, the samples two ranks both read named.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

import pytest

from harness.runner.cells import Cell
from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import catalog
from harness.workloads.registry import target as resolve_target

from support import REPO

OWN = REPO / "tests" / "user_targets" / "own_data"


def _maker(name: str):  # noqa: ANN202 - the stranger's own writer
    spec = importlib.util.spec_from_file_location(name, OWN / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write


@functools.cache
def _data(kind: str, root: str) -> str:
    path = Path(root) / kind
    path.mkdir()
    _maker(f"make_{kind}")(str(path))
    return str(path)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("own-data"))


def matrix(ref: str, data: str) -> dict[str, Cell]:
    scenarios = [s.with_data(data) for s in catalog() if s.workload == "data-sharding"]
    target = resolve_target(f"{OWN / ref}", "data-sharding")
    cells = run_matrix(plan_cells(scenarios, [target], seed=0), jobs=2).cells
    return {c.scenario: c for c in cells}


def test_npz_shards_with_a_seeded_sampler_pass_where_a_loader_without_checks_can(
        data_root: str) -> None:
    cells = matrix("npz_shards.py:ShardedTokens", _data("npz", data_root))
    for name in ("uneven-shards", "readonly-data-mount", "divergent-seed"):
        assert cells[name].outcome == "PASS", (name, cells[name].detail)
        assert "covering all 96 samples" in cells[name].detail
    # the checks it lacks: host 3 without data leaves the others in the first step ...
    missing = cells["missing-data-on-host"]
    assert missing.outcome == "HANG"
    assert "rank 3 raised FileNotFoundError" in missing.detail
    assert "ranks 0-2 wait in all_reduce (step 0)" in missing.detail
    # ... another version on host 2 is trained on silently, named by content
    divergent = cells["divergent-dataset"]
    assert divergent.outcome == "FAIL"
    assert "rank 2 trained on 24 samples that a world of one rank never read" in divergent.detail
    assert "sample {tokens: [" in divergent.detail
    assert "(the scenario: host 2 has another version of shard-00000.npz, shard-00001.npz, " \
        "shard-00002.npz" in divergent.detail
    # a copy interrupted on host 1: its ranks alone raise, the others wait in the first step
    truncated = cells["truncated-data-on-host"]
    assert truncated.outcome == "HANG"
    assert "rank 1 raised zipfile.BadZipFile" in truncated.detail
    assert truncated.detail.endswith("(the scenario: host 1's copy of shard-00002.npz cut in half; "
                                     "of the files the target's fault-free run read)"), \
        truncated.detail  # what was done to the user's data, whatever the outcome
    assert "(the scenario: host 3 has none of /" in missing.detail
    # a garbled shard: np.load's CRC check is the loud error every rank raises
    assert cells["corrupt-npy"].outcome == "ERROR" and cells["corrupt-npy"].met
    assert "BadZipFile" in cells["corrupt-npy"].detail


def test_jsonl_reader_seeded_per_rank_runs_unequal_steps_and_its_last_step_hangs(
        data_root: str) -> None:
    cells = matrix("jsonl_docs.py:make_loader", _data("jsonl", data_root))
    plain = cells["readonly-data-mount"]  # no fault: the data as it is
    assert plain.outcome == "HANG", plain.detail
    assert "wait in all_reduce (step " in plain.detail and "returned" in plain.detail
    assert cells["divergent-seed"].outcome == "HANG"


def test_grouped_puzzles_with_unseeded_numpy_fail_with_no_fault_naming_the_overlap(
        data_root: str) -> None:
    cells = matrix("grouped_puzzles.py:PuzzleDataset", _data("puzzles", data_root))
    plain = cells["readonly-data-mount"]  # 8 ranks, no fault
    assert plain.outcome == "FAIL", plain.detail
    assert "read more than once" in plain.detail
    assert "in rank " in plain.detail and "sample #" in plain.detail  # named by place and content
    assert "or on unseeded randomness" in plain.detail


def test_a_changed_copy_no_rank_of_its_host_read_is_not_exercised_never_pass(tmp_path: Path) -> None:
    """Each rank reads whole files: host 1 never opens the file whose copy the scenario cut
    (the largest, host 0's), so truncated-data-on-host tested nothing there: NOT-EXERCISED,
    saying why. Host 2 reads its own shard of another version: FAIL, the revised record named."""
    data = tmp_path / "shards"
    data.mkdir()
    for shard in range(4):  # as many documents each; shard 0's longest, so the largest file
        words = " and more" * (4 if shard == 0 else 1)
        (data / f"part-{shard}.jsonl").write_text("".join(
            json.dumps({"text": f"shard {shard} document {i}{words}"}) + "\n" for i in range(8)))
    scenarios = [s.with_data(str(data)) for s in catalog()
                 if s.name in ("truncated-data-on-host", "divergent-dataset")]
    target = resolve_target(f"{OWN / 'file_per_rank.py'}:stream", "data-sharding")
    cells = {c.scenario: c for c in run_matrix(plan_cells(scenarios, [target], seed=0)).cells}
    cut = cells["truncated-data-on-host"]
    assert (cut.outcome, cut.verdict) == ("NOT-EXERCISED", "unexercised"), cut.detail
    assert "host 1's copy of part-0.jsonl cut in half, and no rank of host 1 read it" in cut.detail
    other = cells["divergent-dataset"]
    assert other.outcome == "FAIL", other.detail
    assert "rank 2 trained on 1 sample that a world of one rank never read" in other.detail
    assert "(the scenario: host 2 has another version of part-0.jsonl" in other.detail
