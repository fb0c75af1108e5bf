"""Faults and their triggers: exactly what goes wrong, where and when.

A ``FaultPlan`` is computed once, in the harness, from a scenario's fault
specs and the seed; every rank receives the same plan and fires the faults
whose triggers match its own operations. Anything random (the byte offset
of a torn write, the bytes of a corruption) is drawn from a generator seeded
here, so the same seed fires the same faults at the same points.
"""

from __future__ import annotations

import fnmatch
import posixpath
import random
from dataclasses import dataclass, field
from typing import Any

from harness.filesystem.sandbox import Leftover

#: Filesystem primitives, fired by the rank's view.
FS_KINDS = {
    "torn-write": "readers see a prefix of what the writer wrote (offset from the seed)",
    "lost-write": "the writer's write succeeds but never becomes visible",
    "empty-window": "readers see the file created but empty until they have all looked",
    "corrupt": "readers see garbled bytes",
    "stale-leftover": "a file from a previous run is there before the world starts",
    "eio": "the first N attempts of an operation fail with EIO, then succeed",
    "enospc": "writes fail with ENOSPC once the file reaches K bytes",
    "permission-denied": "the file or directory belongs to another user",
    "latency": "an operation takes D ms",
    "hold-write": "the writer's write becomes visible only after the others have looked "
                  "(or have all finished)",
    "foreign-write": "another job writes the same path right after the writer (last one wins)",
}
#: Process primitives, fired by the rank's bootstrap and collective hooks.
PROCESS_KINDS = {
    "kill": "SIGKILL the rank at the trigger point",
    "preempt": "SIGKILL the rank at the trigger point and start it again with the same "
               "identity and host disk, as a pre-empted TPU VM comes back",
    "raise": "raise an exception in the rank at the trigger point",
    "straggle": "delay the rank before a collective",
    "never-arrive": "the rank blocks forever before a collective",
    "divergent-rng": "seed every rank's random generators differently",
    "env-skew": "set extra environment variables on some hosts",
}
KINDS = {**FS_KINDS, **PROCESS_KINDS}

#: Operations a trigger can name.
OPS = ("open-read", "open-write", "read", "write", "fsync", "close", "stat", "listdir",
       "mkdir", "remove", "rmdir", "rename", "chmod", "collective", "start")
_FILE_OPS = ("open-read", "open-write", "read", "write", "fsync", "stat", "listdir", "mkdir",
             "remove", "rmdir", "rename", "chmod")
#: The operations at which each kind can fire: a trigger naming another would never fire.
KIND_OPS = {
    "eio": ("open-read", "open-write", "read", "write", "fsync"),
    "enospc": ("write",),
    "latency": _FILE_OPS,
    "kill": _FILE_OPS + ("collective",),
    "preempt": _FILE_OPS + ("collective",),
    "raise": _FILE_OPS + ("collective",),
    "straggle": ("collective",),
    "never-arrive": ("collective",),
    **{k: ("close",) for k in ("torn-write", "lost-write", "corrupt", "empty-window", "hold-write",
                               "foreign-write")},
}


class PlanError(ValueError):
    """A fault spec that cannot be planned; ``field`` names the offending key."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Trigger:
    """Which ranks, which operation, which path or tag, which occurrences."""

    ranks: tuple[int, ...] | None = None
    hosts: tuple[int, ...] | None = None
    op: tuple[str, ...] | None = None
    path: str | None = None  # a glob on the virtual path
    tag: str | None = None  # a glob on a collective's op name or tag
    occurrences: tuple[int, ...] | None = None  # 1-based, counted per rank, fault and life
    after_ms: int | None = None  # time from the rank's start
    lives: tuple[int, ...] | None = None  # which incarnations (0 = first start) it fires in

    def selects(self, rank: int, host: int, life: int = 0) -> bool:
        return ((self.ranks is None or rank in self.ranks)
                and (self.hosts is None or host in self.hosts)
                and (self.lives is None or life in self.lives))

    def matches(self, op: str, path: str | None = None, tag: str | None = None) -> bool:
        if self.op is not None and op not in self.op:
            return False
        if self.path is not None and (path is None or not fnmatch.fnmatchcase(path, self.path)):
            return False
        if self.tag is not None and (tag is None or not fnmatch.fnmatchcase(tag, self.tag)):
            return False
        return True

    def describe(self) -> str:
        parts = []
        if self.ranks is not None:
            parts.append(f"ranks {','.join(map(str, self.ranks))}")
        if self.hosts is not None:
            parts.append(f"hosts {','.join(map(str, self.hosts))}")
        if self.op:
            parts.append("/".join(self.op))
        if self.path:
            parts.append(self.path)
        if self.tag:
            parts.append(f"tag {self.tag}")
        if self.occurrences:
            parts.append(f"occurrence {','.join(map(str, self.occurrences))}")
        if self.after_ms is not None:
            parts.append(f"after {self.after_ms} ms")
        return " ".join(parts) or "always"


@dataclass(frozen=True)
class Fault:
    kind: str
    trigger: Trigger = field(default_factory=Trigger)
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    index: int = 0  # position in the plan: names the fault in the history

    @property
    def name(self) -> str:
        return f"{self.kind}#{self.index}"


@dataclass(frozen=True)
class FaultPlan:
    seed: int = 0
    faults: tuple[Fault, ...] = ()
    leftovers: tuple[Leftover, ...] = ()

    def for_rank(self, rank: int, host: int, life: int = 0) -> list[Fault]:
        return [f for f in self.faults if f.trigger.selects(rank, host, life)]

    def held_paths(self) -> list[str]:
        """Globs of paths whose visibility some fault controls: readers report access."""
        return [f.trigger.path or "*" for f in self.faults
                if f.kind in ("hold-write", "empty-window", "stale-leftover")]


def _tuple(value: Any, name: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in value):
        return tuple(value)
    raise PlanError(f"{name} must be an integer or a list of integers, got {value!r}", name)


def make_trigger(spec: dict[str, Any], world_size: int, hosts: int, home: str) -> Trigger:
    ops = spec.get("op")
    if isinstance(ops, str):
        ops = (ops,)
    if ops is not None:
        bad = [o for o in ops if o not in OPS]
        if bad:
            raise PlanError(f"unknown op {bad[0]!r}: use one of {', '.join(OPS)}", "op")
        ops = tuple(ops)
    ranks = _tuple(spec.get("ranks", spec.get("rank")), "ranks")
    host_list = _tuple(spec.get("hosts", spec.get("host")), "hosts")
    for r in ranks or ():
        if not 0 <= r < world_size:
            raise PlanError(f"rank {r} is outside a world of {world_size} ranks", "ranks")
    for h in host_list or ():
        if not 0 <= h < hosts:
            raise PlanError(f"host {h} is outside a world of {hosts} hosts", "hosts")
    path = spec.get("path")
    if path is not None:
        if not isinstance(path, str):
            raise PlanError(f"path must be a string, got {path!r}", "path")
        if path.startswith("~"):
            path = home + path[1:]
        if not path.startswith(("/", "*")):
            raise PlanError(f"path must be absolute (or start with ~ or *), got {path!r}", "path")
        if "/../" in path + "/" or path.endswith("/.."):
            raise PlanError(f"path must not climb with '..': {path!r}", "path")
        path = path if path.startswith("*") else posixpath.normpath(path)
    occurrences = _tuple(spec.get("occurrence", spec.get("occurrences")), "occurrence")
    for o in occurrences or ():
        if o < 1:
            raise PlanError(f"occurrences count from 1, got {o}", "occurrence")
    after_ms = spec.get("after_ms")
    if after_ms is not None and (not isinstance(after_ms, int) or after_ms < 0):
        raise PlanError(f"after_ms must be a non-negative integer, got {after_ms!r}", "after_ms")
    lives = _tuple(spec.get("life", spec.get("lives")), "lives")
    for life in lives or ():
        if life < 0:
            raise PlanError(f"lives count from 0 (the first start), got {life}", "lives")
    tag = spec.get("tag")
    if tag is not None and not isinstance(tag, str):
        raise PlanError(f"tag must be a string (a glob), got {tag!r}", "tag")
    return Trigger(ranks=ranks, hosts=host_list, op=ops, path=path, tag=tag,
                   occurrences=occurrences, after_ms=after_ms, lives=lives)


_TRIGGER_KEYS = {"rank", "ranks", "host", "hosts", "op", "path", "tag", "occurrence",
                 "occurrences", "after_ms", "life", "lives"}


def make_plan(specs: list[dict[str, Any]], *, seed: int, world_size: int, hosts: int,
              home: str) -> FaultPlan:
    """Turn scenario fault specs into a plan; every random choice comes from ``seed``."""
    rng = random.Random(f"harness-faults-{seed}")
    faults: list[Fault] = []
    leftovers: list[Leftover] = []
    for index, spec in enumerate(specs):
        if not isinstance(spec, dict) or "kind" not in spec:
            raise PlanError(f"fault {index} must be a mapping with a 'kind'", "kind")
        kind = spec["kind"]
        if kind not in KINDS:
            raise PlanError(f"unknown fault kind {kind!r}: use one of {', '.join(sorted(KINDS))}",
                            "kind")
        trigger = make_trigger({k: v for k, v in spec.items() if k in _TRIGGER_KEYS},
                               world_size, hosts, home)
        params = {k: v for k, v in spec.items() if k not in _TRIGGER_KEYS and k != "kind"}
        params["rng"] = rng.getrandbits(32)  # this fault's own stream, stable under edits
        allowed = KIND_OPS.get(kind)
        if trigger.op is not None and allowed is not None:
            never = [o for o in trigger.op if o not in allowed]
            if never:
                raise PlanError(f"a {kind} never fires at {never[0]!r}: use one of "
                                f"{', '.join(allowed)}", "op")
        if trigger.after_ms is not None and kind not in ("kill", "preempt"):
            raise PlanError(f"after_ms is a trigger of kill and preempt only (a {kind} fires at an "
                            "operation or a collective: use op, path or tag)", "after_ms")
        if kind == "env-skew":
            env = params.get("env")
            if not isinstance(env, dict) or not env or not all(
                    isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in env.items()):
                raise PlanError(f"env-skew needs env: a mapping of variable names to values, "
                                f"got {env!r}", "env")
        _check_params(kind, params)
        if kind in ("stale-leftover", "permission-denied"):
            leftovers.append(_leftover(kind, trigger, params))
        faults.append(Fault(kind=kind, trigger=trigger, params=params, index=index))
    return FaultPlan(seed=seed, faults=tuple(faults), leftovers=tuple(leftovers))


#: Integer parameters: (kinds, name, smallest value).
_INT_PARAMS = (
    (("eio",), "count", 1), (("enospc",), "at_byte", 0), (("torn-write",), "offset", 0),
    (("corrupt",), "bytes", 1), (("latency", "straggle"), "delay_ms", 0),
    (("raise",), "errno", 1),
)
#: Exceptions a ``raise`` fault may name (builtins a target can meet).
RAISABLE = ("RuntimeError", "ValueError", "OSError", "KeyError", "TimeoutError",
            "AssertionError", "TypeError", "PermissionError", "FileNotFoundError")


def _check_params(kind: str, params: dict[str, Any]) -> None:
    """A parameter of the wrong type is refused here, naming it, rather than
    failing inside a rank where it would look like the target's fault."""
    for kinds, name, low in _INT_PARAMS:
        if kind in kinds and name in params:
            value = params[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise PlanError(f"{name} must be an integer >= {low}, got {value!r}", name)
    if kind == "raise":
        exc = params.get("exception", "RuntimeError")
        if exc not in RAISABLE:
            raise PlanError(f"exception {exc!r} is not one of {', '.join(RAISABLE)}", "exception")
        if exc in ("OSError", "PermissionError", "FileNotFoundError") and "errno" not in params:
            raise PlanError(f"a raised {exc} needs an errno (a real one always has one)", "errno")
    if kind == "hold-write" and params.get("until", "read") not in ("read", "done"):
        raise PlanError(f"until must be 'read' or 'done', got {params.get('until')!r}", "until")
    if kind == "permission-denied":
        mode = params.get("mode")
        if mode is not None:
            try:
                mode = int(mode, 8) if isinstance(mode, str) else int(mode)
            except (TypeError, ValueError):
                mode = -1
            if not 0 <= mode <= 0o7777:
                raise PlanError(f"mode must be an octal permission like '0600', got "
                                f"{params['mode']!r}", "mode")
        if not isinstance(params.get("directory", False), bool):
            raise PlanError("directory must be true or false", "directory")


def _leftover(kind: str, trigger: Trigger, params: dict[str, Any]) -> Leftover:
    if not trigger.path or any(c in trigger.path for c in "*?["):
        raise PlanError(f"{kind} needs an exact path, got {trigger.path!r}", "path")
    content = params.get("content", "")
    if not isinstance(content, (str, bytes)):
        raise PlanError(f"content must be text, got {type(content).__name__}", "content")
    data = content.encode() if isinstance(content, str) else content
    if kind == "stale-leftover":
        return Leftover(trigger.path, data, hosts=trigger.hosts)
    is_dir = bool(params.get("directory", False))
    mode = params.get("mode", 0o500 if is_dir else 0o600)
    if isinstance(mode, str):
        mode = int(mode, 8)
    return Leftover(trigger.path, data, is_dir=is_dir, owner_uid=1001, mode=mode,
                    hosts=trigger.hosts)
