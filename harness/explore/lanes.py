"""An exploration split into lanes: independent searches, each with its own seed,
run one after another here or side by side on a cluster (``--cluster``).

A Hypothesis search is sequential (each plan depends on what the last one
showed), so a campaign spreads *searches*, not plans: lane ``i`` is the search
of seed ``lane_seed(seed, i)``, with its share of the worlds. A lane is plain
data in and plain data out (``run_lane``), so it crosses to a cluster worker
and back as JSON; its findings are merged here in lane order (a finding another
lane already explains is dropped), each is run once more here from the file it
is written to, and the example database entries a lane saved are saved in this
machine's database. This machine's database goes out with every lane (its files,
as data), so that a lane replays what earlier runs found before drawing anew.
The same seed, lanes and database give the same findings whether the lanes ran
here or on a cluster.
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis.database import ExampleDatabase

from harness.explore.search import Finding, Search, explore
from harness.explore.space import Plan
from harness.scenarios import base_scenario, without_faults

log = logging.getLogger(__name__)


def lane_seed(seed: int, lane: int) -> int:
    """What lane ``lane`` draws its plans from: lane 0 draws what ``--seed`` alone would,
    the others their own (every lane's worlds keep ``--seed``: a finding replays with it)."""
    return seed if lane == 0 else random.Random(f"harness-lane-{seed}-{lane}").getrandbits(32)


#: The most bytes of example database a lane takes along (a database past it goes
#: without: a lane then starts from nothing, as it would with ``--no-database``).
MAX_EXAMPLES_BYTES = 16 << 20


class _Recording(ExampleDatabase):
    """An example database that remembers every save, to send them home; it fetches from
    ``home`` too (this machine's database, read only)."""

    def __init__(self, home: ExampleDatabase | None = None) -> None:
        super().__init__()
        self.entries: dict[bytes, set[bytes]] = {}
        self.home = home

    def save(self, key: bytes, value: bytes) -> None:
        self.entries.setdefault(key, set()).add(value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        home = set(self.home.fetch(key)) if self.home is not None else set()
        yield from sorted(home | self.entries.get(key, set()))

    def delete(self, key: bytes, value: bytes) -> None:
        self.entries.get(key, set()).discard(value)


def run_lane(lane: dict[str, Any]) -> dict[str, Any]:
    """One lane's search, wherever it runs: plain data in, plain data out."""
    from harness.scenarios import find
    from harness.workloads.registry import target

    chosen = target(lane["target"], lane["workload"])
    base = without_faults(find(lane["base"])) if lane["base"] else \
        base_scenario(chosen.workload or lane["workload"])
    if lane.get("mounts"):
        from harness.scenarios import MountSpec

        base = base.with_mounts([MountSpec.parse_option(m) for m in lane["mounts"]])
    with tempfile.TemporaryDirectory(prefix="harness-lane-db-") as directory:
        home = _unpack(lane.get("examples") or {}, directory)
        return _search(lane, chosen, base, _Recording(home))


def _search(lane: dict[str, Any], chosen: Any, base: Any, database: _Recording) -> dict[str, Any]:
    result = explore(chosen, base, seed=lane["seed"], draw_seed=lane["draw_seed"],
                     budget_s=lane["budget_s"],
                     max_worlds=lane["max_worlds"], database=database, kinds=lane["kinds"],
                     topologies=lane["topologies"], timeout=lane["timeout"],
                     check_determinism=bool(lane.get("check_determinism")))
    return {"lane": lane["lane"], "worlds": result.worlds, "stopped": result.stopped,
            "findings": [{"topology": f.plan.topology, "faults": [dict(x) for x in f.plan.faults],
                          "shared_handoff": f.plan.shared_handoff, "order": f.plan.order,
                          "needs": sorted(f.needs),
                          "outcome": f.outcome, "worlds": f.worlds,
                          "first_faults": f.first_faults} for f in result.findings],
            "database": {k.hex(): sorted(v.hex() for v in values)
                         for k, values in database.entries.items() if values}}


@dataclass(frozen=True)
class Lanes:
    """What every lane shares, and how many there are."""

    target: str
    workload: str
    base: str | None
    seed: int
    count: int
    budget_s: float | None
    max_worlds: int | None
    kinds: list[str] | None
    topologies: list[str] | None
    timeout: float | None
    #: this machine's example database, as ``pack`` makes it ({} : none)
    examples: dict[str, str] | None = None
    #: ``--mount``: what paths are on the user's pod, as it spells them
    mounts: tuple[str, ...] = ()
    #: ``--check-determinism``: each plan's world runs twice
    check_determinism: bool = False

    def items(self) -> list[dict[str, Any]]:
        share = None if self.max_worlds is None else -(-self.max_worlds // self.count)
        return [{"lane": i, "seed": self.seed, "draw_seed": lane_seed(self.seed, i),
                 "target": self.target,
                 "workload": self.workload, "base": self.base, "budget_s": self.budget_s,
                 "max_worlds": share, "kinds": self.kinds, "topologies": self.topologies,
                 "timeout": self.timeout, "examples": self.examples or {},
                 "mounts": list(self.mounts), "check_determinism": self.check_determinism}
                for i in range(self.count)]


def run_here(items: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The lanes one after another on this machine (what a cluster's ``map`` yields)."""
    for item in items:
        yield item, run_lane(item)


def merge(search: Search, results: Iterable[dict[str, Any]],
          database: ExampleDatabase | None,
          on_finding: Callable[[Search, Finding], None] | None = None) -> list[Finding]:
    """Every lane's findings in lane order, each once: one that a finding kept before it
    explains is dropped. Each kept one is run here (its cell is this machine's), and the
    lanes' saved examples are saved in ``database``."""
    kept: list[Finding] = []
    for result in sorted(results, key=lambda r: r["lane"]):
        for key, values in result["database"].items():
            for value in values:
                if database is not None:
                    database.save(bytes.fromhex(key), bytes.fromhex(value))
        for found in result["findings"]:
            needs, outcome = frozenset(found["needs"]), found["outcome"]
            if any(f.explains(needs, outcome) for f in kept):
                continue
            plan = Plan(found["topology"], tuple(found["faults"]), found["shared_handoff"],
                        found.get("order", 0))
            cell = search.failure(plan)
            if cell is None:
                log.warning("lane %d found %s ending %s, which passed when run here: dropped",
                            result["lane"], plan.describe(), outcome)
                continue
            finding = Finding(plan, cell, needs, found["worlds"], found["first_faults"])
            kept.append(finding)
            search.findings.append(finding)
            if on_finding is not None:
                on_finding(search, finding)
    return kept


def pack(path: Path | None) -> dict[str, str]:
    """A directory example database as data (relative file path -> hex of its bytes), for
    a lane to take along; {} without one, or past ``MAX_EXAMPLES_BYTES``."""
    if path is None or not path.is_dir():
        return {}
    out: dict[str, str] = {}
    size = 0
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
        data = file.read_bytes()
        size += len(data)
        if size > MAX_EXAMPLES_BYTES:
            log.warning("example database %s is past %d bytes: the lanes start without it",
                        path, MAX_EXAMPLES_BYTES)
            return {}
        out[file.relative_to(path).as_posix()] = data.hex()
    return out


def _unpack(examples: dict[str, str], directory: str) -> ExampleDatabase | None:
    """``pack``'s data as a database in ``directory`` (None when there is none)."""
    from hypothesis.database import DirectoryBasedExampleDatabase

    if not examples:
        return None
    root = os.path.realpath(directory)
    for relative, data in examples.items():
        target = os.path.realpath(os.path.join(root, relative))
        if os.path.commonpath([root, target]) != root:
            raise ValueError(f"example database entry {relative!r} is outside the database")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(bytes.fromhex(data))
    return DirectoryBasedExampleDatabase(root)


def database_at(path: Path | None) -> ExampleDatabase | None:
    from hypothesis.database import DirectoryBasedExampleDatabase

    return DirectoryBasedExampleDatabase(str(path)) if path is not None else None
