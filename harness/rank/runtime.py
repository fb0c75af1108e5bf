"""The harness's side of the shim's runtime protocol.

The fake ``torch_xla`` reaches its world only through the protocol of
``torch_xla._internal.runtime``. ``enter`` makes a ``RankContext`` this
process's own and installs ``HarnessRuntime`` in the shim as soon as the
target imports it; every call reads the context afresh, so module objects a
launcher imported before forking its ranks keep working in the ranks.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.imports import when_imported
from harness.rank.channel import Channel
from harness.rank.spec import WorldSpec

#: The module of the shim that defines the protocol and holds the installed runtime.
SHIM_RUNTIME_MODULE = "torch_xla._internal.runtime"


@dataclass
class RankContext:
    """What the shim needs to know about the process it runs in."""

    spec: WorldSpec
    role: str  # "rank" or "host" (an exec-mode launcher before xmp.spawn)
    rank: int | None
    host: int
    channel: Channel | None
    engine: Any = None  # the fault engine, when the world has a sandbox
    view: Any = None  # the filesystem view, when the world has a sandbox
    runtime_used: bool = False
    result_fd: int | None = None  # exec mode: the launcher that forked us reads our fate here
    launcher: bool = False  # exec mode: the host's launcher, even once it became its rank
    single: Any = None  # a launcher after xmp.spawn(nprocs=1): the shim's world of one
    rounds: int = 0  # a launcher: how many xmp.spawn calls have forked its ranks

    @property
    def world_size(self) -> int:
        return 1 if self.single is not None else self.spec.topology.world_size

    @property
    def local_rank(self) -> int:
        if self.rank is None or self.single is not None:
            return 0
        return self.spec.topology.local_rank(self.rank)


_context: RankContext | None = None


def active() -> RankContext | None:
    """This process's context, if it has become a rank or a launcher."""
    return _context


def current() -> RankContext:
    """The context ``enter`` made this process's (the shim's runtime exists only after it)."""
    assert _context is not None, "this process has not become a rank or a launcher"
    return _context


def enter(ctx: RankContext) -> None:
    """Make ``ctx`` this process's, and the shim's runtime this process's world."""
    global _context
    _context = ctx
    when_imported(SHIM_RUNTIME_MODULE, lambda shim: shim.install(HarnessRuntime()))
    from harness.rank import distributed

    when_imported("torch.distributed", distributed.install)


def before_collective(op: str, tag: str | None) -> None:
    """The shim calls this on entering every collective (the fault plan's hook)."""
    ctx = _context
    if ctx is not None and ctx.engine is not None:
        ctx.engine.before_collective(op, tag)


def promote_host_to_rank() -> RankContext:
    """A launcher that uses the runtime without xmp.spawn is the host's only rank."""
    ctx = current()
    topology = ctx.spec.topology
    if topology.ranks_per_host != 1:
        raise RuntimeError(
            f"harness exec: this script uses the XLA runtime without xmp.spawn on a host "
            f"of {topology.ranks_per_host} ranks; call xmp.spawn(fn) as PJRT code does, "
            f"or run on a topology with one rank per host (e.g. {topology.hosts}x1)")
    if ctx.rounds:
        raise RuntimeError(
            "harness exec: this launcher uses the XLA runtime itself after its xmp.spawn "
            "already ran its host's rank; the harness does not model a launcher that "
            "becomes the rank its spawned processes were: use the device in the spawned "
            "function only")
    rank = ctx.host
    os.environ.update(topology.rank_environment(rank, ctx.spec.profile))
    assert ctx.channel is not None
    ctx.channel.notify({"type": "promote", "rank": rank})
    ctx.role, ctx.rank = "rank", rank
    return ctx


def become_single() -> RankContext:
    """``xmp.spawn(nprocs=1)`` in a launcher: this process is a world of one device.

    As torch_xla's ``_run_singleprocess``: one chip's topology in the
    environment (where the launcher's has none), ordinal 0, world size 1, and
    collectives that complete at once, in this process, never reaching the
    other hosts. A launcher that already became its host's rank stays it.
    """
    ctx = current()
    if ctx.role == "rank":
        return ctx
    if ctx.single is None:
        shim = sys.modules[SHIM_RUNTIME_MODULE]
        ctx.single = shim.LocalRuntime(ctx.spec.profile)
        for name, value in (("PJRT_LOCAL_PROCESS_COUNT", "1"), ("TPU_VISIBLE_CHIPS", "0"),
                            ("TPU_CHIPS_PER_PROCESS_BOUNDS", "1,1,1"),
                            ("TPU_PROCESS_BOUNDS", "1,1,1")):
            os.environ.setdefault(name, value)
        _channel().notify({"type": "spawning", "single": True})
    ctx.runtime_used = True
    return ctx


def _channel() -> Channel:
    channel = current().channel
    assert channel is not None
    return channel


def box_name(box: Any) -> str:
    """A mailbox key (``("dist", src, dst)``) as the string both ends name it by."""
    return box if isinstance(box, str) else json.dumps(box, separators=(",", ":"), default=repr)


class HarnessRuntime:
    """The shim's ``Runtime``, answered by this process's rank context and channel."""

    @property
    def profile(self) -> str:
        return current().spec.profile

    def use(self) -> None:
        ctx = current()
        if ctx.role == "host" and ctx.single is None:
            promote_host_to_rank()
        ctx.runtime_used = True

    def used(self) -> bool:
        return current().runtime_used

    def is_launcher(self) -> bool:
        return current().launcher

    def ordinal(self) -> int:
        ctx = current()
        if ctx.single is not None:
            return 0
        assert ctx.rank is not None
        return ctx.rank

    def world_size(self) -> int:
        return current().world_size

    def local_rank(self) -> int:
        return current().local_rank

    def host_index(self) -> int:
        return current().host

    def ranks_per_host(self) -> int:
        return current().spec.topology.ranks_per_host

    def devices_per_process(self) -> int:
        """The chips one process addresses: its host's every chip in an SPMD topology."""
        return current().spec.topology.devices_per_process

    def collective(self, op: str, kind: str, payload: Any, site: str | None,
                   meta: dict[str, Any]) -> tuple[dict, bytearray]:
        before_collective(op, meta.get("tag"))
        single = current().single
        if single is not None:
            return single.collective(op, kind, payload, site, meta)
        channel = _channel()
        header = {"type": "collective", "op": op, "kind": kind, "site": site, **meta}
        return channel.request(header, payload)

    def send(self, box: Any, peer: int, payload: Any, site: str | None) -> None:
        single = current().single
        if single is not None:
            return single.send(box, peer, payload, site)
        _channel().request({"type": "send", "box": box_name(box), "peer": peer, "site": site},
                           payload)

    def recv(self, box: Any, peer: int, site: str | None) -> bytearray:
        single = current().single
        if single is not None:
            return single.recv(box, peer, site)
        _, data = _channel().request({"type": "recv", "box": box_name(box), "peer": peer,
                                      "site": site})
        return data

    def store(self, name: str, timeout: Any) -> Any:
        """The world's torch.distributed store at ``name`` (``xla://``'s)."""
        from harness.rank.distributed import world_store

        return world_store(name, timeout)

    def sync_point(self, op: str, step: int = 0) -> bool:
        """The XLA runtime's preemption sync manager (``world/preemption.py``): ``activate``
        (its C++ handler catches SIGTERM), ``deactivate``, ``reached`` (is ``step`` the
        sync point?)."""
        from harness.rank import signals

        ctx = current()
        if ctx.single is not None or ctx.channel is None:
            return False
        channel = ctx.channel
        if op == "activate":
            signals.catch_sigterm(lambda: channel.notify({"type": "sync-point",
                                                          "op": "deactivate"}))
        elif op == "deactivate":
            signals.release_sigterm()
        reply, _ = channel.request({"type": "sync-point", "op": op, "step": int(step),
                                    "site": None})
        return bool(reply.get("reached"))

    def step(self) -> None:
        """A training step's marker: it costs the world's ``step_seconds`` (the scenario's
        cost model) and the world hears of it (the trainer's checker counts the steps)."""
        ctx = current()
        if ctx.single is not None or ctx.channel is None:
            return
        if ctx.spec.step_seconds:
            time.sleep(ctx.spec.step_seconds)  # the world's sleep, in a rank
        ctx.channel.notify({"type": "step"})

    def aside(self, fn: Callable[[], Any]) -> Any:
        """The shim's own work (registering its ops when torch._dynamo is imported): it
        takes no turn of the world's, so the world's time does not depend on whether the
        rank's process had imported torch._dynamo before the world began. Its file
        operations reach the machine's functions, never the view, its turns or its faults."""
        from harness.filesystem import patch

        with patch.aside():
            return fn()

    def spawn(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        from harness.rank.launcher import spawn_local_ranks

        spawn_local_ranks(current(), fn, args)

    def single(self) -> None:
        become_single()

    def run_script(self, argv: tuple[str, ...]) -> None:
        from harness.rank.bootstrap import run_script

        run_script(argv)
