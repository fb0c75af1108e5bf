"""Workloads and targets by name: what a scenario's ranks run, how its result
is judged, and which failures each built-in target is known to have."""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.checkers.common import Judgement
from harness.filesystem.sandbox import Leftover
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


def _builtins(package: str, workload: str, known: dict[str, frozenset[str]]) -> list[Target]:
    """A workload package's reference targets (its ``TARGETS``), sharing one preload
    set (its ``PRELOAD``) and so one warm fork server."""
    module = importlib.import_module(package)
    return [Target(name, ref, workload, known.get(name, frozenset()), builtin=True,
                   preload=module.PRELOAD) for name, ref in module.TARGETS.items()]


# -- data sharding (harness/workloads/data_sharding) ---------------------------

def _check_data_sharding(result: WorldResult) -> Judgement:
    from harness.checkers import sharding
    from harness.workloads.data_sharding.dataset import expected_from_files

    expected = expected_from_files(result.files)
    return sharding.check(result, sharding.Epoch.from_expected(expected) if expected else None)


def _data_sharding_setup(inputs: dict[str, Any], topology: Topology, seed: int) -> list[Leftover]:
    from harness.workloads.data_sharding.dataset import build
    return build(inputs, topology, seed)


def _data_sharding_watch(inputs: dict[str, Any]) -> list[str]:
    from harness.workloads.data_sharding.dataset import watch
    return watch(inputs)


def _data_sharding_workload() -> Workload:
    from harness.workloads.data_sharding import DEFAULT_INPUTS
    return Workload("data-sharding", DEFAULT_INPUTS, _check_data_sharding,
                    setup=_data_sharding_setup, watch=_data_sharding_watch)


# The seed's loader (seed 000, Finding 3) never fails loudly in the catalog: a host
# without the files leaves the others blocked in their first step's collective
# (HANG); another version, garbled rows or divergent generators are trained on
# silently (FAIL). It passes uneven-shards (it drops the last partial batch on
# every rank alike) and readonly-data-mount (it writes nothing).
_SEED_LOADER_KNOWN = frozenset({"missing-data-on-host", "divergent-dataset", "corrupt-npy",
                                "divergent-seed"})


def _data_sharding_targets() -> list[Target]:
    from harness.workloads.data_sharding import PRELOAD, TARGETS

    known = {"seed-loader": _SEED_LOADER_KNOWN}
    return [Target(name, ref, "data-sharding", known.get(name, frozenset()), builtin=True,
                   preload=PRELOAD) for name, ref in TARGETS.items()]


# -- checkpoint/resume (harness/workloads/checkpoint_resume) -----------------

def _check_checkpoint_resume(result: WorldResult) -> Judgement:
    from harness.checkers import exactly_once
    from harness.topology import get_topology

    topo = get_topology(result.topology)  # one worker per host: worker id = host index
    return exactly_once.check(result, {r: topo.host_of(r) for r in range(topo.world_size)})


def _checkpoint_resume_workload() -> Workload:
    from harness.workloads.checkpoint_resume import DEFAULT_INPUTS, dataset
    return Workload("checkpoint-resume", DEFAULT_INPUTS, _check_checkpoint_resume,
                    setup=dataset.setup, watch=dataset.watch)


# Seed 003's worker (see its module docstring): a restart re-uses shard names and
# replaces the first life's shards (lost samples), a torn checkpoint raises on every
# restart, a transient EIO kills the upload, and a duplicated id loses a stream.
_NAIVE_WORKER_KNOWN = frozenset({"preempt-mid-shard", "preempt-mid-checkpoint", "preempt-storm",
                                 "upload-failure", "duplicate-worker-id"})


def _config_sync_workload() -> Workload:
    from harness.workloads.config_sync import DEFAULT_INPUTS
    return Workload("config-sync", DEFAULT_INPUTS, _check_config_sync)


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    _config_sync_workload(), _data_sharding_workload(), _checkpoint_resume_workload())}

BUILTIN_TARGETS: dict[str, Target] = {t.name: t for t in (
    *_builtins("harness.workloads.config_sync", "config-sync",
               {"naive-sync": _NAIVE_KNOWN, "seed-fix-sync": _SEED_FIX_KNOWN}),
    *_builtins("harness.workloads.data_sharding", "data-sharding",
               {"seed-loader": _SEED_LOADER_KNOWN}),
    *_builtins("harness.workloads.checkpoint_resume", "checkpoint-resume",
               {"naive-worker": _NAIVE_WORKER_KNOWN}),
)}


def target(spec: str) -> Target:
    """A built-in name, or a user's ``module:function`` / ``file.py:function``."""
    if spec in BUILTIN_TARGETS:
        return BUILTIN_TARGETS[spec]
    if ":" not in spec:
        names = ", ".join(BUILTIN_TARGETS)
        raise ValueError(f"unknown target {spec!r}: use a built-in ({names}), "
                         "module.path:function or path/to/file.py:function")
    return Target(spec, spec)
