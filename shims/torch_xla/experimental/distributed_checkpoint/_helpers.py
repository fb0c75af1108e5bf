"""What torch_xla's planners and manager share: flattening a state dict, removing the
plans' duplicate writes, moving a state dict to the CPU. torch_xla 2.9 keeps copies of
torch's helpers here; the shim uses torch's own."""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.distributed.checkpoint._dedup_tensors import dedup_tensors
from torch.distributed.checkpoint._nested_dict import FLATTEN_MAPPING, flatten_state_dict
from torch.distributed.checkpoint._traverse import set_element

__all__ = ["FLATTEN_MAPPING", "dedup_tensors", "flatten_state_dict", "narrow_tensor_by_index",
           "set_element", "_sharded_cpu_state_dict"]


def _sharded_cpu_state_dict(state_dict: Any) -> Any:
    """The state dict with every tensor on the CPU (``save_async`` hands this copy to its
    thread). A process of a world holds no sharded tensor: each tensor is copied whole, as
    ``_xla_get_cpu_tensors`` copies a device tensor to the host."""
    if isinstance(state_dict, dict):
        return {k: _sharded_cpu_state_dict(v) for k, v in state_dict.items()}
    if isinstance(state_dict, list):
        return [_sharded_cpu_state_dict(v) for v in state_dict]
    if isinstance(state_dict, tuple):
        return tuple(_sharded_cpu_state_dict(v) for v in state_dict)
    if isinstance(state_dict, torch.Tensor):
        return state_dict.detach().cpu().clone()
    return state_dict
