"""``torch_xla._internal.pjrt``: PJRT's process launching, as the harness runs it.

``spawn`` is ``xmp.spawn``; the initialisers are what every spawned rank has
already had done (the harness starts ranks with their PJRT environment set).
``run_multiprocess`` (a dict of every rank's return value) and
``spawn_threads`` (one thread per device) are not modelled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_xla._internal import link
from torch_xla._internal.surface import not_modelled


def initialize_singleprocess() -> None:
    link.use()


def initialize_multiprocess(local_rank: int, local_world_size: int) -> None:
    link.use()


def spawn(fn: Callable[..., Any], nprocs: int | None = None, start_method: str = "spawn",
          args: tuple[Any, ...] = ()) -> None:
    from torch_xla.distributed import xla_multiprocessing as xmp

    xmp.spawn(fn, args=args, nprocs=nprocs, start_method=start_method)


def run_multiprocess(fn: Callable[..., Any], *args: Any, start_method: str = "spawn",
                     **kwargs: Any) -> dict[int, Any]:
    not_modelled("torch_xla._internal.pjrt.run_multiprocess",
                 "the harness's ranks return their values to the harness, not to the launcher: "
                 "use xmp.spawn or torch_xla.launch")


def spawn_threads(fn: Callable[..., Any], args: tuple[Any, ...] = ()) -> None:
    not_modelled("torch_xla._internal.pjrt.spawn_threads",
                 "one thread per device is v2/v3's layout; the harness runs one process per chip")
