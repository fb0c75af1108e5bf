"""naive-trainer: a data-parallel training loop as the torch_xla examples write one, with
the pre-emption handling teams add first. Its flaws, each where it is:

1. The SIGTERM handler sets a flag each process reads at its own step boundaries: a host
   that gets the notice alone stops, and the others wait for it in the next step's
   gradient all-reduce, forever (pytorch/pocket-tts#277's shape).
2. Checkpoints go to a host-local path (``/tmp/checkpoints``), whatever ``inputs`` say:
   each host saves and resumes its own copy.
3. It resumes from the newest step directory, complete or not: a save the hard stop cut
   short (a grace shorter than the save) is what the next start loads
   (AI-Hypercomputer/maxtext#5260, google/flax#1200).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import torch
import torch_xla.core.xla_model as xm

from harness.workloads.trainer.model import make, restore, state_of, train_step

CHECKPOINTS = "/tmp/checkpoints"  # flaw 2: on the host's own disk


def train(inputs: dict[str, Any]) -> dict[str, Any]:
    stop = {"requested": False}

    def on_sigterm(signum: int, frame: Any) -> None:
        stop["requested"] = True  # flaw 1: read at this process's next step boundary only

    signal.signal(signal.SIGTERM, on_sigterm)
    model, optimizer = make(inputs["seed"])

    resumed_from = resumed_state = None
    if os.path.isdir(CHECKPOINTS):
        done = sorted(int(d.split("-")[1]) for d in os.listdir(CHECKPOINTS) if d.startswith("step-"))
        if done:  # flaw 3: the newest directory, whether its save finished or not
            resumed_from = done[-1]
            resumed_state = restore(model, optimizer, f"{CHECKPOINTS}/step-{resumed_from}/state.pt")

    states = {}
    step = resumed_from or 0
    while step < inputs["steps"]:
        step += 1
        states[str(step)] = train_step(model, optimizer, inputs["seed"], step)
        if step % inputs["save_every"] == 0 or stop["requested"]:
            if xm.is_master_ordinal(local=True):  # one process per host writes its copy
                os.makedirs(f"{CHECKPOINTS}/step-{step}", exist_ok=True)
                torch.save(state_of(model, optimizer, step), f"{CHECKPOINTS}/step-{step}/state.pt")
        if stop["requested"]:
            sys.exit(0)
    return {"resumed_from": resumed_from, "resumed_state": resumed_state, "states": states,
            "step": step}
