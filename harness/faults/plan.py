"""Faults and their triggers: exactly what goes wrong, where and when.

A ``FaultPlan`` is computed once, in the harness, from a scenario's typed
faults (or mappings, validated as a scenario's are) and the seed; every rank
receives the same plan and fires the faults whose triggers match its own
operations. Anything random (the byte offset of a torn write, the bytes of a
corruption) is drawn from a generator seeded here, so the same seed fires the
same faults at the same points.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.faults.kinds import FaultKind, ValidationError, explain, parse_fault
from harness.faults.trigger import PlanError, Trigger
from harness.filesystem.sandbox import Leftover
from harness.roles import Roles

__all__ = ["Fault", "FaultPlan", "PlanError", "make_plan"]


@dataclass(frozen=True)
class Fault:
    """One planned fault: what the scenario wrote, its trigger in this world,
    its place in the plan (it names the fault in the history) and its own seed."""

    spec: FaultKind = field(hash=False)
    trigger: Trigger = field(default_factory=Trigger)
    index: int = 0
    rng: int = 0

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def name(self) -> str:
        return f"{self.kind}#{self.index}"


@dataclass(frozen=True)
class FaultPlan:
    seed: int = 0
    faults: tuple[Fault, ...] = ()
    leftovers: tuple[Leftover, ...] = ()
    roles: Roles | None = None  # what the target does, for faults aimed at a role
    #: fault index -> why it cannot fire for this target (a role that resolved to nothing)
    unresolved: Mapping[int, str] = field(default_factory=dict)

    def for_rank(self, rank: int, host: int, life: int = 0) -> list[Fault]:
        return [f for f in self.faults if f.trigger.selects(rank, host, life)]

    def held_paths(self) -> list[str]:
        """Globs of paths whose visibility some fault controls: readers report access."""
        return [f.trigger.path or "*" for f in self.faults if f.spec.watched_path]


def check_fault(value: FaultKind | Mapping[str, Any], index: int = 0) -> FaultKind:
    """A typed fault as it is; a mapping validated as a scenario's fault, or a
    PlanError naming the key."""
    if isinstance(value, FaultKind):
        return value
    try:
        return parse_fault(value)
    except ValidationError as exc:
        message, loc = explain(exc.errors()[0])
        name = ".".join(str(p) for p in loc) or None
        raise PlanError(f"fault {index}: {message}" + (f" (field {name!r})" if name else ""),
                        str(loc[0]) if loc else None, index) from None


def check_fits(faults: Sequence[FaultKind | Mapping[str, Any]], *, world_size: int, hosts: int,
               home: str) -> None:
    """Raise ``PlanError`` (with the fault's index and field) for a fault whose trigger a
    world of ``world_size`` ranks on ``hosts`` hosts cannot meet: the check a scenario gets
    at load and against an overriding topology. The plan itself is made once, by the cell
    (``make_plan``), when the target's roles are known."""
    for index, value in enumerate(faults):
        spec = check_fault(value, index)
        try:
            spec.trigger(world_size, hosts, home, None)
        except PlanError as exc:
            raise PlanError(str(exc), exc.field, index) from None


def make_plan(faults: Sequence[FaultKind | Mapping[str, Any]], *, seed: int, world_size: int,
              hosts: int, home: str, roles: Roles | None = None) -> FaultPlan:
    """Plan the faults for a world; every random choice comes from ``seed``; a fault
    aimed at a role is aimed at what ``roles`` says the target does."""
    rng = random.Random(f"harness-faults-{seed}")
    planned: list[Fault] = []
    leftovers: list[Leftover] = []
    unresolved: dict[int, str] = {}
    for index, value in enumerate(faults):
        spec = check_fault(value, index)
        try:
            trigger = spec.trigger(world_size, hosts, home, roles)
        except PlanError as exc:
            raise PlanError(str(exc), exc.field, index) from None
        # One draw per fault, in order: this fault's own stream, stable under edits.
        fault = Fault(spec, trigger, index, rng.getrandbits(32))
        planned.append(fault)
        leftovers += spec.leftovers(fault, roles)
        why = spec.unresolved(trigger, roles)
        if why is not None:
            unresolved[index] = why
    return FaultPlan(seed=seed, faults=tuple(planned), leftovers=tuple(leftovers), roles=roles,
                     unresolved=unresolved)
