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
