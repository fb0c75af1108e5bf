"""``torch_xla._internal.rendezvous``: the ``xla://`` init_method of torch.distributed.

As in torch_xla, the store is created once per process and reused by later
``init_process_group`` calls; rank and world size come from the runtime (in SPMD, the
process's index and count). The store is the world's (``link.store``): one set of
keys every process sees, whose waits are the world's, which outlives every rank, as
the real one effectively does (process 0 hosts it, and where torch_xla runs its
distributed runtime every process's shutdown at exit is a barrier over all of them,
``XlaCoordinator``). Departure: no socket, so no MASTER_ADDR/MASTER_PORT is read and
parallel worlds never collide on a port. Its connection handshake, where every
process must arrive, is one collective of the world, ``init_process_group``.
``TORCH_DIST_INIT_BARRIER=0`` with ``XLA_USE_DUMMY_STORE=1`` gives a dummy store and
no handshake. torchrun (torchelastic) launches are not emulated.
"""

from __future__ import annotations

import datetime
import os
import threading
from collections.abc import Iterator
from typing import Any

import torch.distributed as dist
import torch_xla.runtime as xr
from torch_xla._internal import link


class DummyStore(dist.Store):
    """The store of ``TORCH_DIST_INIT_BARRIER=0 XLA_USE_DUMMY_STORE=1``: holds nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()


_store: Any = None
_store_lock = threading.Lock()
_STORE_TIMEOUT = datetime.timedelta(seconds=300)  # TCPStore's default, which the real one keeps


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def _world_store() -> Any:
    """The world's store; every process arrives at its handshake, as every worker
    connects to the real master's TCPStore before it returns."""
    if xr.process_count() > 1:
        link.collective("init_process_group", "broadcast", b"", root=0, tag="xla://")
    return link.store("xla://", _STORE_TIMEOUT)


def pjrt_rendezvous_handler(url: str, timeout: datetime.timedelta = dist.default_pg_timeout,
                            **kwargs: Any) -> Iterator[tuple[Any, int, int]]:
    """``init_method='xla://'``: rank and world size from the runtime, as PJRT gives them."""
    global _store
    with _store_lock:
        if not _store:
            if (_env_int("TORCH_DIST_INIT_BARRIER", 1) == 0
                    and _env_int("XLA_USE_DUMMY_STORE", 0) == 1):
                _store = DummyStore()
            else:
                _store = _world_store()
    world_size = xr.process_count() if xr.is_spmd() else xr.world_size()
    rank = xr.process_index() if xr.is_spmd() else xr.global_ordinal()
    yield (_store, rank, world_size)
