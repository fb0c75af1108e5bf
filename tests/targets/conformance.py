"""Rank-side targets of tests/catalog/test_shim_conformance.py.

Every function here runs on every rank of a harness world, against the fake
torch_xla, and returns a dict of plain observations (lists, numbers, bools,
strings) that the test then compares with what real torch_xla 2.9 does
(docs/torch_xla.md and the upstream tests it names). A target
never asserts: it reports, so one world can check many things and a failing
expectation names exactly what differs.
"""

from __future__ import annotations

import io
import os
import sys
import warnings
from typing import Any

import numpy as np
import torch


def _line() -> int:
    """The line number of the caller's next line (where the call under test is)."""
    return sys._getframe(1).f_lineno + 1


def _outcome(fn, *args, **kwargs) -> dict[str, Any]:
    """What a call did: returned (with a repr) or raised (type and message)."""
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the exception is the observation
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"returned": repr(value)}


class Point:
    """A user-defined object: not on torch.load's weights_only allow-list."""

    def __init__(self, x: int) -> None:
        self.x = x


def _me() -> tuple[int, int]:
    import torch_xla.runtime as xr

    return xr.global_ordinal(), xr.world_size()


# -- test/pjrt/test_mesh_service.py ---------------------------------------------

def mesh_service() -> dict[str, Any]:
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    me, n = _me()
    obs: dict[str, Any] = {"ordinal": me, "world_size": n}
    obs["static"] = xm.rendezvous("test rendezvous", b"message %d" % me)
    obs["dynamic"] = xm.rendezvous("test rendezvous", b"message" * me)
    obs["empty"] = xm.rendezvous("test rendezvous", b"")
    obs["default_payload"] = xm.rendezvous("barrier")
    obs["replicas_all"] = xm.rendezvous("test rendezvous", b"message",
                                        list(range(xr.global_device_count())))
    # Errors raised before any exchange: every rank raises, no step is consumed.
    obs["str_payload"] = _outcome(xm.rendezvous, "test rendezvous", "")
    obs["replicas_too_many"] = _outcome(xm.rendezvous, "r", b"x", list(range(n + 1)))
    obs["replicas_one"] = _outcome(xm.rendezvous, "r", b"x", [0]) if n > 1 else None
    # The exchange still works after the refused calls.
    obs["after_errors"] = xm.rendezvous("after", b"%d" % (me * me))

    obs["mesh_reduce"] = xm.mesh_reduce("test mesh reduce", me, sum)
    # test/test_mp_mesh_reduce.py
    obs["mesh_reduce_scalar"] = xm.mesh_reduce("test_mp_mesh_reduce._test_scalar", 1.25, sum)
    tvalue = torch.tensor([[1, 2], [3, 4], [5, 6]], dtype=torch.float32)
    reduced = xm.mesh_reduce("test_mp_mesh_reduce._test_tensor", tvalue,
                             lambda vs: torch.stack(vs).sum(dim=0))
    obs["mesh_reduce_tensor"] = {"type": type(reduced).__name__, "dtype": str(reduced.dtype),
                                 "values": reduced.tolist()}
    obs["mesh_reduce_order"] = xm.mesh_reduce("order", {"rank": me, "name": f"r{me}"}, list)
    # torch.load's weights_only default (torch >= 2.6): plain data passes,
    # numpy scalars and user objects do not.
    obs["mesh_reduce_numpy"] = _outcome(xm.mesh_reduce, "numpy", np.float64(me), np.mean)
    obs["mesh_reduce_object"] = _outcome(xm.mesh_reduce, "object", Point(me), len)
    obs["after_mesh_reduce"] = xm.rendezvous("after mesh_reduce", b"ok")
    return obs


# -- test/pjrt/test_collective_ops_tpu.py ----------------------------------------

def collectives() -> dict[str, Any]:
    import torch_xla.core.xla_model as xm

    me, n = _me()
    obs: dict[str, Any] = {"ordinal": me, "world_size": n}

    # broadcast_master_param: parameters AND buffers become rank 0's, in place.
    torch.manual_seed(me)
    model = torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.BatchNorm1d(5))
    model[1].running_mean.fill_(float(me))
    model[1].num_batches_tracked.fill_(me)
    ids = [id(t) for t in model.state_dict(keep_vars=True).values()]
    obs["params_before"] = [t.tolist() for t in model.state_dict().values()]
    obs["broadcast_master_param_returned"] = repr(xm.broadcast_master_param(model))
    obs["params_after"] = [t.tolist() for t in model.state_dict().values()]
    obs["params_same_objects"] = ids == [id(t) for t in model.state_dict(keep_vars=True).values()]
    obs["params_requires_grad"] = [p.requires_grad for p in model.parameters()]

    # all_reduce of ordinals (the upstream test also checks requires_grad survives).
    x = torch.tensor(float(me), requires_grad=True)
    out = xm.all_reduce(xm.REDUCE_SUM, x)
    obs["all_reduce"] = {"value": out.item(), "requires_grad": out.requires_grad,
                         "shape": list(out.shape)}
    obs["all_reduce_unpinned"] = xm.all_reduce(xm.REDUCE_SUM, torch.tensor([float(me)]),
                                               pin_layout=False).tolist()

    # all_gather
    ordinal = torch.tensor([me])
    obs["all_gather"] = xm.all_gather(ordinal).tolist()
    obs["all_gather_unpinned"] = xm.all_gather(ordinal, pin_layout=False).tolist()
    output = torch.full((n,), -1, dtype=torch.int64)
    ret = xm.all_gather(ordinal, output=output)
    obs["all_gather_output"] = {"same": ret is output, "values": output.tolist()}
    col = torch.tensor([[me], [10 * me]])
    obs["all_gather_dim1"] = xm.all_gather(col, dim=1).tolist()
    obs["all_gather_dim_neg"] = xm.all_gather(col, dim=-1).tolist()
    obs["all_gather_input"] = col.tolist()

    # reduce_scatter(-arange(n), scale=1/n) -> [-ordinal]
    tensor = -torch.arange(n, dtype=torch.float32)
    for pin in (True, False):
        out = xm.reduce_scatter(xm.REDUCE_SUM, tensor, scale=1.0 / n, scatter_dim=0,
                                shard_count=n, pin_layout=pin)
        obs[f"reduce_scatter_pin{pin}"] = out.tolist()
    obs["reduce_scatter_input"] = tensor.tolist()
    output = torch.full((1,), 99.0)
    ret = xm.reduce_scatter(xm.REDUCE_SUM, tensor, scale=1.0 / n, scatter_dim=0,
                            shard_count=n, output=output)
    obs["reduce_scatter_output"] = {"same": ret is output, "values": output.tolist()}

    # all_to_all, exactly as upstream builds its input
    tensor = torch.cat([-torch.arange(n, dtype=torch.float32).view(-1, 1, 1),
                        torch.ones(n, 1, 1) * me], dim=1)
    obs["all_to_all"] = xm.all_to_all(tensor, split_dimension=0, concat_dimension=2,
                                      split_count=n).tolist()

    # collective_permute around the ring, then a single pair
    value = torch.tensor([me + 1.0])
    obs["permute_ring"] = xm.collective_permute(value, [[i, (i + 1) % n] for i in range(n)]).tolist()
    obs["permute_single"] = (xm.collective_permute(value, [[0, 1]]).tolist() if n > 1 else None)
    obs["permute_input"] = value.tolist()

    # collective_broadcast: in place, from the last rank (non-zero when n > 1)
    a, b = torch.full((3,), float(me)), torch.tensor([10 * me], dtype=torch.int32)
    ptr = a.data_ptr()
    ret = xm.collective_broadcast([a, b], root_ordinal=n - 1)
    obs["collective_broadcast"] = {"returned": repr(ret), "a": a.tolist(), "b": b.tolist(),
                                   "in_place": a.data_ptr() == ptr, "b_dtype": str(b.dtype)}

    if n == 8:
        groups = [[0, 1, 2, 3], [4, 5, 6, 7]]
        obs["g_all_reduce"] = xm.all_reduce(xm.REDUCE_SUM, torch.tensor([float(me)]),
                                            groups=groups).tolist()
        obs["g_all_reduce_list"] = [t.tolist() for t in xm.all_reduce(
            xm.REDUCE_MAX, [torch.tensor([me])], groups=groups)]
        obs["g_all_gather"] = xm.all_gather(torch.tensor([me]), groups=groups).tolist()
        obs["g_all_gather_unpinned"] = xm.all_gather(torch.tensor([me]), groups=groups,
                                                     pin_layout=False).tolist()
        obs["g_reduce_scatter"] = xm.reduce_scatter(
            xm.REDUCE_SUM, -torch.arange(4, dtype=torch.float32), scale=0.25, scatter_dim=0,
            shard_count=4, groups=groups).tolist()
        t = torch.cat([-torch.arange(4, dtype=torch.float32).view(-1, 1, 1),
                       torch.ones(4, 1, 1) * me], dim=1)
        obs["g_all_to_all"] = xm.all_to_all(t, 0, 2, 4, groups=groups).tolist()
        c = torch.tensor([float(me) + 100])
        xm.collective_broadcast([c], root_ordinal=1, groups=groups)
        obs["g_collective_broadcast"] = c.tolist()
    return obs


# -- all_reduce semantics (xla_model.all_reduce; test/test_mp_replication.py) ----

def all_reduce_semantics() -> dict[str, Any]:
    import torch_xla.core.xla_model as xm

    me, n = _me()
    obs: dict[str, Any] = {"ordinal": me, "world_size": n}
    obs["constants"] = [xm.REDUCE_SUM, xm.REDUCE_MUL, xm.REDUCE_AND, xm.REDUCE_OR,
                        xm.REDUCE_MIN, xm.REDUCE_MAX]

    # A tensor: out of place.
    t = torch.tensor([me + 1.0, 2.0])
    ptr = t.data_ptr()
    out = xm.all_reduce(xm.REDUCE_SUM, t)
    obs["tensor"] = {"same_object": out is t, "same_storage": out.data_ptr() == ptr,
                     "input": t.tolist(), "out": out.tolist(), "type": type(out).__name__}

    # A list: in place, the same list object and the same tensors come back.
    a, b = torch.tensor([me + 1.0]), torch.tensor([[2.0 * (me + 1)]])
    lst = [a, b]
    ret = xm.all_reduce(xm.REDUCE_SUM, lst)
    obs["list"] = {"same_list": ret is lst, "same_tensors": ret[0] is a and ret[1] is b,
                   "a": a.tolist(), "b": b.tolist()}
    tup = (torch.tensor([me + 1.0]),)
    ret = xm.all_reduce(xm.REDUCE_SUM, tup)
    obs["tuple"] = {"same": ret is tup, "values": tup[0].tolist()}

    # test_mp_replication: list of ones/twos is multiplied by the world size.
    ones = torch.ones((2, 3))
    xones, xtwos = ones.clone(), ones + 1.0
    xm.all_reduce("sum", [xones, xtwos])
    obs["replication"] = {"ones": xones.allclose(ones * float(n)),
                          "twos": xtwos.allclose((ones + 1.0) * float(n))}

    # scale multiplies AFTER the reduce: MAX with scale -1 and MUL with scale 2
    # tell "after" from "before".
    obs["scale_sum"] = xm.all_reduce(xm.REDUCE_SUM, torch.tensor([me + 1.0]), scale=0.5).tolist()
    obs["scale_max"] = xm.all_reduce(xm.REDUCE_MAX, torch.tensor([me + 1.0]), scale=-1.0).tolist()
    obs["scale_mul"] = xm.all_reduce(xm.REDUCE_MUL, torch.tensor([me + 1.0]), scale=2.0).tolist()
    s = [torch.tensor([me + 1.0])]
    xm.all_reduce(xm.REDUCE_SUM, s, scale=0.25)
    obs["scale_list"] = s[0].tolist()

    # Every reduce type on ints and on bools.
    ints, bools = {}, {}
    for rt in obs["constants"]:
        r = xm.all_reduce(rt, torch.tensor([me + 1, 1 << me, -me], dtype=torch.int32))
        ints[rt] = {"values": r.tolist(), "dtype": str(r.dtype)}
    for rt in (xm.REDUCE_AND, xm.REDUCE_OR, xm.REDUCE_MIN, xm.REDUCE_MAX):
        r = xm.all_reduce(rt, torch.tensor([me == 0, True, False, me % 2 == 1]))
        bools[rt] = {"values": r.tolist(), "dtype": str(r.dtype)}
    obs["ints"], obs["bools"] = ints, bools

    # Unknown reduce types (raised before anything is exchanged).
    obs["unknown"] = _outcome(xm.all_reduce, "avg", torch.tensor([1.0]))
    obs["unknown_upper"] = _outcome(xm.all_reduce, "SUM", [torch.tensor([1.0])])
    obs["after_unknown"] = xm.all_reduce(xm.REDUCE_SUM, torch.tensor([1.0])).tolist()
    return obs


# -- test/test_mp_save.py and master_only ----------------------------------------

def _state_dict() -> dict[str, Any]:
    gen = torch.Generator().manual_seed(1234)  # the same data on every rank
    a, b, c = (torch.randn(3, 4, generator=gen) for _ in range(3))
    return {"a": a, "b": b, "c": c, "a+b": a + b, "a+c": a + c, "b*c": b * c,
            "a,b,c": [a, b, c], "b,c,a*b": (b, c, a * b)}


def _as_bytes(data: Any) -> bytes:
    bio = io.BytesIO()
    torch.save(data, bio)
    return bio.getvalue()


def _equal(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return isinstance(y, torch.Tensor) and torch.equal(x, y)
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(_equal(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return (type(x) is type(y) and len(x) == len(y)
                and all(_equal(p, q) for p, q in zip(x, y)))
    return x == y


def mp_save(root: str) -> dict[str, Any]:
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    me, n = _me()
    host = xr.host_index()
    obs: dict[str, Any] = {"ordinal": me, "host": host}
    dd = _state_dict()
    # One file per host, as a host-local /tmp would give (test_mp_save's temp file).
    path = os.path.join(root, f"save-host{host}.pt")
    obs["save_returned"] = repr(xm.save(dd, path))
    xm.rendezvous("torch_xla.core.xla_model.save")
    ldd = torch.load(path)
    obs["loaded_equals_saved"] = _equal(ldd, dd)
    data = xm.rendezvous("xm_save_test", _as_bytes(ldd))
    obs["equal_everywhere"] = [_equal(ldd, torch.load(io.BytesIO(d))) for d in data]

    # Who writes: every rank names its own file, so the files on disk show it.
    xm.save({"rank": me}, os.path.join(root, f"default-r{me}.pt"))
    xm.save({"rank": me}, os.path.join(root, f"global-r{me}.pt"), global_master=True)
    xm.save({"rank": me}, os.path.join(root, f"all-r{me}.pt"), master_only=False)
    xm.save({"rank": me}, os.path.join(root, f"all-global-r{me}.pt"), master_only=False,
            global_master=True)
    xm.rendezvous("saved")
    obs["files"] = sorted(os.listdir(root))
    return obs


# -- test/pjrt/test_runtime_multi_cpu.py, profiles, environment ------------------

_ENV_NAMES = ("TPU_WORKER_ID", "PJRT_LOCAL_PROCESS_RANK", "PJRT_LOCAL_PROCESS_COUNT",
              "CLOUD_TPU_TASK_ID", "TPU_VISIBLE_CHIPS", "TPU_PROCESS_PORT", "TPU_PROCESS_BOUNDS",
              "TPU_CHIPS_PER_PROCESS_BOUNDS", "PJRT_DEVICE", "XRT_SHARD_ORDINAL",
              "XRT_SHARD_WORLD_SIZE", "TPUVM_MODE")


def runtime_info() -> dict[str, Any]:
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.xla_multiprocessing as xmp
    import torch_xla.runtime as xr

    obs: dict[str, Any] = {
        "global_ordinal": xr.global_ordinal(), "world_size": xr.world_size(),
        "local_ordinal": xr.local_ordinal(), "host_index": xr.host_index(),
        "process_index": xr.process_index(), "process_count": xr.process_count(),
        "local_process_count": xr.local_process_count(),
        "global_device_count": xr.global_device_count(),
        "addressable_device_count": xr.addressable_device_count(),
        "local_device_count": xr.local_device_count(),
        "device_type": xr.device_type(),
        "xla_device_hw": xm.xla_device_hw(torch_xla.device()),
        "supported_devices": xm.get_xla_supported_devices(),
        "get_local_ordinal": xm.get_local_ordinal(),
        "is_master_default": xm.is_master_ordinal(),
        "is_master_local": xm.is_master_ordinal(local=True),
        "is_master_global": xm.is_master_ordinal(local=False),
        "env": {k: os.environ.get(k) for k in _ENV_NAMES},
    }
    spawned: list[Any] = []
    xmp.spawn(lambda index, out: out.append(index), args=(spawned,))
    obs["spawn_indices"] = spawned

    me = obs["global_ordinal"]
    xm.master_print(f"global-master-print from {me}")
    xm.master_print(f"local-master-print from {me}", local=True)
    print(f"plain-print from {me}")

    # API profile: get_ordinal/xrt_world_size were removed in 2.7, using_pjrt in 2.5.
    obs["version"] = torch_xla.__version__
    obs["has_get_ordinal"] = hasattr(xm, "get_ordinal")
    obs["get_ordinal"] = _outcome(lambda: xm.get_ordinal())
    obs["xrt_world_size"] = _outcome(lambda: xm.xrt_world_size())
    obs["using_pjrt"] = _outcome(lambda: xr.using_pjrt())
    # xla_device()/mark_step() still work; 2.8+ marks them deprecated.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obs["xla_device"] = str(xm.xla_device())
        xm.mark_step()
    obs["deprecations"] = [(w.category.__name__, str(w.message)) for w in caught]
    return obs


def environment() -> dict[str, Any]:
    import torch_xla.runtime as xr

    return {"rank": xr.global_ordinal(), "host": xr.host_index(), "local": xr.local_ordinal(),
            "env": {k: os.environ.get(k) for k in _ENV_NAMES}}


# -- the coordinator's history ---------------------------------------------------

def history_probe(divergent_tags: bool, late_rank: int = -1) -> dict[str, Any]:
    import time

    import torch_xla.core.xla_model as xm

    me, n = _me()
    if me == late_rank:
        time.sleep(0.2)  # every other rank reaches the rendezvous first
    tag = f"tag-of-rank-{me}" if divergent_tags else "sync"
    lines = {"rendezvous": _line()}
    gathered = xm.rendezvous(tag, b"payload-%d" % me)
    lines["all_reduce"] = _line()
    reduced = xm.all_reduce(xm.REDUCE_SUM, torch.arange(3, dtype=torch.float32) + me)
    return {"lines": lines, "gathered": gathered, "reduced": reduced.tolist(),
            "file": os.path.basename(__file__)}
