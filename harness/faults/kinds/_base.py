"""What every fault kind shares: its trigger fields, their bounds, and the
hooks the fault engine calls for every planned fault (each a no-op here).

A kind is one module of this package holding one subclass of ``FaultKind``:
its parameters with bounds on every number, the operations it fires at,
the facts the world and the sandbox need, and the hooks it overrides.
Triggers keep the YAML spellings (``rank`` or ``ranks``, ``occurrence`` or
``occurrences``...); caps: ranks and hosts below 65,536 and inside the world,
occurrences 1..10**6, after_ms 0..86,400,000 (the longest timeout, a day), lives 0..1,000.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.faults.trigger import FILE_OPS, OPS, PlanError, Trigger
from harness.filesystem.mounts import KERNEL_TREES as MACHINE_PATHS  # never sandboxed
from harness.filesystem.sandbox import Leftover
from harness.roles import MEANING, ROLES, Roles
from harness.vocabulary import MAX_TIMEOUT_MS, Expect

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault
    from harness.faults.seal import Sealing
    from harness.filesystem.files import ViewFile
    from harness.filesystem.resolution import Resolved
    from harness.history import Event

MAX_MS = MAX_TIMEOUT_MS  # the longest scenario timeout
MAX_BYTES = 2**40  # a terabyte: beyond any file a test writes


def _listed(value: Any) -> Any:
    """One value or a list of them, as a scenario file may spell either."""
    if isinstance(value, (int, str)):
        return [value]
    return list(value) if isinstance(value, tuple) else value


def _some(item: Any) -> Any:
    return Annotated[list[item], Field(min_length=1, max_length=10_000), BeforeValidator(_listed)]


Ranks = _some(Annotated[int, Field(ge=0, lt=65_536)])
Occurrences = _some(Annotated[int, Field(ge=1, le=10**6)])
Lives = _some(Annotated[int, Field(ge=0, le=1000)])
Ops = _some(Literal[OPS])
Glob = Annotated[str, Field(min_length=1, max_length=4096)]
Millis = Annotated[int, Field(ge=0, le=MAX_MS)]
MAX_CONTENT = 16 * 2**20  # 16 MiB: a config or a small checkpoint, not a dataset
Content = Annotated[str, Field(max_length=MAX_CONTENT)] | Annotated[bytes, Field(max_length=MAX_CONTENT)]


class FaultKind(BaseModel):
    """A fault as the scenario wrote it: its kind's parameters and its trigger."""

    # Validated where a scenario is read, never in the fork server or a rank (which only
    # unpickle them): each kind's schema is built on its first validation.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    kind: str
    rank: Ranks | None = None
    ranks: Ranks | None = None
    host: Ranks | None = None
    hosts: Ranks | None = None
    op: Ops | None = None
    role: Literal[ROLES] | None = None  # what the target does with the path (see harness.roles)
    path: Glob | None = None  # a glob on the virtual path: absolute, ~ or *
    tag: Glob | None = None  # a glob on a collective's op name or tag
    occurrence: Occurrences | None = None
    occurrences: Occurrences | None = None
    after_ms: Millis | None = None
    life: Lives | None = None
    lives: Lives | None = None

    #: The operations it fires at: a trigger naming another would never fire.
    ops: ClassVar[tuple[str, ...]] = ()
    #: It may fire on a timer (after_ms) rather than at an operation.
    timed: ClassVar[bool] = False
    #: It fires inside the sandboxed filesystem view.
    needs_sandbox: ClassVar[bool] = False
    #: Its rank's life ends when it fires; ``restarts``: the rank comes back.
    ends_life: ClassVar[bool] = False
    restarts: ClassVar[bool] = False
    #: Its rank blocks forever when it fires.
    holds_forever: ClassVar[bool] = False
    #: Its rank blocks until every other one waits on another (the world says when).
    holds_for_others: ClassVar[bool] = False
    #: Readers of its path report their access (the coordinator times visibility by it).
    watched_path: ClassVar[bool] = False
    #: A content fault: decided at a writer's open, applied at close in this order.
    close_order: ClassVar[int | None] = None
    #: It shows what is seen between a write's open and its close (an empty file): a write
    #: that shows up whole, in one step (a linked ``O_TMPFILE``), has no such moment.
    in_between: ClassVar[bool] = False
    #: A write it holds back stays held when its writer renames it: the new name shows it
    #: when the hold ends (a late write is late under any name; an empty window is not:
    #: a staging file's window is over when it is renamed).
    follows_rename: ClassVar[bool] = False
    #: It needs the simulator's coordinator (a write held and published later, by what the
    #: other ranks do): a pod has none.
    needs_coordinator: ClassVar[bool] = False
    #: What ``harness explore`` draws for each parameter, simplest first (the shrinker
    #: goes toward the first); a parameter not named keeps its default.
    search: ClassVar[Mapping[str, tuple[Any, ...]]] = {}
    #: Why the explorer never draws this kind ("": it does).
    unsearchable: ClassVar[str] = ""
    #: No code can do better than fail loudly under it (a rank ends for good or raises).
    breaks_the_run: ClassVar[bool] = False
    #: A transient error, which ``search`` keeps short enough for a retry to get through:
    #: two of it at the same files add up to an outage code can at best report.
    transient: ClassVar[bool] = False

    @classmethod
    def expectation(cls, role: str | None = None) -> Expect:
        """What correct code can at best do under this fault (aimed at files of ``role``):
        a scenario's ``expect``."""
        ends = (cls.ends_life and not cls.restarts) or cls.holds_forever or cls.breaks_the_run
        return Expect.FAIL_LOUDLY if ends else Expect.PASS

    def off_pod(self) -> str | None:
        """Why this fault cannot act on a real pod (None: it can). A pod's ranks have the
        fault engine at their start, collectives, timers and file operations (the view over
        the pod's own files), but no coordinator and no world that restarts them."""
        if self.needs_coordinator:
            return ("it holds a write back and publishes it by what the other ranks do, which "
                    "only the simulator's coordinator sees")
        if self.restarts:
            return "a pre-empted rank comes back only in the simulator, whose world restarts it"
        return None

    def at_files(self) -> bool:
        """Can it fire at a file operation (the rank then needs the filesystem view)?"""
        ops = self.op or list(self.ops)
        return self.needs_sandbox or self.role is not None or self.path is not None or (
            self.after_ms is None and any(op in FILE_OPS or op == "close" for op in ops))

    @model_validator(mode="before")
    @classmethod
    def _null_is_left_out(cls, data: Any) -> Any:
        """``op: null`` in YAML means no op, as if the key were not written; a required
        field written as null is then reported missing, by its name."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k not in cls.model_fields}
        return data

    @field_validator("op")
    @classmethod
    def _fires_at(cls, ops: list[str]) -> list[str]:
        never = [o for o in ops if o not in cls.ops]
        if never and not cls.ops:
            raise ValueError(f"{cls._name()} fires at no operation: leave op out")
        if never:
            raise ValueError(f"{cls._name()} never fires at {never[0]!r}: use one of "
                             f"{', '.join(cls.ops)}")
        return ops

    @field_validator("path")
    @classmethod
    def _path(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is None:  # a placed file's, validated by default: it needs a path or a role
            if info.data.get("role") is None:
                raise ValueError("needs a path or a role: where the file is placed")
            return None
        if info.data.get("role") is not None:
            raise ValueError("give path or role, not both")
        if set(cls.ops) <= {"collective"} and not issubclass(cls, Placed):
            raise ValueError(f"{cls._name()} never fires at a file: a path matches none")
        if "\0" in path:
            raise ValueError("path must not contain a NUL byte")
        if not path.startswith(("/", "~/", "*")) and path != "~":
            raise ValueError(f"path must be absolute (or start with ~/ or *), got {path!r}")
        if "/../" in path + "/" or path.endswith("/.."):
            raise ValueError(f"path must not climb with '..': {path!r}")
        return path

    @field_validator("role")
    @classmethod
    def _role(cls, role: str) -> str:
        if set(cls.ops) <= {"collective"} and not issubclass(cls, Placed):
            raise ValueError(f"{cls._name()} never fires at a file: a role names files")
        return role

    @field_validator("tag")
    @classmethod
    def _at_collectives(cls, tag: str) -> str:
        if "collective" not in cls.ops:
            raise ValueError(f"{cls._name()} never fires at a collective: a tag matches none")
        return tag

    @field_validator("occurrence", "occurrences")
    @classmethod
    def _counted(cls, value: list[int]) -> list[int]:
        if not cls.ops:
            raise ValueError(f"{cls._name()} fires at no operation: there is nothing to count")
        return value

    @classmethod
    def _name(cls) -> str:
        return str(cls.model_fields["kind"].default)

    @field_validator("after_ms")
    @classmethod
    def _timed(cls, value: int) -> int:
        if not cls.timed:
            raise ValueError(f"after_ms is a trigger of kill and preempt only ({cls._name()} fires at "
                             "an operation or a collective: use op, path or tag)")
        return value

    @field_validator("ranks", "hosts", "occurrences", "lives")
    @classmethod
    def _one_spelling(cls, value: Any, info: ValidationInfo) -> Any:
        single = {"occurrences": "occurrence", "lives": "life"}.get(info.field_name,
                                                                   info.field_name[:-1])
        if info.data.get(single) is not None:
            raise ValueError(f"give {single} or {info.field_name}, not both")
        return value

    # -- the plan --------------------------------------------------------------------
    def trigger(self, world_size: int, hosts: int, home: str,
                roles: Roles | None = None) -> Trigger:
        """The trigger in the world it will run in: ranks and hosts inside it, ~ expanded,
        a role resolved to what this target does (``roles``; none known: it matches nothing)."""
        ranks = self.ranks or self.rank
        host_list = self.hosts or self.host
        for r in ranks or ():
            if r >= world_size:
                raise PlanError(f"rank {r} is outside a world of {world_size} ranks",
                                "ranks" if self.ranks else "rank")
        for h in host_list or ():
            if h >= hosts:
                raise PlanError(f"host {h} is outside a world of {hosts} hosts",
                                "hosts" if self.hosts else "host")
        path = self.path
        if path is not None and path.startswith("~"):
            path = home + path[1:]
        if path is not None and not path.startswith("*"):
            path = posixpath.normpath(path)
        paths = None if self.role is None else self.role_paths(roles or Roles(), self.role)
        return Trigger(ranks=_tuple(ranks), hosts=_tuple(host_list), op=_tuple(self.op),
                       path=path, paths=paths, tag=self.tag,
                       occurrences=_tuple(self.occurrences or self.occurrence),
                       after_ms=self.after_ms, lives=_tuple(self.lives or self.life))

    def role_paths(self, roles: Roles, role: str) -> tuple[str, ...]:
        """What a trigger on ``role`` matches: its files and their staging names."""
        return roles.globs(role)

    def unresolved(self, trigger: Trigger, roles: Roles | None) -> str | None:
        """Why this fault cannot fire for this target (None: it can)."""
        if self.role is not None and not trigger.paths:
            if roles is None:
                return f"role {self.role} is unknown: the target's fault-free run was not recorded"
            return f"role {self.role} resolved to nothing: the target has no {MEANING[self.role]}"
        return None

    def leftovers(self, fault: Fault, roles: Roles | None = None) -> list[Leftover]:
        """Files placed in the sandbox before any rank starts."""
        return []

    def occurs(self, count: int) -> bool:
        """Fires at the ``count``-th match when the trigger names no occurrence."""
        return True

    def without_effect(self, fired: Event, history: Sequence[Event],
                       world_size: int) -> str | None:
        """Why this fault, fired as ``fired``, changed nothing any rank observed (None: it
        did, or may have): such a fault does not count as fired (``not_exercised``). Here: a
        write it held back that its writer renamed away before it was published (a staging
        file's hold, or empty window, that no reader could see)."""
        path = fired.detail.get("path")
        for e in history:
            if e.kind == "publish" and e.rank == fired.rank and e.t >= fired.t \
                    and e.detail.get("path") == path and e.detail.get("gone"):
                return (f"rank {fired.rank} renamed its write of {path} before the hold ended: "
                        f"the name it gave it showed the whole file at once")
        return None

    # -- hooks the fault engine calls ----------------------------------------------------
    def notice_grace(self) -> float | None:
        """When it fires, the world seconds between the notice it gives its rank's host
        (SIGTERM to every process of it) and the hard stop; None: it gives none."""
        return None

    def at_start(self, engine: FaultEngine, fault: Fault, seed: int) -> int:
        """As the rank starts: may set its environment or timers; returns its generators' seed."""
        return seed

    def before(self, engine: FaultEngine, fault: Fault, op: str, r: Resolved,
               r2: Resolved | None = None) -> None:
        """Before a file operation (``r2``: a rename's or link's new name): may raise,
        delay or end the rank."""

    def on_write(self, engine: FaultEngine, fault: Fault, r: Resolved, f: ViewFile,
                 data: memoryview) -> memoryview:
        """A write's bytes: may shorten them, raise or end the rank."""
        return data

    def at_close(self, engine: Sealing, fault: Fault, r: Resolved, data: bytes) -> bytes | None:
        """A faulted write closed: the bytes to publish, or None when withheld."""
        return data

    def at_collective(self, engine: FaultEngine, fault: Fault, shown: str) -> None:
        """Before a collective its trigger matched: may delay, block or end the rank."""


def _tuple(values: list[Any] | None) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


class Placed(FaultKind):
    """A kind that places a file at an exact ``path`` (or at each file of a ``role``)
    before any rank starts."""

    path: Glob | None = Field(default=None, validate_default=True)
    content: Content = ""

    def role_paths(self, roles: Roles, role: str) -> tuple[str, ...]:
        return roles.paths(role)  # a file is placed at a name, not at a pattern

    def places(self, trigger: Trigger) -> tuple[str, ...]:
        """Every path it places a file at."""
        return trigger.paths if trigger.paths is not None else (trigger.path or "",)

    @field_validator("path")
    @classmethod
    def _exact(cls, path: str | None) -> str | None:
        if path is None:
            return None
        if any(c in path for c in "*?["):
            raise ValueError(f"needs an exact path, not a glob: {path!r}")
        machine = next((m for m in MACHINE_PATHS if posixpath.normpath(path).startswith(m + "/")
                        or posixpath.normpath(path) == m), None)
        if machine is not None:
            raise ValueError(f"cannot place a file under {machine}: it is the machine's own")
        return path

    def content_bytes(self) -> bytes:
        return self.content.encode() if isinstance(self.content, str) else self.content
