"""``torch_xla.distributed.spmd.xla_sharding``: meshes and sharding annotations, checked as
torch_xla 2.9 checks them (its asserts, word for word), held by a process that computes
every tensor whole.

Decision (docs/reference/shim.md, "SPMD"): a process of an SPMD world holds its tensors
whole and computes the whole step on the CPU, so its state is the global state. A sharding
annotation changes no value: ``mark_sharding`` checks the mesh and the partition spec,
needs SPMD on (as the real one's C++ check does), records the spec on the tensor and
returns the tensor itself (the real one returns an ``XLAShardedTensor`` wrapping it).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import torch_xla.runtime as xr

PartitionSpec = tuple[Any, ...]


class Mesh:
    """The logical mesh of the slice's devices: ``device_ids`` laid out as ``mesh_shape``."""

    def __init__(self, device_ids: Any, mesh_shape: tuple[int, ...],
                 axis_names: tuple[str, ...] | None = None) -> None:
        if not isinstance(device_ids, np.ndarray):
            device_ids = np.array(device_ids)
        # At the moment, XLA requires that the Mesh uses the global number of devices.
        num_devices = xr.global_runtime_device_count()
        assert num_devices > 0, "This requires XLA supported device(s)."
        assert num_devices == len(device_ids), (
            f"Number of device IDs ({len(device_ids)}) must match the global number of "
            f"devices ({num_devices})")
        if axis_names is not None:
            assert len(mesh_shape) == len(axis_names), (
                f"Number of axis names ({len(axis_names)}) must match mesh dimensions "
                f"({len(mesh_shape)})")
            assert len(set(axis_names)) == len(axis_names), \
                f"Axis names must be unique, got: {axis_names}"
        expected_devices = np.prod(mesh_shape)
        assert len(device_ids) == expected_devices, (
            f"Number of device IDs ({len(device_ids)}) must match mesh size "
            f"({expected_devices})")
        assert len(device_ids) == len(np.unique(device_ids)), \
            f"Device IDs must be unique, got: {device_ids}"
        self.device_ids = device_ids
        self.mesh_shape = tuple(mesh_shape)
        self.axis_names = axis_names
        assert all(d < self.size() for d in device_ids), \
            f"Device IDs must be less than mesh size ({self.size()}), got: {device_ids}"

    def size(self) -> int:
        return int(np.prod(self.mesh_shape))

    def shape(self) -> collections.OrderedDict:
        names = self.axis_names or tuple(range(len(self.mesh_shape)))
        return collections.OrderedDict(zip(names, self.mesh_shape))

    def get_logical_mesh(self) -> np.ndarray:
        return self.device_ids.reshape(self.mesh_shape)

    def get_axis_name_idx(self, name: str) -> int | None:
        if self.axis_names is None or name not in self.axis_names:
            return None
        return self.axis_names.index(name)

    def _axis(self, entry: Any) -> list[int]:
        """The mesh dimensions one partition-spec entry names (None: replicated)."""
        if entry is None:
            return []
        if isinstance(entry, tuple):
            return [i for e in entry for i in self._axis(e)]
        if isinstance(entry, str):
            index = self.get_axis_name_idx(entry)
            if index is None:
                raise ValueError(f"Axis name {entry!r} is not in the mesh's axis names "
                                 f"{self.axis_names}")
            return [index]
        return [int(entry)]

    def check(self, partition_spec: PartitionSpec) -> None:
        """What ``_get_op_sharding_args`` checks of a partition spec against this mesh."""
        used = [i for entry in partition_spec for i in self._axis(entry)]
        assert all(0 <= i < len(self.mesh_shape) for i in used), \
            f"partition_spec ({partition_spec}) contains out of bound index into mesh_shape."
        assert len(used) == len(set(used)), \
            "Each device mesh dimension should appear at most once in partition_spec."

    def __repr__(self) -> str:
        return (f"Mesh(device_ids={self.device_ids.tolist()}, mesh_shape={self.mesh_shape}, "
                f"axis_names={self.axis_names})")


class HybridMesh(Mesh):
    """One slice's mesh (``dcn_mesh_shape`` all ones): the devices in ordinal order. A
    multislice mesh is not modelled: the real one then asks for ``dcn_mesh_shape``."""

    def __init__(self, *, ici_mesh_shape: tuple[int, ...],
                 dcn_mesh_shape: tuple[int, ...] | None = None,
                 axis_names: tuple[str, ...] | None = None) -> None:
        if dcn_mesh_shape is None:
            dcn_mesh_shape = tuple([1] * len(ici_mesh_shape))
        assert len(ici_mesh_shape) == len(dcn_mesh_shape)
        if int(np.prod(dcn_mesh_shape)) > 1:
            raise ValueError("Invalid dcn_mesh_shape for single slice mesh")
        self.ici_mesh_shape, self.dcn_mesh_shape = tuple(ici_mesh_shape), tuple(dcn_mesh_shape)
        mesh_shape = tuple(x * y for x, y in zip(ici_mesh_shape, dcn_mesh_shape))
        super().__init__(np.arange(int(np.prod(mesh_shape))), mesh_shape, axis_names)


_global_mesh: Mesh | None = None


def set_global_mesh(mesh: Mesh) -> None:
    global _global_mesh
    _global_mesh = mesh


def get_global_mesh() -> Mesh | None:
    return _global_mesh


def get_1d_mesh(axis_name: str | None = None) -> Mesh:
    n = xr.global_runtime_device_count()
    return Mesh(np.array(range(n)), (n,), None if axis_name is None else (axis_name,))


def mark_sharding(t: Any, mesh: Mesh, partition_spec: PartitionSpec) -> Any:
    """Check the annotation as the real one does and keep it on ``t`` (the tensor itself is
    returned: the process holds it whole)."""
    assert len(t.shape) == len(partition_spec), (
        f"Partition spec length ({len(partition_spec)}) should be equal to the input rank "
        f"({len(t.shape)}).")
    mesh.check(tuple(partition_spec))
    if not xr.is_spmd():
        raise RuntimeError("Please enable SPMD via `torch_xla.runtime.use_spmd()`")
    t._harness_sharding = (mesh.mesh_shape, tuple(partition_spec))
    return t


def mark_sharding_with_gradients(t: Any, mesh: Mesh, partition_spec: PartitionSpec) -> Any:
    return mark_sharding(t, mesh, partition_spec)


def clear_sharding(t: Any) -> Any:
    if hasattr(t, "_harness_sharding"):
        del t._harness_sharding
    return t
