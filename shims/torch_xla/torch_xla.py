"""``torch_xla.device()``, ``torch_xla.sync()``, ``torch_xla.step()``/``compile()``,
``torch_xla.manual_seed()`` and ``torch_xla.launch()``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from torch_xla._internal import link


def device(index: int | None = None) -> Any:
    """The rank's device: a real CPU device (see docs/reference/shim.md: tensors are CPU tensors),
    onto which ``.to`` copies as a transfer to a TPU does (``_internal.device``)."""
    from torch_xla._internal.device import xla_device

    if index is not None and index > 1:
        raise IndexError(f"Device index {index} out of range in ['xla:0']")
    link.use()
    return xla_device()


def devices() -> list[Any]:
    return [device()]


def real_devices() -> list[str]:
    """The process's one chip, as PJRT names it (``TPU:<global ordinal>``)."""
    from torch_xla.core import xla_model as xm

    return xm.xla_real_devices()


def device_count() -> int:
    return len(real_devices())


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    """A step marker: counted (``MarkStep``), then the step closures run, as in the real one.
    CPU tensors are always materialised, so nothing waits. The target's marker ends a
    training step (its world time: ``link.step``)."""
    _marker(step=True)


def _marker(step: bool) -> None:
    """A step marker; ``step=False``: one the shim's own APIs make inside a call (the real
    ``xla_rendezvous`` marks steps), which is no training step of the target's."""
    from torch_xla.core import xla_model as xm
    from torch_xla.debug import metrics

    link.use()
    metrics._count("MarkStep")
    if step:
        link.step()
        if xm._spmd() and link.world_size() > 1:
            # An SPMD step's graph spans every host's chips: each process runs its part,
            # and the step's collectives meet across hosts. A host that is gone leaves the
            # others waiting in their next step, as a pod's do.
            link.collective("sync", "gather_bytes", b"")
    xm._run_step_closures()


def step() -> Any:
    """``with torch_xla.step():`` a step marker before and after the block."""
    return compile()


def compile(f: Callable[..., Any] | None = None, full_graph: bool | None = False,
            name: str | None = None, max_different_graphs: int | None = None) -> Any:
    """The real one traces ``f`` lazily between two step markers; the shim runs it eagerly
    between the same two markers (``full_graph`` and ``max_different_graphs`` are not checked:
    nothing is traced)."""

    @contextlib.contextmanager
    def _compile() -> Any:
        sync()
        try:
            yield
        finally:
            sync()

    return _compile() if f is None else _compile()(f)


def manual_seed(seed: int, device: Any = None) -> None:
    from torch_xla.core import xla_model as xm

    xm.set_rng_state(seed, device)


def launch(fn: Callable[..., Any], args: tuple[Any, ...] = (), start_method: str = "spawn",
           debug_single_process: bool = False) -> None:
    from torch_xla.distributed import xla_multiprocessing as xmp

    nprocs = 1 if debug_single_process else None
    xmp.spawn(fn, args=args, nprocs=nprocs, start_method=start_method)
