"""``torch_xla.distributed.spmd``: meshes and sharding annotations (``xla_sharding``); a
process of an SPMD world holds its tensors whole. The rest of the real package's names
raise NotModelledError when used."""

from torch_xla.distributed.spmd.xla_sharding import (
    HybridMesh,
    Mesh,
    clear_sharding,
    get_1d_mesh,
    get_global_mesh,
    mark_sharding,
    mark_sharding_with_gradients,
    set_global_mesh,
)

__all__ = ["Mesh", "HybridMesh", "mark_sharding", "mark_sharding_with_gradients",
           "clear_sharding", "get_1d_mesh", "set_global_mesh", "get_global_mesh"]
