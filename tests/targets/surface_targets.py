"""Rank-side targets of tests/world/test_shim_metrics.py and tests/unit/test_shim_surface.py.

Each runs on every rank of a harness world against the shim and reports plain
observations (a target never asserts), so one world checks many things.
"""

from __future__ import annotations

from typing import Any

import torch


def _delta(before: dict[str, int | None], names: list[str]) -> dict[str, int]:
    import torch_xla.debug.metrics as met

    return {n: (met.counter_value(n) or 0) - (before.get(n) or 0) for n in names}


def _with(context: Any) -> None:
    with context:
        pass


COUNTERS = ["xla::all_reduce", "xla::AllReduce", "xla::AllReduceInPlace", "xla::AllGather",
            "xla::AllGatherOut", "xla::ReduceScatter", "xla::ReduceScatterOut", "xla::AllToAll",
            "MarkStep", "CreateDataHandles", "xla::_to_cpu"]


def counters() -> dict[str, Any]:
    """The counters each collective bumps, one call at a time, and the reports after them."""
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    import torch_xla.runtime as xr

    n, me = xr.world_size(), xr.global_ordinal()
    met.clear_all()
    obs: dict[str, Any] = {"start_names": met.counter_names(),
                           "start_value": met.counter_value("MarkStep"),
                           "start_report": met.metrics_report()}
    t = torch.arange(2 * n, dtype=torch.float32) + me
    calls = {
        "all_reduce": lambda: xm.all_reduce(xm.REDUCE_SUM, t),
        "all_reduce_scaled": lambda: xm.all_reduce(xm.REDUCE_SUM, t, scale=0.5),
        "all_reduce_list": lambda: xm.all_reduce(xm.REDUCE_SUM, [t.clone(), t.clone()]),
        "all_gather": lambda: xm.all_gather(t),
        "all_gather_unpinned": lambda: xm.all_gather(t, pin_layout=False),
        "all_gather_out": lambda: xm.all_gather(t, output=torch.zeros(2 * n * n)),
        "reduce_scatter": lambda: xm.reduce_scatter(xm.REDUCE_SUM, t, 1.0, 0, n),
        "reduce_scatter_out": lambda: xm.reduce_scatter(xm.REDUCE_SUM, t, 1.0, 0, n,
                                                        output=torch.zeros(2)),
        "all_to_all": lambda: xm.all_to_all(t, 0, 0, n),
        "collective_broadcast": lambda: xm.collective_broadcast([t.clone()]),
        "rendezvous": lambda: xm.rendezvous("tag", b"payload"),
        "rendezvous_empty": lambda: xm.rendezvous("tag", b""),
        "sync": lambda: torch_xla.sync(),
        "mark_step": lambda: xm.mark_step(),
        "step": lambda: _with(torch_xla.step()),
        "send_cpu_data_to_device": lambda: xm.send_cpu_data_to_device(
            {"a": torch.ones(3), "b": [torch.ones(2, dtype=torch.int64)]}, torch_xla.device()),
    }
    deltas = {}
    for name, call in calls.items():
        before = {c: met.counter_value(c) for c in COUNTERS}
        call()
        deltas[name] = {c: d for c, d in _delta(before, COUNTERS).items() if d}
    obs["deltas"] = deltas
    obs["names"] = met.counter_names()
    obs["metric_names"] = met.metric_names()
    obs["report"] = met.metrics_report()
    obs["short_report"] = met.short_metrics_report()
    obs["outbound"] = met.metric_data("OutboundData")
    obs["compile_time"] = met.metric_data("CompileTime")
    obs["lazy_tracing_samples"] = (met.metric_data("LazyTracing") or (0,))[0]
    met.clear_counters()
    obs["after_clear"] = [met.counter_names(), met.counter_value("MarkStep")]
    return obs


def autograd() -> dict[str, Any]:
    """torch_xla.core.functions across the world: values and gradients."""
    import torch_xla.core.functions as xf
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    n, me = xr.world_size(), xr.global_ordinal()
    obs: dict[str, Any] = {}
    x = torch.full((3,), float(me + 1), requires_grad=True)
    y = xf.all_reduce(xm.REDUCE_SUM, x, scale=2.0)
    y.sum().backward()
    obs["sum"] = (y.tolist(), x.grad.tolist())

    x = torch.full((2,), float(me + 1), requires_grad=True)
    y = xf.all_reduce(xm.REDUCE_MAX, x)
    y.sum().backward()
    obs["max"] = (y.tolist(), x.grad.tolist())

    x = torch.full((2, 1), float(me), requires_grad=True)
    g = xf.all_gather(x, dim=0)
    (g * torch.arange(2 * n, dtype=torch.float32).reshape(-1, 1)).sum().backward()
    obs["gather"] = (g.flatten().tolist(), x.grad.flatten().tolist())

    torch.manual_seed(0)
    w_full, x_full = torch.randn(4, 2 * n), torch.randn(2 * n, 6)
    w = w_full[:, 2 * me:2 * me + 2]
    # Every rank holds the same x: the product is w_full @ x_full on every rank.
    obs["mm"] = xf.distributed_mm(w, x_full, split=2).tolist()
    obs["mm_expected"] = (w_full @ x_full).tolist()

    bn = xf.SyncBatchNorm(2)
    batch = torch.full((4, 2), float(me))
    out = bn(batch)
    obs["bn_running_mean"] = bn.running_mean.tolist()
    obs["bn_out_shape"] = list(out.shape)
    return obs


def bucketized() -> dict[str, Any]:
    """The bucketized collectives' values, and how many collectives their buckets made."""
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    import torch_xla.runtime as xr

    n, me = xr.world_size(), xr.global_ordinal()
    tensors = [torch.full((2 * n,), float(me + i)) for i in range(3)]
    obs: dict[str, Any] = {}
    gathered = xm.all_gather_bucketized(tensors, bucket_cap_mb=1)
    obs["gather"] = [g.tolist() for g in gathered]
    scattered = xm.reduce_scatter_bucketized(xm.REDUCE_SUM, tensors, 1.0, 0, n, bucket_cap_mb=1)
    obs["scatter"] = [s.tolist() for s in scattered]
    grads = [torch.full((4,), float(me + 1)) for _ in range(3)]
    before = met.counter_value("xla::AllReduceInPlace") or 0
    xm.all_reduce_bucketized_gradients(grads, scale=1.0 / n, groups=None, pin_layout=True,
                                       bucket_cap_mb=0)
    obs["grads"] = [g.tolist() for g in grads]
    obs["grad_all_reduces"] = (met.counter_value("xla::AllReduceInPlace") or 0) - before
    return obs


def step_closures() -> dict[str, Any]:
    """add_step_closure runs at the next step marker, in order, and not before."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    ran: list[str] = []
    xm.add_step_closure(lambda tag: ran.append(tag), args=("a",))
    xm.add_step_closure(lambda: ran.append("b"))
    before = list(ran)
    xm.rendezvous("closures")  # a rendezvous steps the graph: closures run there
    after_rendezvous = list(ran)
    xm.add_step_closure(lambda: ran.append("c"))
    with torch_xla.step():
        ran.append("body")
    return {"before": before, "after_rendezvous": after_rendezvous, "all": ran}


def do_on_ordinals() -> dict[str, Any]:
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    me = xr.global_ordinal()
    result = xm.do_on_ordinals(lambda t: float(t.sum()) + me, (torch.ones(2),), ordinals=(0, 1))
    return {"result": result}


def compiled() -> dict[str, Any]:
    """torch.compile(fn, backend='openxla') around collectives runs them eagerly."""
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    import torch_xla.runtime as xr

    n, me = xr.world_size(), xr.global_ordinal()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return xm.all_reduce(xm.REDUCE_SUM, x * 2) + 1

    def gather(x: torch.Tensor) -> torch.Tensor:
        return xm.all_gather(x, dim=0)

    compiled_fn = torch.compile(fn, backend="openxla", fullgraph=True)
    compiled_gather = torch.compile(gather, backend="openxla", fullgraph=True)
    met.clear_all()
    out = compiled_fn(torch.full((2,), float(me)))
    out2 = compiled_fn(torch.full((2,), float(me + 1)))
    gathered = compiled_gather(torch.full((1,), float(me)))
    import torch_xla

    # on the device, as upstream's test_mp_all_gather compiles it (torch 2.13 checked a
    # custom op's inputs on a graph's first run and refused the device's tensor class)
    on_device = compiled_gather(torch.full((1,), float(me), device=torch_xla.device()))
    return {"out": out.tolist(), "out2": out2.tolist(), "gathered": gathered.tolist(),
            "on_device": on_device.cpu().tolist(),
            "extracted": (met.counter_value("DynamoExtractCompiledGraph") or 0) > 0, "n": n,
            "executed": (met.metric_data("ExecuteTime") or [0])[0]}


def eager_collectives() -> dict[str, Any]:
    """In eager mode every collective is an op executed at once (upstream's
    test_eager_all_reduce_in_place counts them); in the default mode none is."""
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    counts = []
    for eager in (False, True):
        torch_xla.experimental.eager_mode(eager)
        met.clear_all()
        xm.all_reduce(xm.REDUCE_SUM, [torch.ones(1), torch.ones(1, dtype=torch.int32)])
        counts.append((met.metric_data("EagerOpExecuteTime") or [0])[0])
    return {"counts": counts}


def loader_transfers() -> dict[str, Any]:
    """MpDeviceLoader moves each batch with send_cpu_data_to_device: one counted transfer each."""
    import torch_xla
    import torch_xla.debug.metrics as met
    import torch_xla.distributed.parallel_loader as pl

    met.clear_all()
    batches = [(torch.ones(4), torch.zeros(4, dtype=torch.int64)) for _ in range(3)]
    seen = list(pl.MpDeviceLoader(batches, torch_xla.device()))
    outbound = met.metric_data("OutboundData")
    return {"batches": len(seen), "handles": met.counter_value("CreateDataHandles"),
            "transfers": met.metric_data("TransferToDeviceTime")[0],
            "bytes": outbound[1], "moved_is_copy": seen[0][0] is not batches[0][0]}


def reduce_gradients() -> dict[str, Any]:
    """xm.reduce_gradients: the mean over the world, in groups or not, bucketed or not."""
    import os

    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    import torch_xla.runtime as xr

    me = xr.global_ordinal()
    obs: dict[str, Any] = {}
    for name, groups, bucket in (("world", None, None), ("groups", [[0, 1], [2, 3]], None),
                                 ("bucketed", None, "1")):
        params = [torch.nn.Parameter(torch.zeros(2)) for _ in range(3)]
        for p in params:
            p.grad = torch.full((2,), float(me + 1))
        if bucket:
            os.environ["ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB"] = bucket
        before = met.counter_value("xla::AllReduceInPlace") or 0
        xm.reduce_gradients(torch.optim.SGD(params, lr=0.1), groups=groups)
        os.environ.pop("ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB", None)
        obs[name] = ([p.grad.tolist() for p in params],
                     (met.counter_value("xla::AllReduceInPlace") or 0) - before)
    return obs


def device_collectives() -> dict[str, Any]:
    """What each collective gives for a device tensor: a device tensor, as torch_xla 2.9's."""
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    n, me = xr.world_size(), xr.global_ordinal()
    x = torch.full((n, 2), float(me), device=torch_xla.device())
    made = {
        "all_reduce": xm.all_reduce(xm.REDUCE_SUM, x),
        "all_gather": xm.all_gather(x, dim=0),
        "reduce_scatter": xm.reduce_scatter(xm.REDUCE_SUM, x, 1.0, 0, n),
        "all_to_all": xm.all_to_all(x, 0, 0, n),
        "collective_permute": xm.collective_permute(x, [[r, (r + 1) % n] for r in range(n)]),
        "plain_all_reduce": xm.all_reduce(xm.REDUCE_SUM, torch.ones(2)),
    }
    return {name: [str(t.device), t.cpu().tolist()] for name, t in made.items()}
