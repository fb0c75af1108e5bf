"""The local pod's interconnect: the shim's collectives between workers, over gloo.

On a real pod the collectives are the TPU's own. On the local pod the shim
stands in for torch_xla, and its collectives need a network between the
workers' processes that owes nothing to the controller, as a pod's does:
every collective is one all-gather of every rank's call (over a gloo process
group on TCP, rank 0's store being the pod's coordinator address), and each
rank feeds the same calls, in rank order, to its own replica of the
simulator's ``Coordinator``. The replicas agree (the coordinator is a pure
state machine), so each rank takes its reply from its own: the results are
the simulator's, bit for bit, and a step whose calls do not match never
completes, as on a pod. Point-to-point sends are gloo sends, tagged by mailbox.

The world has no timeout here either: the host launcher's deadline ends it.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from harness.rank import wire
from harness.rank.channel import CollectiveError
from harness.world import protocol
from harness.world.coordinator import Coordinator

#: Longer than any deadline: the launcher's deadline ends a world, never gloo.
_FOREVER = datetime.timedelta(days=7)
_ERRORS = {"TypeError": TypeError, "ValueError": ValueError, "RuntimeError": RuntimeError}


@dataclass(frozen=True)
class FabricAddress:
    """Where rank 0's store listens (on worker 0), and which spawn round this is."""

    host: str
    port: int


class GlooRuntime:
    """The shim's ``Runtime`` for one process of a local pod (a launcher or a rank)."""

    def __init__(self, address: FabricAddress, profile: str, host: int, hosts: int,
                 ranks_per_host: int, spawn_ranks: Callable[[Callable[..., Any], tuple], None],
                 rank: int | None = None) -> None:
        self.address, self.profile = address, profile
        self.host, self.hosts, self.rph = host, hosts, ranks_per_host
        self.rank = rank
        self._spawn_ranks = spawn_ranks
        self._used = False
        self._single: Any = None
        self._group: Any = None
        self._coordinator: Coordinator | None = None
        self._lock = threading.Lock()

    # -- who this process is -------------------------------------------------
    def become_rank(self, rank: int) -> None:
        """A forked child of the launcher is ``rank`` from now on, connected to the others
        before the target runs (a TPU's interconnect is up before user code starts, and
        gloo's setup would otherwise be charged to the target's first collective)."""
        self.rank, self._group, self._coordinator = rank, None, None
        self._gloo()

    def use(self) -> None:
        if self.rank is None and self._single is None:
            raise RuntimeError("the pod launcher itself used the XLA runtime before xmp.spawn")
        self._used = True

    def used(self) -> bool:
        return self._used

    def is_launcher(self) -> bool:
        return self.rank is None

    def ordinal(self) -> int:
        if self._single is not None:
            return 0
        assert self.rank is not None
        return self.rank

    def world_size(self) -> int:
        return 1 if self._single is not None else self.hosts * self.rph

    def local_rank(self) -> int:
        return 0 if self.rank is None or self._single is not None else self.rank % self.rph

    def host_index(self) -> int:
        return self.host

    def ranks_per_host(self) -> int:
        return self.rph

    # -- collectives -----------------------------------------------------------
    def _gloo(self) -> Any:
        if self._group is None:
            import torch.distributed as dist

            assert self.rank is not None
            store = dist.TCPStore(self.address.host, self.address.port, self.world_size(),
                                  is_master=self.rank == 0, timeout=_FOREVER,
                                  wait_for_workers=False)
            self._group = dist.ProcessGroupGloo(store, self.rank, self.world_size(), _FOREVER)
            # Every rank is connected before any goes on: a rank still connecting reads its
            # peers' addresses from rank 0's store, which goes when rank 0's process does (a
            # target whose rank 0 raises at once left another rank "Connection reset by
            # peer" before its target ran). The barrier needs no store.
            self._group.barrier().wait()
            self._coordinator = Coordinator(self.world_size(), now=time.monotonic)
        return self._group

    def collective(self, op: str, kind: str, payload: Any, site: str | None,
                   meta: dict[str, Any]) -> tuple[dict, bytearray]:
        if self._single is not None:
            return self._single.collective(op, kind, payload, site, meta)
        header = {"type": "collective", "op": op, "kind": kind, "site": site, **meta}
        with self._lock:
            frames = self._all_gather(_frame(wire.encode(header), bytes(payload)))
            coordinator = self._coordinator
            assert coordinator is not None
            mine: tuple[dict, bytes | bytearray] | None = None
            for r, frame in enumerate(frames):
                head, body = _unframe(frame)
                call = protocol.decode(head, body)
                assert isinstance(call, protocol.Collective)
                for to, reply, data in coordinator.collective(r, call):
                    if to == self.rank:
                        mine = (reply, data)
        if mine is None:  # a step whose calls do not match: on a pod it never completes
            threading.Event().wait()
        reply, data = mine  # type: ignore[misc]
        if "error" in reply:
            raise _ERRORS.get(reply["error"], CollectiveError)(reply["message"])
        return reply, bytearray(data)

    def _all_gather(self, data: bytes) -> list[bytes]:
        with _peer_loss_blocks():
            return self._all_gather_now(data)

    def _all_gather_now(self, data: bytes) -> list[bytes]:
        import torch

        group = self._gloo()
        n = self.world_size()
        size = torch.tensor([len(data)], dtype=torch.int64)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(n)]
        group.allgather([sizes], [size]).wait()
        longest = max(int(s.item()) for s in sizes)
        mine = torch.zeros(longest, dtype=torch.uint8)
        if data:
            mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        out = [torch.zeros(longest, dtype=torch.uint8) for _ in range(n)]
        group.allgather([out], [mine]).wait()
        return [bytes(t[:int(s.item())].numpy().tobytes()) for t, s in zip(out, sizes)]

    def send(self, box: Any, peer: int, payload: Any, site: str | None) -> None:
        if self._single is not None:
            return self._single.send(box, peer, payload, site)
        import torch

        data = bytes(payload)
        with _peer_loss_blocks():
            group, tag = self._gloo(), _tag(box)
            group.send([torch.tensor([len(data)], dtype=torch.int64)], peer, tag).wait()
            if data:
                group.send([torch.frombuffer(bytearray(data), dtype=torch.uint8)], peer, tag).wait()
        return None

    def recv(self, box: Any, peer: int, site: str | None) -> bytearray:
        if self._single is not None:
            return self._single.recv(box, peer, site)
        import torch

        with _peer_loss_blocks():
            group, tag = self._gloo(), _tag(box)
            size = torch.zeros(1, dtype=torch.int64)
            group.recv([size], peer, tag).wait()
            n = int(size.item())
            if not n:
                return bytearray()
            data = torch.zeros(n, dtype=torch.uint8)
            group.recv([data], peer, tag).wait()
            return bytearray(data.numpy().tobytes())

    # -- launching ---------------------------------------------------------------
    def spawn(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._spawn_ranks(fn, args)

    def single(self) -> None:
        import sys

        if self._single is None:
            shim = sys.modules["torch_xla._internal.runtime"]
            self._single = shim.LocalRuntime(self.profile)
        self._used = True

    def run_script(self, argv: tuple[str, ...]) -> None:
        raise RuntimeError("a pod runs functions; scripts run with harness exec")


@contextlib.contextmanager
def _peer_loss_blocks() -> Iterator[None]:
    """A peer whose process ended closes its gloo connections; on a pod a collective with a
    rank that never arrives blocks forever (the deadline ends it), so here it does too,
    rather than raising gloo's "Connection closed by peer"."""
    try:
        yield
    except RuntimeError as exc:
        if "gloo" not in str(exc).lower() and "connection" not in str(exc).lower():
            raise
        threading.Event().wait()


def _tag(box: Any) -> int:
    from harness.rank.runtime import box_name

    return zlib.crc32(box_name(box).encode()) & 0x7FFFFFFF


def _frame(head: bytes, body: bytes) -> bytes:
    return len(head).to_bytes(4, "big") + head + body


def _unframe(frame: bytes) -> tuple[bytes, bytes]:
    n = int.from_bytes(frame[:4], "big")
    return frame[4:4 + n], frame[4 + n:]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (for rank 0's store on worker 0 of a local pod)."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
