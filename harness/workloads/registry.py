"""Workloads and targets by name: what a scenario's ranks run, how its result
is judged, and which failures each built-in target is known to have."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.checkers.common import Judgement
from harness.faults.plan import Leftover
from harness.topology import Topology
from harness.world.result import WorldResult


@dataclass(frozen=True)
class Workload:
    """What a workload's cells share: default inputs, the files a scenario
    starts with, the files to watch, and the checker."""

    name: str
    default_inputs: dict[str, Any]
    checker: Callable[[WorldResult], Judgement]
    #: (inputs, topology, seed) -> files placed in the sandbox before the world starts
    setup: Callable[[dict[str, Any], Topology, int], list[Leftover]] | None = None
    #: (inputs) -> virtual globs whose content the history records at every exit
    watch: Callable[[dict[str, Any]], list[str]] | None = None

    def inputs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        merged = copy.deepcopy(self.default_inputs)
        merged.update(copy.deepcopy(overrides))
        return merged


@dataclass(frozen=True)
class Target:
    name: str  # what reports call it
    ref: str  # module.path:function or path/to/file.py:function
    workload: str | None = None  # built-ins belong to one workload
    known_failures: frozenset[str] = field(default_factory=frozenset)
    builtin: bool = False
    preload: tuple[str, ...] | None = None  # None: read from the target's imports


def _validate_config(config: dict[str, Any]) -> str | None:
    from pydantic import ValidationError

    from harness.workloads.config_sync.model import PretrainConfig

    try:
        PretrainConfig.model_validate(config)
    except ValidationError as exc:
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
    return None


def _check_config_sync(result: WorldResult) -> Judgement:
    from harness.checkers import config_sync
    return config_sync.check(result, validate=_validate_config)


DEFAULT_CONFIG: dict[str, Any] = {
    "arch": {"name": "trm@tiny", "hidden_size": 512, "num_layers": 2},
    "data_paths": ["harness"],
    "global_batch_size": 768,
    "epochs": 100,
    "lr": 1e-4,
    "weight_decay": 0.1,
    "seed": 0,
}

WORKLOADS: dict[str, Workload] = {
    "config-sync": Workload("config-sync",
                            {"config": DEFAULT_CONFIG, "sync_timeout_s": 2.0},
                            _check_config_sync),
}

# Which catalog cells the seed's code fails: recorded as the strict xfails of
# pytest. A known failure that starts passing is reported as unexpected.
_CONFIG_SYNC_CATALOG = frozenset({
    "baseline", "missing-file", "partial-write", "empty-file", "corrupt-file", "stale-leftover",
    "isolated-tmp", "transient-eio", "disk-full", "permission-denied", "read-only-fs",
    "slow-writer", "visibility-delay", "writer-killed", "rank0-raises", "divergent-slugs",
    "divergent-input", "concurrent-jobs", "api-drift"})
# The seed's current code survives only what a shared /tmp and luck allow.
_NAIVE_KNOWN = _CONFIG_SYNC_CATALOG - {"baseline", "divergent-slugs", "divergent-input"}
# The seed's proposed fix calls os.fsync on a file its `with` block already closed:
# rank 0 raises ValueError before the rendezvous, every time, so it fails everything.
_SEED_FIX_KNOWN = _CONFIG_SYNC_CATALOG

def _config_sync_targets() -> list[Target]:
    from harness.workloads.config_sync import PRELOAD, TARGETS

    known = {"naive-sync": _NAIVE_KNOWN, "seed-fix-sync": _SEED_FIX_KNOWN}
    # One preload set for the three: they share one warm fork server.
    return [Target(name, ref, "config-sync", known.get(name, frozenset()), builtin=True,
                   preload=PRELOAD) for name, ref in TARGETS.items()]


BUILTIN_TARGETS: dict[str, Target] = {t.name: t for t in _config_sync_targets()}


def target(spec: str) -> Target:
    """A built-in name, or a user's ``module:function`` / ``file.py:function``."""
    if spec in BUILTIN_TARGETS:
        return BUILTIN_TARGETS[spec]
    if ":" not in spec:
        names = ", ".join(BUILTIN_TARGETS)
        raise ValueError(f"unknown target {spec!r}: use a built-in ({names}), "
                         "module.path:function or path/to/file.py:function")
    return Target(spec, spec)
