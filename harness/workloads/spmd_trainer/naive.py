"""naive-spmd-trainer: an SPMD trainer with ``torch.distributed.checkpoint`` as teams first
write one. Its flaws, each where it is:

1. The SIGTERM handler sets a flag each process reads at its own step boundaries: a host
   that gets the notice alone stops, and the others wait for it in the next step.
2. ``dist_cp.save`` to a host-local path (``/tmp/checkpoints``): every process writes its
   shards there, and only the coordinator (process 0) writes ``.metadata``, on its own
   host; a process of another host finds a step directory without it
   (pytorch/xla#7919, google/flax#3364).
3. It resumes from the newest step directory, complete or not.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dist_cp
import torch_xla
import torch_xla.distributed.xla_backend  # noqa: F401 - registers xla://
import torch_xla.runtime as xr

from harness.workloads.trainer.model import batch, digest, make

CHECKPOINTS = "/tmp/checkpoints"  # flaw 2: on the host's own disk


def train(inputs: dict[str, Any]) -> dict[str, Any]:
    stop = {"requested": False}

    def on_sigterm(signum: int, frame: Any) -> None:
        stop["requested"] = True  # flaw 1: read at this process's next step boundary only

    signal.signal(signal.SIGTERM, on_sigterm)
    xr.use_spmd()
    dist.init_process_group("gloo", init_method="xla://")
    model, optimizer = make(inputs["seed"])

    resumed_from = resumed_state = None
    if os.path.isdir(CHECKPOINTS):
        done = sorted(int(d.split("-")[1]) for d in os.listdir(CHECKPOINTS) if d.startswith("step-"))
        if done:  # flaw 3: the newest directory, whether its save finished or not
            resumed_from = done[-1]
            for p in model.parameters():  # the optimizer's state exists to be loaded into
                p.grad = torch.zeros_like(p)
            optimizer.step()
            state_dict = {"model": model.state_dict(), "optim": optimizer.state_dict()}
            dist_cp.load(state_dict, checkpoint_id=f"{CHECKPOINTS}/step-{resumed_from}")
            model.load_state_dict(state_dict["model"])
            optimizer.load_state_dict(state_dict["optim"])
            resumed_state = digest(model, optimizer)

    states = {}
    step = resumed_from or 0
    while step < inputs["steps"]:
        step += 1
        x, y = batch(inputs["seed"], step, 0)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        torch_xla.sync()
        states[str(step)] = digest(model, optimizer)
        if step % inputs["save_every"] == 0 or stop["requested"]:
            dist_cp.save({"model": model.state_dict(), "optim": optimizer.state_dict()},
                         checkpoint_id=f"{CHECKPOINTS}/step-{step}")
        if stop["requested"]:
            sys.exit(0)
    return {"resumed_from": resumed_from, "resumed_state": resumed_state, "states": states,
            "step": step}
