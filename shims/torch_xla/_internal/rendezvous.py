"""``torch_xla._internal.rendezvous``: the ``xla://`` init_method of torch.distributed.

As in torch_xla, the store is created once per process and reused by later
``init_process_group`` calls. Departure: the store is a real ``TCPStore``
served by rank 0 on 127.0.0.1 and a port the kernel picks (not
MASTER_ADDR/MASTER_PORT, so parallel worlds never collide); the port reaches
the other ranks through one collective, ``init_process_group``, which stands
for the real store's connection handshake (every rank must arrive).
``TORCH_DIST_INIT_BARRIER=0`` with ``XLA_USE_DUMMY_STORE=1`` gives a dummy
store and no handshake. torchrun (torchelastic) launches are not emulated.

The store outlives its clients, as on a pod: there, process 0 also hosts the
XLA distributed runtime, whose client shutdown at exit is a barrier over every
process (``DIST_SERVICE_SHUTDOWN_TIMEOUT_IN_MIN``, 5 minutes), so rank 0 does
not exit while a peer is still inside torch's init barrier on rank 0's store.
Here every worker marks itself gone from the store at exit and rank 0's exit
waits for them; a worker killed before its exit is waited for as the real
barrier waits for it, until the world's deadline. Without this, rank 0
returning right after ``init_process_group`` killed peers still in the
barrier with ``DistNetworkError: Broken pipe``.
"""

from __future__ import annotations

import atexit
import datetime
import logging
import os
import threading
import time
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
_LOOPBACK = "127.0.0.1"
_STORE_TIMEOUT = datetime.timedelta(seconds=300)  # TCPStore's default, which the real one keeps
_JOINED_KEY = "harness/xla-workers-joined"
_LEFT_KEY = "harness/xla-workers-left"
CLOSING_KEY = "harness/xla-store-closing"  # set by rank 0 when its exit starts to wait

log = logging.getLogger(__name__)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def _wait_for_workers(store: Any, world_size: int) -> None:
    """What the real master's TCPStore constructor does: return once every worker joined."""
    deadline = time.monotonic() + _STORE_TIMEOUT.total_seconds()
    pause = 0.0005
    while (joined := store.add(_JOINED_KEY, 0)) < world_size - 1:
        if time.monotonic() > deadline:
            raise dist.DistStoreError(
                f"Timed out after {int(_STORE_TIMEOUT.total_seconds())} seconds waiting for "
                f"clients. {joined + 1}/{world_size} clients joined.")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _leave(store: Any) -> None:
    """A worker's exit: it is done with rank 0's store (the shutdown barrier's arrival)."""
    try:
        store.add(_LEFT_KEY, 1)
    except dist.DistError as exc:  # rank 0 is already gone: nothing left to tell it
        log.debug("could not mark this worker gone from the store: %s", exc)


def _outlive_workers(store: Any, world_size: int) -> None:
    """Rank 0's exit: serve the store until every worker has left it (the shutdown barrier)."""
    store.set(CLOSING_KEY, "1")
    deadline = time.monotonic() + _STORE_TIMEOUT.total_seconds()
    pause = 0.0005
    while (left := store.add(_LEFT_KEY, 0)) < world_size - 1:
        if time.monotonic() > deadline:
            log.warning("rank 0 exits with %d/%d workers still on its store after %d s",
                        world_size - 1 - left, world_size - 1,
                        int(_STORE_TIMEOUT.total_seconds()))
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _tcp_store() -> Any:
    """Rank 0 serves a TCPStore; every rank learns its port in one collective.

    The master returns only when every worker has connected, as the real one
    (``wait_for_workers=True``) does: a rank 0 that returned at once could
    exit and take the store with it while a worker is still connecting.
    """
    rank, world_size = xr.process_index(), xr.process_count()
    if rank == 0:
        store = dist.TCPStore(_LOOPBACK, 0, world_size, is_master=True, wait_for_workers=False,
                              timeout=_STORE_TIMEOUT)
        payload = str(store.port).encode()
    else:
        store, payload = None, b""
    if world_size > 1:
        _, data = link.collective("init_process_group", "broadcast", payload, root=0,
                                  tag="xla://")
        port = int(bytes(data).decode())
        if store is None:
            store = dist.TCPStore(_LOOPBACK, port, world_size, is_master=False,
                                  wait_for_workers=False, timeout=_STORE_TIMEOUT)
            store.add(_JOINED_KEY, 1)
            atexit.register(_leave, store)
        else:
            _wait_for_workers(store, world_size)
            atexit.register(_outlive_workers, store, world_size)
    return store


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
                _store = _tcp_store()
    world_size = xr.process_count() if xr.is_spmd() else xr.world_size()
    rank = xr.process_index() if xr.is_spmd() else xr.global_ordinal()
    yield (_store, rank, world_size)
