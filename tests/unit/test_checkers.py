"""The checkers as pure functions: hand-built WorldResults in, a Judgement out.

No world runs here. The property: a checker's judgement does not depend on the
order in which the world lists its ranks.
"""

from __future__ import annotations

import json
import pickle
import signal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checkers import config_sync, exactly_once, resume, sharding
from harness.checkers.common import Baseline, end_of_world
from harness.history import Event
from harness.world.result import CRASH, ERROR, FAIL, HANG, PASS, RankResult, WorldResult

import support
from support import error

KILLED = "killed"  # a rank the fault plan killed (not an outcome: a fate)


def rank(r: int, fate: str = PASS, value: Any = None, *, host: int | None = None,
         message: str = "the config did not arrive", restarts: int = 0) -> RankResult:
    outcome = CRASH if fate == KILLED else fate
    fates = {ERROR: dict(error=error("RuntimeError", message), exit_code=1),
             CRASH: dict(signal=int(signal.SIGKILL), killed_by_fault=fate == KILLED),
             HANG: dict(stack="File train.py, in all_reduce")}
    return support.rank(r, outcome, value, host=host, restarts=restarts, **fates.get(outcome, {}))


def world(ranks: list[RankResult], *, files: dict[int, dict[str, str]] | None = None,
          history: list[Event] = (), topology: str = "4x1") -> WorldResult:
    hung = any(r.outcome == HANG for r in ranks)
    return support.world(ranks, HANG if hung else PASS, topology=topology, history=list(history),
                         hang_report="ranks 1-3 blocked in rendezvous 'config'" if hung else None,
                         files=files or {})


# -- common: how the world ended ------------------------------------------------------

def test_every_rank_returned_leaves_the_judgement_to_the_workload():
    assert end_of_world(world([rank(0), rank(1)])) is None


def test_a_hang_comes_first_and_notes_the_killed_ranks():
    judged = end_of_world(world([rank(0, KILLED), rank(1, HANG), rank(2, ERROR)]))
    assert judged.outcome == HANG
    assert judged.detail == ("ranks 1-3 blocked in rendezvous 'config' "
                             "(rank 0 killed by the fault plan)")


def test_a_crash_names_the_signal_and_groups_ranks_alike():
    judged = end_of_world(world([rank(0, CRASH), rank(1, CRASH), rank(2)]))
    assert judged.outcome == CRASH
    assert judged.detail == "ranks 0-1 killed by SIGKILL without a Python exception"


def test_errors_are_loud_only_when_every_judged_rank_raised_clearly():
    loud = end_of_world(world([rank(0, KILLED), rank(1, ERROR), rank(2, ERROR)]))
    assert (loud.outcome, loud.loud) == (ERROR, True)
    assert loud.detail.startswith("ranks 1-2 raised RuntimeError: the config did not arrive")
    partly = end_of_world(world([rank(0, ERROR), rank(1), rank(2)]))
    assert (partly.outcome, partly.loud) == (ERROR, False)
    assert "; ranks 1-2 returned" in partly.detail
    mute = end_of_world(world([rank(0, ERROR, message="  "), rank(1, ERROR)]))
    assert (mute.outcome, mute.loud) == (ERROR, False)
    assert (loud.quiet, partly.quiet, mute.quiet) == (
        "", "ranks 1-2 returned", "rank 0 raised with no message")


def test_a_cell_that_expects_a_loud_failure_says_why_an_error_is_not_one():
    """A bare ``queue.Empty`` (its cause lost in a thread) is an ERROR, not the loud failure a
    fail-loudly scenario asks for: the cell says which rank made it quiet, not only that
    the expectation was missed; a loud ERROR meets it and adds nothing."""
    from harness.runner.run import meets
    from harness.vocabulary import Expect

    mute = end_of_world(world([rank(0, ERROR, message=""), rank(1, ERROR), rank(2, ERROR)]))
    assert meets(Expect.FAIL_LOUDLY, mute) == (
        False, " (not the loud failure the scenario expects: rank 0 raised with no message)")
    assert meets(Expect.PASS, mute) == (False, "")
    loud = end_of_world(world([rank(0, ERROR), rank(1, ERROR)]))
    assert meets(Expect.FAIL_LOUDLY, loud) == (True, "")
    assert meets(Expect.FAIL_LOUDLY, end_of_world(world([rank(0, HANG), rank(1)]))) == (False, "")


def test_a_world_the_fault_plan_killed_entirely_has_nothing_to_judge():
    judged = end_of_world(world([rank(0, KILLED), rank(1, KILLED)]))
    assert judged.outcome == FAIL and "killed every rank" in judged.detail


# -- config sync ------------------------------------------------------------------------

CONFIG = {"run_name": "brave-otter", "lr": 0.0001, "arch": {"name": "trm@tiny"}}


def test_the_same_config_everywhere_passes():
    judged = config_sync.check(world([rank(r, value=dict(CONFIG)) for r in range(4)]))
    assert judged.outcome == PASS
    assert judged.detail.startswith("all 4 ranks hold the same config (sha256 ")


def test_differing_configs_name_the_ranks_and_keys_against_the_lowest_rank():
    other = {**CONFIG, "run_name": "calm-heron"}
    ranks = [rank(0, value=CONFIG), rank(1, value=other), rank(2, value=other), rank(3, value=CONFIG)]
    judged = config_sync.check(world(ranks))
    assert judged.outcome == FAIL
    assert judged.detail == "ranks 1-2 differ from rank 0: run_name 'brave-otter' != 'calm-heron'"


def refused(r: int, value: Any, why: str) -> RankResult:
    """A rank whose value the world's checker refused (in the rank)."""
    return support.rank(r, FAIL, value, returned=True, exit_code=0, value_pickle=pickle.dumps(value),
                        value_repr=repr(value), invalid=why)


def test_a_value_the_checker_refused_fails_before_any_comparison():
    ranks = [refused(0, {**CONFIG, "lr": 5}, "lr: must be at most 1"), rank(1, value=CONFIG),
             refused(2, {}, "lr: must be at most 1")]
    judged = config_sync.check(world(ranks))
    assert judged.outcome == FAIL
    assert judged.detail == "ranks 0,2 returned an invalid value: lr: must be at most 1"


def test_a_rank_that_returned_no_dict_returned_no_config():
    ranks = [rank(0, value=CONFIG), rank(1, value=None), rank(2, value=[1])]
    judged = config_sync.check(world(ranks))
    assert judged.outcome == FAIL
    assert judged.detail == "ranks 1-2 returned no config: NoneType / list instead of a dict"


ANOTHER = {**CONFIG, "lr": 0.001, "seed": 1}


def test_every_rank_holding_another_runs_config_fails_even_though_they_agree():
    baseline = Baseline({**CONFIG, "seed": 0}, ANOTHER)
    judged = config_sync.check(world([rank(r, value=ANOTHER) for r in range(4)]), baseline)
    assert judged.outcome == FAIL
    assert judged.detail == ("all 4 ranks hold another run's config: lr 0.001 (this run's: 0.0001), "
                             "seed 1 (this run's: 0)")


def test_a_key_each_run_draws_anew_is_not_mistaken_for_another_runs():
    # run_name differs in every run (a timestamp, a random name): neither run's value
    baseline = Baseline({**CONFIG, "run_name": "a"}, {**CONFIG, "run_name": "b"})
    agreed = {**CONFIG, "run_name": "c"}
    assert config_sync.check(world([rank(r, value=agreed) for r in range(4)]), baseline).outcome \
        == PASS
    # without another run's value (it did not run, or returned nothing JSON holds): agreement only
    assert config_sync.check(world([rank(r, value=ANOTHER) for r in range(2)]),
                             Baseline(CONFIG, None)).outcome == PASS


def test_a_target_that_returns_the_same_config_for_another_runs_is_not_exercised():
    """A sync that ignores inputs['config'] (returns constants): ranks agree, and nothing
    tells whose config they hold; a target that hands its config over is judged as ever."""
    constant = {"lr": 3e-4, "batch_size": 32}
    judged = config_sync.check(world([rank(r, value=constant) for r in range(4)]),
                               Baseline(constant, dict(constant)))
    assert judged.outcome == PASS
    assert judged.unexercised is not None and judged.unexercised.startswith(
        "the target returned the same config in a fault-free run handed another run's config")
    handing = config_sync.check(world([rank(r, value=CONFIG) for r in range(4)]),
                                Baseline(CONFIG, ANOTHER))
    assert (handing.outcome, handing.unexercised) == (PASS, None)
    assert config_sync.check(world([rank(r, value=constant) for r in range(2)]),
                             Baseline(constant, None)).unexercised is None, \
        "without another run there is nothing to compare"


def test_killed_ranks_are_not_judged_by_config_sync():
    ranks = [rank(0, KILLED), rank(1, value=CONFIG), rank(2, value=CONFIG)]
    assert config_sync.check(world(ranks)).outcome == PASS


# -- data sharding ----------------------------------------------------------------------

EPOCH = sharding.Epoch(frozenset(range(8)), global_batch_size=4)


def loader(*batches: list[int], restart: list[list[int]] | None = None) -> dict[str, Any]:
    return {"batches": [list(b) for b in batches],
            "restart": [list(b) for b in (batches if restart is None else restart)]}


def test_disjoint_shards_covering_the_epoch_pass():
    ranks = [rank(0, value=loader([0, 1], [4, 5])), rank(1, value=loader([2, 3], [6, 7]))]
    judged = sharding.check(world(ranks), EPOCH)
    assert judged.outcome == PASS
    assert judged.detail.startswith("2 ranks x 2 batches: disjoint shards covering all 8 samples")


def test_overlapping_shards_fail_naming_the_sample_and_the_ranks():
    ranks = [rank(0, value=loader([0, 1], [4, 5])), rank(1, value=loader([0, 1], [4, 5]))]
    judged = sharding.check(world(ranks), EPOCH)
    assert judged.outcome == FAIL
    assert "4 samples read more than once, by ranks 0-1 (e.g. sample 0 in rank 0 batch 0 " \
        "and rank 1 batch 0" in judged.detail


def test_a_repeat_in_the_last_batch_is_named_as_a_sampler_that_pads_the_epoch():
    """7 samples on 2 ranks: DistributedSampler (drop_last=False) gives rank 1 sample 0 again
    as its last; a repeat elsewhere is not called padding."""
    seven = sharding.Epoch(frozenset(range(7)), global_batch_size=2)
    padded = [rank(0, value=loader([0], [2], [4], [6])), rank(1, value=loader([1], [3], [5], [0]))]
    judged = sharding.check(world(padded), seven)
    assert judged.outcome == FAIL and "a sampler that pads the epoch" in judged.detail, judged.detail
    early = [rank(0, value=loader([0], [2], [4], [6])), rank(1, value=loader([0], [3], [5], [1]))]
    assert "pads the epoch" not in sharding.check(world(early), seven).detail


def test_unequal_batch_counts_and_another_restart_order_fail():
    ranks = [rank(0, value=loader([0, 1], [4, 5], restart=[[4, 5], [0, 1]])),
             rank(1, value=loader([2, 3]))]
    judged = sharding.check(world(ranks), EPOCH)
    assert judged.outcome == FAIL
    assert "unequal batch counts: rank 1 1 batch, rank 0 2 batches" in judged.detail
    assert "a fresh loader with the same seed gives another order: rank 0 at batch 0" \
        in judged.detail


def test_no_ground_truth_is_a_failure_not_a_pass():
    judged = sharding.check(world([rank(0, value=loader([0, 1]))]), None)
    assert judged.outcome == FAIL and "no ground truth" in judged.detail


# -- exactly once -----------------------------------------------------------------------

STREAM = "/srv/w/data/streams/stream_{w:03d}.jsonl"
OUTPUT = "/mnt/bucket/activations/tpu_{w}/{name}.jsonl"
CHECKPOINT = "/srv/w/checkpoints/checkpoint_worker_{w}.json"


def lines(*ids: str) -> str:
    return "".join(json.dumps({"id": i}) + "\n" for i in ids)


def streams(workers: int = 2, per: int = 2) -> dict[str, str]:
    return {STREAM.format(w=w): lines(*(f"s{w}-{i}" for i in range(per))) for w in range(workers)}


def uploaded(w: int, *ids: str, name: str = "shard-0") -> dict[str, str]:
    return {OUTPUT.format(w=w, name=name): lines(*ids)}


def test_every_sample_uploaded_once_passes():
    files = {**streams(), **uploaded(0, "s0-0", "s0-1"), **uploaded(1, "s1-0", "s1-1")}
    ranks = [rank(0, value={"worker_id": 0}), rank(1, value={"worker_id": 1})]
    judged = exactly_once.check(world(ranks, files={0: files, 1: files}, topology="2x1"),
                                {0: 0, 1: 1})
    assert judged.outcome == PASS
    assert judged.detail.startswith("all 4 samples of 2 streams uploaded exactly once (2 objects")


def test_a_sample_uploaded_twice_fails_naming_the_objects():
    files = {**streams(), **uploaded(0, "s0-0", "s0-1"), **uploaded(0, "s0-1", name="shard-1"),
             **uploaded(1, "s1-0", "s1-1")}
    ranks = [rank(0, value={"worker_id": 0}), rank(1, value={"worker_id": 1})]
    judged = exactly_once.check(world(ranks, files={0: files, 1: files}, topology="2x1"),
                                {0: 0, 1: 1})
    assert judged.outcome == FAIL
    assert "worker 0 (rank 0): 1 sample uploaded more than once: s0-1" in judged.detail
    assert "(s0-1 in tpu_0/shard-0.jsonl, tpu_0/shard-1.jsonl)" in judged.detail


def test_a_lost_sample_a_checkpoint_claimed_fails_silently_lost():
    claim = {CHECKPOINT.format(w=0): json.dumps({"processed_sample_ids": ["s0-0", "s0-1"]})}
    files = {**streams(), **uploaded(0, "s0-0"), **uploaded(1, "s1-0", "s1-1"), **claim}
    ranks = [rank(0, value={"worker_id": 0}), rank(1, value={"worker_id": 1})]
    judged = exactly_once.check(world(ranks, files={0: files, 1: files}, topology="2x1"),
                                {0: 0, 1: 1})
    assert judged.outcome == FAIL
    assert "worker 0 (rank 0): 1 sample lost that its checkpoint claims processed: s0-1" \
        in judged.detail


def test_a_worker_that_raised_before_claiming_its_samples_is_a_loud_error():
    files = {**streams(), **uploaded(1, "s1-0", "s1-1")}
    ranks = [rank(0, ERROR, message="upload failed"), rank(1, value={"worker_id": 1})]
    judged = exactly_once.check(world(ranks, files={0: files, 1: files}, topology="2x1"),
                                {0: 0, 1: 1})
    assert (judged.outcome, judged.loud) == (ERROR, True)
    assert "2 samples of worker 0 not uploaded" in judged.detail


def test_a_checkpoint_that_moves_backwards_across_a_restart_fails():
    first = json.dumps({"processed_sample_ids": ["s0-0", "s0-1"], "total_shards": 2})
    then = json.dumps({"processed_sample_ids": ["s0-0", "s0-1"], "total_shards": 1})
    snapshot = Event(t=0.5, kind="snapshot", rank=0,
                     detail={"life": 0, "files": {CHECKPOINT.format(w=0): first}})
    files = {**streams(1), **uploaded(0, "s0-0", "s0-1"), CHECKPOINT.format(w=0): then}
    judged = exactly_once.check(world([rank(0, value={"worker_id": 0}, restarts=1)],
                                      files={0: files}, history=[snapshot], topology="1x1"),
                                {0: 0})
    assert judged.outcome == FAIL
    assert "rank 0's checkpoint_worker_0.json moved backwards from life 0 to the end" \
        in judged.detail


# -- the property: the order the ranks are listed in does not matter ---------------------

FATES = st.sampled_from([PASS, PASS, PASS, ERROR, KILLED, CRASH, HANG])


def _same_judgement_in_any_order(build, specs, order) -> None:
    listed = [specs[i] for i in order]
    assert build(listed) == build(specs)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_config_sync_judges_the_same_whatever_the_rank_order(data):
    configs = [CONFIG, {**CONFIG, "run_name": "calm-heron"}, {**CONFIG, "lr": 5},
               {**CONFIG, "lr": 7}, None, ["not", "a", "dict"]]
    n = data.draw(st.integers(1, 6))
    specs = [(r, data.draw(FATES), data.draw(st.sampled_from(configs))) for r in range(n)]
    order = data.draw(st.permutations(range(n)))

    def fate(r: int, f: str, v: Any) -> RankResult:  # a config with lr > 1: its checker refused it
        too_fast = f == PASS and isinstance(v, dict) and v["lr"] > 1
        return refused(r, v, "lr: must be at most 1") if too_fast else rank(r, f, v)

    _same_judgement_in_any_order(
        lambda listed: config_sync.check(world([fate(r, f, v) for r, f, v in listed]),
                                         Baseline(CONFIG, ANOTHER)),
        specs, order)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_sharding_judges_the_same_whatever_the_rank_order(data):
    shards = [loader([0, 1], [4, 5]), loader([2, 3], [6, 7]), loader([2, 3]), loader([9, 1]),
              loader([0, 1], [4, 5], restart=[[4, 5], [0, 1]]), {"batches": "nope"},
              {**loader([6, 7], [2, 3]), "dropped": [0]}]
    n = data.draw(st.integers(1, 5))
    specs = [(r, data.draw(FATES), data.draw(st.sampled_from(shards))) for r in range(n)]
    order = data.draw(st.permutations(range(n)))
    _same_judgement_in_any_order(
        lambda listed: sharding.check(world([rank(r, f, v) for r, f, v in listed]), EPOCH),
        specs, order)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_exactly_once_judges_the_same_whatever_the_rank_order(data):
    n = data.draw(st.integers(1, 4))
    bucket: dict[str, str] = {}
    for w in range(n):
        kept = data.draw(st.lists(st.sampled_from([f"s{w}-0", f"s{w}-1", "alien"]), max_size=3))
        bucket.update(uploaded(w, *kept) if kept else {})
    claims = {CHECKPOINT.format(w=w): json.dumps({"processed_sample_ids": [f"s{w}-0"]})
              for w in range(n) if data.draw(st.booleans())}
    files = {**streams(n), **bucket, **claims}
    specs = [(r, data.draw(FATES), {"worker_id": data.draw(st.sampled_from([r, 0]))})
             for r in range(n)]
    order = data.draw(st.permutations(range(n)))

    def judge(listed):
        ranks = [rank(r, f, v, restarts=r % 2) for r, f, v in listed]
        return exactly_once.check(world(ranks, files={r: files for r, _, _ in listed},
                                        topology=f"{n}x1"), {r: r for r in range(n)})

    _same_judgement_in_any_order(judge, specs, order)


def test_dropped_ids_may_be_any_ids_a_loader_names_its_samples_by():
    """A loader that calls its samples "doc0053" reports them so; the contract says what it
    takes, and the checker compares without raising (issue 44: int() crashed every rank)."""
    import numpy as np
    import pytest

    from harness.workloads.data_sharding.adapter import ContractError, dropped_ids

    assert dropped_ids(["doc0053", np.int64(4), 7]) == ["doc0053", 4, 7]
    assert dropped_ids(()) == []
    for bad, said in ((["doc1", 3.5], "holds 3.5 (a float)"), ("doc1", "is 'doc1' (a str)"),
                      (5, "is 5 (a int)"), ([None], "holds None (a NoneType)")):
        with pytest.raises(ContractError, match=r"dropped_ids " + said.replace("(", r"\(")
                           .replace(")", r"\)") + r": the data-sharding contract"):
            dropped_ids(bad)
    # 10 samples in global batches of 4: 8 and 9 are the remainder; "doc9" is not a sample
    epoch = sharding.Epoch(frozenset(range(10)), global_batch_size=4)
    ranks = [rank(0, PASS, {**loader([0, 1], [2, 3]), "dropped": [8, "doc9"]}),
             rank(1, PASS, {**loader([4, 5], [6, 7]), "dropped": [8, "doc9"]})]
    judged = sharding.check(world(ranks), epoch)
    assert judged.outcome == FAIL
    assert "1 never read and not reported as dropped (e.g. 9)" in judged.detail
    assert "1 reported as dropped but read or not in the data (e.g. doc9)" in judged.detail
    told = [rank(0, PASS, {**loader([0, 1], [2, 3]), "dropped": [8, 9]}),
            rank(1, PASS, {**loader([4, 5], [6, 7]), "dropped": [8, 9]})]
    assert sharding.check(world(told), epoch).outcome == PASS


# -- resume: the trainer after its pre-emption -----------------------------------------

FAULT_FREE = {"resumed_from": None, "resumed_state": None, "step": 12,
              "states": {str(s): f"state-{s}" for s in range(1, 13)}}


def resumed(at: int, states: range, restarts: int = 1) -> list[RankResult]:
    value = {"resumed_from": at, "resumed_state": f"state-{at}", "step": 12,
             "states": {str(s): f"state-{s}" for s in states}}
    return [rank(r, value=value, restarts=restarts) for r in range(2)]


def steps(upto: int) -> list[Event]:
    return [Event(t=float(s), kind="step", rank=r, detail={"life": 0})
            for s in range(1, upto + 1) for r in range(2)]


def test_a_job_resumed_at_its_last_step_ends_with_the_state_it_loaded():
    # Pre-empted at step 12 of 12: it saved step 12, came back, loaded it, ran nothing.
    judged = resume.check(world(resumed(12, range(0)), history=steps(12)), save_every=4,
                          baseline=Baseline(this_run=FAULT_FREE))
    assert judged.outcome == PASS, judged.detail
    assert "resumed from step 12" in judged.detail


def test_a_job_resumed_earlier_that_ends_short_of_the_last_step_fails():
    value = {"resumed_from": 8, "resumed_state": "state-8", "step": 10,
             "states": {"9": "state-9", "10": "state-10"}}
    judged = resume.check(world([rank(r, value=value, restarts=1) for r in range(2)],
                                history=steps(9)), save_every=4,
                          baseline=Baseline(this_run=FAULT_FREE))
    assert judged.outcome == FAIL
    assert "ended at step 10" in judged.detail and "at step 12" in judged.detail


def test_a_job_resumed_at_the_last_step_with_another_state_fails_naming_it():
    ranks = resumed(12, range(0))
    ranks[1].value["resumed_state"] = "state-8"
    judged = resume.check(world(ranks, history=steps(12)), save_every=4,
                          baseline=Baseline(this_run=FAULT_FREE))
    assert judged.outcome == FAIL
    assert "rank 1 resumed from step 12 with a state that is not" in judged.detail
