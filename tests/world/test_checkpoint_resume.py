"""Checkpoint/resume (seed 003): the two reference workers under pre-emption, and the
exactly-once checker on worlds built by hand.

The workers run as real rank processes (4 or 2 hosts, one worker each); the
synthetic ``WorldResult``s at the bottom pin the checker's every rule.
"""

from __future__ import annotations

import json
import os
import pickle
from typing import Any

import pytest

from harness import run_world
from harness.checkers import exactly_once
from harness.filesystem.mounts import Mount
from harness.filesystem.sandbox import Leftover
from harness.history import Event
from harness.reports.diagnosis import describe
from harness.runner.cells import OK
from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import catalog, find
from harness.topology import get_topology
from harness.workloads.checkpoint_resume import PRELOAD, TARGETS, dataset, robust
from harness.workloads.registry import BUILTIN_TARGETS, WORKLOADS
from harness.world.result import ERROR, FAIL, HANG, PASS, RankResult, WorldResult

from support import REPO

WORKLOAD = WORKLOADS["checkpoint-resume"]
WORKDIR = WORKLOAD.inputs().workdir
BUCKET = Mount("/mnt/bucket", scope="shared", consistency="object")
CKPT = "*/checkpoints/checkpoint_worker_*"
PREEMPTION = ("preempt-mid-shard", "preempt-mid-checkpoint", "preempt-storm")
SCENARIOS = [s for s in catalog() if s.workload == "checkpoint-resume"]


def ids(start: int, stop: int) -> list[str]:
    return [dataset.sample_id(i) for i in range(start, stop)]


def world(target: str, faults: list[dict[str, Any]] = (), *, seed: int = 0, topology: str = "4x1",
          extra: list[Leftover] = (), **inputs: Any):
    """Run a reference worker as the runner would; return (result, judgement)."""
    topo = get_topology(topology)
    merged = WORKLOAD.inputs(inputs, topo)
    result = run_world(TARGETS[target], topology=topo, timeout=10, seed=seed,
                       args=(merged.for_target(),),
                       mounts=[BUCKET], faults=list(faults), preload=PRELOAD,
                       files=WORKLOAD.setup(merged, topo, seed) + list(extra),
                       watch=WORKLOAD.watch(merged))
    return result, WORKLOAD.checker(result)


def cell(scenario: str, target: str, seed: int = 0):
    plans = plan_cells([find(scenario)], [BUILTIN_TARGETS[target]], seed=seed)
    return run_matrix(plans).cells[0]


# -- the dataset -------------------------------------------------------------------

def test_streams_split_the_dataset_with_the_remainder_first_and_depend_on_the_seed():
    assert [len(r) for r in dataset.split(50, 4)] == [13, 13, 12, 12]
    assert [r.start for r in dataset.split(50, 4)] == [0, 13, 26, 38]
    a, b = dataset.streams(50, 4, seed=1), dataset.streams(50, 4, seed=2)
    assert [s["id"] for s in a[1]] == ids(13, 26) == [s["id"] for s in b[1]]
    assert a == dataset.streams(50, 4, seed=1) and a != b, "text from the seed, ids fixed"
    files = dataset.setup(WORKLOAD.inputs({"missing_streams": [3]}), get_topology("4x1"), 0)
    assert [f.path for f in files] == [
        f"{WORKDIR}/data/streams/stream_{w:03d}.jsonl" for w in range(3)] + [dataset.LAYOUT_PATH]
    assert all(f.hosts is None for f in files), "every VM's disk holds every stream"
    assert [json.loads(line)["id"] for line in files[2].content.decode().splitlines()] == ids(26, 38)


# -- the naive worker: what seed 003 loses -------------------------------------------

def test_both_workers_are_exactly_once_without_faults():
    for target in TARGETS:
        result, judgement = world(target)
        assert judgement.outcome == PASS, (target, judgement.detail, describe(result))
        assert "all 50 samples of 4 streams uploaded exactly once" in judgement.detail
        assert [r.value["total_samples_processed"] for r in result.ranks] == [13, 13, 12, 12]


def test_naive_loses_the_first_lifes_shards_after_a_pre_emption_and_the_checker_names_them():
    result, judgement = world("naive-worker", [
        {"kind": "preempt", "rank": 0, "op": "write", "path": "/mnt/bucket/*", "occurrence": 3,
         "lives": [0]}])
    assert result.ranks[0].restarts == 1 and result.ranks[0].outcome == PASS
    assert judgement.outcome == FAIL
    audit = exactly_once.audit(result)
    lost = sorted(set(audit.expected) - set(audit.seen))
    # Life 0 uploaded shard_0000/0001 (samples 0-7); life 1 named its first shards
    # shard_0000/0001 again and replaced them.
    assert lost == ids(0, 8)
    assert set(lost) <= set(audit.claimed), "the checkpoint claims them processed"
    assert judgement.detail.startswith("worker 0 (rank 0): 8 samples lost that its checkpoint "
                                       "claims processed: sample-00000, sample-00001")
    assert "(+4 more)" in judgement.detail


def test_naive_duplicates_a_shard_redone_under_a_name_the_counter_reused():
    # Life 0: shards 0-2 uploaded, pre-empted before the third checkpoint; life 1:
    # shard 2's samples redone as shard_0000, pre-empted before its checkpoint; life 2
    # redoes them as shard_0000 again, then shard 3 as shard_0001.
    result, judgement = world("naive-worker", [
        {"kind": "preempt", "rank": 0, "op": "open-write", "path": CKPT, "occurrence": 3, "lives": [0]},
        {"kind": "preempt", "rank": 0, "op": "open-write", "path": CKPT, "occurrence": 1, "lives": [1]},
    ], topology="2x1", total_samples=26)
    assert judgement.outcome == FAIL
    assert "worker 0 (rank 0): 4 samples uploaded more than once: sample-00008, sample-00009, " \
           "sample-00010, sample-00011 (sample-00008 in tpu_0/shard_0000.jsonl, " \
           "tpu_0/shard_0002.jsonl)" in judgement.detail
    assert "8 samples lost that its checkpoint claims processed" in judgement.detail


def test_naive_checkpoint_moves_backwards_and_the_checker_says_from_which_life():
    result, judgement = world("naive-worker", [
        {"kind": "preempt", "rank": 0, "op": "write", "path": "/mnt/bucket/*", "occurrence": 4,
         "lives": [0]}], topology="2x1", total_samples=26)
    assert judgement.outcome == FAIL
    assert "rank 0's checkpoint_worker_0.json moved backwards from life 0 to life 1: " \
           "total_shards 3 -> 1" in judgement.detail


def test_naive_is_bricked_by_the_checkpoint_it_tore():
    c = cell("preempt-mid-checkpoint", "naive-worker", seed=5)
    assert c.outcome == ERROR and not c.met
    assert all(r.error and r.error.startswith("json.decoder.JSONDecodeError") for r in c.ranks)
    assert c.detail.endswith("; 18 samples of workers 0-3 not uploaded; checkpoint torn "
                             "(unreadable) after life 0 on ranks 0-3")


def test_naive_cells_fail_as_recorded_and_robust_cells_meet_every_expectation():
    naive, robust_ = BUILTIN_TARGETS["naive-worker"], BUILTIN_TARGETS["robust-worker"]
    matrix = run_matrix(plan_cells(SCENARIOS, [naive, robust_], seed=0))
    outcomes = {(c.scenario, c.target): (c.outcome, c.verdict) for c in matrix.cells}
    assert outcomes == {
        ("preempt-mid-shard", "naive-worker"): (FAIL, "known"),
        ("preempt-mid-checkpoint", "naive-worker"): (ERROR, "known"),
        ("preempt-storm", "naive-worker"): (FAIL, "known"),
        ("upload-failure", "naive-worker"): (ERROR, "known"),
        ("duplicate-worker-id", "naive-worker"): (FAIL, "known"),
        ("stream-missing", "naive-worker"): (ERROR, OK),
        ("preempt-mid-shard", "robust-worker"): (PASS, OK),
        ("preempt-mid-checkpoint", "robust-worker"): (PASS, OK),
        ("preempt-storm", "robust-worker"): (PASS, OK),
        ("upload-failure", "robust-worker"): (PASS, OK),
        ("duplicate-worker-id", "robust-worker"): (ERROR, OK),
        ("stream-missing", "robust-worker"): (ERROR, OK),
        ("baseline-resume", "naive-worker"): (PASS, OK),
        ("baseline-resume", "robust-worker"): (PASS, OK),
    }
    dup = next(c for c in matrix.cells if c.key == ("duplicate-worker-id", "naive-worker"))
    assert dup.detail == ("worker 1 (rank 1): 13 samples lost: sample-00013, sample-00014, "
                          "sample-00015, sample-00016 (+9 more); rank 1 (host of worker 1) ran as "
                          "worker 0")


# -- the robust worker: exactly once, over many seeds --------------------------------

def test_robust_is_exactly_once_under_every_pre_emption_and_upload_failure_over_ten_seeds():
    # The seed draws the samples' text (so the shard names) and where each torn write is cut.
    # (duplicate-worker-id and stream-missing do not depend on it: seed 0 is tested above.)
    robust_ = BUILTIN_TARGETS["robust-worker"]
    chosen = [s for s in SCENARIOS if s.expect == "pass" and s.faults]
    assert [s.name for s in chosen] == [*PREEMPTION, "upload-failure"]
    plans = [p for seed in range(10) for p in plan_cells(chosen, [robust_], seed=seed)]
    matrix = run_matrix(plans, jobs=4)  # cells mostly wait on their ranks
    assert len(matrix.cells) == 40
    bad = [f"{c.scenario} seed {c.seed}: {c.outcome} {c.detail}" for c in matrix.cells
           if c.outcome != PASS]
    assert not bad, bad
    for c in matrix.cells:
        assert "uploaded exactly once" in c.detail and c.verdict == OK
        if c.scenario in PREEMPTION:  # not vacuous: every worker was pre-empted, and came back
            preempted = {f.rank for f in c.faults_fired if f.fault == "preempt"}
            assert preempted == {0, 1, 2, 3}, (c.scenario, c.seed)
        if c.scenario == "preempt-storm":
            assert "20 restarts" in c.detail, c.detail  # lives 0-5 of 4 workers, less the last
        # Atomic: at every exit, pre-empted mid-write or not, the checkpoint parses.
        for event in c.history:
            for path, text in event.get("detail", {}).get("files", {}).items():
                if path.endswith(".json") and "/checkpoints/" in path:
                    assert isinstance(json.loads(text), dict), (c.scenario, c.seed, path)
        if c.scenario == "upload-failure":
            assert sum(f.fault == "eio" for f in c.faults_fired) == 8


def test_robust_rebuilds_a_torn_checkpoint_and_drops_a_torn_object_left_from_before():
    workdir = WORKDIR
    torn_checkpoint = Leftover(f"{workdir}/checkpoints/checkpoint_worker_0.json",
                               b'{"processed_sample_ids": ["sample-00000", "sam', hosts=(0,))
    torn_object = Leftover("/mnt/bucket/activations/tpu_0/shard_sample-00000_000000000000.jsonl",
                           b'{"act": "0", "id": "sample-00000"}\n{"act": "1", "id": "sam')
    result, judgement = world("robust-worker", topology="2x1", total_samples=26,
                              extra=[torn_checkpoint, torn_object])
    assert judgement.outcome == PASS, judgement.detail
    assert "is unreadable" in result.ranks[0].stderr and "removing" in result.ranks[0].stderr
    final = json.loads(result.files[0][f"{workdir}/checkpoints/checkpoint_worker_0.json"])
    assert final["processed_sample_ids"] == ids(0, 13) and final["complete"] is True


def test_robust_refuses_an_identity_it_cannot_trust(monkeypatch):
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "w-0,w-1")
    monkeypatch.setenv("HOSTNAME", "w-1")
    monkeypatch.setenv("TPU_WORKER_ID", "1")
    assert robust.worker_identity() == 1
    monkeypatch.setenv("TPU_WORKER_ID", "0")
    with pytest.raises(robust.WorkerError, match="TPU_WORKER_ID=0 but this VM, w-1, is worker 1"):
        robust.worker_identity()
    monkeypatch.delenv("TPU_WORKER_ID")
    with pytest.raises(robust.WorkerError, match="not set: refusing to default to worker 0"):
        robust.worker_identity()
    monkeypatch.setenv("TPU_WORKER_ID", "3")
    monkeypatch.delenv("TPU_WORKER_HOSTNAMES")
    assert robust.worker_identity() == 3, "no slice to compare with: the id as given"


def test_robust_names_shards_by_content_so_a_redone_shard_overwrites_itself():
    records = [{"id": "sample-00004", "act": "ab"}, {"id": "sample-00005", "act": "cd"}]
    content = robust.shard_content(records)
    name = robust.shard_name("sample-00004", content)
    assert name == robust.shard_name("sample-00004", robust.shard_content(list(records)))
    assert name.startswith("shard_sample-00004_") and name.endswith(".jsonl")
    assert name != robust.shard_name("sample-00004", content.replace("cd", "ce"))


def test_the_cli_runs_the_torn_checkpoint_scenario(tmp_path, cli):
    proc = cli("run", "--scenario", "preempt-mid-checkpoint", "--report-dir", str(tmp_path),
               "--format", "json", cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cells = {c["target"]: c for c in json.loads((tmp_path / "latest" / "matrix.json").read_text())["cells"]}
    assert (cells["naive-worker"]["verdict"], cells["robust-worker"]["verdict"]) == ("known", "ok")
    assert cells["robust-worker"]["outcome"] == PASS


# -- the checker on worlds built by hand -----------------------------------------------

W = "/srv/w"


def _lines(sample_ids: list[str]) -> str:
    return "".join(json.dumps({"id": s}) + "\n" for s in sample_ids)


def synthetic(streams: dict[int, list[str]], objects: dict[str, list[str] | str],
              checkpoints: dict[int, list[dict[str, Any] | str]] | None = None,
              outcomes: dict[int, str] | None = None, values: dict[int, Any] | None = None,
              killed: tuple[int, ...] = ()) -> WorldResult:
    """A world of ``len(streams)`` hosts x 1 rank; ``objects``: bucket name -> ids (or raw
    text); ``checkpoints``: rank -> the checkpoint at each of its exits, in order."""
    checkpoints, outcomes, values = checkpoints or {}, outcomes or {}, values or {}
    workers = max([*streams, *checkpoints, *outcomes, -1]) + 1
    shared = {f"{W}/data/streams/stream_{w:03d}.jsonl": _lines(s) for w, s in streams.items()}
    shared |= {f"/mnt/bucket/activations/{name}": (body if isinstance(body, str) else _lines(body))
               for name, body in objects.items()}
    history, files, ranks = [], {}, []
    for rank in range(workers):
        states = [c if isinstance(c, str) else json.dumps(c) for c in checkpoints.get(rank, [])]
        path = f"{W}/checkpoints/checkpoint_worker_{rank}.json"
        for life, text in enumerate(states):
            history.append(Event(t=0.1 * life, kind="snapshot", rank=rank,
                                 detail={"files": {**shared, path: text}, "life": life}))
        files[rank] = {**shared, **({path: states[-1]} if states else {})}
        outcome = outcomes.get(rank, PASS)
        r = RankResult(rank=rank, host=rank, outcome=outcome, restarts=max(len(states) - 1, 0),
                       killed_by_fault=rank in killed)
        if outcome == PASS:
            r.value_pickle = pickle.dumps(values.get(rank, {"worker_id": rank}))
        elif outcome == ERROR:
            r.error = {"type": "RuntimeError", "message": f"worker {rank} gave up", "traceback": ""}
        ranks.append(r)
    return WorldResult(world_id="w", topology=f"{workers}x1", profile="legacy", seed=0,
                       outcome=PASS, ranks=ranks, history=history, mismatches=[],
                       hang_report=None, duration_s=0.1, files=files)


def judge(result: WorldResult):
    return exactly_once.check(result, {r.rank: r.rank for r in result.ranks})


def ckpt(sample_ids: list[str], shards: int) -> dict[str, Any]:
    return {"processed_sample_ids": sample_ids, "total_samples_processed": len(sample_ids),
            "total_shards": shards}


def test_checker_passes_every_sample_exactly_once_with_a_monotonic_checkpoint():
    result = synthetic({0: ids(0, 6), 1: ids(6, 9)},
                       {"tpu_0/a.jsonl": ids(0, 4), "tpu_0/b.jsonl": ids(4, 6),
                        "tpu_1/a.jsonl": ids(6, 9)},
                       {0: [ckpt(ids(0, 4), 1), "{torn", ckpt(ids(0, 6), 2)]})
    j = judge(result)
    assert j.outcome == PASS, j.detail
    assert j.detail == ("all 9 samples of 2 streams uploaded exactly once (3 objects, 2 restarts); "
                        "no checkpoint moved backwards; checkpoint torn (unreadable) after life 1 "
                        "on rank 0")
    assert exactly_once.audit(result).unreadable == [(0, "life 1")]


def test_checker_names_lost_samples_and_their_worker():
    result = synthetic({0: ids(0, 10), 1: ids(10, 12)},
                       {"tpu_0/a.jsonl": ids(0, 3), "tpu_1/a.jsonl": ids(10, 12)})
    j = judge(result)
    assert j.outcome == FAIL
    assert j.detail == ("worker 0 (rank 0): 7 samples lost: sample-00003, sample-00004, "
                        "sample-00005, sample-00006 (+3 more)")


def test_checker_says_when_a_checkpoint_claimed_what_the_bucket_lost():
    result = synthetic({0: ids(0, 4), 1: ids(4, 8)}, {"tpu_0/a.jsonl": ids(2, 4),
                                                      "tpu_1/a.jsonl": ids(6, 8)},
                       {0: [ckpt(ids(0, 4), 1)], 1: [ckpt(ids(4, 8), 1)]},
                       outcomes={0: ERROR, 1: ERROR})
    j = judge(result)
    assert j.outcome == FAIL, "a raise does not excuse what the checkpoint claimed"
    assert j.detail.startswith("workers 0-1: 4 samples lost that their checkpoints claim processed "
                               "(2, 2): sample-00000, sample-00001, sample-00004, sample-00005; ")
    assert "ranks 0-1 raised RuntimeError: worker N gave up" in j.detail


def test_checker_names_duplicates_and_where_they_are():
    result = synthetic({0: ids(0, 4)}, {"tpu_0/a.jsonl": ids(0, 4), "tpu_0/b.jsonl": ids(2, 4),
                                        "tpu_0/c.jsonl": [dataset.sample_id(3)]})
    j = judge(result)
    assert j.outcome == FAIL
    assert j.detail == ("worker 0 (rank 0): 2 samples uploaded more than once: sample-00002, "
                        "sample-00003 (sample-00002 in tpu_0/a.jsonl, tpu_0/b.jsonl)")
    assert exactly_once.audit(result).seen[dataset.sample_id(3)] == [
        "tpu_0/a.jsonl", "tpu_0/b.jsonl", "tpu_0/c.jsonl"]


def test_checker_catches_a_checkpoint_moving_backwards_even_when_the_bucket_is_right():
    result = synthetic({0: ids(0, 8)}, {"tpu_0/a.jsonl": ids(0, 8)},
                       {0: [ckpt(ids(0, 4), 1), ckpt(ids(0, 8), 3), ckpt(ids(0, 2) + ids(4, 8), 2)]})
    j = judge(result)
    assert j.outcome == FAIL
    assert j.detail == ("rank 0's checkpoint_worker_0.json moved backwards from life 1 to life 2: "
                        "2 samples no longer processed (sample-00002, sample-00003); "
                        "total_samples_processed 8 -> 6; total_shards 3 -> 2")


def test_checker_refuses_corrupt_and_foreign_records():
    result = synthetic({0: ids(0, 2)}, {"tpu_0/a.jsonl": _lines(ids(0, 2)) + '{"id": "sam\n',
                                        "tpu_0/b.jsonl": ["sample-99999"]})
    j = judge(result)
    assert j.outcome == FAIL
    assert "1 record for samples in no input stream: sample-99999" in j.detail
    assert "1 unparseable output line: tpu_0/a.jsonl:3" in j.detail


def test_checker_excuses_only_the_work_of_workers_that_raised():
    streams = {0: ids(0, 2), 1: ids(2, 4), 2: ids(4, 6)}
    objects = {"tpu_0/a.jsonl": ids(0, 2), "tpu_2/a.jsonl": ids(4, 6)}
    loud = judge(synthetic(streams, objects, outcomes={1: ERROR}))
    assert (loud.outcome, loud.loud) == (ERROR, True)
    assert loud.detail == ("rank 1 raised RuntimeError: worker 1 gave up; ranks 0,2 returned; "
                           "2 samples of worker 1 not uploaded; no checkpoint (checkpoints/*.json "
                           "under the workdir) listed 'processed_sample_ids' (see the "
                           "checkpoint-resume contract): whether the raising workers had claimed "
                           "the missing samples is not judged")
    # The same loss, but the worker that should have done it returned: silent.
    silent = judge(synthetic(streams, objects))
    assert silent.outcome == FAIL and silent.detail.startswith("worker 1 (rank 1): 2 samples lost")
    # Another worker raising does not explain worker 1's loss.
    other = judge(synthetic(streams, {"tpu_0/a.jsonl": ids(0, 2)}, outcomes={2: ERROR}))
    assert other.outcome == FAIL and "worker 1 (rank 1): 2 samples lost" in other.detail


def test_checker_requires_a_worker_without_a_stream_to_raise():
    streams = {0: ids(0, 2)}
    objects = {"tpu_0/a.jsonl": ids(0, 2)}
    returned = judge(synthetic(streams, objects, outcomes={1: PASS}))
    assert returned.outcome == FAIL
    assert returned.detail == ("worker 1 (rank 1) returned, but its stream is on no host: its "
                               "samples were never processed")
    raised = judge(synthetic(streams, objects, outcomes={1: ERROR}))
    assert (raised.outcome, raised.loud) == (ERROR, True)
    assert raised.detail.endswith("worker 1 has no input stream on any host")


def test_checker_flags_a_rank_that_ran_as_another_worker_and_skips_killed_ranks():
    streams = {0: ids(0, 2), 1: ids(2, 4)}
    j = judge(synthetic(streams, {"tpu_0/a.jsonl": ids(0, 2), "tpu_1/a.jsonl": ids(2, 4)},
                        values={1: {"worker_id": 0}}))
    assert j.outcome == FAIL and j.detail == "rank 1 (host of worker 1) ran as worker 0"
    killed = judge(synthetic(streams, {"tpu_0/a.jsonl": ids(0, 2)}, outcomes={1: ERROR},
                             killed=(1,)))
    assert killed.outcome == PASS
    assert killed.detail.endswith("; worker 1: 2 samples not judged (its rank was killed by the "
                                  "fault plan)")


def test_checker_leaves_hangs_to_the_common_judgement():
    result = synthetic({0: ids(0, 2)}, {}, outcomes={0: HANG})
    result.hang_report = "rank 0 still blocked"
    j = judge(result)
    assert (j.outcome, j.detail) == (HANG, "rank 0 still blocked")


# -- a stranger's worker with its own layout -------------------------------------------

def test_a_workers_own_output_layout_and_checkpoint_are_aimed_at_by_their_roles():
    """TSV parts under the bucket's embeddings/worker-N/, progress in state/progress-N.json
    through a temporary file: the catalog's faults aim at what its fault-free run showed
    (its outputs, its rewritten checkpoint, its stream), and the checker finds each sample's
    id in its own format."""
    from harness.workloads.registry import target as resolve_target

    worker = resolve_target(f"{REPO}/tests/user_targets/own_data/embed_worker.py:main",
                            "checkpoint-resume")
    scenarios = [s for s in catalog() if s.workload == "checkpoint-resume"]
    cells = {c.scenario: c for c in run_matrix(plan_cells(scenarios, [worker], seed=0),
                                                jobs=2).cells}
    for name in ("preempt-mid-shard", "preempt-mid-checkpoint", "preempt-storm"):
        assert cells[name].outcome == PASS, (name, cells[name].detail)
        assert cells[name].faults_fired, name  # the faults found its own files
        assert "all 50 samples of 4 streams uploaded exactly once (12 objects" in cells[name].detail
    assert "state/progress-0.json" in cells["preempt-mid-checkpoint"].roles["state"]
    # what it lacks: a retry of a failed upload, and a check of its identity
    assert cells["upload-failure"].outcome == ERROR
    assert "Input/output error: '/mnt/bucket/embeddings/worker-" in cells["upload-failure"].detail
    dup = cells["duplicate-worker-id"]
    assert dup.outcome == FAIL and "rank 1 (host of worker 1) ran as worker 0" in dup.detail
    assert "worker 1 (rank 1): 13 samples lost" in dup.detail


def test_a_checkpoint_kept_in_the_bucket_is_not_taken_for_records():
    from harness.checkers.exactly_once import _one_document

    assert _one_document('{\n  "done": [\n    "sample-00001",\n    "sample-00002"\n  ]\n}\n')
    assert not _one_document('{"id": "sample-00001"}\n{"id": "sample-00002"}\n')
