"""managed-trainer: an SPMD trainer written the way torch_xla 2.9's distributed-checkpoint
guide shows one (docs/source/perf/spmd_distributed_checkpoint.md): ``xr.use_spmd()``, a
gloo group from ``xla://``, ``CheckpointManager`` saving every ``save_every`` steps to the
shared ``checkpoint_dir``, restoring its newest committed step after ``prime_optimizer``.
On a notice the manager's preemption sync manager has every process agree on one step; it
saves there (``should_save``) and leaves.

It saves with ``save``, not the guide's ``save_async``: a save's thread beside the training
loop orders its file operations against the loop's by the machine's scheduler, which the
catalog's determinism check (the same seed, the same history) does not yet allow; the
guide's own loop, with ``save_async``, runs as a script (tests/user_targets).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.distributed as dist
import torch_xla
import torch_xla.distributed.xla_backend  # noqa: F401 - registers xla://
import torch_xla.runtime as xr
from torch_xla.experimental.distributed_checkpoint import CheckpointManager, prime_optimizer

from harness.workloads.trainer.model import batch, digest, make


def train(inputs: dict[str, Any]) -> dict[str, Any]:
    xr.use_spmd()
    dist.init_process_group("gloo", init_method="xla://")
    model, optimizer = make(inputs["seed"])
    chkpt_mgr = CheckpointManager(inputs["checkpoint_dir"], inputs["save_every"])

    resumed_from = resumed_state = None
    tracked_steps = chkpt_mgr.all_steps()
    if tracked_steps:
        resumed_from = max(tracked_steps)
        prime_optimizer(optimizer)
        state_dict = {"model": model.state_dict(), "optim": optimizer.state_dict()}
        chkpt_mgr.restore(resumed_from, state_dict)
        model.load_state_dict(state_dict["model"])
        optimizer.load_state_dict(state_dict["optim"])
        resumed_state = digest(model, optimizer)

    states = {}
    step = resumed_from or 0
    while step < inputs["steps"]:
        step += 1
        x, y = batch(inputs["seed"], step, 0)  # SPMD: the global batch, in every process
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        torch_xla.sync()
        states[str(step)] = digest(model, optimizer)
        state_dict = {"model": model.state_dict(), "optim": optimizer.state_dict()}
        if chkpt_mgr.save(step, state_dict) and chkpt_mgr.reached_preemption(step):
            sys.exit(0)  # the step every process agreed on is saved, whole
    return {"resumed_from": resumed_from, "resumed_state": resumed_state, "states": states,
            "step": step}
