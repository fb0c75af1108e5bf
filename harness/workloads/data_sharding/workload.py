"""The data-sharding workload: its inputs, checker and known failures (see ``__init__``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from harness.checkers import sharding
from harness.checkers.common import Judgement
from harness.filesystem.sandbox import Leftover
from harness.topology import Topology
from harness.vocabulary import MAX_SEED, MAX_TIMEOUT
from harness.workloads.base import AbsolutePath, HostList, Workload, WorkloadInputs
from harness.workloads.data_sharding import PRELOAD, TARGETS, call_error, user_ref
from harness.world.result import WorldResult

#: The most int32 cells one array of a built dataset may hold (4 MiB): the builder
#: writes several arrays per host variant, all in memory, before the world starts.
MAX_CELLS = 1 << 20
_SIZE = 1 << 20


class DataShardingInputs(WorkloadInputs):
    """The loader's keys, then the builder's (see ``dataset.py``)."""

    data_dir: AbsolutePath = "/mnt/data/puzzles"
    # (the sizes the sample counts are checked against come first)
    examples_per_puzzle: int = Field(default=1, ge=1, le=_SIZE)
    seq_len: int = Field(default=16, ge=1, le=4096)
    num_samples: int = Field(default=96, ge=1, le=_SIZE, validate_default=True)
    global_batch_size: int = Field(default=8, ge=1, le=_SIZE)
    #: the training config's seed: the shuffle seed of the loaders
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    #: robust-loader's deadline for its dataset check
    sync_timeout_s: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT)
    missing_on_hosts: HostList = Field(default_factory=list)
    divergent_on_hosts: HostList = Field(default_factory=list)
    divergent_num_samples: int | None = Field(default=None, ge=1, le=_SIZE,
                                              validate_default=True)
    corrupt_file: Literal["inputs.npy", "labels.npy", "puzzle_indices.npy"] | None = None
    #: None: every host that has the data
    corrupt_on_hosts: HostList | None = None
    corrupt_where: Literal["data", "header"] = "data"
    corrupt_rows: int = Field(default=2, ge=1, le=_SIZE)

    @field_validator("num_samples", "divergent_num_samples")
    @classmethod
    def _buildable(cls, n: int | None, info: ValidationInfo) -> int | None:
        k, seq_len = info.data.get("examples_per_puzzle"), info.data.get("seq_len")
        if n is None or k is None or seq_len is None:
            return n  # an earlier field already failed
        if n % k:
            raise ValueError(f"{n} is not a multiple of examples_per_puzzle {k}")
        if n * (1 + seq_len) > MAX_CELLS:
            raise ValueError(f"{n} samples x (1 + seq_len {seq_len}) is more than {MAX_CELLS} "
                             "cells per array: too large a dataset to build")
        return n


def check(result: WorldResult) -> Judgement:
    from harness.workloads.data_sharding.dataset import expected_from_files

    expected = expected_from_files(result.files)
    return sharding.check(result, sharding.Epoch.from_expected(expected) if expected else None)


def _setup(inputs: DataShardingInputs, topology: Topology, seed: int) -> list[Leftover]:
    from harness.workloads.data_sharding.dataset import build  # numpy: only when a cell runs
    return build(inputs, topology, seed)


def _watch(inputs: DataShardingInputs) -> list[str]:
    from harness.workloads.data_sharding.dataset import watch
    return watch(inputs)


# The seed's loader (seed 000, Finding 3) never fails loudly in the catalog: a host
# without the files leaves the others blocked in their first step's collective
# (HANG); another version, garbled rows or divergent generators are trained on
# silently (FAIL). It passes uneven-shards (it drops the last partial batch on
# every rank alike) and readonly-data-mount (it writes nothing).
_SEED_LOADER_KNOWN = frozenset({"missing-data-on-host", "divergent-dataset", "corrupt-npy",
                                "divergent-seed"})

WORKLOAD = Workload(
    "data-sharding", DataShardingInputs, check, targets=TARGETS,
    known_failures={"seed-loader": _SEED_LOADER_KNOWN}, preload=PRELOAD,
    setup=_setup, watch=_watch, user_ref=user_ref, call_error=call_error,
    contract="def run(inputs: dict) -> dict, or a loader factory (a class or function) taking "
             "some of data_dir, rank, num_replicas, seed, global_batch_size by name "
             "(harness.workloads.data_sharding)",
    catalog_order=("uneven-shards", "missing-data-on-host", "divergent-dataset", "corrupt-npy",
                   "readonly-data-mount", "divergent-seed"),
    # what a loader meets: a flaky or slow data disk, a file it may not read, ranks whose
    # generators or pace differ. Not a rank lost for good: once the data is checked, its
    # peers wait for it in the training step's all-reduce on a pod whatever the loader
    # does (the loud failures a loader owes are the catalog's missing and corrupt data)
    explore_kinds=("divergent-rng", "eio", "latency", "permission-denied", "straggle"))
