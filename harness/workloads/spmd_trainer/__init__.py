"""Training under pre-emption, SPMD: one process per host, ``torch.distributed.checkpoint``
and ``CheckpointManager`` (DESIGN.md, "Training under pre-emption"; docs/reference/targets.md).

The same contract and checker as the ``trainer`` workload (``train(inputs)`` on every
process, every life; ``harness.checkers.resume``), on SPMD topologies, where torch_xla 2.9
trains on v5e/v6e pods: a process per host (``xr.use_spmd()``), a gloo group from
``xla://``, checkpoints through the real ``torch.distributed.checkpoint``. Two reference
targets:

- ``naive-spmd-trainer`` (``naive.py``): a SIGTERM flag each process reads alone,
  ``dist_cp.save`` to a host-local path, resume from the newest directory;
- ``managed-trainer`` (``managed.py``): ``CheckpointManager`` as torch_xla's guide shows
  it (``save_async`` every step, the pre-emption sync point, ``join``), on the shared
  checkpoint path, resuming from its newest committed step.
"""

from __future__ import annotations

TARGETS = {
    "naive-spmd-trainer": "harness.workloads.spmd_trainer.naive:train",
    "managed-trainer": "harness.workloads.spmd_trainer.managed:train",
}

PRELOAD = ("torch", "torch._dynamo", "torch.distributed.checkpoint", "fsspec",
           "harness.workloads.trainer.model")

__all__ = ["TARGETS", "PRELOAD"]
