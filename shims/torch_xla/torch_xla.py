"""``torch_xla.device()``, ``torch_xla.sync()`` and ``torch_xla.launch()``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_xla._internal import link


def device(index: int | None = None) -> Any:
    """The rank's device: a real CPU device (see the README: tensors are CPU tensors),
    onto which ``.to`` copies as a transfer to a TPU does (``_internal.device``)."""
    from torch_xla._internal.device import xla_device

    if index is not None and index > 1:
        raise IndexError(f"Device index {index} out of range in ['xla:0']")
    link.use()
    return xla_device()


def devices() -> list[Any]:
    return [device()]


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    """A step marker. CPU tensors are always materialised, so nothing waits."""
    link.use()


def launch(fn: Callable[..., Any], args: tuple[Any, ...] = (), start_method: str = "spawn",
           debug_single_process: bool = False) -> None:
    from torch_xla.distributed import xla_multiprocessing as xmp

    nprocs = 1 if debug_single_process else None
    xmp.spawn(fn, args=args, nprocs=nprocs, start_method=start_method)
