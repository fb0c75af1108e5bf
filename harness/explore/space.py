"""The space a search draws fault plans from, as Hypothesis strategies.

A plan is a scenario with its faults, its topology and the consistency of the
directory it hands files over in, chosen for one target: the fault kinds' own
models say what can be drawn (their operations, their ``search`` choices), the
target's fault-free run says what can be aimed at (its roles), and the base
scenario gives everything else (the workload's inputs, its mounts, its
deadline). Every choice is drawn simplest first, so Hypothesis's shrinker moves
a failing plan toward fewer faults, lower ranks and occurrences, and the first
(smallest) topology.

Swarm-style (after FoundationDB): each example first draws the subset of kinds
it may use, so one example explores a few kinds hard rather than all of them
thinly.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from harness.faults.kinds import KINDS, FaultKind
from harness.faults.kinds._base import Placed
from harness.roles import ROLES, Roles, place_of
from harness.scenarios import Scenario
from harness.topology import get_topology
from harness.vocabulary import MAX_SEED, Expect
from harness.workloads.registry import WORKLOADS

#: The most faults one plan holds: most bugs need three or fewer (CrashMonkey/ACE).
MAX_FAULTS = 3
#: The operations a fault aimed at a file is drawn at, the classic crash point first.
FILE_STEPS = ("write", "open-write", "close", "fsync", "rename", "open-read", "read", "remove")
#: Occurrences drawn for a trigger (None, the default, comes first: every match).
OCCURRENCES = (1, 2, 3)
#: Consistencies a shared handoff directory is drawn with, the plain local disk first (the
#: base scenario's own mounts keep theirs: a gcsfuse bucket is what the user has).
CONSISTENCIES = ("local", "close-to-open", "delayed", "object")
#: Topologies a config handoff is drawn on, the smallest first: one host of two ranks,
#: then two hosts (each its own /tmp), then the catalog's own shapes.
DEFAULT_TOPOLOGIES = ("1x2", "2x1", "1x4", "single-host-8", "v4-64")
#: Orders of the ranks at one instant a fault-free plan is drawn with (0, the search's own
#: seed, first): its worlds run with the seed ``seed + order`` (``Plan.seed``), whose draw
#: decides which rank acts first whenever several are due at once (``world/clock.py``).
ORDERS = 16
#: How late a ``delayed`` mount shows a write to other hosts (as visibility-delay's 1.5 s).
DELAY_MS = 1500


@dataclass(frozen=True)
class Plan:
    """One fault plan: what a scenario file holds beyond the base scenario."""

    topology: str
    faults: tuple[Mapping[str, Any], ...] = ()
    #: a shared mount over the handoff directory with this consistency (None: none)
    shared_handoff: str | None = None
    #: which of the seeds after the search's own its worlds run with (0: that seed)
    order: int = 0

    def seed(self, base: int) -> int:
        """The seed the plan's worlds run with, whose order of ranks at each instant it is."""
        return (base + self.order) % (MAX_SEED + 1)

    def key(self) -> str:
        """A stable identity: the same plan always has the same key."""
        blob = json.dumps([self.topology, list(self.faults), self.shared_handoff]
                          + ([self.order] if self.order else []), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def expect(self) -> str:
        """What correct code can at best do under every fault of the plan (transient errors
        stacked at the same files last longer than any retry need outwait)."""
        worst = [KINDS[f["kind"]].expectation(f.get("role")) for f in self.faults]
        stacked = Counter((f["kind"], f.get("role"), f.get("path")) for f in self.faults
                          if KINDS[f["kind"]].transient)
        if any(n > 1 for n in stacked.values()):
            worst.append(Expect.FAIL_LOUDLY)
        # a plain string: it is written into a scenario file by yaml.safe_dump
        return (Expect.FAIL_LOUDLY if Expect.FAIL_LOUDLY in worst else Expect.PASS).value

    def scenario(self, base: Scenario, name: str, description: str, finding: str = "") -> dict[str, Any]:
        """The scenario file this plan is: ``base`` with the plan's topology, mounts and
        faults, and the expectation its faults allow."""
        mounts = [m.model_dump(exclude_defaults=True) for m in base.mounts]  # the base's own
        if self.shared_handoff is not None:
            spec = {"role": "handoff-dir", "scope": "shared", "consistency": self.shared_handoff}
            if self.shared_handoff == "delayed":
                spec["delay_ms"] = DELAY_MS
            mounts.append(spec)
        data: dict[str, Any] = {
            "name": name, "workload": base.workload, "description": description,
            "finding": finding, "topology": self.topology, "expect": self.expect,
            "profile": base.profile, "timeout": base.timeout, "mounts": mounts,
            "faults": [dict(f) for f in self.faults]}
        for key in ("inputs", "host_inputs"):
            if getattr(base, key):
                data[key] = getattr(base, key)
        if base.checker is not None:
            data["checker"] = base.checker
        return data

    def describe(self) -> str:
        """One line: the topology, the mounts drawn, each fault's kind and aim."""
        parts = [self.topology]
        if self.shared_handoff:
            parts.append(f"shared handoff-dir ({self.shared_handoff})")
        parts += [_fault_phrase(f) for f in self.faults] or ["no fault"]
        if self.order:
            parts.append(f"order {self.order} of the ranks at one instant")
        return "; ".join(parts)


def _fault_phrase(fault: Mapping[str, Any]) -> str:
    aim = [f"{k}={v}" for k, v in fault.items() if k != "kind"]
    return f"{fault['kind']}({', '.join(aim)})" if aim else fault["kind"]


@dataclass(frozen=True)
class Space:
    """What a search may draw for one target: kinds, aims, topologies and mounts."""

    base: Scenario
    roles: Roles
    topologies: tuple[str, ...]
    kinds: tuple[str, ...] = ()
    #: why each kind left out of the space is left out (for the report)
    left_out: Mapping[str, str] = field(default_factory=dict)
    #: the target's fault-free run made collective calls
    collectives: bool = True

    @classmethod
    def of(cls, base: Scenario, roles: Roles, topologies: Sequence[str] | None = None,
           kinds: Sequence[str] | None = None, collectives: bool = True) -> Space:
        """The space for a target with ``roles``, around ``base`` (its inputs and mounts);
        ``collectives``: its fault-free run made collective calls."""
        default = WORKLOADS[base.workload].explore_kinds
        chosen = list(kinds) if kinds is not None else _catalog_first(base.workload,
                                                                      default or KINDS)
        unknown = [k for k in chosen if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown fault kind {unknown[0]!r}: use one of {', '.join(KINDS)}")
        usable, left_out = [], {}
        alone = WORKLOADS[base.workload].restarts_alone
        for name in chosen:
            why = _why_not(KINDS[name], roles, alone, collectives)
            if why:
                left_out[name] = why
            else:
                usable.append(name)
        shapes = tuple(topologies) if topologies else _topologies_for(base)
        for name in shapes:
            get_topology(name)  # a ValueError names the known ones
        return cls(base, roles, shapes, tuple(usable), left_out, collectives)

    def fingerprint(self) -> str:
        """What the space is, for the example database's key: another space's saved
        examples are another search's."""
        blob = json.dumps([self.base.name, self.base.workload, self.topologies, self.kinds,
                           self.roles.to_dict()], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # -- strategies ------------------------------------------------------------------
    def plans(self) -> st.SearchStrategy[Plan]:
        return _plans(self)


def _catalog_first(workload: str, kinds: Sequence[str]) -> list[str]:
    """The kinds the workload's catalog uses first, in its order (what its authors met on
    pods is searched first), then the others."""
    from harness.scenarios import catalog

    used = dict.fromkeys(f.kind for s in catalog() if s.workload == workload for f in s.faults)
    rank = {kind: i for i, kind in enumerate(used)}
    return sorted(kinds, key=lambda k: (rank.get(k, len(rank)), k))


def _topologies_for(base: Scenario) -> tuple[str, ...]:
    """A workload whose base runs one rank per host (independent workers) keeps its shape;
    anything else is drawn over the default shapes, the smallest first."""
    topo = get_topology(base.topology)
    if topo.ranks_per_host == 1 and base.mounts:
        return (base.topology,)
    return DEFAULT_TOPOLOGIES


def _aims(kind: type[FaultKind], roles: Roles) -> list[tuple[str, str]]:
    """What a file fault of ``kind`` may aim at, for a target with ``roles``: each role it
    has, then (a fault that need not place a file at a name) the files of a role directory
    by directory, numbered directories as one (``tpu_*``), so that a checkpoint and the
    shards beside it in the role ``output`` can be told apart."""
    found = [r for r in ROLES if roles.paths(r)]
    if issubclass(kind, Placed):
        return [("role", r) for r in found if r != "handoff-dir"]  # a file, not a directory
    globs = dict.fromkeys(place_of(p) for r in ("handoff", "output", "state", "input")
                          for p in roles.paths(r))
    return [("role", r) for r in found] + [("path", g) for g in globs if g != "/*"]


def _why_not(kind: type[FaultKind], roles: Roles, restarts_alone: bool,
             collectives: bool) -> str:
    """Why the explorer cannot draw ``kind`` for this target ("" when it can)."""
    if kind.unsearchable:
        return kind.unsearchable
    if kind.restarts and not restarts_alone:
        return ("a rank of this workload never comes back alone: its ranks are joined by "
                "collectives, and a pre-empted VM takes its slice down with it")
    files = _at_files_only(kind) or any(op != "collective" for op in kind.ops)
    at_files = files and bool(_aims(kind, roles))
    at_collectives = "collective" in kind.ops and collectives
    if (files or "collective" in kind.ops) and not (at_files or at_collectives):
        where = " or ".join(w for w, has in (("files", files),
                                             ("collectives", "collective" in kind.ops)) if has)
        return f"it acts at {where}, and the target's fault-free run made none it could aim at"
    return ""


def _at_files_only(kind: type[FaultKind]) -> bool:
    return bool(kind.ops) and "collective" not in kind.ops or issubclass(kind, Placed)


@st.composite
def _plans(draw: st.DrawFn, space: Space) -> Plan:
    topology = draw(st.sampled_from(space.topologies))
    world = get_topology(topology).world_size
    faults: list[dict[str, Any]] = []
    if space.kinds:
        enabled = sorted(draw(st.sets(st.sampled_from(space.kinds), min_size=1)),
                         key=space.kinds.index)
        count = draw(st.integers(0, MAX_FAULTS))
        for _ in range(count):
            kind = KINDS[draw(st.sampled_from(enabled))]
            faults.append(draw(_fault(space, kind, world)))
        # no code survives losing every rank: a plan leaves at least one
        lost = {f["rank"] for f in faults if _ends_rank(KINDS[f["kind"]])}
        assume(len(lost) < world)
    shared = None
    if space.roles.paths("handoff-dir") and not space.base.mounts:
        shared = draw(st.none() | st.sampled_from(CONSISTENCIES))
    # the order of the ranks at one instant: drawn for a fault-free plan (a race that fails
    # on its own), so that a plan with faults is drawn and shrunk as it always was
    order = draw(st.integers(0, ORDERS - 1)) if not faults else 0
    return Plan(topology, tuple(faults), shared, order)


def _ends_rank(kind: type[FaultKind]) -> bool:
    """The rank it fires on is gone for good (killed, or held forever)."""
    return (kind.ends_life and not kind.restarts) or kind.holds_forever


@st.composite
def _fault(draw: st.DrawFn, space: Space, kind: type[FaultKind], world: int) -> dict[str, Any]:
    fault: dict[str, Any] = {"kind": kind.model_fields["kind"].default}
    aims = _aims(kind, space.roles)
    collective = "collective" in kind.ops
    files_too = any(op != "collective" for op in kind.ops)
    at_files = _at_files_only(kind) or (collective and files_too and bool(aims)
                                         and (not space.collectives or draw(st.booleans())))
    if at_files:
        field_name, aim = draw(st.sampled_from(aims))
        fault[field_name] = aim
        # what a file of a role goes through (mkdir or chmod of a file never happens)
        ops = [o for o in FILE_STEPS if o in kind.ops]
        if len(ops) > 1:
            op = draw(st.none() | st.sampled_from(ops))
            if op is not None:
                fault["op"] = op
    elif collective and len(kind.ops) > 1:
        fault["op"] = "collective"
    # a fault that ends a rank for good aims at one: no code survives losing every rank
    one = _ends_rank(kind)
    rank = draw(st.integers(0, world - 1) if one else st.none() | st.integers(0, world - 1))
    if rank is not None:
        fault["rank"] = rank
    if kind.ops and "occurrence" not in kind.search:  # else the kind says which
        occurrence = draw(st.none() | st.sampled_from(OCCURRENCES))
        if occurrence is not None:
            fault["occurrence"] = occurrence
    if kind.restarts:
        fault["lives"] = [0]  # the first life only: a rank pre-empted in every life never ends
    for name, choices in kind.search.items():
        value = draw(st.sampled_from(choices))
        if value != kind.model_fields[name].default:
            fault[name] = value
    return fault
