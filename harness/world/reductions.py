"""Element-wise reductions the coordinator performs for all_reduce and
reduce_scatter. numpy where it can; torch (imported lazily) for dtypes numpy
lacks, such as bfloat16."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class ReductionError(TypeError):
    pass


def _numpy_op(reduce_type: str, dtype: np.dtype):
    if reduce_type == "sum":
        return np.add
    if reduce_type == "mul":
        return np.multiply
    if reduce_type == "min":
        return np.minimum
    if reduce_type == "max":
        return np.maximum
    if reduce_type in ("and", "or"):
        if dtype == np.bool_:
            return np.logical_and if reduce_type == "and" else np.logical_or
        if np.issubdtype(dtype, np.integer):
            return np.bitwise_and if reduce_type == "and" else np.bitwise_or
        raise ReductionError(f"reduce type {reduce_type!r} is not defined for {dtype} tensors")
    raise ReductionError(f"Invalid reduce type: {reduce_type}")


def reduce_buffers(reduce_type: str, dtype: str, buffers: Sequence[bytes | bytearray]) -> bytes:
    """Reduce equal-length raw buffers of ``dtype`` element-wise, in ordinal order."""
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        return _reduce_with_torch(reduce_type, dtype, buffers)
    op = _numpy_op(reduce_type, np_dtype)
    acc = np.frombuffer(buffers[0], dtype=np_dtype).copy()
    for buf in buffers[1:]:
        op(acc, np.frombuffer(buf, dtype=np_dtype), out=acc)
    return acc.tobytes()


def _reduce_with_torch(reduce_type: str, dtype: str, buffers: Sequence[bytes | bytearray]) -> bytes:
    import torch

    tdtype = getattr(torch, dtype, None)
    if not isinstance(tdtype, torch.dtype):
        raise ReductionError(f"unsupported dtype {dtype!r}")
    tensors = [torch.frombuffer(bytearray(b), dtype=tdtype) for b in buffers]
    acc = tensors[0].clone()
    for t in tensors[1:]:
        if reduce_type == "sum":
            acc.add_(t)
        elif reduce_type == "mul":
            acc.mul_(t)
        elif reduce_type == "min":
            acc = torch.minimum(acc, t)
        elif reduce_type == "max":
            acc = torch.maximum(acc, t)
        else:
            raise ReductionError(f"reduce type {reduce_type!r} is not defined for {dtype} tensors")
    # numpy has no bfloat16: hand back the raw bits.
    return acc.view(torch.uint8).numpy().tobytes()
