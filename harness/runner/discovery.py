"""Discovery: one fault-free world per target, to learn what its scenarios aim at.

Before a target's cells run, the runner runs it once with no fault and every
file operation recorded (``record_files``). From that history come its roles
(``harness.roles``) and the modules it imported (preloaded by the fork server
for its cells, so that a deadline measures the code, not its imports). When a
scenario needs what another run of the same target leaves behind (a stale
leftover, another job's write), a second world runs it with the workload's
``another_run`` inputs and keeps the bytes it wrote at each handoff.

Both are cached on disk (``HARNESS_CACHE_DIR``, default ``.harness_cache`` in the working
directory, as pytest keeps its own), keyed by everything that changes what they show: the
target and its own source files, the workload, its inputs and setting (the user's data and
config included), the topology, the working directory and the harness's version.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import __version__, refs, source
from harness.checkers.common import Baseline, as_json
from harness.filesystem.mounts import Mount
from harness.filesystem.snapshot import content_bytes
from harness.roles import Roles, derive
from harness.topology import Topology, get_topology
from harness.vocabulary import PASS
from harness.workloads.base import Learning, Target, Workload
from harness.world import pool
from harness.world.world import run_world

log = logging.getLogger(__name__)

#: A discovery world's deadline unless the run gives one (``--timeout``): it pays for the
#: target's imports, a cell does not.
DISCOVERY_TIMEOUT = 60.0
TOPOLOGY = "single-host-8"  # a workload without a catalog scenario
#: 3: a directory is never a file role; 4: the workload's setting, collectives; 5: state;
#: 6: fits; 7: an appended file is an output; 8: no package metadata
_FORMAT = 9


@dataclass(frozen=True)
class Discovery:
    """What one target's fault-free run showed."""

    roles: Roles = field(default_factory=Roles)
    imported: tuple[str, ...] = ()
    outcome: str = PASS  # of the fault-free world: a target that fails it has no roles to trust
    detail: str = ""
    previous: bool = False  # another run's leftovers were collected
    #: what rank 0 returned in each run (as JSON), for the checker: see ``common.Baseline``
    baseline: Baseline = field(default_factory=Baseline)
    #: collective calls its ranks made (none: a fault at a collective cannot fire)
    collectives: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"format": _FORMAT, "roles": self.roles.to_dict(), "imported": list(self.imported),
                "outcome": self.outcome, "detail": self.detail, "previous": self.previous,
                "baseline": [self.baseline.this_run, self.baseline.another_run],
                "collectives": self.collectives}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Discovery:
        this_run, another_run = data["baseline"]
        return cls(Roles.from_dict(data["roles"]), tuple(data["imported"]), data["outcome"],
                   data["detail"], data["previous"], Baseline(this_run, another_run),
                   data["collectives"])


def cache_dir() -> Path:
    return Path(os.environ.get("HARNESS_CACHE_DIR") or ".harness_cache") / "discovery"


#: At most this many of the target's own source files go into its cache key.
MAX_SOURCES = 200


def _code_of(target: Target) -> bytes:
    """The target's own code, for the cache key: its file (a workload's adapter runs it by
    the user's reference: that file, not the adapter's) and every file of its own it
    imports, by name, from beside it or the working directory (a helper module, a package
    of the team's), read from their sources. Installed packages are the harness version's
    business; a module loaded by path at run time is not seen."""
    ref = refs.parse(target.ref if target.builtin or refs.module_of(target.name) is None
                     else target.name)
    first = os.path.abspath(ref.module) if ref.is_file else \
        source.module_file(ref.module, [os.getcwd(), *sys.path])  # found, never imported here
    if first is None:
        return b""
    search = [os.path.dirname(first), os.getcwd()]
    digest, todo, seen = hashlib.sha256(), [first], {first}
    while todo and len(seen) <= MAX_SOURCES:
        path = todo.pop(0)
        try:
            digest.update(path.encode(errors="surrogateescape") + b"\0" + source.read(path))
        except (OSError, ValueError):  # check_defines said why, before any world
            continue
        for name in sorted(pool.imports_of(path)):
            if name.split(".")[0] in ("harness", "torch_xla"):  # the harness version's
                continue
            found = source.module_file(name, search)
            if found is not None and os.path.abspath(found) not in seen:
                seen.add(os.path.abspath(found))
                todo.append(os.path.abspath(found))
    return digest.digest()


def cache_key(target: Target, workload: Workload, previous: bool,
              learning: Learning | None = None) -> str:
    blob = json.dumps(_fits(target, workload, previous, learning), sort_keys=True,
                      default=str).encode()
    return hashlib.sha256(blob + _code_of(target)).hexdigest()[:32]


def _fits(target: Target, workload: Workload, previous: bool,
          learning: Learning | None) -> list[Any]:
    """Everything but the code that changes what a fault-free run shows: also kept in the
    entry, which is used only if it holds the same (a key that collides, an entry another
    version wrote, is learned again)."""
    inputs = workload.inputs().model_dump(mode="json")
    checker = target.checker.ref if target.checker else None
    topology, mounts = setting(workload, learning)
    return as_json([_FORMAT, __version__, target.name, target.ref, workload.name, inputs,
                    previous, checker, os.path.abspath(os.getcwd()), topology.name,
                    [repr(m) for m in mounts], learning.key if learning is not None else None])


def discover(target: Target, workload: Workload, previous: bool = False,
             use_cache: bool = True, timeout: float | None = None,
             learning: Learning | None = None) -> Discovery:
    """The target's roles and imports, from the cache or from its fault-free world(s)
    (whose deadline is ``timeout``, else ``DISCOVERY_TIMEOUT``), in the workload's plain
    setting or the one ``learning`` gives (``Workload.learning``: the user's own data).

    Only a fault-free run that passed is cached: one that failed (a HANG while the
    machine was loaded, a target that raises) says so in the report, and the next run
    learns again rather than trusting it (or preloading nothing) forever."""
    key = cache_key(target, workload, previous, learning)
    fits = _fits(target, workload, previous, learning)
    path = cache_dir() / f"{key}.json"
    if use_cache:
        try:
            data = json.loads(path.read_text())
            if data.get("fits") == fits:
                return Discovery.from_dict(data)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # absent, from another format or another run's: learn it again
    found = _run(target, workload, previous, timeout or DISCOVERY_TIMEOUT, learning)
    if use_cache and found.outcome == PASS:
        _store(path, found, fits)
    return found


def _store(path: Path, found: Discovery, fits: list[Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump({**found.to_dict(), "fits": fits}, f)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only checkout: learn it again next time
        log.warning("cannot cache what %s showed: %s", path, exc)


def setting(workload: Workload, learning: Learning | None = None) -> tuple[Topology, list[Mount]]:
    """Where the fault-free run is recorded: ``learning``'s, else the workload's plain
    setting (its base scenario's topology and mounts: checkpoint-resume's four workers,
    each its own id, sharing a bucket), else eight ranks on one host."""
    from harness.scenarios import ScenarioError, base_scenario

    if learning is not None:
        return get_topology(learning.topology), list(learning.mounts)
    try:
        base = base_scenario(workload.name)
    except (ScenarioError, KeyError):
        return get_topology(TOPOLOGY), []
    return get_topology(base.topology), base.mount_list(os.path.expanduser("~"))


def _world(target: Target, workload: Workload, inputs: Any, watch: list[str],
           timeout: float, learning: Learning | None) -> Any:
    topology, mounts = setting(workload, learning)
    files = workload.setup(inputs, topology, 0, None) if workload.setup else []
    return run_world(target.ref, topology=topology, timeout=timeout, seed=0,
                     args=(inputs.for_target(),), preload=target.preload, files=files,
                     watch=watch, record_files=True, checker=workload.validator_for(target),
                     mounts=mounts, reads=target.reads)


def _returned(result: Any) -> Any:
    """Rank 0's value as JSON, if it returned one JSON can hold."""
    rank0 = result.ranks[0] if result.ranks else None
    return as_json(rank0.value) if rank0 is not None and rank0.outcome == PASS else None


def _run(target: Target, workload: Workload, previous: bool, timeout: float,
         learning: Learning | None) -> Discovery:
    inputs = learning.inputs if learning is not None else \
        workload.inputs(topology=setting(workload)[0])  # defaults that follow the hosts
    # what the workload's checker reads (a bucket's objects), as a cell's world records it
    result = _world(target, workload, inputs, workload.watch(inputs) if workload.watch else [],
                    timeout, learning)
    roles = derive(result.history)
    judgement = workload.judge(result, Baseline(_returned(result)))  # (a reference: itself)
    found = Discovery(roles, tuple(result.imported), judgement.outcome, judgement.detail,
                      baseline=Baseline(_returned(result)),
                      collectives=sum(e.kind == "call" for e in result.history))
    handoffs = roles.paths("handoff")
    if not previous or workload.another_run is None or not handoffs:
        return found
    other = _world(target, workload, workload.another_run(inputs), list(handoffs), timeout,
                   learning)
    left: dict[str, bytes] = {}
    for event in other.history:  # every rank's snapshot: the last one of a path wins
        if event.kind == "snapshot":
            for vpath, content in event.detail.get("files", {}).items():
                data = content_bytes(content)
                if data is not None and vpath in handoffs:
                    left[vpath] = data
    return Discovery(Roles(roles.uses, left), found.imported, found.outcome, found.detail, True,
                     Baseline(found.baseline.this_run, _returned(other)), found.collectives)
