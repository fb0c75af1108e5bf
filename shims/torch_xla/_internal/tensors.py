"""Real CPU tensors on the wire: raw bytes out, views back in."""

from __future__ import annotations

import sys
from typing import Any


def torch():
    import torch as _torch  # lazy: a target that only exchanges bytes never pays for it
    return _torch


def is_tensor(value: Any) -> bool:
    # No torch imported means no tensor can exist: do not import it to find out.
    mod = sys.modules.get("torch")
    return mod is not None and isinstance(value, mod.Tensor)


def compiling() -> bool:
    """Is dynamo tracing the caller? (``torch.compile``: the collectives become graph ops.)"""
    mod = sys.modules.get("torch")
    return mod is not None and mod.compiler.is_compiling()


def encode_lists(lists: Any) -> str:
    """Replica groups or pairs as a string a torch op can take ("0,1;2,3"); plain string
    operations, which dynamo traces (json does not)."""
    return ";".join(",".join(str(int(x)) for x in inner) for inner in lists or [])


def decode_lists(text: str) -> list[list[int]]:
    return [[int(x) for x in inner.split(",") if x] for inner in text.split(";")] if text else []


def dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def meta(t: Any) -> tuple[str, tuple[int, ...], int]:
    return (dtype_name(t), tuple(t.shape), t.numel() * t.element_size())


def to_bytes(t: Any) -> memoryview:
    """The tensor's contents as one contiguous byte view (no copy when it can)."""
    flat = t.detach().contiguous().reshape(-1)
    return memoryview(flat.view(torch().uint8).numpy())


def pack(tensors: list[Any]) -> tuple[list[tuple[str, tuple[int, ...], int]], Any]:
    metas = [meta(t) for t in tensors]
    if len(tensors) == 1:
        return metas, to_bytes(tensors[0])
    return metas, b"".join(to_bytes(t) for t in tensors)


def from_bytes(data: bytearray, dtype: str, shape: tuple[int, ...], offset: int = 0,
               nbytes: int | None = None) -> Any:
    """A tensor over ``data[offset:offset+nbytes]`` (shares the buffer, no copy)."""
    tt = torch()
    if nbytes is None:
        nbytes = len(data) - offset
    raw = tt.frombuffer(data, dtype=tt.uint8, offset=offset, count=nbytes) if nbytes else \
        tt.empty(0, dtype=tt.uint8)
    return raw.view(getattr(tt, dtype)).reshape(shape)


def unpack(data: bytearray, metas: list[tuple[str, tuple[int, ...], int]]) -> list[Any]:
    out, offset = [], 0
    for dtype, shape, nbytes in metas:
        out.append(from_bytes(data, dtype, shape, offset, nbytes))
        offset += nbytes
    return out
