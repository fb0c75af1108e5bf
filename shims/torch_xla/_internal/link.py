"""The shim's only link to the harness: which rank this is, and the
coordinator that carries its collectives. Knows nothing of faults or checkers."""

from __future__ import annotations

import os
import sys
from typing import Any

from harness.world import rank as _rank

_SHIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def profile() -> str:
    return os.environ.get("HARNESS_PROFILE", "current")


def context() -> _rank.RankContext:
    """This process as a rank; using the runtime in a launcher makes it one."""
    ctx = _rank.current()
    if ctx.role == "host":
        _rank.promote_host_to_rank()
    ctx.runtime_used = True
    return ctx


def world_size() -> int:
    return context().world_size


def ordinal() -> int:
    ctx = context()
    assert ctx.rank is not None
    return ctx.rank


def call_site() -> str | None:
    """``file:line in function`` of the user's code that called into the shim."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SHIM_DIR) and "/torch/" not in filename:
            return f"{os.path.basename(filename)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return None


def collective(op: str, kind: str, payload: Any = b"", **meta: Any) -> tuple[dict, bytearray]:
    """One step of the world's collective sequence; blocks until every rank arrives."""
    ctx = context()
    assert ctx.channel is not None
    _rank.before_collective(op, meta.get("tag"))
    header = {"type": "collective", "op": op, "kind": kind, "site": call_site(),
              "guarded": _rank.guarded(), **meta}
    return ctx.channel.request(header, payload)


def send(box: Any, peer: int, payload: Any) -> None:
    ctx = context()
    assert ctx.channel is not None
    ctx.channel.request({"type": "send", "box": box, "peer": peer, "site": call_site()}, payload)


def recv(box: Any, peer: int) -> bytearray:
    ctx = context()
    assert ctx.channel is not None
    _, data = ctx.channel.request({"type": "recv", "box": box, "peer": peer, "site": call_site(),
                                   "guarded": _rank.guarded()})
    return data
