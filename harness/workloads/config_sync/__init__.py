"""Config sync: the workload that hands one config from rank 0 to every rank.

Three reference targets, each a module with a ``run`` function:

- ``naive-sync`` (``naive.py``): the seed's current ``load_synced_config``
  (seeds 000/001, docs/seeds.md; train_tpu.py lines 592-628): /tmp/temp_config.yaml + a rendezvous.
- ``seed-fix-sync`` (``seed_fix.py``): the "Fixed Version" seed 001 proposes,
  written as the seed writes it, bugs included.
- ``robust-sync`` (``robust.py``): the recipe we recommend: the config travels
  over the collective, the run name is derived, every rank checks a digest,
  errors reach every rank, and every wait has a deadline.

The calling convention (the same for a user's config-sync target)
------------------------------------------------------------------
Every rank calls ``run(inputs: dict) -> dict``. ``inputs`` holds:

- ``config``: the base config every rank composes, as Hydra would, e.g.
  ``{"arch": {"name": "trm@tiny", "loss": {"name": ..., "loss_type": ...}},
  "data_paths": [...], "global_batch_size": 768, "epochs": 100, "lr": 1e-4, ...}``
  with every field ``model.PretrainConfig`` requires; ``model.default_config()`` when absent.
- ``sync_timeout_s`` (optional float, default 30, seconds of the world's clock):
  robust-sync's deadline for each of its waits. It is below every deadline (a
  scenario's 1800 s, a pod cell's 60 s), so that when a rank dies the survivors
  fail loudly before the harness calls it a hang.
- ``sync_dir`` (optional): unused by the seed's code (it hard-codes its paths).

The defaults and bounds of these keys are ``workload.ConfigSyncInputs``.

Each rank composes its own ``hydra_config`` = deep merge of ``inputs["config"]``
and the overrides in its environment variable ``TRM_OVERRIDES``
(``"lr=0.5,arch.name=trm@big"``, values parsed with ``yaml.safe_load``): that is
how a host with a different environment composes a different config, as Hydra
does on each worker. ``run`` returns the config the rank ended with as a plain
dict (``config.model_dump()``); the checkers compare it across ranks by digest
(``model.digest``) and validate it against ``model.PretrainConfig``.

``PRELOAD`` lists the modules these targets import (directly or through
``model``); pass it as ``run_world(..., preload=PRELOAD)`` so that the warm fork
server imports them once instead of every rank importing them (the automatic
preload reads only the target's own file and only top-level package names).
"""

from __future__ import annotations

#: Built-in target name -> ``module:function``.
TARGETS = {
    "naive-sync": "harness.workloads.config_sync.naive:run",
    "seed-fix-sync": "harness.workloads.config_sync.seed_fix:run",
    "robust-sync": "harness.workloads.config_sync.robust:run",
}

#: Modules worth importing in the fork server before any rank starts. Never the
#: target modules themselves: they import torch_xla, which exists only in a rank.
PRELOAD = ("coolname", "pydantic", "torch", "torch.distributed", "yaml",
           "harness.workloads.config_sync.model")

__all__ = ["TARGETS", "PRELOAD"]
