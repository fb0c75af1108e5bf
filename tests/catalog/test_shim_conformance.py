"""Conformance of the torch_xla shim with real torch_xla 2.9.

Ports the expectations of the upstream tests that docs/torch_xla.md
names (test/pjrt/test_mesh_service.py, test/pjrt/test_collective_ops_tpu.py,
test/test_mp_replication.py, test/test_mp_mesh_reduce.py, test/test_mp_save.py,
test/pjrt/test_runtime_multi_cpu.py) plus the semantics the reference lists for
xm.all_reduce, xm.save, the API profiles, the rank environment and the
coordinator's history. Expected values for N > 1 come from the TPU-only
upstream tests (real torch_xla cannot run N > 1 on a CPU).

Each world runs one target of tests/targets/conformance.py on every rank; the
target reports a dict of observations and several tests below read the same
(cached) world, so the file runs a few dozen worlds in all.
"""

from __future__ import annotations

import functools
import math
import operator
import os

import pytest

import harness
from harness.filesystem.mounts import Mount
from harness.reports.diagnosis import describe

from support import TARGETS_DIR

TARGETS = os.path.join(TARGETS_DIR, "conformance.py")
TIMEOUT = 20.0
SIZES = {1: "1x1", 2: "2x1", 8: "8x1"}
GROUPS = [[0, 1, 2, 3], [4, 5, 6, 7]]

_worlds: dict[tuple, harness.WorldResult] = {}


def world(target: str, topology: str, *, profile: str = "legacy", env: dict[str, str] | None = None,
          args: tuple = ()) -> harness.WorldResult:
    """Run ``target`` once per (topology, profile, env, args) and share the result."""
    key = (target, topology, profile, tuple(sorted((env or {}).items())), args)
    if key not in _worlds:
        _worlds[key] = harness.run_world(f"{TARGETS}:{target}", topology=topology, timeout=TIMEOUT,
                                         profile=profile, env=env, args=args)
    return _worlds[key]


def observations(result: harness.WorldResult) -> list[dict]:
    """Every rank's observations, in rank order; the world must have passed."""
    assert result.outcome == harness.PASS, describe(result)
    return result.values


def per_rank(target: str, n: int, **kw) -> list[dict]:
    return observations(world(target, SIZES[n], **kw))


def raised(obs: dict, exc_type: str, message: str | None = None) -> bool:
    return obs.get("raised") == exc_type and (message is None or obs.get("message") == message)


sizes = pytest.mark.parametrize("n", [1, 2, 8])
multi = pytest.mark.parametrize("n", [2, 8])


# -- test/pjrt/test_mesh_service.py, test/test_mp_mesh_reduce.py ------------------

@sizes
def test_rendezvous_static_size(n):
    expected = [b"message %d" % r for r in range(n)]
    for obs in per_rank("mesh_service", n):
        assert obs["static"] == expected


@sizes
def test_rendezvous_dynamic_size(n):
    expected = [b"message" * r for r in range(n)]
    for obs in per_rank("mesh_service", n):
        assert obs["dynamic"] == expected
        assert [type(p) for p in obs["dynamic"]] == [bytes] * n


@sizes
def test_rendezvous_empty_payload(n):
    for obs in per_rank("mesh_service", n):
        assert obs["empty"] == [b""] * n
        assert obs["default_payload"] == [b""] * n


@sizes
def test_rendezvous_replica_groups(n):
    for obs in per_rank("mesh_service", n):
        assert obs["replicas_all"] == [b"message"] * n


@sizes
def test_rendezvous_string_payload(n):
    for obs in per_rank("mesh_service", n):
        assert raised(obs["str_payload"], "TypeError", "`payload` must be bytes, not <class 'str'>")


@sizes
def test_rendezvous_partial_replicas(n):
    for obs in per_rank("mesh_service", n):
        assert raised(obs["replicas_too_many"], "ValueError", "Only global rendezvous is supported")
        if n > 1:
            assert raised(obs["replicas_one"], "ValueError", "Only global rendezvous is supported")
        # A refused call exchanges nothing: the next rendezvous still pairs up.
        assert obs["after_errors"] == [b"%d" % (r * r) for r in range(n)]


@sizes
def test_mesh_reduce(n):
    for obs in per_rank("mesh_service", n):
        assert obs["mesh_reduce"] == sum(range(n))
        assert type(obs["mesh_reduce"]) is int


@sizes
def test_mp_mesh_reduce_scalar_and_tensor(n):
    for obs in per_rank("mesh_service", n):
        assert obs["mesh_reduce_scalar"] == 1.25 * n
        tensor = obs["mesh_reduce_tensor"]
        assert tensor["type"] == "Tensor" and tensor["dtype"] == "torch.float32"
        assert tensor["values"] == [[v * n for v in row] for row in [[1, 2], [3, 4], [5, 6]]]


@sizes
def test_mesh_reduce_gives_values_in_ordinal_order(n):
    expected = [{"rank": r, "name": f"r{r}"} for r in range(n)]
    for obs in per_rank("mesh_service", n):
        assert obs["mesh_reduce_order"] == expected


@sizes
def test_mesh_reduce_loads_with_weights_only(n):
    """mesh_reduce round-trips through torch.save/torch.load, whose weights_only default
    (torch >= 2.6) refuses numpy scalars and user objects: every rank raises
    UnpicklingError after the exchange, so the world stays in step."""
    for obs in per_rank("mesh_service", n):
        for key, name in (("mesh_reduce_numpy", "numpy"), ("mesh_reduce_object", "conformance.Point")):
            assert obs[key]["raised"] == "UnpicklingError", obs[key]
            assert obs[key]["message"].startswith("Weights only load failed")
            assert name in obs[key]["message"]
        assert obs["after_mesh_reduce"] == [b"ok"] * n


# -- test/pjrt/test_collective_ops_tpu.py --------------------------------------------

@sizes
def test_broadcast_master_param(n):
    ranks = per_rank("collectives", n)
    master = ranks[0]["params_before"]
    for obs in ranks:
        assert obs["params_after"] == master  # parameters and buffers, incl. num_batches_tracked
        assert obs["params_same_objects"] and obs["params_requires_grad"] == [True] * 4
        assert obs["broadcast_master_param_returned"] == "None"
    for obs in ranks[1:]:  # unsynchronized parameters differ: the broadcast did the work
        assert obs["params_before"] != master


@sizes
def test_all_reduce_ordinals(n):
    for obs in per_rank("collectives", n):
        assert obs["all_reduce"] == {"value": sum(range(n)), "requires_grad": True, "shape": []}
        assert obs["all_reduce_unpinned"] == [sum(range(n))]


@sizes
def test_all_gather(n):
    for r, obs in enumerate(per_rank("collectives", n)):
        assert obs["all_gather"] == list(range(n))
        assert obs["all_gather_unpinned"] == list(range(n))
        assert obs["all_gather_output"] == {"same": True, "values": list(range(n))}
        expected = [list(range(n)), [10 * i for i in range(n)]]
        assert obs["all_gather_dim1"] == expected
        assert obs["all_gather_dim_neg"] == expected
        assert obs["all_gather_input"] == [[r], [10 * r]]


@sizes
def test_reduce_scatter(n):
    for r, obs in enumerate(per_rank("collectives", n)):
        assert obs["reduce_scatter_pinTrue"] == [-r]
        assert obs["reduce_scatter_pinFalse"] == [-r]
        assert obs["reduce_scatter_output"] == {"same": True, "values": [-r]}
        assert obs["reduce_scatter_input"] == [-i for i in range(n)]


@sizes
def test_all_to_all(n):
    for r, obs in enumerate(per_rank("collectives", n)):
        assert obs["all_to_all"] == [[[-r] * n, list(range(n))]]


@sizes
def test_collective_permute(n):
    for r, obs in enumerate(per_rank("collectives", n)):
        assert obs["permute_ring"] == [(r - 1) % n + 1.0]
        assert obs["permute_input"] == [r + 1.0]
        if n > 1:  # only rank 1 is sent to; a rank nobody sends to gets zeros
            assert obs["permute_single"] == ([1.0] if r == 1 else [0.0])


@sizes
def test_collective_broadcast_in_place_from_last_rank(n):
    root = n - 1
    for obs in per_rank("collectives", n):
        assert obs["collective_broadcast"] == {
            "returned": "None", "a": [float(root)] * 3, "b": [10 * root], "in_place": True,
            "b_dtype": "torch.int32"}


def test_collectives_with_groups():
    for r, obs in enumerate(per_rank("collectives", 8)):
        group = GROUPS[r // 4]
        assert obs["g_all_reduce"] == [float(sum(group))]
        assert obs["g_all_reduce_list"] == [[max(group)]]
        assert obs["g_all_gather"] == group
        assert obs["g_all_gather_unpinned"] == group
        assert obs["g_reduce_scatter"] == [-(r % 4)]
        assert obs["g_all_to_all"] == [[[-(r % 4)] * 4, [float(g) for g in group]]]


def test_collective_broadcast_with_groups():
    """The real op scales each rank's tensors by (global ordinal == root) and all-reduces
    them with SUM in its group: the group holding the root gets the root's values, the
    other group sums zeros."""
    for r, obs in enumerate(per_rank("collectives", 8)):
        assert obs["g_collective_broadcast"] == ([101.0] if r < 4 else [0.0])


# -- all_reduce semantics; test/test_mp_replication.py --------------------------------

@sizes
def test_reduce_type_constants(n):
    for obs in per_rank("all_reduce_semantics", n):
        assert obs["constants"] == ["sum", "mul", "and", "or", "min", "max"]


@sizes
def test_all_reduce_tensor_is_out_of_place(n):
    total = float(sum(r + 1 for r in range(n)))
    for r, obs in enumerate(per_rank("all_reduce_semantics", n)):
        t = obs["tensor"]
        assert t["type"] == "Tensor"
        assert not t["same_object"] and not t["same_storage"]  # n == 1: a clone
        assert t["input"] == [r + 1.0, 2.0]
        assert t["out"] == ([total, 2.0 * n] if n > 1 else [1.0, 2.0])


@sizes
def test_all_reduce_list_is_in_place(n):
    total = float(sum(r + 1 for r in range(n)))
    for obs in per_rank("all_reduce_semantics", n):
        assert obs["list"] == {"same_list": True, "same_tensors": True, "a": [total],
                               "b": [[2 * total]]}
        assert obs["tuple"] == {"same": True, "values": [total]}


@sizes
def test_mp_replication(n):
    for obs in per_rank("all_reduce_semantics", n):
        assert obs["replication"] == {"ones": True, "twos": True}


@sizes
def test_all_reduce_scale_multiplies_after_the_reduce(n):
    """MAX with scale -1 and MUL with scale 2 tell 'after' from 'before' the reduce;
    at world size 1 all_reduce is a no-op and scale is ignored."""
    total = float(sum(r + 1 for r in range(n)))
    for obs in per_rank("all_reduce_semantics", n):
        if n == 1:
            assert [obs[k] for k in ("scale_sum", "scale_max", "scale_mul", "scale_list")] == [[1.0]] * 4
        else:
            assert obs["scale_sum"] == [0.5 * total]
            assert obs["scale_max"] == [-float(n)]
            assert obs["scale_mul"] == [2.0 * math.factorial(n)]
            assert obs["scale_list"] == [0.25 * total]


_PY_REDUCE = {"sum": operator.add, "mul": operator.mul, "and": operator.and_, "or": operator.or_,
              "min": min, "max": max}


@sizes
def test_all_reduce_types_on_ints_and_bools(n):
    ints = [[r + 1, 1 << r, -r] for r in range(n)]
    bools = [[r == 0, True, False, r % 2 == 1] for r in range(n)]
    for obs in per_rank("all_reduce_semantics", n):
        for rt, op in _PY_REDUCE.items():
            expected = [functools.reduce(op, col) for col in zip(*ints)]
            assert obs["ints"][rt] == {"values": expected, "dtype": "torch.int32"}, rt
        for rt in ("and", "or", "min", "max"):
            expected = [bool(functools.reduce(_PY_REDUCE[rt], col)) for col in zip(*bools)]
            assert obs["bools"][rt] == {"values": expected, "dtype": "torch.bool"}, rt


@sizes
def test_all_reduce_unknown_type(n):
    for obs in per_rank("all_reduce_semantics", n):
        if n == 1:  # the no-op returns before the type is looked at
            assert obs["unknown"] == {"returned": "tensor([1.])"}
            assert obs["unknown_upper"] == {"returned": "[tensor([1.])]"}
        else:
            assert raised(obs["unknown"], "RuntimeError", "Unknown AllReduce type: avg")
            assert raised(obs["unknown_upper"], "RuntimeError", "Unknown AllReduce type: SUM")
        assert obs["after_unknown"] == [float(n)]


def test_xla_always_allreduce_runs_the_reduce_at_world_size_1():
    (obs,) = per_rank("all_reduce_semantics", 1, env={"XLA_ALWAYS_ALLREDUCE": "1"})
    assert obs["scale_sum"] == [0.5] and obs["scale_max"] == [-1.0]
    assert obs["scale_mul"] == [2.0] and obs["scale_list"] == [0.25]
    assert raised(obs["unknown"], "RuntimeError", "Unknown AllReduce type: avg")
    assert obs["tensor"]["out"] == [1.0, 2.0] and not obs["tensor"]["same_object"]
    assert obs["list"]["same_list"] and obs["list"]["same_tensors"]


def test_xla_always_allreduce_zero_means_unset():
    """torch_xla reads the flag as bool(int(value)): '0' keeps the no-op."""
    (obs,) = per_rank("all_reduce_semantics", 1, env={"XLA_ALWAYS_ALLREDUCE": "0"})
    assert obs["scale_sum"] == [1.0] and obs["scale_mul"] == [1.0]
    assert obs["unknown"] == {"returned": "tensor([1.])"}


# -- test/test_mp_save.py and xm.save's master_only ----------------------------------

SAVE_TOPOLOGIES = ["1x1", "2x1", "8x1", "1x4", "2x2"]


@pytest.fixture(scope="module")
def save_worlds(tmp_path_factory):
    cache: dict[str, harness.WorldResult] = {}

    def get(topology: str) -> harness.WorldResult:
        if topology not in cache:
            root = str(tmp_path_factory.mktemp(f"save-{topology}"))
            # A directory every host shares (as upstream's test assumes), kept on the
            # machine so the test can list who wrote what.
            shared = Mount(root, scope="shared", base="passthrough")
            cache[topology] = harness.run_world(f"{TARGETS}:mp_save", topology=topology,
                                                timeout=TIMEOUT, args=(root,), mounts=[shared])
        return cache[topology]

    return get


@pytest.mark.parametrize("topology", SAVE_TOPOLOGIES)
def test_mp_save_then_load_is_equal_everywhere(save_worlds, topology):
    topo = harness.get_topology(topology)
    for obs in observations(save_worlds(topology)):
        assert obs["save_returned"] == "None"
        assert obs["loaded_equals_saved"]
        assert obs["equal_everywhere"] == [True] * topo.world_size


@pytest.mark.parametrize("topology", SAVE_TOPOLOGIES)
def test_save_writes_on_each_hosts_local_master_only(save_worlds, topology):
    topo = harness.get_topology(topology)
    ranks = range(topo.world_size)
    expected = sorted(
        [f"default-r{r}.pt" for r in ranks if topo.local_rank(r) == 0]   # master_only=True
        + ["global-r0.pt"]                                               # global_master=True
        + [f"all-r{r}.pt" for r in ranks]                                # master_only=False
        + [f"all-global-r{r}.pt" for r in ranks]                         # global_master moot
        + [f"save-host{h}.pt" for h in range(topo.hosts)])
    for obs in observations(save_worlds(topology)):
        assert obs["files"] == expected


@pytest.mark.parametrize("topology", ["2x1", "2x2"])
def test_save_does_not_rendezvous(save_worlds, topology):
    result = save_worlds(topology)
    observations(result)
    for r in range(harness.get_topology(topology).world_size):
        calls = [e.op for e in result.history if e.kind == "call" and e.rank == r]
        assert calls == ["rendezvous"] * 3  # the target's own three, none from xm.save


# -- test/pjrt/test_runtime_multi_cpu.py, API profiles -------------------------------

RUNTIME_TOPOLOGIES = ["1x1", "2x1", "8x1", "2x4"]
profiles = pytest.mark.parametrize("profile", ["legacy", "current"])


@profiles
@pytest.mark.parametrize("topology", RUNTIME_TOPOLOGIES)
def test_runtime_ordinals(topology, profile):
    topo = harness.get_topology(topology)
    n, per_host = topo.world_size, topo.ranks_per_host
    ranks = observations(world("runtime_info", topology, profile=profile))
    assert sorted(obs["global_ordinal"] for obs in ranks) == list(range(n))
    for r, obs in enumerate(ranks):
        assert obs["global_ordinal"] == r and obs["process_index"] == r
        assert obs["local_ordinal"] == obs["get_local_ordinal"] == r % per_host
        assert obs["host_index"] == r // per_host
        assert obs["world_size"] == obs["process_count"] == obs["global_device_count"] == n
        assert obs["local_process_count"] == obs["local_device_count"] == per_host
        assert obs["addressable_device_count"] == 1
        assert obs["device_type"] == obs["xla_device_hw"] == "TPU"
        assert obs["supported_devices"] == ["xla:0"]
        assert obs["spawn_indices"] == [r]  # inside a rank, xmp.spawn calls fn(ordinal)


@pytest.mark.parametrize("topology", RUNTIME_TOPOLOGIES)
def test_is_master_ordinal(topology):
    topo = harness.get_topology(topology)
    for r, obs in enumerate(observations(world("runtime_info", topology, profile="current"))):
        local_master = topo.local_rank(r) == 0
        assert obs["is_master_default"] is local_master
        assert obs["is_master_local"] is local_master
        assert obs["is_master_global"] is (r == 0)


@pytest.mark.parametrize("topology", RUNTIME_TOPOLOGIES)
def test_master_print(topology):
    topo = harness.get_topology(topology)
    result = world("runtime_info", topology, profile="current")
    observations(result)
    for rank in result.ranks:
        r = rank.rank
        assert f"plain-print from {r}\n" in rank.stdout
        assert ("global-master-print" in rank.stdout) is (r == 0)
        assert (f"local-master-print from {r}\n" in rank.stdout) is (topo.local_rank(r) == 0)


@sizes
def test_current_profile_removes_get_ordinal_and_xrt_world_size(n):
    for obs in observations(world("runtime_info", SIZES[n], profile="current")):
        assert obs["version"].startswith("2.9")
        assert obs["has_get_ordinal"] is False
        mod = "module 'torch_xla.core.xla_model'"
        assert raised(obs["get_ordinal"], "AttributeError", f"{mod} has no attribute 'get_ordinal'")
        assert raised(obs["xrt_world_size"], "AttributeError", f"{mod} has no attribute 'xrt_world_size'")
        assert raised(obs["using_pjrt"], "AttributeError",
                      "module 'torch_xla.runtime' has no attribute 'using_pjrt'")


@sizes
def test_legacy_profile_keeps_get_ordinal_and_xrt_world_size(n):
    for r, obs in enumerate(observations(world("runtime_info", SIZES[n], profile="legacy"))):
        assert obs["has_get_ordinal"] is True
        assert obs["get_ordinal"] == {"returned": str(r)}
        assert obs["xrt_world_size"] == {"returned": str(n)}
        assert obs["using_pjrt"] == {"returned": "True"}


@profiles
def test_xla_device_and_mark_step_deprecations(profile):
    (obs,) = observations(world("runtime_info", "1x1", profile=profile))
    expected = ([("DeprecationWarning", "Use torch_xla.device instead"),
                 ("DeprecationWarning", "Use torch_xla.sync instead")] if profile == "current" else [])
    assert obs["deprecations"] == expected


# -- the rank environment -------------------------------------------------------------

@profiles
def test_environment_on_v4_64_pjrt(profile):
    ranks = observations(world("environment", "v4-64-pjrt", profile=profile))
    assert len(ranks) == 32
    for r, obs in enumerate(ranks):
        host, local = divmod(r, 4)
        env = obs["env"]
        assert (obs["rank"], obs["host"], obs["local"]) == (r, host, local)
        assert env["TPU_WORKER_ID"] == str(host)
        assert env["PJRT_LOCAL_PROCESS_RANK"] == str(local)
        assert env["PJRT_LOCAL_PROCESS_COUNT"] == "4"
        assert env["CLOUD_TPU_TASK_ID"] == str(host * 4 + local)  # worker_id * local_world_size + local
        assert env["TPU_VISIBLE_CHIPS"] == str(local)
        assert env["TPU_PROCESS_PORT"] == str(8476 + local)
        assert env["TPU_CHIPS_PER_PROCESS_BOUNDS"] == "1,1,1"
        assert env["TPU_PROCESS_BOUNDS"] == "2,2,8"
        assert env["PJRT_DEVICE"] == "TPU"
        if profile == "current":  # the xla_dist variables went with XRT
            assert env["XRT_SHARD_ORDINAL"] is None and env["TPUVM_MODE"] is None


def test_legacy_environment_on_v4_64():
    """xla_dist (one process per host) exported the host's index and count."""
    for r, obs in enumerate(observations(world("environment", "v4-64", profile="legacy"))):
        env = obs["env"]
        assert env["XRT_SHARD_ORDINAL"] == env["TPU_WORKER_ID"] == env["CLOUD_TPU_TASK_ID"] == str(r)
        assert env["XRT_SHARD_WORLD_SIZE"] == "8" and env["TPUVM_MODE"] == "1"


# -- the coordinator's history -----------------------------------------------------------

@multi
def test_history_records_every_call(n):
    result = world("history_probe", SIZES[n], args=(False,))
    ranks = observations(result)
    lines = ranks[0]["lines"]
    for obs in ranks:
        assert obs["lines"] == lines
        assert obs["gathered"] == [b"payload-%d" % i for i in range(n)]
        assert obs["reduced"] == [float(n * i + sum(range(n))) for i in range(3)]
    for r in range(n):
        calls = [e for e in result.history if e.kind == "call" and e.rank == r]
        assert [(e.op, e.tag, e.step) for e in calls] == [("rendezvous", "sync", 0),
                                                         ("all_reduce", None, 1)]
        rdv, red = calls
        assert rdv.site == f"conformance.py:{lines['rendezvous']} in history_probe"
        assert red.site == f"conformance.py:{lines['all_reduce']} in history_probe"
        assert rdv.detail.get("payload_bytes") == len(b"payload-%d" % r)
        assert red.detail.get("tensors") == ["float32[3]"]
    for step, op in ((0, "rendezvous"), (1, "all_reduce")):
        done = [i for i, e in enumerate(result.history) if e.kind == "complete" and e.step == step]
        assert len(done) == 1 and result.history[done[0]].op == op
        arrivals = [i for i, e in enumerate(result.history) if e.kind == "call" and e.step == step]
        assert len(arrivals) == n and max(arrivals) < done[0]
    assert result.mismatches == []


@multi
@pytest.mark.parametrize("late_rank", [-1, 0])
def test_rendezvous_with_different_tags_pairs_up_with_a_note(n, late_rank):
    result = world("history_probe", SIZES[n], args=(True, late_rank))
    for obs in observations(result):
        assert obs["gathered"] == [b"payload-%d" % i for i in range(n)]
    notes = [m for m in result.mismatches if "rendezvous tags differ" in m]
    assert len(notes) == 1, result.mismatches
    assert "step 0" in notes[0]
    for r in range(n):
        assert f"'tag-of-rank-{r}'" in notes[0]
    assert [e.kind for e in result.history].count("warning") == 1
