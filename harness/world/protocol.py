"""The messages units send the harness, decoded and checked in one place.

A frame's header is a JSON object whose ``type`` names one of the messages
below; ``decode`` turns it into that message's dataclass, checking every
field's type, or raises ``ProtocolError``. Bytes that must travel (a tensor,
a pickled return value or exception) are the frame's payload, never the header.
Nothing a rank sends is unpickled by the harness (a return value is, on first
use of ``RankResult.value``, by the caller who asked for it).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from harness.rank import wire


class ProtocolError(ValueError):
    """A frame that is not a well-formed message."""


# -- the messages ----------------------------------------------------------------

@dataclass(slots=True)
class Hello:
    role: str  # rank | host | leader
    id: int
    channel: str  # call | control | leader
    pid: int | None = None
    secret: str = field(default="", repr=False)  # the world's (``knows_secret``)


def knows_secret(hello: Hello, secret: str) -> bool:
    """Does ``hello`` carry its world's secret (``WorldSpec.secret``)? Anyone on the
    machine may find the world's socket and say hello as any rank, the leader included;
    only the world's own processes were handed the secret. Compared in constant time."""
    said = hello.secret.encode("utf-8", "surrogatepass")
    return bool(secret) and hmac.compare_digest(said, secret.encode())


@dataclass(slots=True)
class Collective:
    """The k-th collective call of a rank (the coordinator matches it with step k).

    ``idle``, on this and every request whose reply wakes its thread (``Send``,
    ``Recv``): the rank's word to the world clock when this wait left none of its
    threads running (``{"seen": wakes taken, "wake": its earliest wake-up or None}``),
    carried in the request so that nothing can come between them."""

    op: str
    kind: str  # gather_bytes | gather | reduce | broadcast | permute
    tag: str | None = None
    site: str | None = None
    idle: dict[str, Any] | None = None
    tensors: list[list[Any]] = field(default_factory=list)  # [dtype, shape, nbytes] each
    reduce: str | None = None
    groups: list[list[int]] | None = None
    root: int | None = None
    pairs: list[list[int]] | None = None
    #: a torch.distributed process group's (``world/groups.py``): its collectives are a
    #: sequence of their own among ``groups[0]``, the members, apart from the XLA runtime's
    group: str | None = None
    #: the wait's limit in world milliseconds (a process group's timeout); None: none
    timeout_ms: int | None = None
    req: int | None = None  # the request's number: its reply carries it (``Channel``)
    payload: bytes | bytearray = b""


@dataclass(slots=True)
class StoreOp:
    """An operation on a torch.distributed store the world keeps (``world/stores.py``):
    ``set``, ``get``, ``add``, ``compare_set``, ``wait``, ``check``, ``delete``,
    ``num_keys``. ``get`` and ``wait`` block, on the world's clock, until their keys are
    set or ``timeout_ms`` passes. A value travels as the payload (``compare_set``'s
    expected value first, ``split`` bytes long)."""

    store: str
    op: str
    keys: list[str] = field(default_factory=list)
    amount: int = 0
    split: int = 0
    site: str | None = None
    idle: dict[str, Any] | None = None
    timeout_ms: int | None = None
    req: int | None = None
    payload: bytes | bytearray = b""


@dataclass(slots=True)
class SyncPoint:
    """The XLA runtime's preemption sync manager (``world/preemption.py``): ``activate``
    (it catches SIGTERM from now), ``deactivate`` (it no longer does: shut down, or the
    target set its own handler), ``reached`` (is ``step`` the sync point?)."""

    op: str
    step: int = 0
    site: str | None = None
    idle: dict[str, Any] | None = None
    req: int | None = None


@dataclass(slots=True)
class Send:
    box: str  # the mailbox: sender and receiver name it the same way
    peer: int
    site: str | None = None
    idle: dict[str, Any] | None = None
    req: int | None = None
    payload: bytes | bytearray = b""


@dataclass(slots=True)
class Recv:
    box: str
    peer: int
    site: str | None = None
    idle: dict[str, Any] | None = None
    req: int | None = None


@dataclass(slots=True)
class Idle:
    """Every thread of the unit waits in a wait the world clock knows: it has taken
    ``seen`` of the wakes sent to it, and wants waking at world time ``wake`` (ns from
    the world's start; None: only another unit, or nothing, can wake it)."""

    seen: int
    wake: int | None = None
    #: the wake is a turn before this file operation (``RankClock.turn``): op, path, where;
    #: ``until: others-wait``: granted only once every other unit waits on another
    turn: dict[str, str] | None = None


@dataclass(slots=True)
class Forked:
    """The unit started a process of its own (``os.fork``, ``subprocess``...)."""


@dataclass(slots=True)
class Networked:
    """The unit used an IP socket, under Python isolation the machine's network
    (``rank/network.py``)."""


@dataclass(slots=True)
class Result:
    """How the target ended; the payload is its pickled value (ok) or exception."""

    ok: bool
    value_repr: str | None = None
    pickle_error: str | None = None
    exit_code: int | None = None
    error: dict[str, str] | None = None  # type, message, traceback
    imported: list[str] | None = None  # record_files: modules the rank imported after its fork
    invalid: str | None = None  # what the world's checker refused in the value (None: nothing)
    value_note: str | None = None  # how the value was sent when not as it is (values.encode)
    payload: bytes | bytearray = b""


@dataclass(slots=True)
class Promote:
    rank: int


@dataclass(slots=True)
class Stacks:
    stacks: str = ""


@dataclass(slots=True)
class RankExit:
    rank: int
    status: int


@dataclass(slots=True)
class Spawning:
    """An exec-mode launcher's word on its ``xmp.spawn``: it forked ``ranks`` and waits for
    them; or (``single``) it runs the function itself, as a world of one (``nprocs=1``),
    and starts no rank."""

    ranks: list[int] = field(default_factory=list)
    single: bool = False


@dataclass(slots=True)
class Fault:
    fault: str  # the kind
    index: int | None = None
    op: str | None = None
    path: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Step:
    """A training step's marker (``torch_xla.sync``, ``mark_step``): the history counts them."""


@dataclass(slots=True)
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


@dataclass(slots=True)
class HoldMoved:
    """Its writer renamed a held write (``path``) to ``to`` (on the disk: ``dst``): the hold
    follows it, and the new name shows the write when the hold's condition holds."""

    path: str
    to: str
    dst: str


@dataclass(slots=True)
class Seal:
    """A faulted write was closed: the harness applies its content faults (``faults``,
    indices of the plan) to the file staged at ``staging`` (``harness.faults.seal``)."""

    path: str
    staging: str
    upper: str
    faults: list[int]
    model_staging: str | None = None
    req: int | None = None


@dataclass(slots=True)
class FsAccess:
    path: str


@dataclass(slots=True)
class Touch:
    """A rank did ``op`` on ``path`` (and ``dst``, a rename's), in its turn: what the
    world's race finder (``world/races.py``) reads, in every world."""

    op: str
    path: str
    where: str = "shared"  # whose file: its mount's scope key (``shared``, ``host-N``)
    dst: str | None = None
    line: str | None = None  # ``file:line in function`` of the target's code that made it


@dataclass(slots=True)
class FileOp:
    """One file operation a rank made through the view (``record_files``)."""

    op: str  # open-read | open-write | write | fsync | close | rename | link | remove | stat
    #          | listdir | mkdir | rmdir
    path: str
    ok: bool
    errno: int | None = None  # when not ok
    dst: str | None = None  # a rename's, a link's
    size: int | None = None  # a writer's close: the bytes the file holds; a write's: its bytes
    count: int | None = None  # a stat or listdir repeated this many more times
    offset: int | None = None  # a write's: where in the file it starts
    trunc: bool | None = None  # an open-write's: it truncated the file (O_TRUNC)
    append: bool | None = None  # an open-write's: it only adds to the file (O_APPEND)
    new: bool | None = None  # an open-write's: the file did not exist before
    dir: bool | None = None  # an fsync's: of a directory
    line: str | None = None  # ``file:line in function`` of the target's code that made it


@dataclass(slots=True)
class Started:
    units: list[list[Any]]  # [pid, role, ident] each
    #: kernel isolation: [host, fd] each, the leader's descriptor of that host's root
    roots: list[list[int]] | None = None


@dataclass(slots=True)
class Exited:
    pid: int
    status: int
    unit: list[Any] | None = None  # [role, ident]


@dataclass(slots=True)
class Done:
    leftovers: int = 0
    #: the leader waited until it had no child left: nothing of the world runs (every
    #: orphan of the world was its child, a subreaper's); else the harness sweeps for it
    clean: bool = False


Message = (Hello | Collective | StoreOp | SyncPoint | Send | Recv | Idle | Forked | Result
           | Promote | Stacks | RankExit | Spawning | Fault | Step | Hold | Seal | FsAccess
           | Touch | FileOp | Started | Exited | Done)


# -- field checks --------------------------------------------------------------------

Check = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return type(v) is int


def _str(v: Any) -> bool:
    return type(v) is str


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


def _root(v: Any) -> bool:
    return type(v) is list and len(v) == 2 and _int(v[0]) and _int(v[1])


def _doing(v: Any) -> bool:
    """A turn's operation: ``{"op", "path", "where"}``, a rename's ``dst`` and a slow
    writer's ``until`` (``slow-write``), all strings."""
    return _dict(v) and {"op", "path", "where"} <= v.keys() <= {"op", "path", "where", "dst",
                                                                "until"} \
        and all(_str(x) for x in v.values())


def _idle_word(v: Any) -> bool:
    return _dict(v) and v.keys() <= {"seen", "wake", "turn"} and _int(v.get("seen")) \
        and v["seen"] >= 0 and _opt(_int)(v.get("wake")) and _opt(_doing)(v.get("turn"))


# A check is a tuple of the exact types a value may have (the fast, common case)
# or a function of the value.
_S, _I, _B, _N = (str,), (int,), (bool,), type(None)
_S0, _I0 = (str, _N), (int, _N)
_ints = _list(_int)
#: type -> (message class, its fields: name -> check; a field without a default is required)
_SCHEMAS: dict[str, tuple[type, dict[str, Any]]] = {
    "hello": (Hello, {"role": _S, "id": _I, "channel": _S, "pid": _I0, "secret": _S}),
    "collective": (Collective, {
        "op": _S, "kind": _S, "tag": _S0, "site": _S0, "idle": _opt(_idle_word),
        "tensors": _list(_tensor), "reduce": _S0, "groups": _opt(_list(_ints)),
        "root": _I0, "pairs": _opt(_list(_pair)), "group": _S0, "timeout_ms": _I0, "req": _I0}),
    "store": (StoreOp, {"store": _S, "op": _S, "keys": _list(_str), "amount": _I, "split": _I,
                        "site": _S0, "idle": _opt(_idle_word), "timeout_ms": _I0,
                        "req": _I0}),
    "sync-point": (SyncPoint, {"op": _S, "step": _I, "site": _S0, "idle": _opt(_idle_word),
                               "req": _I0}),
    "send": (Send, {"box": _S, "peer": _I, "site": _S0, "idle": _opt(_idle_word), "req": _I0}),
    "recv": (Recv, {"box": _S, "peer": _I, "site": _S0, "idle": _opt(_idle_word), "req": _I0}),
    "idle": (Idle, {"seen": _I, "wake": _I0, "turn": _opt(_doing)}),
    "forked": (Forked, {}),
    "networked": (Networked, {}),
    "result": (Result, {"ok": _B, "value_repr": _S0, "pickle_error": _S0,
                        "exit_code": _I0, "error": _opt(_error),
                        "imported": _opt(_list(_str)), "invalid": _S0,
                        "value_note": _S0}),
    "promote": (Promote, {"rank": _I}),
    "stacks": (Stacks, {"stacks": _S}),
    "rank-exit": (RankExit, {"rank": _I, "status": _I}),
    "spawning": (Spawning, {"ranks": _ints, "single": _B}),
    "fault": (Fault, {"fault": _S, "index": _I0, "op": _S0, "path": _S0, "detail": (dict,)}),
    "step": (Step, {}),
    "hold": (Hold, {"src": _S, "dst": _S, "path": _S, "until": _S, "writer": _I0,
                    "delay_ms": (int, float), "copy": _B, "fault": _S0}),
    "hold-moved": (HoldMoved, {"path": _S, "to": _S, "dst": _S}),
    "seal": (Seal, {"path": _S, "staging": _S, "upper": _S, "model_staging": _S0,
                    "faults": _ints, "req": _I0}),
    "fs-access": (FsAccess, {"path": _S}),
    "touch": (Touch, {"op": _S, "path": _S, "where": _S, "dst": _S0, "line": _S0}),
    "file-op": (FileOp, {"op": _S, "path": _S, "ok": _B, "errno": _I0, "dst": _S0,
                         "size": _I0, "count": _I0, "offset": _I0, "trunc": (bool, _N),
                         "append": (bool, _N), "new": (bool, _N), "dir": (bool, _N), "line": _S0}),
    "started": (Started, {"units": _list(_started_unit), "roots": _opt(_list(_root))}),
    "exited": (Exited, {"pid": _I, "status": _I, "unit": _opt(_unit)}),
    "done": (Done, {"leftovers": _I, "clean": _B}),
}
_WITH_PAYLOAD = (Collective, StoreOp, Send, Result)


def _required(cls: type, checks: dict[str, Any]) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls)  # type: ignore[arg-type]
                     if f.name in checks and f.default is MISSING and f.default_factory is MISSING)


_REQUIRED = {name: _required(cls, checks) for name, (cls, checks) in _SCHEMAS.items()}


def decode(head: bytes | bytearray, payload: bytes | bytearray = b"") -> Message:
    """The message a frame carries, every field checked; ``ProtocolError`` if it is none."""
    try:
        header = wire.decode(head)
    except wire.FrameError as exc:
        raise ProtocolError(str(exc)) from None
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
        if not (type(value) in check if type(check) is tuple else check(value)):
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
