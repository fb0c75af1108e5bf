"""robust-trainer: the recipe we recommend under pre-emption, in the same loop.

- The SIGTERM handler sets a flag that every process all-reduces at every step: all of
  them see the notice at the same step, save it together and exit; the job restarts.
- Checkpoints go to ``inputs["checkpoint_dir"]``, shared by every host (gcsfuse in the
  catalog: no atomic rename of a directory, so nothing is renamed).
- A step is committed by a marker that one process writes once every process has saved
  (as torch_xla's ``CheckpointManager`` does); a start resumes from the newest step that
  has its marker, and ignores the others.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import torch
import torch_xla.core.xla_model as xm

from harness.workloads.trainer.model import make, restore, state_of, train_step

MARKER = "COMMITTED"


def _committed(root: str) -> list[int]:
    if not os.path.isdir(root):
        return []
    return sorted(int(d.split("-")[1]) for d in os.listdir(root)
                  if d.startswith("step-") and d.split("-")[1].isdigit()
                  and os.path.exists(os.path.join(root, d, MARKER)))


def _save(root: str, step: int, model: Any, optimizer: Any) -> None:
    where = os.path.join(root, f"step-{step}")
    if xm.is_master_ordinal(local=False):
        os.makedirs(where, exist_ok=True)
        torch.save(state_of(model, optimizer, step), os.path.join(where, "state.pt"))
    xm.rendezvous(f"saved-{step}")  # every process has saved its part
    if xm.is_master_ordinal(local=False):
        with open(os.path.join(where, MARKER), "w") as f:
            f.write(str(step))
    xm.rendezvous(f"committed-{step}")


def train(inputs: dict[str, Any]) -> dict[str, Any]:
    stop = {"requested": False}
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.update(requested=True))
    root = inputs["checkpoint_dir"]
    model, optimizer = make(inputs["seed"])

    resumed_from = resumed_state = None
    committed = _committed(root)
    if committed:
        resumed_from = committed[-1]
        resumed_state = restore(model, optimizer, os.path.join(root, f"step-{resumed_from}",
                                                               "state.pt"))

    states = {}
    step = resumed_from or 0
    while step < inputs["steps"]:
        step += 1
        states[str(step)] = train_step(model, optimizer, inputs["seed"], step)
        flag = xm.all_reduce(xm.REDUCE_MAX, torch.tensor([1.0 if stop["requested"] else 0.0]))
        leaving = bool(flag.item())
        if step % inputs["save_every"] == 0 or leaving:
            _save(root, step, model, optimizer)
        if leaving:
            sys.exit(0)
    return {"resumed_from": resumed_from, "resumed_state": resumed_state, "states": states,
            "step": step}
