"""Rank-side targets for tests/world/test_world_speed.py: what a rank's start-up and end must
still do once they are cheap (seeded generators, tracebacks with their source, the shim
whatever a preload imported). No module-level import of torch_xla: ``shim_loaders`` looks
at the rank before its first import of it."""

import sys


def torch_draws():
    """What a seeded rank draws from torch, and what torch queued for absent devices."""
    import torch
    import torch_xla.core.xla_model as xm

    queued = {name: len(getattr(torch, name)._lazy_seed_tracker.get_calls())
              for name in ("cuda", "xpu") if hasattr(getattr(torch, name), "_lazy_seed_tracker")}
    return {"draws": torch.rand(4).tolist(), "queued": queued, "rank": xm.get_ordinal()}


def fails_with_a_traceback():
    import torch_xla.core.xla_model as xm

    xm.rendezvous("before")
    raise ValueError("the config is torn")  # this line's text must be in the traceback


def which_torch_xla():
    """The files of the torch_xla modules this rank sees (a preload imported another one)."""
    import torch_xla.core  # noqa: F401
    return {name: getattr(module, "__file__", None) for name, module in sys.modules.items()
            if name == "torch_xla" or name.startswith("torch_xla.")}


def shim_loaders():
    """The loader each torch_xla module of this rank was loaded by (the surface's wrapper
    unwrapped), which of them the fork server had executed, and what the shim's import
    did in this rank: what it read of the rank's environment, the ``xla`` backend it
    registered, the locks it made."""
    before = {"torch_xla": "torch_xla" in sys.modules, "xla backend": _xla_backend(),
              "xla new_group": _xla_new_group()}
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as metrics

    loaders, handed = {}, []
    for name, module in list(sys.modules.items()):
        if name == "torch_xla" or name.startswith("torch_xla."):
            loader = getattr(module, "__loader__", None)
            loaders[name] = type(getattr(loader, "loader", loader)).__name__
            spec_loader = getattr(module.__spec__, "loader", None)
            if type(getattr(spec_loader, "loader", spec_loader)).__name__ == "_Handout":
                handed.append(name)
    return {"loaders": loaders, "handed": sorted(handed), "before": before,
            "metrics_samples": metrics._samples_kept(), "xla backend": _xla_backend(),
            "xla new_group": _xla_new_group(),
            "store lock": type(sys.modules["torch_xla._internal.rendezvous"]._store_lock).__name__,
            "locks": [type(m).__name__ for m in (metrics._LOCK, xm._DEVICE_CONTEXTS_LOCK)],
            "ordinal": xm.get_ordinal()}


def _xla_new_group() -> bool:
    """Is ``dist.new_group`` the shim's (which gives an XLA subgroup its mesh)?"""
    import torch.distributed as dist

    return dist.new_group.__name__ == "new_xla_process_group"


def _xla_backend() -> bool:
    """Is ``xla`` a backend of this process's torch.distributed?"""
    import torch.distributed as dist

    return "xla" in dist.Backend.backend_list
