"""Rank-side targets for tests/world/test_spmd.py: one process per host, SPMD."""

import os
import warnings

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr


def answers():
    before = {"is_spmd": xr.is_spmd()}  # the environment's only: the runtime unused
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        xr.use_spmd()
        first = [str(w.message) for w in said]
        xr.use_spmd()
        second = [str(w.message)[:40] for w in said[len(first):]]
    return {
        "before": before,
        "after": {
            "is_spmd": xr.is_spmd(), "world_size": xr.world_size(),
            "global_ordinal": xr.global_ordinal(), "local_ordinal": xr.local_ordinal(),
            "process_index": xr.process_index(), "process_count": xr.process_count(),
            "global_device_count": xr.global_device_count(),
            "global_runtime_device_count": xr.global_runtime_device_count(),
            "addressable_runtime_device_count": xr.addressable_runtime_device_count(),
            "is_master_ordinal": xm.is_master_ordinal(local=False),
            "host_index": xr.host_index(),
        },
        "warned": [first, second],
        "env": sorted(k for k in os.environ if k.startswith(("PJRT_LOCAL", "TPU_VISIBLE",
                                                               "TPU_PROCESS_"))),
    }


def used_then_spmd():
    import torch

    torch.ones(2).to(torch_xla.device())
    before = [xr.world_size(), xr.global_ordinal()]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        xr.use_spmd()
    return [before, [str(w.message)[:42] for w in said], [xr.world_size(), xr.global_ordinal()]]


def spmd_on_one_process_per_chip():
    try:
        xr.use_spmd()
    except NotImplementedError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def one_host_leaves_after(steps):
    """Host 1 stops after ``steps`` steps; the others train on and wait in the next step."""
    xr.use_spmd()
    for step in range(5):
        if xr.process_index() == 1 and step == steps:
            return "left"
        torch_xla.sync()
    return "trained"


def shards_as_the_docs_show():
    """torch_xla's SPMD user guide: a 2D mesh over every device, a tensor sharded on it."""
    import numpy as np
    import torch
    import torch_xla.distributed.spmd as xs

    said = {}
    t = torch.arange(32.0).reshape(8, 4)
    mesh = xs.Mesh(np.array(range(xr.global_runtime_device_count())), (16, 2),
                   ("data", "model"))
    try:
        xs.mark_sharding(t.to(torch_xla.device()), mesh, ("data", "model"))
    except RuntimeError as exc:
        said["before_use_spmd"] = str(exc)
    xr.use_spmd()
    xt = t.to(torch_xla.device())
    same = xs.mark_sharding(xt, mesh, ("data", None))
    said["returns_the_tensor"] = same is xt and bool((xt.cpu() == t).all())
    said["logical_mesh"] = mesh.get_logical_mesh().shape
    said["hybrid"] = xs.HybridMesh(ici_mesh_shape=(8, 4), axis_names=("x", "y")).mesh_shape
    for name, bad in (("too_few_devices", lambda: xs.Mesh(list(range(8)), (8,))),
                      ("spec_length", lambda: xs.mark_sharding(xt, mesh, ("data",))),
                      ("axis_twice", lambda: xs.mark_sharding(xt, mesh, (0, 0))),
                      ("multislice", lambda: xs.HybridMesh(ici_mesh_shape=(4, 4),
                                                           dcn_mesh_shape=(2, 1)))):
        try:
            bad()
        except (AssertionError, ValueError) as exc:
            said[name] = f"{type(exc).__name__}: {exc}"
    return said
