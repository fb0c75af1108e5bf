"""The shim's APIs reach the world through here: the installed runtime, marked
as used whenever an API touches it. Knows nothing of faults or checkers."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from torch_xla._internal import runtime as _runtime
from torch_xla._internal import sites as _sites

_SHIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: The torch_xla release each API profile is (what ``torch_xla.__version__`` says): the one
#: table of profiles in the shim; the harness's ``topology.PROFILES`` names the same ones.
RELEASES = {"legacy": "2.0.0", "2.7": "2.7.0", "2.8": "2.8.0", "current": "2.9.0"}


def profile() -> str:
    """The installed runtime's API profile; the shim alone is torch_xla 2.9 (``current``)."""
    runtime = _runtime.installed()
    return "current" if runtime is None else runtime.profile


def release() -> str:
    """The torch_xla release the profile is, as ``"2.9.0"``."""
    return RELEASES[profile()]


def _parse(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


_VERSIONS = {name: _parse(text) for name, text in RELEASES.items()}


def version() -> tuple[int, int]:
    """The profile's torch_xla release as ``(major, minor)``, for comparisons."""
    return _VERSIONS[profile()]


def since(release_: str) -> bool:
    """Is the profile torch_xla ``release_`` (``"2.8"``) or later? Every API difference
    between profiles asks this, so that a new profile is one line of ``RELEASES``."""
    return version() >= _parse(release_)


def removed_in(module: str, functions: dict[Callable[..., Any], str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that shows each function only under the profiles older than
    the release that removed it (``{get_ordinal: "2.7"}``).

    Asking at each lookup lets the runtime be installed after the module is imported.
    """
    table = {fn.__name__: (fn, gone) for fn, gone in functions.items()}

    def __getattr__(name: str) -> Any:
        if name in table and not since(table[name][1]):
            return table[name][0]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def legacy_only(module: str, *functions: Callable[..., Any]) -> Callable[[str], Any]:
    """Names removed in 2.7 (``get_ordinal``, ``xrt_world_size``): the ``legacy`` profile's."""
    return removed_in(module, {fn: "2.7" for fn in functions})


def use() -> _runtime.Runtime:
    """This process as a rank; using the runtime in a launcher makes it one."""
    runtime = _runtime.current()
    runtime.use()
    return runtime


def world_size() -> int:
    return use().world_size()


def ordinal() -> int:
    return use().ordinal()


def local_rank() -> int:
    return use().local_rank()


def host_index() -> int:
    return use().host_index()


def devices_per_process() -> int:
    """The chips this process addresses (its host's every chip where the world runs one
    process per host for SPMD); a runtime without the notion has one per process."""
    runtime = use()
    count = getattr(runtime, "devices_per_process", None)
    return 1 if count is None else count()


def step() -> None:
    """A training step ends (``torch_xla.sync``, ``mark_step``, ``optimizer_step`` with a
    barrier): where XLA runs the step's graph, so where a real step's time is spent. A
    runtime that models it (the harness's: the world time a step costs, and the step
    told to the world) has a ``step`` of its own; the protocol does not require one."""
    runtime = _runtime.installed()
    step_ = getattr(runtime, "step", None)
    if step_ is not None:
        step_()


def aside(fn: Callable[[], Any]) -> Any:
    """Run ``fn``, the shim's own work rather than the process's: a runtime that models
    time (the harness's) charges it none. The protocol does not require one."""
    own = getattr(_runtime.installed(), "aside", None)
    return fn() if own is None else own(fn)


def store(name: str, timeout: Any) -> Any:
    """The world's torch.distributed store named ``name``: one set of keys for every
    process, its waits the world's. A runtime without stores (a world of one) gets a
    ``HashStore`` of this process."""
    own = getattr(_runtime.installed(), "store", None)
    if own is not None:
        return own(name, timeout)
    import torch.distributed as dist

    return dist.HashStore()


def sync_point(op: str, step: int = 0) -> bool:
    """The XLA coordinator's preemption sync manager (``activate``, ``deactivate``,
    ``reached``): the world's, where the runtime models one; else no notice ever comes."""
    own = getattr(_runtime.installed(), "sync_point", None)
    return False if own is None else own(op, step)


def call_site() -> str | None:
    """``file:line in function`` of the user's code that called into the shim."""
    return _sites.user_site(sys._getframe(1), (_SHIM_DIR,))


_before_world_call: list[Callable[[], None]] = []


def before_next_world_call(fn: Callable[[], None]) -> None:
    """Run ``fn`` once, just before this process's next collective, send or recv."""
    _before_world_call.append(fn)


def _world_call() -> None:
    while _before_world_call:
        _before_world_call.pop(0)()


def collective(op: str, kind: str, payload: Any = b"", **meta: Any) -> tuple[dict, bytearray]:
    """One step of the world's collective sequence; blocks until every rank arrives."""
    _world_call()
    return use().collective(op, kind, payload, call_site(), meta)


def send(box: Any, peer: int, payload: Any) -> None:
    _world_call()
    use().send(box, peer, payload, call_site())


def recv(box: Any, peer: int) -> bytearray:
    _world_call()
    return use().recv(box, peer, call_site())
