"""``torch_xla.core.xla_model`` (xm), backed by the harness coordinator.

Semantics follow torch_xla 2.9 (see shared/reference/torch_xla.md): a world of
one rank short-circuits all_reduce; a tensor all_reduce is out of place and a
list one in place; rendezvous has no timeout and pairs calls by position, not
by tag. Under the ``current`` profile get_ordinal and xrt_world_size do not
exist, as in 2.7 and later.
"""

from __future__ import annotations

import io
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, TextIO

import torch_xla
from torch_xla._internal import link
from torch_xla._internal import tensors as _t

REDUCE_SUM = "sum"
REDUCE_MUL = "mul"
REDUCE_AND = "and"
REDUCE_OR = "or"
REDUCE_MIN = "min"
REDUCE_MAX = "max"
_REDUCE_TYPES = (REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX)


# -- ordinals and devices ------------------------------------------------------

def get_ordinal(defval: int = 0) -> int:
    """Removed in 2.7: present only under the ``legacy`` profile."""
    return link.ordinal()


def xrt_world_size(defval: int = 1) -> int:
    """Removed in 2.7: present only under the ``legacy`` profile."""
    return link.world_size()


def get_local_ordinal() -> int:
    return link.local_rank()


def is_master_ordinal(local: bool = True) -> bool:
    ordinal = get_local_ordinal() if local else link.ordinal()
    return ordinal == 0


def master_print(*args: Any, fd: TextIO = sys.stdout, local: bool = False,
                 flush: bool = False) -> None:
    if is_master_ordinal(local=local):
        print(*args, file=fd, flush=flush)


def _deprecated(new: str) -> None:
    if link.profile() == "current":
        warnings.warn(f"Use {new} instead", DeprecationWarning, stacklevel=3)


def xla_device(n: int | None = None, devkind: str | None = None) -> Any:
    _deprecated("torch_xla.device")
    return torch_xla.device(n)


def xla_device_hw(device: Any) -> str:
    link.use()
    return os.environ.get("PJRT_DEVICE", "TPU").split("_")[0]


def get_xla_supported_devices(max_devices: int | None = None) -> list[str]:
    link.use()
    devices = ["xla:0"]
    return devices[:max_devices] if max_devices is not None else devices


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    _deprecated("torch_xla.sync")
    torch_xla.sync(wait, reset_scope)


def wait_device_ops(devices: list[str] = []) -> None:  # noqa: B006 - the real signature
    link.use()


# -- groups --------------------------------------------------------------------

def _my_group(groups: list[list[int]] | None) -> list[int]:
    """The replica group this rank belongs to; checks the groups as XLA would."""
    world_size, ordinal = link.world_size(), link.ordinal()
    if not groups:
        return list(range(world_size))
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        raise RuntimeError("Replica groups must have the same number of replicas/shards.")
    seen: set[int] = set()
    mine = None
    for group in groups:
        for r in group:
            if not isinstance(r, int) or r < 0 or r >= world_size:
                raise RuntimeError(f"Invalid replica id {r!r} in groups {groups}: the world has "
                                   f"{world_size} replicas")
            if r in seen:
                raise RuntimeError(f"Replica {r} appears twice in groups {groups}")
            seen.add(r)
        if ordinal in group:
            mine = list(group)
    if mine is None:
        raise RuntimeError(f"Replica {ordinal} is not in any of the groups {groups}")
    return mine


def _plain_groups(groups: list[list[int]] | None) -> list[list[int]] | None:
    return [list(g) for g in groups] if groups else None


# -- collectives ---------------------------------------------------------------

def _always_allreduce() -> bool:
    """XLA_ALWAYS_ALLREDUCE as torch_xla reads it (xu.getenv_as(..., bool)): bool(int(value))."""
    value = os.environ.get("XLA_ALWAYS_ALLREDUCE")
    return False if value is None else bool(int(value))


def all_reduce(reduce_type: str, inputs: Any, scale: float = 1.0,
               groups: list[list[int]] | None = None, pin_layout: bool = True) -> Any:
    """Tensor: out of place, returns a new tensor. List: in place, returns the list."""
    if link.world_size() == 1 and not _always_allreduce():
        return inputs.clone() if _t.is_tensor(inputs) else inputs
    if reduce_type not in _REDUCE_TYPES:
        raise RuntimeError(f"Unknown AllReduce type: {reduce_type}")
    single = _t.is_tensor(inputs)
    tensors = [inputs] if single else list(inputs)
    if not all(_t.is_tensor(t) for t in tensors):
        raise TypeError(f"all_reduce expects a tensor or a list of tensors, got {type(inputs)}")
    _my_group(groups)
    metas, payload = _t.pack(tensors)
    _, data = link.collective("all_reduce", "reduce", payload, tensors=metas,
                              reduce=reduce_type, groups=_plain_groups(groups))
    results = _t.unpack(data, metas)
    if scale != 1.0:
        tt = _t.torch()
        results = [r.mul_(tt.tensor(scale, dtype=r.dtype)) for r in results]
    if single:
        # The real plain case goes through torch.ops._c10d_functional.all_reduce, which
        # autograd tracks; the scale/groups/unpinned case (_xla_all_reduce) does not.
        if inputs.requires_grad and scale == 1.0 and not groups and pin_layout:
            results[0].requires_grad_(True)
        return results[0]
    for t, r in zip(tensors, results):
        t.data.copy_(r)
    return inputs


def all_gather(value: Any, dim: int = 0, groups: list[list[int]] | None = None,
               output: Any = None, pin_layout: bool = True, channel_id: int | None = None,
               use_global_device_ids: bool | None = None) -> Any:
    """Concatenation along ``dim`` in group order; ``output=`` is written and returned."""
    if isinstance(value, list):  # a list only: the real one refuses a tuple (below)
        if pin_layout:
            raise RuntimeError("For xm.all_gather with list of tensors input, pin_layout=True "
                               "is not yet supported.")
        results = [all_gather(v, dim, groups, None, False) for v in value]
        if output is not None:
            if not isinstance(output, list) or not all(_t.is_tensor(o) for o in output):
                raise TypeError(f"`output` needs to be a list of Tensors, but given {type(output)}.")
            if len(output) != len(value):
                raise ValueError("`output` length doesn't match `input` length: "
                                 f"{len(output)} vs {len(value)}.")
            for o, r in zip(output, results):
                _write_out(o, r)
            return output
        return results
    if not _t.is_tensor(value):
        raise TypeError(f"`value` needs to be a Tensor or a list of Tensors, but given {type(value)}.")
    if value.dim() == 0:  # the real one sizes the gather dimension first, at any world size
        value.size(dim)  # IndexError: Dimension specified as 0 but tensor has no dimensions
    group = _my_group(groups)
    if len(group) == 1:
        result = value.clone()
    else:
        meta = _t.meta(value)
        _, data = link.collective("all_gather", "gather", _t.to_bytes(value), tensors=[meta],
                                  dim=dim, groups=_plain_groups(groups))
        chunks = _t.unpack(data, [meta] * len(group))
        result = _t.torch().cat(chunks, dim=dim)
    if output is not None:
        _write_out(output, result)
        return output
    return result


def _write_out(output: Any, result: Any) -> None:
    """``output=`` takes the result's value and shape, as the real out-collectives do (the
    XLA tensor takes the result's graph): a CPU tensor by pointing it at the result's data,
    never by a copy that would refuse, or broadcast into, another shape."""
    with _t.torch().no_grad():
        output.set_(result.to(output.dtype).contiguous())


def reduce_scatter(reduce_type: str, input: Any, scale: float, scatter_dim: int,
                   shard_count: int, groups: list[list[int]] | None = None, output: Any = None,
                   pin_layout: bool = True, channel_id: int | None = None,
                   use_global_device_ids: bool | None = None) -> Any:
    """Reduce across the group, then keep this rank's shard of ``scatter_dim``."""
    if isinstance(input, (list, tuple)):
        results = [reduce_scatter(reduce_type, t, scale, scatter_dim, shard_count, groups)
                   for t in input]
        if output is not None:
            for o, r in zip(output, results):
                _write_out(o, r)
            return output
        return results
    if not _t.is_tensor(input):
        raise TypeError(f"`input` needs to be a Tensor or a list of Tensors, but given {type(input)}.")
    if reduce_type not in _REDUCE_TYPES:
        raise RuntimeError(f"Unknown AllReduce type: {reduce_type}")
    group = _my_group(groups)
    if shard_count != len(group):
        raise RuntimeError(f"reduce_scatter: shard_count {shard_count} does not match the "
                           f"{len(group)} replicas of the group")
    if input.shape[scatter_dim] % shard_count:
        raise RuntimeError(f"reduce_scatter: dimension {scatter_dim} of size "
                           f"{input.shape[scatter_dim]} is not divisible by {shard_count}")
    if len(group) == 1:
        reduced = input.clone()
    else:
        meta = _t.meta(input)
        _, data = link.collective("reduce_scatter", "reduce", _t.to_bytes(input), tensors=[meta],
                                  reduce=reduce_type, groups=_plain_groups(groups),
                                  scatter_dim=scatter_dim)
        reduced = _t.unpack(data, [meta])[0]
    if scale != 1.0:
        reduced = reduced.mul_(_t.torch().tensor(scale, dtype=reduced.dtype))
    shard = reduced.chunk(shard_count, dim=scatter_dim)[group.index(link.ordinal())].clone()
    if output is not None:
        _write_out(output, shard)
        return output
    return shard


def all_to_all(value: Any, split_dimension: int, concat_dimension: int, split_count: int,
               groups: list[list[int]] | None = None, pin_layout: bool = True) -> Any:
    """Chunk j of every rank's value goes to the j-th rank of the group."""
    group = _my_group(groups)
    if split_count != len(group):
        raise RuntimeError(f"all_to_all: split_count {split_count} does not match the "
                           f"{len(group)} replicas of the group")
    if value.shape[split_dimension] % split_count:
        raise RuntimeError(f"all_to_all: dimension {split_dimension} of size "
                           f"{value.shape[split_dimension]} is not divisible by {split_count}")
    me = group.index(link.ordinal())
    if len(group) == 1:
        return value.clone()
    meta = _t.meta(value)
    _, data = link.collective("all_to_all", "gather", _t.to_bytes(value), tensors=[meta],
                              groups=_plain_groups(groups), split_dimension=split_dimension,
                              concat_dimension=concat_dimension)
    peers = _t.unpack(data, [meta] * len(group))
    pieces = [p.chunk(split_count, dim=split_dimension)[me] for p in peers]
    return _t.torch().cat(pieces, dim=concat_dimension)


def collective_permute(value: Any, pairs: list[list[int]]) -> Any:
    """Every ``[src, dst]`` pair sends src's value to dst; a rank no one sends to gets zeros."""
    world_size = link.world_size()
    for pair in pairs:
        if len(pair) != 2 or not all(0 <= p < world_size for p in pair):
            raise RuntimeError(f"collective_permute: invalid source-target pair {pair!r}")
    meta = _t.meta(value)
    if world_size == 1:
        return value.clone() if [0, 0] in [list(p) for p in pairs] else _t.torch().zeros_like(value)
    header, data = link.collective("collective_permute", "permute", _t.to_bytes(value),
                                   tensors=[meta], pairs=[list(p) for p in pairs])
    if header.get("none"):
        return _t.torch().zeros_like(value)
    return _t.unpack(data, [meta])[0].clone()


def collective_broadcast(tensors: list[Any], root_ordinal: int = 0,
                         groups: list[list[int]] | None = None, pin_layout: bool = True) -> None:
    """In place: every rank's tensors become the root's.

    The real op multiplies each rank's tensors by (global ordinal == root) and
    all-reduces them with SUM, so a group that does not hold the root ends with zeros.
    """
    group = _my_group(groups)
    if len(group) > 1:
        metas, payload = _t.pack(list(tensors))
        header, data = link.collective("collective_broadcast", "broadcast", payload,
                                       tensors=metas, root=root_ordinal,
                                       groups=_plain_groups(groups))
        if not header.get("none"):
            for t, r in zip(tensors, _t.unpack(data, metas)):
                t.data.copy_(r)
    if root_ordinal not in group:
        for t in tensors:
            t.data.zero_()
    return None


def broadcast_master_param(model: Any) -> None:
    params_and_buffers = list(model.parameters()) + list(model.buffers())
    collective_broadcast(params_and_buffers)
    torch_xla.sync()


def send(value: Any, channel_id: int) -> None:
    """Point-to-point send matched with ``recv`` by ``channel_id``."""
    link.send(("xm-channel", channel_id), -1, _t.to_bytes(value))


def recv(output: Any, channel_id: int) -> Any:
    data = link.recv(("xm-channel", channel_id), -1)
    output.copy_(_t.from_bytes(data, _t.dtype_name(output), tuple(output.shape)))
    return output


def rendezvous(tag: str, payload: bytes = b"", replicas: list[int] = []) -> list[bytes]:  # noqa: B006
    """Every rank's payload, in ordinal order, on every rank. No timeout."""
    world_size = link.world_size()
    if replicas and len(replicas) != world_size:
        raise ValueError("Only global rendezvous is supported")
    if not isinstance(payload, bytes):
        raise TypeError(f"`payload` must be bytes, not {type(payload)}")
    if world_size == 1:
        return [payload]
    header, data = link.collective("rendezvous", "gather_bytes", payload, tag=tag)
    out, offset = [], 0
    for size in header["sizes"]:
        out.append(bytes(data[offset:offset + size]))
        offset += size
    return out


def mesh_reduce(tag: str, data: Any, reduce_fn: Callable[[list[Any]], Any]) -> Any:
    """torch.save every rank's ``data``, rendezvous, load them all, reduce in ordinal order."""
    tt = _t.torch()
    bio = io.BytesIO()
    tt.save(data, bio)
    if link.world_size() == 1:
        gathered = [bio.getvalue()]
    else:
        header, raw = link.collective("rendezvous", "gather_bytes", bio.getvalue(), tag=tag,
                                      api="mesh_reduce")
        gathered, offset = [], 0
        for size in header["sizes"]:
            gathered.append(bytes(raw[offset:offset + size]))
            offset += size
    values = [tt.load(io.BytesIO(b)) for b in gathered]
    return reduce_fn(values) if values else data


# -- training helpers ----------------------------------------------------------

def reduce_gradients(optimizer: Any, groups: list[list[int]] | None = None,
                     pin_layout: bool = True) -> None:
    count = len(groups[0]) if groups else link.world_size()
    if count > 1:
        gradients = [p.grad for group in optimizer.param_groups for p in group["params"]
                     if p.grad is not None]
        if gradients:
            all_reduce(REDUCE_SUM, gradients, scale=1.0 / count, groups=groups,
                       pin_layout=pin_layout)


def optimizer_step(optimizer: Any, barrier: bool = False,
                   optimizer_args: dict[str, Any] = {},  # noqa: B006 - the real signature
                   groups: list[list[int]] | None = None, pin_layout: bool = True) -> Any:
    reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
    loss = optimizer.step(**optimizer_args)
    if barrier:
        torch_xla.sync()
    return loss


def save(data: Any, file_or_path: Any, master_only: bool = True,
         global_master: bool = False) -> None:
    """By default each host's local master writes; no rendezvous (callers add it)."""
    should_write = not master_only or is_master_ordinal(local=not global_master)
    if should_write:
        _t.torch().save(data, file_or_path)


# Looked up when used, so that the profile is the installed runtime's.
__getattr__ = link.legacy_only(__name__, get_ordinal, xrt_world_size)
del get_ordinal, xrt_world_size
