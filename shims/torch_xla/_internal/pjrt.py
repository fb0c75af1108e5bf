"""``torch_xla._internal.pjrt``: PJRT's process launching, as the harness runs it.

``spawn`` is ``xmp.spawn``; ``run_multiprocess`` is ``xmp.spawn`` too, each
of this host's ranks sending ``fn``'s value back to the launcher through a
pipe of its own (the real one uses a process pool), so the launcher gets
``{global ordinal: value}`` for its host. The initialisers are what every
spawned rank has already had done (the harness starts ranks with their PJRT
environment set). ``spawn_threads`` (one thread per device) is not modelled.
"""

from __future__ import annotations

import collections
import os
import pickle
import select
import struct
import threading
from collections.abc import Callable
from typing import Any

from torch_xla._internal import link
from torch_xla._internal import runtime as _runtime
from torch_xla._internal.surface import not_modelled


def initialize_singleprocess() -> None:
    link.use()


def initialize_multiprocess(local_rank: int, local_world_size: int) -> None:
    link.use()


def spawn(fn: Callable[..., Any], nprocs: int | None = None, start_method: str = "spawn",
          args: tuple[Any, ...] = ()) -> None:
    from torch_xla.distributed import xla_multiprocessing as xmp

    xmp.spawn(fn, args=args, nprocs=nprocs, start_method=start_method)


class _SendValue:
    """Runs ``fn(*args, **kwargs)`` in a rank and writes ``(ordinal, value)`` to the pipe of
    its local rank."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 write_fds: list[int]) -> None:
        self.fn, self.args, self.kwargs, self.write_fds = fn, args, kwargs, write_fds

    def __call__(self, index: int) -> None:
        value = self.fn(*self.args, **self.kwargs)
        data = pickle.dumps((link.ordinal(), value))
        fd = self.write_fds[link.local_rank() % len(self.write_fds)]
        view = memoryview(struct.pack("<Q", len(data)) + data)
        while view:
            view = view[os.write(fd, view):]


def _drain(read_fds: list[int], buffers: dict[int, bytearray]) -> None:
    """Read every pipe to its end (a rank blocks on a full pipe otherwise)."""
    open_fds = list(read_fds)
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [])
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                buffers[fd].extend(chunk)
            else:
                open_fds.remove(fd)


def run_multiprocess(fn: Callable[..., Any], *args: Any, start_method: str = "spawn",
                     **kwargs: Any) -> dict[int, Any]:
    """``fn(*args, **kwargs)`` on every rank of this host: ``{global ordinal: its value}``."""
    from torch_xla.distributed import xla_multiprocessing as xmp

    pipes = [os.pipe() for _ in range(max(1, _runtime.current().ranks_per_host()))]
    buffers = {r: bytearray() for r, _ in pipes}
    reader = threading.Thread(target=_drain, args=([r for r, _ in pipes], buffers),
                              name="run_multiprocess results", daemon=True)
    reader.start()
    try:
        xmp.spawn(_SendValue(fn, args, kwargs, [w for _, w in pipes]),
                  start_method=start_method)
    finally:
        for _, w in pipes:
            os.close(w)
        reader.join()
        for r, _ in pipes:
            os.close(r)
    replica_results: list[tuple[int, Any]] = []
    for data in buffers.values():
        offset = 0
        while offset < len(data):
            (size,) = struct.unpack_from("<Q", data, offset)
            replica_results.append(pickle.loads(bytes(data[offset + 8:offset + 8 + size])))
            offset += 8 + size
    counts = collections.Counter(ordinal for ordinal, _ in replica_results)
    if counts:
        replica, num_results = counts.most_common(1)[0]
        assert num_results == 1, f"{num_results} results for replica {replica}"
    return dict(sorted(replica_results))


def spawn_threads(fn: Callable[..., Any], args: tuple[Any, ...] = ()) -> None:
    not_modelled("torch_xla._internal.pjrt.spawn_threads",
                 "one thread per device is v2/v3's layout; the harness runs one process per chip")
