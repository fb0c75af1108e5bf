"""The spmd-trainer workload: the trainer workload's contract and checker, SPMD targets."""

from __future__ import annotations

from harness.workloads.base import Workload
from harness.workloads.spmd_trainer import PRELOAD, TARGETS
from harness.workloads.trainer.workload import TrainerInputs, check

# Host-local checkpoints: a process of another host finds a step without its .metadata
# (every scenario that restarts); the flag read alone leaves the other host waiting.
_NAIVE_KNOWN = frozenset({"checkpoint-host-local", "spmd-notice-one-host",
                          "async-save-pending", "gcsfuse-checkpoint"})

WORKLOAD = Workload(
    "spmd-trainer", TrainerInputs, check, targets=TARGETS,
    known_failures={"naive-spmd-trainer": _NAIVE_KNOWN}, preload=PRELOAD,
    catalog_order=("checkpoint-host-local", "spmd-notice-one-host",
                   "async-save-pending", "gcsfuse-checkpoint", "checkpoint-disk-full",
                   "baseline-spmd-train"),
    restarts_job=True, step_seconds=lambda inputs: inputs.step_seconds,
    explore_kinds=("preempt",),
    record_files=lambda inputs: True,
    contract="def train(inputs: dict) -> dict, called on every process (one per host), "
             "every life")
