"""A stranger's SPMD training script, written from torch_xla's SPMD user guide: one process
per host (launched on every TPU VM), a 2D mesh over every device, the batch sharded along
the data axis, a step marked with ``xm.mark_step()``. Run it with
``harness exec -t v4-64-spmd -- python spmd_train.py``."""

import numpy as np
import torch
import torch.nn as nn
import torch_xla.core.xla_model as xm
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

xr.use_spmd()

num_devices = xr.global_runtime_device_count()
mesh_shape = (num_devices // 2, 2)
device_ids = np.array(range(num_devices))
mesh = xs.Mesh(device_ids, mesh_shape, ("data", "model"))

device = xm.xla_device()
torch.manual_seed(42)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
xs.mark_sharding(model[0].weight, mesh, ("model", None))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()

for _step in range(5):
    data = torch.randn(64, 16).to(device)
    target = torch.randn(64, 1).to(device)
    xs.mark_sharding(data, mesh, ("data", None))
    optimizer.zero_grad()
    loss = loss_fn(model(data), target)
    loss.backward()
    optimizer.step()
    xm.mark_step()

if xr.process_index() == 0:
    print(f"trained 5 steps on {num_devices} devices over {xr.process_count()} hosts; "
          f"loss {loss.item():.4f}")
