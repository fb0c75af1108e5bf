"""``torch_xla.distributed.parallel_loader`` of the shim: batches, devices, syncs, failures.

Expectations are read off torch_xla 2.9's parallel_loader.py: each batch is
moved to the device (copies; tuples become lists), ``torch_xla.sync()`` runs
every ``batches_per_execution`` batches with the real counter and once at the
end, and a DataLoader that raises ends the epoch early without an exception.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.reports.diagnosis import describe
from harness.world.world import run_world

from support import TARGETS_DIR

TARGETS = TARGETS_DIR / "dist_targets.py"
TIMEOUT = 20.0


def run(name: str, topology: str, *args: Any) -> list[Any]:
    """Each rank's value of a target of dist_targets.py; the world must pass."""
    result = run_world(f"{TARGETS}:{name}", topology=topology, timeout=TIMEOUT, args=args)
    assert result.outcome == "PASS", describe(result)
    return [r.value for r in result.ranks]


@pytest.mark.parametrize("topology", ["1x1", "2x1", "8x1"])
def test_mp_device_loader_yields_each_ranks_batches_as_copies(topology):
    vals = run("mp_device_loader", topology, 10, 4)
    for rank, v in enumerate(vals):
        base = 1000.0 * rank
        expected = [([base + i for i in range(s, min(s + 4, 10))], list(range(s, min(s + 4, 10))))
                    for s in range(0, 10, 4)]
        assert v["batches"] == expected
        assert v["len"] == 3  # len(loader)
        assert v["devices"] == ["xla:0"] * 3  # on the device, as 2.9 says it
        assert v["batch_types"] == ["list"] * 3
        # The batches were copies: adding to them changed neither the dataset nor epoch 2.
        assert v["dataset_after"] == [base + i for i in range(10)]
        assert v["second_epoch"] == [b[0] for b in expected]


def test_sync_before_every_batch_and_at_the_end():
    (v,) = run("mp_device_loader", "1x1", 5, 1)
    # Before batches 1..5 (0..4 already yielded), then the end of the epoch syncs twice:
    # once by the counter, once for StopIteration.
    assert v["sync_calls"] == [0, 1, 2, 3, 4, 5, 5]


@pytest.mark.parametrize(("n_items", "bpe", "expected"), [
    (10, 2, [1, 3, 5, 5]),  # 5 batches
    (8, 2, [1, 3, 4]),  # 4 batches: the end falls between two syncs
    (8, 3, [2, 4]),  # 4 batches
])
def test_sync_every_batches_per_execution(n_items, bpe, expected):
    (v,) = run("mp_device_loader", "1x1", n_items, 2, bpe)
    assert v["sync_calls"] == expected


def test_parallel_loader_deals_samples_round_robin_and_drops_the_tail():
    (v,) = run("parallel_loader_devices", "1x1", 5)
    assert v["first"] == [[0], [2]]
    assert v["second"] == [[1], [3]]  # sample 4 has no partner for xla:1: dropped
    assert v["per_device_samples"] == 2 and v["len_first"] == 2
    assert v["unknown_device"]["raised"] == "KeyError"


def test_batches_are_converted_like_send_cpu_data_to_device():
    (v,) = run("parallel_loader_structures", "1x1")
    assert v["pair_type"] == "list"  # a tuple comes back as a list
    assert v["pair_same_object"] is True  # one tensor met twice is converted once
    assert v["pair_is_copy"] is True
    # Only a plain torch.Tensor is moved; a Parameter, like any object with a __dict__, is
    # shallow-copied by the real for_each_instance_rewrite (a new object on the same storage).
    assert v["param_same_object"] is False
    assert v["scalars"] == [3, "b0"]
    assert v["nested"] == [2.0]
    assert v["len"] == 1


def test_a_failing_dataloader_ends_the_epoch_early_and_quietly():
    (v,) = run("loader_error", "1x1", 6, 3)
    assert v["got"] == [0.0, 1.0, 2.0]  # no exception reached the loop
    assert len(v["records"]) == 1 and v["records"][0].endswith("|exc")  # but it was reported


def test_close_ends_the_per_device_loader():
    (v,) = run("loader_close", "1x1")
    assert v == {"first": 0, "rest": []}
