"""``torch_xla._internal.rendezvous``: the ``xla://`` init_method of torch.distributed.

As in torch_xla, the store is created once per process and reused by later
``init_process_group`` calls. Departure: the store is a real ``TCPStore``
served by rank 0 on 127.0.0.1 and a port the kernel picks (not
MASTER_ADDR/MASTER_PORT, so parallel worlds never collide); the port reaches
the other ranks through one collective, ``init_process_group``, which stands
for the real store's connection handshake (every rank must arrive).
``TORCH_DIST_INIT_BARRIER=0`` with ``XLA_USE_DUMMY_STORE=1`` gives a dummy
store and no handshake. torchrun (torchelastic) launches are not emulated.

Departure: rank 0 serves the store until its workers are done with it. In
torch_xla the store lives in rank 0's process and torch itself does not keep
it for late peers, but a real rank 0 does not vanish the instant it returns:
where torch_xla runs the XLA distributed runtime, process 0 hosts its service
and every process's client shutdown at exit is a barrier over all of them
(``XlaCoordinator``; ``DIST_SERVICE_SHUTDOWN_TIMEOUT_IN_MIN``, 5 minutes). An
emulated rank exits in microseconds, so a rank 0 that returned right after
``init_process_group`` tore its store down under peers still in torch's store
barrier (``DistNetworkError: Broken pipe``, about 1 world in 4 under load): a
failure of the emulation, not of the code under test. So rank 0's exit waits
until every worker has left the store: at the worker's exit, at its next call
into the world (a collective, send or recv: it is out of torch's store code
then, and may be waiting on rank 0, whose own error must still be reported),
or by dying. A new process group's store barrier puts the workers back on it.
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
_LEFT_KEY = "harness/xla-worker-left/"  # + rank: that worker is done with the store
_PID_KEY = "harness/xla-worker-pid/"  # + rank: its process, for rank 0 to see it die
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


class _Leaver:
    """A worker's presence on rank 0's store, as rank 0's exit waits on it.

    A worker is on the store from its handshake, and again whenever torch is about to
    run a store barrier for a new process group (``arrive``). It leaves at its next
    call into the world (out of torch's store code then, and maybe waiting on rank 0,
    whose own error must still be reported) or at its exit.
    """

    def __init__(self, store: Any, rank: int) -> None:
        self.store, self.key, self.on_store = store, f"{_LEFT_KEY}{rank}", False
        self.arrive()
        atexit.register(self.leave)

    def arrive(self) -> None:
        if self.on_store:
            return
        self.on_store = True
        self.store.delete_key(self.key)
        link.before_next_world_call(self.leave)

    def leave(self) -> None:
        if not self.on_store:
            return
        self.on_store = False
        try:
            self.store.set(self.key, "1")
        except dist.DistError as exc:  # rank 0 is already gone: nothing left to tell it
            log.debug("could not tell rank 0 this worker left its store: %s", exc)


_leaver: _Leaver | None = None


def store_in_use() -> None:
    """torch is about to use the store again (a new process group's barrier)."""
    if _leaver is not None:
        _leaver.arrive()


def _alive(pid: int) -> bool:
    """Is this peer's process still running (not gone, not a zombie)? Ranks share a machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[:1] != ["Z"]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: a zombie counts as running
        return True


def _outlive_workers(store: Any, world_size: int) -> None:
    """Rank 0's exit: serve the store until every worker has left it or died."""
    pending = set(range(1, world_size))
    pids = {r: int(store.get(f"{_PID_KEY}{r}")) for r in pending}
    store.set(CLOSING_KEY, "1")
    deadline = time.monotonic() + _STORE_TIMEOUT.total_seconds()
    pause = 0.0005
    while pending := {r for r in pending
                      if not store.check([f"{_LEFT_KEY}{r}"]) and _alive(pids[r])}:
        if time.monotonic() > deadline:
            log.warning("rank 0 exits with workers %s still on its store after %d s",
                        sorted(pending), int(_STORE_TIMEOUT.total_seconds()))
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _tcp_store() -> Any:
    """Rank 0 serves a TCPStore; every rank learns its port in one collective.

    The master returns only when every worker has connected, as the real one
    (``wait_for_workers=True``) does: a rank 0 that returned at once could
    exit and take the store with it while a worker is still connecting.
    """
    global _leaver
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
            store.set(f"{_PID_KEY}{rank}", str(os.getpid()))
            store.add(_JOINED_KEY, 1)
            _leaver = _Leaver(store, rank)
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
