"""The messages units send the harness, decoded and checked in one place.

A frame's header is a JSON object whose ``type`` names one of the messages
below; ``decode`` turns it into that message's dataclass, checking every
field's type, or raises ``ProtocolError``. Bytes that must travel (a tensor,
a pickled return value or exception) are the frame's payload, never the header.
Nothing a rank sends is unpickled by the harness (a return value is, on first
use of ``RankResult.value``, by the caller who asked for it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any


class ProtocolError(ValueError):
    """A frame that is not a well-formed message."""


# -- the messages ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Hello:
    role: str  # rank | host | leader
    id: int
    channel: str  # call | control | leader
    pid: int | None = None


@dataclass(frozen=True, slots=True)
class Collective:
    """The k-th collective call of a rank (the coordinator matches it with step k)."""

    op: str
    kind: str  # gather_bytes | gather | reduce | broadcast | permute
    tag: str | None = None
    site: str | None = None
    guarded: bool = True
    tensors: list[list[Any]] = field(default_factory=list)  # [dtype, shape, nbytes] each
    reduce: str | None = None
    groups: list[list[int]] | None = None
    root: int | None = None
    pairs: list[list[int]] | None = None
    payload: bytes | bytearray = b""


@dataclass(frozen=True, slots=True)
class Send:
    box: str  # the mailbox: sender and receiver name it the same way
    peer: int
    site: str | None = None
    payload: bytes | bytearray = b""


@dataclass(frozen=True, slots=True)
class Recv:
    box: str
    peer: int
    site: str | None = None
    guarded: bool = True


@dataclass(frozen=True, slots=True)
class Result:
    """How the target ended; the payload is its pickled value (ok) or exception."""

    ok: bool
    value_repr: str | None = None
    pickle_error: str | None = None
    exit_code: int | None = None
    error: dict[str, str] | None = None  # type, message, traceback
    payload: bytes | bytearray = b""


@dataclass(frozen=True, slots=True)
class Promote:
    rank: int


@dataclass(frozen=True, slots=True)
class Stacks:
    stacks: str = ""


@dataclass(frozen=True, slots=True)
class RankExit:
    rank: int
    status: int


@dataclass(frozen=True, slots=True)
class Fault:
    fault: str  # the kind
    index: int | None = None
    op: str | None = None
    path: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Hold:
    """A write the consistency model keeps invisible until ``until``."""

    src: str
    dst: str
    path: str
    until: str  # read | done | time
    writer: int | None = None
    delay_ms: int = 0
    copy: bool = False
    fault: str | None = None


@dataclass(frozen=True, slots=True)
class FsAccess:
    path: str


@dataclass(frozen=True, slots=True)
class Started:
    units: list[list[Any]]  # [pid, role, ident] each


@dataclass(frozen=True, slots=True)
class Exited:
    pid: int
    status: int
    unit: list[Any] | None = None  # [role, ident]


@dataclass(frozen=True, slots=True)
class Done:
    leftovers: int = 0


Message = (Hello | Collective | Send | Recv | Result | Promote | Stacks | RankExit | Fault | Hold
           | FsAccess | Started | Exited | Done)


# -- field checks --------------------------------------------------------------------

Check = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return type(v) is int


def _str(v: Any) -> bool:
    return type(v) is str


def _bool(v: Any) -> bool:
    return type(v) is bool


def _num(v: Any) -> bool:
    return type(v) in (int, float)


def _dict(v: Any) -> bool:
    return type(v) is dict


def _opt(check: Check) -> Check:
    return lambda v: v is None or check(v)


def _list(check: Check) -> Check:
    return lambda v: type(v) is list and all(check(x) for x in v)


def _tensor(v: Any) -> bool:
    return (type(v) is list and len(v) == 3 and _str(v[0]) and _list(_int)(v[1])
            and _int(v[2]) and v[2] >= 0)


def _error(v: Any) -> bool:
    return _dict(v) and all(_str(v.get(k)) for k in ("type", "message")) \
        and _opt(_str)(v.get("traceback"))


def _pair(v: Any) -> bool:
    return type(v) is list and len(v) == 2 and _int(v[0]) and _int(v[1])


def _unit(v: Any) -> bool:
    return type(v) is list and len(v) == 2 and _str(v[0]) and _int(v[1])


def _started_unit(v: Any) -> bool:
    return type(v) is list and len(v) == 3 and _int(v[0]) and _str(v[1]) and _int(v[2])


_ints, _opt_str = _list(_int), _opt(_str)
#: type -> (message class, its fields: name -> check; a field without a default is required)
_SCHEMAS: dict[str, tuple[type, dict[str, Check]]] = {
    "hello": (Hello, {"role": _str, "id": _int, "channel": _str, "pid": _opt(_int)}),
    "collective": (Collective, {
        "op": _str, "kind": _str, "tag": _opt_str, "site": _opt_str, "guarded": _bool,
        "tensors": _list(_tensor), "reduce": _opt_str, "groups": _opt(_list(_ints)),
        "root": _opt(_int), "pairs": _opt(_list(_pair))}),
    "send": (Send, {"box": _str, "peer": _int, "site": _opt_str}),
    "recv": (Recv, {"box": _str, "peer": _int, "site": _opt_str, "guarded": _bool}),
    "result": (Result, {"ok": _bool, "value_repr": _opt_str, "pickle_error": _opt_str,
                        "exit_code": _opt(_int), "error": _opt(_error)}),
    "promote": (Promote, {"rank": _int}),
    "stacks": (Stacks, {"stacks": _str}),
    "rank-exit": (RankExit, {"rank": _int, "status": _int}),
    "fault": (Fault, {"fault": _str, "index": _opt(_int), "op": _opt_str, "path": _opt_str,
                      "detail": _dict}),
    "hold": (Hold, {"src": _str, "dst": _str, "path": _str, "until": _str,
                    "writer": _opt(_int), "delay_ms": _num, "copy": _bool, "fault": _opt_str}),
    "fs-access": (FsAccess, {"path": _str}),
    "started": (Started, {"units": _list(_started_unit)}),
    "exited": (Exited, {"pid": _int, "status": _int, "unit": _opt(_unit)}),
    "done": (Done, {"leftovers": _int}),
}
_WITH_PAYLOAD = (Collective, Send, Result)


def _required(cls: type, checks: dict[str, Check]) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls)  # type: ignore[arg-type]
                     if f.name in checks and f.default is MISSING and f.default_factory is MISSING)


_REQUIRED = {name: _required(cls, checks) for name, (cls, checks) in _SCHEMAS.items()}


def decode(head: bytes | bytearray, payload: bytes | bytearray = b"") -> Message:
    """The message a frame carries, every field checked; ``ProtocolError`` if it is none."""
    try:
        header = json.loads(head)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"a header that is not JSON ({exc})") from None
    if type(header) is not dict:
        raise ProtocolError(f"a header that is not a JSON object but {type(header).__name__}")
    kind = header.pop("type", None)
    entry = _SCHEMAS.get(kind) if type(kind) is str else None
    if entry is None:
        raise ProtocolError(f"a message of unknown type {kind!r}")
    cls, checks = entry
    values: dict[str, Any] = {}
    for name, value in header.items():
        check = checks.get(name)
        if check is None:
            continue  # a field nobody reads (a collective's api=, dim=, ...)
        if not check(value):
            raise ProtocolError(f"a {kind} message whose {name!r} is {_short(value)}")
        values[name] = value
    missing = _REQUIRED[kind] - values.keys()
    if missing:
        raise ProtocolError(f"a {kind} message without {', '.join(sorted(missing))}")
    if payload and cls in _WITH_PAYLOAD:
        values["payload"] = payload
    return cls(**values)


def _short(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
