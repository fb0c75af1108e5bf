"""``torch_xla.experimental.distributed_checkpoint``: torch_xla 2.9's CheckpointManager and
its planners over the real ``torch.distributed.checkpoint``.

A process of a world holds its tensors whole (``torch_xla.distributed.spmd``), so every
tensor a state dict holds is what torch's default planners handle; the planners take
that path of torch_xla's code, the one it takes for every tensor that is not sharded.
"""

from torch_xla.experimental.distributed_checkpoint.manager import CheckpointManager
from torch_xla.experimental.distributed_checkpoint.planners import SPMDLoadPlanner, SPMDSavePlanner
from torch_xla.experimental.distributed_checkpoint.util import prime_optimizer

__all__ = ["CheckpointManager", "SPMDSavePlanner", "SPMDLoadPlanner", "prime_optimizer"]
