"""``prime_optimizer``: give an optimizer its state before a restore loads into it."""

from __future__ import annotations

from typing import Any

import torch
import torch_xla
import torch_xla.core.xla_model as xm


def prime_optimizer(optimizer: Any) -> Any:
    """Step ``optimizer`` once on zero gradients, so its state exists to be loaded into (as
    torch_xla 2.9 does; a sharded parameter's gradient would be sharded alike). Its syncs
    are no training step of the target's (no step time, not counted)."""
    torch_xla.torch_xla._marker(step=False)
    xm.wait_device_ops()
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.requires_grad:
                param.grad = torch.zeros_like(param)
    optimizer.step()
    torch_xla.torch_xla._marker(step=False)
    xm.wait_device_ops()
    return optimizer
