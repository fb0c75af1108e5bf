"""``xmp.spawn``: start this host's ranks inside the harness world.

As torch_xla 2.9's ``pjrt.spawn``: ``nprocs=1`` runs ``fn(0)`` in the calling
process as a world of one device (``_run_singleprocess``); otherwise, in a
launcher (``harness exec``), every call forks one new process per local rank
(one process even on a host of one chip, as ``run_multiprocess``'s
``ProcessPoolExecutor`` does), waits for all of them, and raises the first
failure in ordinal order with its own type; a rank killed hard surfaces as
``BrokenProcessPool`` and takes its local siblings with it. Only a launcher
that used the XLA device itself is refused. Inside a rank that is already
running (a ``run_world`` target, or a spawned rank) it calls
``fn(ordinal, *args)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_xla._internal import link
from torch_xla._internal import runtime as _runtime


def spawn(fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int | None = None,
          join: bool = True, daemon: bool = False, start_method: str = "spawn") -> None:
    """Run ``fn(global_ordinal, *args)`` on every device of this host; returns None."""
    runtime = _runtime.current()
    local = runtime.ranks_per_host()
    allowed = (None, 1) if link.since("2.7") else (None, 1, local)
    if nprocs not in allowed:
        raise ValueError(
            f"Unsupported nprocs ({nprocs}). Please use nprocs=1 or None (default). If None, spawn "
            "will use all available devices. Use the environment variable X_NUM_DEVICES (where X "
            "is CPU, TPU, NEURONCORE, etc) to limit the number of devices used.")
    if not runtime.is_launcher():
        fn(link.ordinal(), *args)
        return None
    if nprocs == 1:
        runtime.single()
        fn(link.ordinal(), *args)
        return None
    if runtime.used():
        raise RuntimeError("Runtime is already initialized. Do not use the XLA device before "
                           "calling xmp.spawn.")
    runtime.spawn(fn, args)
    return None


class MpModelWrapper:
    """Legacy helper: the model is shared by reference; ranks are processes anyway."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def to(self, device: Any) -> Any:
        return self._model.to(device)


class MpSerialExecutor:
    """Legacy helper: run ``fn`` once per process, in turn with no lock needed."""

    def run(self, fn: Callable[[], Any]) -> Any:
        return fn()
