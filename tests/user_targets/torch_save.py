"""Config sync with torch.save/torch.load on the "shared" mount."""

import os

import torch
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

RUN_DIR = "/mnt/shared/run"


def sync(inputs):
    path = os.path.join(RUN_DIR, "cfg.pt")
    if xr.global_ordinal() == 0:
        os.makedirs(RUN_DIR, exist_ok=True)
        torch.save({"config": inputs["config"], "world_size": xr.world_size()}, path)
    xm.rendezvous("cfg.pt")
    blob = torch.load(path, weights_only=False)
    return blob["config"]
