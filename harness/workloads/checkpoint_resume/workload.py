"""The checkpoint/resume workload: its inputs, checker and known failures (see ``__init__``)."""

from __future__ import annotations

from pydantic import Field

from harness.checkers import exactly_once
from harness.checkers.common import Judgement
from harness.topology import get_topology
from harness.workloads.base import AbsolutePath, HostList, Workload, WorkloadInputs
from harness.workloads.checkpoint_resume import PRELOAD, TARGETS, dataset
from harness.world.result import WorldResult


class CheckpointResumeInputs(WorkloadInputs):
    """What a checkpoint/resume cell starts from; a scenario's ``inputs`` replace keys of it."""

    workdir: AbsolutePath = "/srv/activation-extraction"
    bucket: AbsolutePath = "/mnt/bucket"
    #: the dataset's size, split into one stream per host (the builder's, not the worker's)
    total_samples: int = Field(default=50, ge=1, le=100_000)
    shard_size: int = Field(default=4, ge=1, le=100_000)
    upload_attempts: int = Field(default=5, ge=1, le=100)
    #: hosts whose stream is absent (the builder's, not the worker's)
    missing_streams: HostList = Field(default_factory=list)


def check(result: WorldResult) -> Judgement:
    topo = get_topology(result.topology)  # one worker per host: worker id = host index
    return exactly_once.check(result, {r: topo.host_of(r) for r in range(topo.world_size)},
                              dataset.bucket_of(result.files))


# Seed 003's worker (see its module docstring): a restart re-uses shard names and
# replaces the first life's shards (lost samples), a torn checkpoint raises on every
# restart, a transient EIO kills the upload, and a duplicated id loses a stream.
_NAIVE_WORKER_KNOWN = frozenset({"preempt-mid-shard", "preempt-mid-checkpoint", "preempt-storm",
                                 "upload-failure", "duplicate-worker-id"})

WORKLOAD = Workload(
    "checkpoint-resume", CheckpointResumeInputs, check, targets=TARGETS,
    known_failures={"naive-worker": _NAIVE_WORKER_KNOWN}, preload=PRELOAD,
    setup=dataset.setup, watch=dataset.watch,
    catalog_order=("preempt-mid-shard", "preempt-mid-checkpoint", "preempt-storm",
                   "upload-failure", "duplicate-worker-id", "stream-missing", "baseline-resume"),
    restarts_alone=True,
    # seed 003's pre-emptible VMs: pre-empted at any point (and back), lost for good, slow;
    # its bucket's own failures are the catalog's upload-failure (or --kinds eio,...)
    explore_kinds=("preempt", "kill", "latency"))
