"""The shim's APIs reach the world through here: the installed runtime, marked
as used whenever an API touches it. Knows nothing of faults or checkers."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from torch_xla._internal import runtime as _runtime

_SHIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def profile() -> str:
    """The installed runtime's API profile; the shim alone is torch_xla 2.9 (``current``)."""
    runtime = _runtime.installed()
    return "current" if runtime is None else runtime.profile


def legacy_only(module: str, *functions: Callable[..., Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that shows ``functions`` under the ``legacy`` profile only.

    The names were removed from torch_xla after 2.0; asking at each lookup
    lets the runtime be installed after the module is imported.
    """
    table = {fn.__name__: fn for fn in functions}

    def __getattr__(name: str) -> Any:
        if name in table and profile() == "legacy":
            return table[name]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


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


def call_site() -> str | None:
    """``file:line in function`` of the user's code that called into the shim."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SHIM_DIR) and "/torch/" not in filename:
            return f"{os.path.basename(filename)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return None


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
