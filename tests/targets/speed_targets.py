"""Rank-side targets for tests/world/test_world_speed.py: what a rank's start-up and end must
still do once they are cheap (seeded generators, tracebacks with their source, the shim
whatever a preload imported)."""

import sys

import torch_xla.core.xla_model as xm


def torch_draws():
    """What a seeded rank draws from torch, and what torch queued for absent devices."""
    import torch

    queued = {name: len(getattr(torch, name)._lazy_seed_tracker.get_calls())
              for name in ("cuda", "xpu") if hasattr(getattr(torch, name), "_lazy_seed_tracker")}
    return {"draws": torch.rand(4).tolist(), "queued": queued, "rank": xm.get_ordinal()}


def fails_with_a_traceback():
    xm.rendezvous("before")
    raise ValueError("the config is torn")  # this line's text must be in the traceback


def which_torch_xla():
    """The files of the torch_xla modules this rank sees (a preload imported another one)."""
    return {name: getattr(module, "__file__", None) for name, module in sys.modules.items()
            if name == "torch_xla" or name.startswith("torch_xla.")}


def shim_loaders():
    """The loader each torch_xla module of this rank was loaded by (the surface's wrapper
    unwrapped), and what the shim's import-time code read in this rank."""
    import torch_xla.debug.metrics as metrics

    loaders = {}
    for name, module in list(sys.modules.items()):
        if name == "torch_xla" or name.startswith("torch_xla."):
            loader = getattr(module, "__loader__", None)
            loaders[name] = type(getattr(loader, "loader", loader)).__name__
    return {"loaders": loaders, "metrics_samples": metrics._MAX_SAMPLES}
