"""The ``xla`` torch.distributed backend of the shim, at world sizes 1, 2 and 8.

Ports the torch.distributed expectations of upstream
test/pjrt/test_collective_ops_tpu.py and checks what real code trips over:
barrier synchronizes nothing, the object collectives fail (pytorch/xla#5492),
BXOR is not implemented.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.reports.diagnosis import describe
from harness.world.world import run_world

from support import TARGETS_DIR

TARGETS = TARGETS_DIR / "dist_targets.py"
TOPOLOGIES = ["1x1", "2x1", "8x1"]
TIMEOUT = 20.0


def run(name: str, topology: str, *args: Any, env: dict[str, str] | None = None) -> Any:
    """Run a target of dist_targets.py on every rank; the world must pass."""
    result = run_world(f"{TARGETS}:{name}", topology=topology, timeout=TIMEOUT, args=args, env=env)
    assert result.outcome == "PASS", describe(result)
    return result


def values(result: Any) -> list[Any]:
    return [r.value for r in result.ranks]


def calls(result: Any) -> list[tuple[int, str]]:
    """(rank, op) of every call the coordinator saw."""
    return [(e.rank, e.op) for e in result.history if e.kind == "call"]


@pytest.fixture(scope="module", params=TOPOLOGIES)
def coll(request: pytest.FixtureRequest) -> tuple[int, list[dict[str, Any]]]:
    """One world that runs every collective once: (world size, each rank's observations)."""
    result = run("collectives", request.param)
    vals = values(result)
    return len(vals), vals


# -- init_process_group ----------------------------------------------------------

@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_init_process_group_takes_rank_and_size_from_the_world(topology):
    result = run("identity", topology)
    vals = values(result)
    n = len(vals)
    assert n == {"1x1": 1, "2x1": 2, "8x1": 8}[topology]
    for i, v in enumerate(vals):
        assert (v["rank"], v["ordinal"]) == (i, i)
        assert v["world_size"] == v["runtime_world_size"] == n
        assert v["backend"] == "xla" and v["backend_name"] == "xla"
        assert v["initialized"] is True
        assert v["group_class"] == "ProcessGroupXla"
    # The store handshake is one collective for the world (none for a single rank).
    expected = [(r, "init_process_group") for r in range(n)] if n > 1 else []
    assert sorted(calls(result)) == expected


def test_init_again_after_destroy_reuses_the_store():
    result = run("reinit", "2x1")
    for i, v in enumerate(values(result)):
        assert v == {"rank": i, "rank2": i, "destroyed": True, "same_store": True, "sum": 1.0}
    assert [op for _, op in calls(result)].count("init_process_group") == 2  # once per rank


@pytest.mark.parametrize("topology", ["2x1", "8x1"])
def test_the_default_store_is_shared_by_the_world(topology):
    assert [v["value"] for v in values(run("store_shared", topology))] == \
        ["from-rank-0"] * int(topology[0])


def test_torch_init_barrier_runs_over_the_shared_store():
    # TORCH_DIST_INIT_BARRIER=1 makes torch wait on the store for every rank: it needs one store.
    # Rank 0 returns right after it: its store must outlive the peers still in the barrier.
    result = run("identity", "8x1", env={"TORCH_DIST_INIT_BARRIER": "1"})
    assert [v["rank"] for v in values(result)] == list(range(8))


@pytest.mark.parametrize("regroup", [False, True], ids=["init", "new_group"])
def test_the_store_outlives_rank_0(regroup):
    # The store is the world's: a rank 0 that returns right after a store barrier (init's, or
    # a new group's) leaves it to the peers that still use it, as torch_xla's runtime keeps
    # process 0 until every process is done. The workers use it once rank 0 has exited.
    result = run("store_after_rank0_returned", "8x1", regroup,
                 env={"TORCH_DIST_INIT_BARRIER": "1"})
    assert [v["rank"] for v in values(result)] == list(range(8))
    assert [v.get("joined") for v in values(result)] == [None] + [7] * 7


def test_rank_0_that_raises_after_init_is_reported_while_the_others_wait():
    # Workers blocked in a collective are done with the store: rank 0 exits with its error.
    # The others hang until the deadline (a real rendezvous never times out): keep it short.
    result = run_world(f"{TARGETS}:rank0_raises_after_init", topology="4x1", timeout=10.0,
                       env={"TORCH_DIST_INIT_BARRIER": "1"})
    rank0 = result.ranks[0]
    assert rank0.outcome == "ERROR", describe(result)
    assert "rank 0's config fails validation" in str(rank0.error), describe(result)


def test_rank_0_does_not_wait_for_a_worker_that_died():
    result = run_world(f"{TARGETS}:worker_dies_after_init", topology="4x1", timeout=TIMEOUT,
                       env={"TORCH_DIST_INIT_BARRIER": "1"})
    assert [r.outcome for r in result.ranks] == ["PASS", "CRASH", "PASS", "PASS"], \
        describe(result)


def test_dummy_store_skips_the_handshake():
    env = {"TORCH_DIST_INIT_BARRIER": "0", "XLA_USE_DUMMY_STORE": "1"}
    result = run("dummy_store", "2x1", env=env)
    assert [v["store"] for v in values(result)] == ["DummyStore"] * 2
    assert [v["sum"] for v in values(result)] == [1.0, 1.0]
    assert "init_process_group" not in [op for _, op in calls(result)]


# -- collectives (upstream test_collective_ops_tpu.py) ----------------------------

def test_all_reduce_sums_the_ordinals(coll):
    n, vals = coll
    assert [v["all_reduce_sum"] for v in vals] == [[float(sum(range(n)))]] * n


def test_all_reduce_supported_ops(coll):
    n, vals = coll
    first = [r + 1.0 for r in range(n)]
    second = [10.0 - r for r in range(n)]
    product = [1.0, 1.0]
    for a, b in zip(first, second):
        product = [product[0] * a, product[1] * b]
    band, bor = [-1, -1], [0, 0]
    for r in range(n):
        pair = [1 << r, 0xFF ^ (1 << r)]
        band = [band[0] & pair[0], band[1] & pair[1]]
        bor = [bor[0] | pair[0], bor[1] | pair[1]]
    for v in vals:
        assert v["all_reduce_product"] == product
        assert v["all_reduce_min"] == [min(first), min(second)]
        assert v["all_reduce_max"] == [max(first), max(second)]
        assert v["all_reduce_band"] == band
        assert v["all_reduce_bor"] == bor


def test_all_gather_into_tensor_concat_and_stack(coll):
    n, vals = coll
    for v in vals:
        assert v["all_gather_into_tensor_concat"] == [float(i) for i in range(n)]
        assert v["all_gather_into_tensor_stack"] == [[float(i)] for i in range(n)]
        bad = v["all_gather_into_tensor_bad_shape"]
        assert bad["raised"] == "ValueError"
        assert "not compatible for all_gather_into_tensor" in bad["message"]


def test_all_gather_into_a_list(coll):
    n, vals = coll
    for v in vals:
        assert v["all_gather"] == [[float(i)] for i in range(n)]
        assert v["all_gather_scalar"] == [10 * i for i in range(n)]


def test_reduce_scatter(coll):
    n, vals = coll
    for i, v in enumerate(vals):
        assert v["reduce_scatter_tensor"] == [2.0 * i * n, (2.0 * i + 1) * n]
        assert v["reduce_scatter_list"] == [100.0 * i * n + sum(range(n))]


def test_all_to_all_single(coll):
    n, vals = coll
    expected = sorted(float(i) for i in range(n) for _ in range(2))
    for v in vals:
        assert sorted(v["all_to_all_single"]) == expected  # upstream: order not promised
        assert v["all_to_all_single"] == expected  # ours: torch's order, chunk j from rank j
        assert v["all_to_all_single_splits"]["raised"] == "AssertionError"


def test_all_to_all_of_lists(coll):
    n, vals = coll
    for i, v in enumerate(vals):
        assert v["all_to_all"] == [[float(10 * j + i)] for j in range(n)]


def test_broadcast_from_the_last_rank(coll):
    n, vals = coll
    assert [v["broadcast"] for v in vals] == [[float(n - 1), -1.0]] * n


def test_reduce_gives_the_sum_to_dst_only(coll):
    n, vals = coll
    dst = n - 1
    for i, v in enumerate(vals):
        assert v["reduce"] == ([float(sum(range(1, n + 1)))] if i == dst else [float(i + 1)])


def test_gather_fills_the_list_on_dst_only(coll):
    n, vals = coll
    assert vals[0]["gather"] == [[float(i), float(i * i)] for i in range(n)]
    for i, v in enumerate(vals):
        if i != 0:
            assert v["gather"] is None
        assert v["gather_input"] == [float(i), float(i * i)]


def test_scatter_from_rank_0(coll):
    n, vals = coll
    assert [v["scatter"] for v in vals] == [[float(i)] for i in range(n)]


def test_async_work_is_complete_at_once(coll):
    n, vals = coll
    for v in vals:
        assert v["async_completed_before_wait"] is True
        assert v["async_wait"] is True
        assert v["async_result"] == [float(n)]


# -- send / recv -------------------------------------------------------------------

@pytest.mark.parametrize("topology", ["2x1", "8x1"])  # torch refuses a send to oneself
def test_send_recv_ring(topology):
    vals = values(run("send_recv_ring", topology))
    n = len(vals)
    for i, v in enumerate(vals):
        prev = (i - 1) % n
        assert v["got"] == [float(prev), float(prev) * 2]
        assert v["src"] == prev
        assert v["sent"] == [float(i), float(i) * 2]  # the sender's tensor is untouched


def test_send_recv_pair_in_order_whatever_the_tag():
    vals = values(run("send_recv_order", "2x1"))
    assert vals[1]["got"] == [0.0, 1.0, 2.0]


def test_recv_into_a_tensor_of_another_size_raises():
    vals = values(run("recv_wrong_shape", "2x1"))
    assert vals[1]["raised"] == "RuntimeError"
    assert "8 bytes" in vals[1]["message"] and "float32[3]" in vals[1]["message"]


def test_send_recv_log_the_real_warning():
    for v in values(run("send_recv_warning", "2x1")):
        assert any(r.startswith("Individual send/recv ops are inefficient on an XLA device")
                   for r in v["records"])


# -- what real code trips over -------------------------------------------------------

@pytest.mark.parametrize("topology", ["1x1", "2x1"])
def test_bxor_is_not_implemented_and_avg_is_invalid(topology):
    n = int(topology[0])
    for v in values(run("invalid_reduce_ops", topology)):
        assert v["bxor"]["raised"] == "NotImplementedError"
        assert v["bxor"]["message"].startswith("reduce op ")
        assert v["reduce_bxor"]["raised"] == "NotImplementedError"
        assert v["avg"]["raised"] == "ValueError"
        assert v["avg"]["message"].startswith("Invalid reduce op ")
        assert v["reduce_scatter_avg"]["raised"] == "ValueError"
        assert v["sum_after"] == float(sum(range(n)))


@pytest.mark.parametrize("topology", ["2x1", "8x1"])
def test_barrier_returns_at_once_and_synchronizes_nothing(topology):
    sleep_s = 1.0
    result = run("barrier_timing", topology, sleep_s)
    vals = values(result)
    rank0_entered = vals[0]["entered"]
    for v in vals:
        assert v["async_completed"] is True
    for v in vals[1:]:
        # Every other rank was out of both barriers before rank 0 even reached its first.
        assert v["left"] < rank0_entered
    # No barrier reached the coordinator: the only calls are the store handshake.
    assert {op for _, op in calls(result)} == {"init_process_group"}


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_object_collectives_raise_on_every_rank(topology):
    result = run("object_collectives", topology)
    vals = values(result)
    n = len(vals)
    for i, v in enumerate(vals):
        for name in ("broadcast_object_list", "all_gather_object", "gather_object"):
            assert v[name].get("raised") == "RuntimeError", (i, name, v[name])
            assert "not an XLA tensor" in v[name]["message"]
            assert f"torch.distributed.{name}" in v[name]["message"]
            assert "pytorch/xla#5492" in v[name]["message"]
        if i != 0:
            assert v["object_list_after"] == "[None]"  # nothing was received
        assert v["sum_after"] == float(sum(range(n)))
    # They failed before sending anything: the only collectives are init and the sum.
    assert {op for _, op in calls(result)} <= {"init_process_group", "all_reduce"}


def test_new_group_of_the_world_has_the_world_as_mesh():
    for v in values(run("new_group_world", "2x1")):
        assert v["class"] == "ProcessGroupXla"
        assert v["mesh"] == [[0, 1]]
        assert v["sum"] == 1.0


def test_infer_mesh_as_the_real_backend():
    cases = [([1, 5, 9], 12), ([4, 5, 6, 7], 12), ([0, 2, 5], 12), ([1, 2], 12), ([0, 1], 5)]
    got = values(run("infer_mesh", "1x1", cases))[0]
    assert got[0] == {"mesh": [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]}
    assert got[1] == {"mesh": [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]}
    assert got[2]["raised"] == "ValueError" and "evenly distributed" in got[2]["message"]
    assert got[3]["raised"] == "ValueError" and "horizontal slice" in got[3]["message"]
    assert got[4]["raised"] == "ValueError" and "side of a rectangle" in got[4]["message"]
