"""The shim's runtime protocol: everything it needs from the world it runs in.

The fake ``torch_xla`` knows nothing of the process that hosts it. Whatever
starts a rank (the harness's rank bootstrap, or a test) ``install``\\ s an
object that answers this protocol; every API that touches the runtime goes
through ``current()``. Importing the shim needs no runtime; using it does.

``LocalRuntime`` is a world of one rank in this process: enough to run the
shim's own tests, and code that calls ``xm`` once, without a harness world.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Runtime(Protocol):
    """One process of a world, as the shim sees it."""

    #: ``current`` (torch_xla 2.9) or ``legacy`` (2.0: XRT names, xla_dist).
    profile: str

    def use(self) -> None:
        """This process uses the XLA runtime (an exec-mode launcher becomes its host's rank)."""

    def used(self) -> bool:
        """Has this process used the runtime (or spawned ranks that did)?"""

    def is_launcher(self) -> bool:
        """Is this an exec-mode launcher (the process ``xmp.spawn`` starts ranks from)?"""

    def ordinal(self) -> int: ...

    def world_size(self) -> int: ...

    def local_rank(self) -> int: ...

    def host_index(self) -> int: ...

    def ranks_per_host(self) -> int: ...

    def collective(self, op: str, kind: str, payload: Any, site: str | None,
                   meta: dict[str, Any]) -> tuple[dict, bytearray]:
        """One step of the world's collective sequence; blocks until every rank arrives.

        ``kind`` says how the payloads combine (gather, gather_bytes, reduce,
        broadcast, permute); ``meta`` carries tensors, groups, root, pairs, tag.
        """

    def send(self, box: Any, peer: int, payload: Any, site: str | None) -> None: ...

    def recv(self, box: Any, peer: int, site: str | None) -> bytearray: ...

    def spawn(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """In a launcher: run ``fn(rank, *args)`` on each of this host's ranks, PJRT-style,
        each in a new process; every call starts a fresh set of them."""

    def single(self) -> None:
        """In a launcher: become a world of one device, as ``xmp.spawn(nprocs=1)`` makes it
        (ordinal 0, world size 1, collectives that complete at once); the runtime is used."""

    def run_script(self, argv: tuple[str, ...]) -> None:
        """Run ``python ARGV...`` in this process (the legacy ``xla_dist`` launcher)."""


_runtime: Runtime | None = None


def install(runtime: Runtime | None) -> None:
    """Make ``runtime`` the one the shim uses in this process (``None`` removes it)."""
    global _runtime
    _runtime = runtime


def installed() -> Runtime | None:
    return _runtime


def current() -> Runtime:
    if _runtime is None:
        raise RuntimeError(
            "the harness torch_xla shim was imported outside a harness world; "
            "run the code with `harness exec` or `harness.run_world`")
    return _runtime


class LocalRuntime:
    """A world of one rank, in this process: collectives complete at once."""

    def __init__(self, profile: str = "current") -> None:
        self.profile = profile
        self._used = False
        self._mailboxes: dict[Any, list[bytes]] = {}

    def use(self) -> None:
        self._used = True

    def used(self) -> bool:
        return self._used

    def is_launcher(self) -> bool:
        return False

    def ordinal(self) -> int:
        return 0

    def world_size(self) -> int:
        return 1

    def local_rank(self) -> int:
        return 0

    def host_index(self) -> int:
        return 0

    def ranks_per_host(self) -> int:
        return 1

    def collective(self, op: str, kind: str, payload: Any, site: str | None,
                   meta: dict[str, Any]) -> tuple[dict, bytearray]:
        """What the coordinator answers a world of one: every kind returns this rank's payload."""
        data = bytearray(payload)
        if kind in ("gather", "gather_bytes"):
            return {"sizes": [len(data)]}, data
        if kind == "broadcast" and meta.get("root") != 0:
            return {"none": True}, bytearray()
        if kind == "permute" and [0, 0] not in [list(p) for p in meta.get("pairs", ())]:
            return {"none": True}, bytearray()
        if kind not in ("reduce", "broadcast", "permute"):
            raise ValueError(f"unknown collective kind {kind!r}")
        return {}, data

    def send(self, box: Any, peer: int, payload: Any, site: str | None) -> None:
        self._mailboxes.setdefault(box, []).append(bytes(payload))

    def recv(self, box: Any, peer: int, site: str | None) -> bytearray:
        waiting = self._mailboxes.get(box)
        if not waiting:
            raise RuntimeError(f"recv on {box!r} in a world of one rank: nothing was sent, "
                               "so it would block forever")
        return bytearray(waiting.pop(0))

    def spawn(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        raise RuntimeError("a LocalRuntime is a rank, not a launcher: it has no ranks to spawn")

    def single(self) -> None:
        self._used = True  # already a world of one

    def run_script(self, argv: tuple[str, ...]) -> None:
        raise RuntimeError("a LocalRuntime runs in-process code only, not scripts")
