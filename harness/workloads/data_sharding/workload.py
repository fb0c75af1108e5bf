"""The data-sharding workload: its inputs, checker and known failures (see ``__init__``)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from harness.checkers import sharding
from harness.checkers.common import Baseline, Judgement, end_of_world
from harness.filesystem.mounts import Mount
from harness.filesystem.sandbox import Leftover
from harness.history import ranks_phrase
from harness.roles import Roles
from harness.topology import Topology
from harness.vocabulary import FAIL, MAX_SEED, MAX_TIMEOUT
from harness.workloads.base import AbsolutePath, HostList, Learning, Workload, WorkloadInputs
from harness.workloads.data_sharding import PRELOAD, TARGETS, call_error, user_ref
from harness.world.result import WorldResult

#: The most int32 cells one array of a built dataset may hold (4 MiB): the builder
#: writes several arrays per host variant, all in memory, before the world starts.
MAX_CELLS = 1 << 20
_SIZE = 1 << 20


class DataShardingInputs(WorkloadInputs):
    """The loader's keys, then the builder's (see ``dataset.py``)."""

    data_dir: AbsolutePath = "/mnt/data/puzzles"
    #: the user's own dataset, a directory of this machine (``--data``): copied to
    #: ``data_dir`` on every host instead of the harness's, its samples known by content
    data: AbsolutePath | None = None
    # (the sizes the sample counts are checked against come first)
    examples_per_puzzle: int = Field(default=1, ge=1, le=_SIZE)
    #: puzzles of these sizes in turn instead (the last takes what is left): groups of
    #: different sizes, so a loader that deals out whole puzzles gives ranks unequal shares
    puzzle_sizes: list[Annotated[int, Field(ge=1, le=_SIZE)]] = Field(default_factory=list,
                                                                      max_length=64)
    seq_len: int = Field(default=16, ge=1, le=4096)
    num_samples: int = Field(default=96, ge=1, le=_SIZE, validate_default=True)
    global_batch_size: int = Field(default=8, ge=1, le=_SIZE)
    #: the training config's seed: the shuffle seed of the loaders
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    #: robust-loader's deadline for its dataset check
    sync_timeout_s: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT)
    missing_on_hosts: HostList = Field(default_factory=list)
    #: those hosts' copy of the largest data file (``inputs.npy``) is cut to half its size,
    #: as an interrupted copy leaves it
    truncated_on_hosts: HostList = Field(default_factory=list)
    divergent_on_hosts: HostList = Field(default_factory=list)
    divergent_num_samples: int | None = Field(default=None, ge=1, le=_SIZE,
                                              validate_default=True)
    corrupt_file: Literal["inputs.npy", "labels.npy", "puzzle_indices.npy"] | None = None
    #: None: every host that has the data
    corrupt_on_hosts: HostList | None = None
    corrupt_where: Literal["data", "header"] = "data"
    corrupt_rows: int = Field(default=2, ge=1, le=_SIZE)

    @field_validator("data")
    @classmethod
    def _small_directory(cls, data: str | None) -> str | None:
        """A directory a world can copy to every host (``own_data.scan``)."""
        if data is not None:
            from harness.workloads.data_sharding.own_data import scan

            scan(data)
        return data

    @field_validator("num_samples", "divergent_num_samples")
    @classmethod
    def _buildable(cls, n: int | None, info: ValidationInfo) -> int | None:
        k, seq_len = info.data.get("examples_per_puzzle"), info.data.get("seq_len")
        if n is None or k is None or seq_len is None:
            return n  # an earlier field already failed
        if info.data.get("puzzle_sizes") and k != 1:
            raise ValueError("give examples_per_puzzle or puzzle_sizes, not both")
        if n % k:
            raise ValueError(f"{n} is not a multiple of examples_per_puzzle {k}")
        if n * (1 + seq_len) > MAX_CELLS:
            raise ValueError(f"{n} samples x (1 + seq_len {seq_len}) is more than {MAX_CELLS} "
                             "cells per array: too large a dataset to build")
        return n


def check(result: WorldResult, baseline: Baseline | None = None) -> Judgement:
    """The sharding invariants against the builder's ground truth, or, for the user's own
    data, against the epoch a fault-free world of one rank read (``baseline``)."""
    from harness.workloads.data_sharding.dataset import expected_from_files

    expected = expected_from_files(result.files)
    if expected is None or expected.get("identity") != "content":
        return sharding.check(result, sharding.Epoch.from_expected(expected) if expected else None)
    reference = baseline.this_run if baseline is not None else None
    where = expected["data"] if expected["data"] == expected["data_dir"] else \
        f"{expected['data']} (at {expected['data_dir']})"
    epoch = sharding.Epoch.from_reference(reference, int(expected["global_batch_size"]), where)
    if epoch is None:
        ended = end_of_world(result)
        return ended or Judgement(FAIL, "no reference epoch: the target's fault-free world of "
                                        "one rank returned no batches, so its samples cannot "
                                        "be told apart from another version's")
    judgement = sharding.check(result, epoch)
    unread = _unread(result, expected)
    if unread is not None:
        judgement = dataclasses.replace(judgement, unexercised=unread)
    said = expected.get("acted_on") or []
    if said:  # what the scenario did to the user's data, whatever the cell's outcome
        judgement = dataclasses.replace(
            judgement, detail=f"{judgement.detail} (the scenario: {'; '.join(said)}; of the "
                              "files the target's fault-free run read)")
    return judgement


def _unread(result: WorldResult, expected: dict[str, Any]) -> str | None:
    """Why no change the scenario made could have reached the target: no rank of a changed
    host opened a changed file (None: one did, or the world recorded no file operation, as
    a pod's does not)."""
    touched = expected.get("touched") or []
    events = [e for e in result.history if e.kind == "file" and e.rank is not None]
    if not touched or not events:
        return None
    host_of = {r.rank: r.host for r in result.ranks}
    opened = {(host_of.get(e.rank), e.detail.get("path")) for e in events
              if e.op == "open-read" and e.detail.get("ok", True)}
    root = str(expected["data_dir"])
    for change in touched:
        if any((h, f"{root}/{name}") in opened for h in change["hosts"] for name in change["files"]):
            return None
    return "; ".join(f"{c['said']}, and no rank of {ranks_phrase(c['hosts'], 'host')} read it"
                     for c in touched)


def _records_files(inputs: DataShardingInputs) -> bool:
    """A cell that changes some hosts' copies of the user's own data: who read what decides
    whether the change was tested."""
    return inputs.data is not None and bool(inputs.truncated_on_hosts or inputs.divergent_on_hosts)


def _setup(inputs: DataShardingInputs, topology: Topology, seed: int,
           roles: Roles | None = None) -> list[Leftover]:
    from harness.workloads.data_sharding.dataset import build  # numpy: only when a cell runs
    return build(inputs, topology, seed, roles)


def _learning(inputs: DataShardingInputs) -> Learning | None:
    """With the user's own data: a world of one rank (a real one: a loader asking torch_xla
    for the world size gets 1) reads the whole epoch, with the scenario's batch size and
    seed, from the data as it is; its samples are the reference a cell's ranks are judged
    against. Without: the workload's defaults."""
    if inputs.data is None:
        return None
    plain = DataShardingInputs(data=inputs.data, data_dir=inputs.data_dir,
                               global_batch_size=inputs.global_batch_size, seed=inputs.seed)
    from harness.workloads.data_sharding.own_data import fingerprint

    return Learning("1x1", plain, (Mount(path=inputs.data_dir, scope="shared", mode="ro"),),
                    fingerprint(inputs.data), reference=True)


def _watch(inputs: DataShardingInputs) -> list[str]:
    from harness.workloads.data_sharding.dataset import watch
    return watch(inputs)


# The seed's loader (seed 000, Finding 3) never fails loudly in the catalog: a host
# without the files leaves the others blocked in their first step's collective
# (HANG); another version, garbled rows or divergent generators are trained on
# silently (FAIL). It passes uneven-shards (it drops the last partial batch on
# every rank alike) and readonly-data-mount (it writes nothing). Puzzles of several
# examples (divergent-seed, uneven-groups) have their examples drawn from each rank's own
# generator: the ranks build different global batches.
_SEED_LOADER_KNOWN = frozenset({"missing-data-on-host", "divergent-dataset", "corrupt-npy",
                                "divergent-seed", "uneven-groups", "truncated-data-on-host"})

WORKLOAD = Workload(
    "data-sharding", DataShardingInputs, check, targets=TARGETS,
    known_failures={"seed-loader": _SEED_LOADER_KNOWN}, preload=PRELOAD,
    setup=_setup, watch=_watch, user_ref=user_ref, call_error=call_error, learning=_learning,
    record_files=_records_files,
    contract="def run(inputs: dict) -> dict, or a loader factory (a class or function) taking "
             "some of data_dir, rank, num_replicas, seed, global_batch_size by name "
             "(harness.workloads.data_sharding)",
    catalog_order=("uneven-shards", "missing-data-on-host", "divergent-dataset", "corrupt-npy",
                   "readonly-data-mount", "divergent-seed", "uneven-groups",
                   "truncated-data-on-host", "baseline-sharding"),
    # what a loader meets: a flaky or slow data disk, a file it may not read, ranks whose
    # generators or pace differ. Not a rank lost for good: once the data is checked, its
    # peers wait for it in the training step's all-reduce on a pod whatever the loader
    # does (the loud failures a loader owes are the catalog's missing and corrupt data)
    explore_kinds=("divergent-rng", "eio", "latency", "permission-denied", "straggle"))
