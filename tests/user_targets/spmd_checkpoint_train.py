"""A trainer written the way torch_xla 2.9's distributed-checkpoint guide shows it
(docs/source/perf/spmd_distributed_checkpoint.md): SPMD, a gloo group from ``xla://``,
CheckpointManager saving asynchronously every 10 steps, restoring the newest step.

Run on every host: ``python spmd_checkpoint_train.py --ckpt-dir DIR --steps N``; it
prints one line per process with the step it resumed from and a checksum of its model.
"""

import argparse
import hashlib

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.spmd as xs
import torch_xla.distributed.xla_backend  # noqa: F401  registers xla://
import torch_xla.runtime as xr
from torch_xla.experimental.distributed_checkpoint import CheckpointManager, prime_optimizer

parser = argparse.ArgumentParser()
parser.add_argument("--ckpt-dir", required=True)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--save-interval", type=int, default=10)
args = parser.parse_args()

xr.use_spmd()
dist.init_process_group("gloo", init_method="xla://")

num_devices = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(num_devices), (num_devices, 1), ("data", "model"))

torch.manual_seed(0)
device = torch_xla.device()
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
optim = torch.optim.SGD(model.parameters(), lr=0.01)

chkpt_mgr = CheckpointManager(args.ckpt_dir, args.save_interval)

start = 0
tracked_steps = chkpt_mgr.all_steps()
if tracked_steps:
    best_step = max(tracked_steps)
    prime_optimizer(optim)
    state_dict = {"model": model.state_dict(), "optim": optim.state_dict()}
    chkpt_mgr.restore(best_step, state_dict)
    model.load_state_dict(state_dict["model"])
    optim.load_state_dict(state_dict["optim"])
    start = best_step + 1

for step in range(start, args.steps):
    g = torch.Generator().manual_seed(step)
    data = torch.randn(8, 16, generator=g).to(device)
    target = torch.randn(8, 1, generator=g).to(device)
    xs.mark_sharding(data, mesh, ("data", None))
    optim.zero_grad()
    loss = nn.functional.mse_loss(model(data), target)
    loss.backward()
    optim.step()
    torch_xla.sync()
    state_dict = {"model": model.state_dict(), "optim": optim.state_dict()}
    if chkpt_mgr.save_async(step, state_dict):
        xm.master_print(f"Checkpoint taken at step {step}")
chkpt_mgr.join()

digest = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes()
                                 for p in model.parameters())).hexdigest()[:16]
print(f"process {xr.process_index()} resumed-from {start} model {digest} "
      f"steps {chkpt_mgr.all_steps()}", flush=True)
