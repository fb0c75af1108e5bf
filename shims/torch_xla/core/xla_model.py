"""``torch_xla.core.xla_model`` (xm), backed by the harness coordinator.

Semantics follow torch_xla 2.9 (see docs/torch_xla.md): a world of
one rank short-circuits all_reduce; a tensor all_reduce is out of place and a
list one in place; rendezvous has no timeout and pairs calls by position, not
by tag. Under the ``current`` profile get_ordinal and xrt_world_size do not
exist, as in 2.7 and later.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TextIO, TypedDict

import torch_xla
from torch_xla._internal import device as _device
from torch_xla._internal import link
from torch_xla._internal import tensors as _t
from torch_xla.debug import metrics as _metrics
from torch_xla.utils import utils as xu

REDUCE_SUM = "sum"
REDUCE_MUL = "mul"
REDUCE_AND = "and"
REDUCE_OR = "or"
REDUCE_MIN = "min"
REDUCE_MAX = "max"
_REDUCE_TYPES = (REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX)


# -- ordinals and devices ------------------------------------------------------

def _spmd() -> bool:
    from torch_xla import runtime as xr

    return xr.is_spmd()


def _replicas() -> int:
    """The processes ``xm``'s collectives span: under SPMD one virtual device, as 2.9's
    ``xr.world_size()`` (the collectives are then the process's own)."""
    return 1 if _spmd() else link.world_size()


def _ordinal() -> int:
    return 0 if _spmd() else link.ordinal()


def _local_ordinal() -> int:
    return 0 if _spmd() else link.local_rank()


def get_ordinal(defval: int = 0) -> int:
    """Removed in 2.7: present only under the ``legacy`` profile."""
    return _ordinal()


def xrt_world_size(defval: int = 1) -> int:
    """Removed in 2.7: present only under the ``legacy`` profile."""
    return _replicas()


def get_local_ordinal() -> int:
    return _local_ordinal()


def is_master_ordinal(local: bool = True) -> bool:
    ordinal = get_local_ordinal() if local else _ordinal()
    return ordinal == 0


def master_print(*args: Any, fd: TextIO = sys.stdout, local: bool = False,
                 flush: bool = False) -> None:
    if is_master_ordinal(local=local):
        print(*args, file=fd, flush=flush)


def _deprecated(new: str) -> None:
    if link.since("2.8"):  # 2.8 decorated xla_device and mark_step with @deprecated
        warnings.warn(f"Use {new} instead", DeprecationWarning, stacklevel=3)


def xla_device(n: int | None = None, devkind: str | None = None) -> Any:
    _deprecated("torch_xla.device")
    return torch_xla.device(n)


def xla_device_hw(device: Any) -> str:
    link.use()
    return os.environ.get("PJRT_DEVICE", "TPU").split("_")[0]


def get_xla_supported_devices(devkind: str | None = None,
                              max_devices: int | None = None) -> list[str] | None:
    """2.7 and before: the device kind first; a kind that matches no device returns None."""
    link.use()
    devices = ["xla:0"]
    if not devkind:
        return devices[:max_devices] if max_devices else devices
    warnings.warn("`devkind` argument is deprecated and will be removed in a future release.",
                  stacklevel=1)  # as the real one: the warning points into xla_model
    if re.match(devkind + r":\d+$", xla_real_devices()[0]):
        return devices[:max_devices] if max_devices else devices
    return None


_supported_devices_by_kind = get_xla_supported_devices


def get_xla_supported_devices(max_devices: int | None = None) -> list[str]:  # noqa: F811
    """2.8 and later: ``devkind`` is gone (a 2.7 script's ``('TPU')`` is a max_devices)."""
    link.use()
    devices = ["xla:0"]
    return devices[:max_devices] if max_devices else devices


_supported_devices = get_xla_supported_devices


def get_xla_supported_devices(*args: Any, **kwargs: Any) -> list[str] | None:  # noqa: F811
    """The profile's signature (2.8 dropped ``devkind``): the two above are named as the real
    one, so that a wrong call's TypeError reads as on a TPU VM."""
    if link.since("2.8"):
        return _supported_devices(*args, **kwargs)
    return _supported_devices_by_kind(*args, **kwargs)


def xla_real_devices(devices: list[Any] | None = None) -> list[str]:
    """The chip behind each device: one per process, ``TPU:<global ordinal>`` as PJRT names it."""
    if devices:
        for d in devices:
            if str(d) not in ("xla:0", str(torch_xla.device())):
                raise RuntimeError(f"Invalid device format: {d}")
    return [f"{xla_device_hw(None)}:{_ordinal()}"]


def xla_replication_devices(local_devices: list[Any] | None = None) -> list[str]:
    """Every chip of the world, in ordinal order."""
    kind = xla_device_hw(None)
    return [f"{kind}:{i}" for i in range(_replicas())]


def set_replication(device: Any, devices: list[Any] | None) -> None:
    """PJRT's spawn sets it up for every rank; the shim's world already is."""
    link.use()


def unlazy(tensors: list[Any]) -> None:
    """Materialise ``tensors``: CPU tensors always are."""
    link.use()


def is_xla_tensor(tensor: Any) -> bool:
    """Is ``tensor`` on the XLA device? The real test is ``tensor.device.type == 'xla'``; here
    a CPU tensor is too, since a module's parameters moved with ``Module.to`` keep reading
    ``cpu`` (see docs/reference/shim.md). Like the real one, it does not start the runtime
    (a launcher that asks stays a launcher)."""
    return tensor.device.type in ("xla", "cpu")


def optimization_barrier_(tensors: list[Any]) -> None:
    """Keeps XLA from moving computation across it; eager CPU ops have nothing to move."""
    link.use()


class DeviceContext:
    """Per-device state: the step closures waiting for the next step marker."""

    def __init__(self, device: Any) -> None:
        self.device = device


_DEVICE_CONTEXTS: dict[str, DeviceContext] = {}
_DEVICE_CONTEXTS_LOCK = threading.Lock()


def _get_device_context(device: Any = None) -> DeviceContext:
    key = "xla:0" if device is None else str(device)
    with _DEVICE_CONTEXTS_LOCK:
        devctx = _DEVICE_CONTEXTS.get(key)
        if devctx is None:
            devctx = _DEVICE_CONTEXTS[key] = DeviceContext(key)
        return devctx


def add_step_closure(closure: Callable[..., Any], args: tuple[Any, ...] = (),
                     run_async: bool = False) -> None:
    """Run ``closure(*args)`` at the next step marker (``torch_xla.sync()``, ``mark_step``,
    a loader's step, ``optimizer_step(barrier=True)``), in the order added."""
    devctx = _get_device_context()
    kind = "async_step_closures" if run_async else "step_closures"
    closures = getattr(devctx, kind, None)
    if closures is None:
        closures = []
        setattr(devctx, kind, closures)
    closures.append(lambda a=args: closure(*a))


def _run_step_closures() -> DeviceContext:
    """What the real step marker does after it launches the graph: the async closures
    (run here in order, on this thread), then the others."""
    devctx = _get_device_context()
    for kind in ("async_step_closures", "step_closures"):
        closures = getattr(devctx, kind, None)
        if closures is not None:
            setattr(devctx, kind, [])
            for closure in closures:
                closure()
    return devctx


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    _deprecated("torch_xla.sync")
    torch_xla.sync(wait, reset_scope)


def wait_device_ops(devices: list[str] = []) -> None:  # noqa: B006 - the real signature
    link.use()


# -- groups --------------------------------------------------------------------

def _my_group(groups: list[list[int]] | None) -> list[int]:
    """The replica group this rank belongs to; checks the groups as XLA would."""
    world_size, ordinal = _replicas(), _ordinal()
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
    """XLA_ALWAYS_ALLREDUCE: a world of one all-reduces anyway."""
    return xu.getenv_as("XLA_ALWAYS_ALLREDUCE", bool, False)


def all_reduce(reduce_type: str, inputs: Any, scale: float = 1.0,
               groups: list[list[int]] | None = None, pin_layout: bool = True) -> Any:
    """Tensor: out of place, returns a new tensor. List: in place, returns the list."""
    if _t.compiling() and _t.is_tensor(inputs):
        return _t.torch().ops.harness_xla.all_reduce(inputs, reduce_type, float(scale),
                                                     _t.encode_lists(groups), pin_layout)
    if _replicas() == 1 and not _always_allreduce():
        return inputs.clone() if _t.is_tensor(inputs) else inputs
    if reduce_type not in _REDUCE_TYPES:
        raise RuntimeError(f"Unknown AllReduce type: {reduce_type}")
    single = _t.is_tensor(inputs)
    tensors = [inputs] if single else list(inputs)
    if not all(_t.is_tensor(t) for t in tensors):
        raise TypeError(f"all_reduce expects a tensor or a list of tensors, got {type(inputs)}")
    _my_group(groups)
    metas, payload = _t.pack(tensors)
    # The binding each real path reaches (its counter's name): the c10d functional op, the
    # out-of-place one, the in-place one for a list.
    binding = ("all_reduce" if scale == 1.0 and not groups and pin_layout else "AllReduce") \
        if single else "AllReduceInPlace"
    with _metrics._traced_collective(binding):
        _, data = link.collective("all_reduce", "reduce", payload, tensors=metas,
                                  reduce=reduce_type, groups=_plain_groups(groups))
    results = _t.unpack(data, metas)
    if scale != 1.0:
        tt = _t.torch()
        results = [r.mul_(tt.tensor(scale, dtype=r.dtype)) for r in results]
    if single:
        result = _device.like(inputs, results[0])
        # The real plain case goes through torch.ops._c10d_functional.all_reduce, which
        # autograd tracks; the scale/groups/unpinned case (_xla_all_reduce) does not.
        if inputs.requires_grad and scale == 1.0 and not groups and pin_layout:
            result.requires_grad_(True)
        return result
    for t, r in zip(tensors, results):
        t.data.copy_(r)
    return inputs


def all_gather(value: Any, dim: int = 0, groups: list[list[int]] | None = None,
               output: Any = None, pin_layout: bool = True, channel_id: int | None = None,
               use_global_device_ids: bool | None = None) -> Any:
    """Concatenation along ``dim`` in group order; ``output=`` is written and returned."""
    if _t.compiling() and _t.is_tensor(value) and output is None:
        return _t.torch().ops.harness_xla.all_gather(value, dim, _t.encode_lists(groups),
                                                     pin_layout)
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
    # The real pinned gather of a tensor is an all_reduce of padded copies (counted as one, and
    # short-circuited in a world of one); the others call the AllGather bindings at any size.
    if pin_layout and output is None:
        binding = None if _replicas() == 1 and not _always_allreduce() else \
            "all_reduce" if not groups else "AllReduce"
    else:
        binding = "AllGatherOut" if output is not None else "AllGather"
    if binding is not None:
        _metrics._count(f"xla::{binding}")
    if len(group) == 1:
        result = value.clone()
    else:
        meta = _t.meta(value)
        with _metrics._timed("LazyTracing"):
            _, data = link.collective("all_gather", "gather", _t.to_bytes(value), tensors=[meta],
                                      dim=dim, groups=_plain_groups(groups))
        chunks = _t.unpack(data, [meta] * len(group))
        result = _device.like(value, _t.torch().cat(chunks, dim=dim))
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
    if _t.compiling() and _t.is_tensor(input) and output is None:
        return _t.torch().ops.harness_xla.reduce_scatter(
            input, reduce_type, float(scale), scatter_dim, shard_count, _t.encode_lists(groups),
            pin_layout)
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
    _metrics._count("xla::ReduceScatterOut" if output is not None else "xla::ReduceScatter")
    if len(group) == 1:
        reduced = input.clone()
    else:
        meta = _t.meta(input)
        with _metrics._timed("LazyTracing"):
            _, data = link.collective("reduce_scatter", "reduce", _t.to_bytes(input),
                                      tensors=[meta], reduce=reduce_type,
                                      groups=_plain_groups(groups), scatter_dim=scatter_dim)
        reduced = _t.unpack(data, [meta])[0]
    if scale != 1.0:
        reduced = reduced.mul_(_t.torch().tensor(scale, dtype=reduced.dtype))
    shard = _device.like(input, reduced.chunk(shard_count, dim=scatter_dim)[
        group.index(_ordinal())].clone())
    if output is not None:
        _write_out(output, shard)
        return output
    return shard


def all_to_all(value: Any, split_dimension: int, concat_dimension: int, split_count: int,
               groups: list[list[int]] | None = None, pin_layout: bool = True) -> Any:
    """Chunk j of every rank's value goes to the j-th rank of the group."""
    if _t.compiling():
        return _t.torch().ops.harness_xla.all_to_all(value, split_dimension, concat_dimension,
                                                     split_count, _t.encode_lists(groups),
                                                     pin_layout)
    group = _my_group(groups)
    if split_count != len(group):
        raise RuntimeError(f"all_to_all: split_count {split_count} does not match the "
                           f"{len(group)} replicas of the group")
    if value.shape[split_dimension] % split_count:
        raise RuntimeError(f"all_to_all: dimension {split_dimension} of size "
                           f"{value.shape[split_dimension]} is not divisible by {split_count}")
    me = group.index(_ordinal())
    _metrics._count("xla::AllToAll")
    if len(group) == 1:
        return value.clone()
    meta = _t.meta(value)
    with _metrics._timed("LazyTracing"):
        _, data = link.collective("all_to_all", "gather", _t.to_bytes(value), tensors=[meta],
                                  groups=_plain_groups(groups), split_dimension=split_dimension,
                                  concat_dimension=concat_dimension)
    peers = _t.unpack(data, [meta] * len(group))
    pieces = [p.chunk(split_count, dim=split_dimension)[me] for p in peers]
    return _device.like(value, _t.torch().cat(pieces, dim=concat_dimension))


def collective_permute(value: Any, pairs: list[list[int]]) -> Any:
    """Every ``[src, dst]`` pair sends src's value to dst; a rank no one sends to gets zeros."""
    if _t.compiling():
        return _t.torch().ops.harness_xla.collective_permute(
            value, _t.encode_lists(pairs))
    world_size = _replicas()
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
    return _device.like(value, _t.unpack(data, [meta])[0].clone())


def collective_broadcast(tensors: list[Any], root_ordinal: int = 0,
                         groups: list[list[int]] | None = None, pin_layout: bool = True) -> None:
    """In place: every rank's tensors become the root's.

    The real op multiplies each rank's tensors by (global ordinal == root) and
    all-reduces them with SUM, so a group that does not hold the root ends with zeros.
    """
    group = _my_group(groups)
    if _replicas() > 1 or _always_allreduce():  # an in-place all_reduce, really
        _metrics._count("xla::AllReduceInPlace")
    if len(group) > 1:
        metas, payload = _t.pack(list(tensors))
        with _metrics._timed("LazyTracing"):
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
    torch_xla.torch_xla._marker(step=False)


def send(value: Any, channel_id: int) -> None:
    """Point-to-point send matched with ``recv`` by ``channel_id``."""
    link.send(("xm-channel", channel_id), -1, _t.to_bytes(value))


def recv(output: Any, channel_id: int) -> Any:
    data = link.recv(("xm-channel", channel_id), -1)
    output.copy_(_t.from_bytes(data, _t.dtype_name(output), tuple(output.shape)))
    return output


def _exchange(payload: bytes, tag: str | None, **meta: Any) -> list[bytes]:
    """Every rank's payload, in ordinal order: the real ``xla_rendezvous``, which all-gathers
    the sizes, then the padded payloads, between step markers (so step closures run)."""
    torch_xla.torch_xla._marker(step=False)
    counted = _replicas() > 1 or _always_allreduce()
    if _replicas() == 1:
        gathered = [payload]
    else:
        _metrics._count("xla::all_reduce")  # the sizes
        with _metrics._timed("LazyTracing"):
            header, data = link.collective("rendezvous", "gather_bytes", payload, tag=tag, **meta)
        gathered, offset = [], 0
        for size in header["sizes"]:
            gathered.append(bytes(data[offset:offset + size]))
            offset += size
    torch_xla.torch_xla._marker(step=False)
    _metrics._count("xla::_to_cpu")  # max_size.item()
    if max(len(p) for p in gathered) < 1:
        return gathered
    if counted:
        _metrics._count("xla::all_reduce")  # the padded payloads
    torch_xla.torch_xla._marker(step=False)
    # The padding's max_size.item() and size.item(), torch.split's int(max_size), sizes.cpu(),
    # and each payload's .cpu().
    _metrics._count("xla::_to_cpu", 4 + len(gathered))
    return gathered


def xla_rendezvous(payload: bytes = b"", ordinals: list[int] | None = None,
                   tag: str | None = None) -> list[bytes]:
    """Every rank's payload, in ordinal order, on every rank. No timeout."""
    if ordinals and len(ordinals) != _replicas():
        raise ValueError("Only global rendezvous is supported")
    if not isinstance(payload, bytes):
        raise TypeError(f"`payload` must be bytes, not {type(payload)}")
    return _exchange(payload, tag)


def rendezvous(tag: str, payload: bytes = b"", replicas: list[int] = []) -> list[bytes]:  # noqa: B006
    """Every rank's payload, in ordinal order, on every rank. No timeout."""
    return xla_rendezvous(payload, replicas or None, tag=tag)


def _maybe_convert_to_cpu(data: Any, convert: bool = True) -> Any:
    """``data`` with its device tensors brought to the CPU (a transfer from the device,
    counted); the shim's device tensors are CPU tensors, so they come back as they are."""
    tensors: list[Any] = []
    xu.for_each_instance(data, lambda v: _t.is_tensor(v) and type(v) is _t.torch().Tensor
                         and is_xla_tensor(v), tensors.append)
    if convert and tensors:
        _metrics._transfer("from", tensors, 0.0)  # nothing is copied: the device is the CPU
    return data


def mesh_reduce(tag: str, data: Any, reduce_fn: Callable[[list[Any]], Any]) -> Any:
    """torch.save every rank's ``data``, rendezvous, load them all, reduce in ordinal order."""
    tt = _t.torch()
    cpu_data = _maybe_convert_to_cpu(data)
    bio = io.BytesIO()
    tt.save(cpu_data, bio)
    gathered = _exchange(bio.getvalue(), tag, api="mesh_reduce")
    values = [tt.load(io.BytesIO(b)) for b in gathered]
    return reduce_fn(values) if values else cpu_data


def do_on_ordinals(target: Callable[..., Any], data: Any = (),
                   ordinals: Any = (0,)) -> Any:
    """``target(*data)`` on ``ordinals`` only, then a rendezvous of every rank."""
    running = _ordinal() in ordinals
    cpu_data = _maybe_convert_to_cpu(data, convert=running)
    result = target(*cpu_data) if running else None
    rendezvous("torch_xla.core.xla_model.do_on_ordinals")
    return result


# -- training helpers ----------------------------------------------------------

def reduce_gradients(optimizer: Any, groups: list[list[int]] | None = None,
                     pin_layout: bool = True) -> None:
    # The world size, with groups or without, as the real one scales (not the group's size).
    count = _replicas()
    if count > 1:
        gradients = [p.grad for group in optimizer.param_groups for p in group["params"]
                     if p.grad is not None]
        bucket_cap_mb = int(os.getenv("ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB", 0))
        if bucket_cap_mb > 0:
            all_reduce_bucketized_gradients(list(reversed(gradients)), scale=1.0 / count,
                                            groups=groups, pin_layout=pin_layout,
                                            bucket_cap_mb=bucket_cap_mb)
        elif gradients:
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
    cpu_data = _maybe_convert_to_cpu(data, convert=should_write)
    if should_write:
        _t.torch().save(cpu_data, file_or_path)


class ToXlaTensorArena:
    """Collects the tensors ``select_fn`` picks in a nested structure, converts them all at
    once with ``convert_fn``, and rebuilds the structure around the results."""

    def __init__(self, convert_fn: Callable[[list[Any]], list[Any]],
                 select_fn: Callable[[Any], bool]) -> None:
        self._convert_fn, self._select_fn = convert_fn, select_fn
        self._tensors: list[Any] = []

    def transform(self, inputs: Any) -> Any:
        self._tensors = []
        xu.for_each_instance(inputs, self._select_fn, self._tensors.append)
        converted = iter(self._convert_fn(self._tensors) if self._tensors else [])
        return xu.for_each_instance_rewrite(inputs, self._select_fn, lambda _: next(converted))


def send_cpu_data_to_device(datas: Any, device: Any, input_sharding: Any = None) -> Any:
    """The CPU tensors of ``datas`` (a tensor, or any nesting of them) on ``device``: one
    counted transfer. A sharding spec is SPMD, which the shim does not model."""
    if input_sharding is not None:
        from torch_xla._internal.surface import not_modelled

        not_modelled("torch_xla.core.xla_model.send_cpu_data_to_device",
                     "input_sharding is SPMD")
    tt = _t.torch()

    def convert_fn(tensors: list[Any]) -> list[Any]:
        # New device tensors: another buffer, outside the autograd graph, as on a TPU.
        start = time.perf_counter_ns()
        with tt.no_grad():
            moved = [_device.on_device(t.detach().clone()) for t in tensors]
        _metrics._transfer("to", tensors, time.perf_counter_ns() - start)
        return moved

    def select_fn(v: Any) -> bool:
        return type(v) is tt.Tensor and v.device.type == "cpu"

    if type(datas) is tt.Tensor:
        datas = [datas]
    return ToXlaTensorArena(convert_fn, select_fn).transform(datas)


def check_view_sharing(obj: Any) -> None:
    """Raise if two tensors of ``obj`` share storage (views do not survive a device move)."""
    tt = _t.torch()
    seen: set[int] = set()
    aliases: dict[int, Any] = {}

    def info(t: Any) -> str:
        return f"{t.dtype}{list(t.size())}"

    def check(t: Any) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        ptr = t.untyped_storage().data_ptr()
        if ptr in aliases:
            other = aliases[ptr]
            raise RuntimeError(f"Tensor ID {id(t), 'torch'} ({info(t)}) is sharing a view with "
                               f"tensor ID {id(other), 'torch'} ({info(other)})")
        aliases[ptr] = t

    xu.for_each_instance(obj, lambda x: type(x) is tt.Tensor, check)


class RateTracker:
    """Samples per second, smoothed (``RATE_TRACKER_SMOOTHING``, 0.4 by default)."""

    def __init__(self, smooth_factor: float | None = None) -> None:
        self._smooth_factor = xu.getenv_as("RATE_TRACKER_SMOOTHING", float, 0.4) \
            if smooth_factor is None else smooth_factor
        self._start_time = time.time()
        self._partial_time = self._start_time
        self._partial_count = 0.0
        self._partial_rate: float | None = None
        self._count = 0.0

    def add(self, count: float) -> None:
        self._count += count

    def rate(self) -> float:
        now = time.time()
        delta = now - self._partial_time
        report_rate = 0.0
        if delta > 0:
            current = self._count / delta
            report_rate = current if self._partial_rate is None else \
                (1 - self._smooth_factor) * current + self._smooth_factor * self._partial_rate
            self._partial_count += self._count
            self._count = 0.0
            self._partial_time = now
            self._partial_rate = report_rate
        return report_rate

    def global_rate(self) -> float:
        delta = time.time() - self._start_time
        count = self._partial_count + self._count
        return count / delta if delta > 0 else 0.0


# -- bucketized collectives ----------------------------------------------------

class CoalescingBuckets:
    """Runs ``func`` on buckets of the input tensors of at most ``bucket_cap_mb`` (a tensor
    larger than the cap goes alone, or with a small bucket), as the real one groups them."""

    def __init__(self, func: Callable[[Any, Any], Any], input_list: Any,
                 output_list: Any = None, bucket_cap_mb: int = 160) -> None:
        if not isinstance(input_list, list) or any(not _t.is_tensor(v) for v in input_list):
            raise TypeError(
                f"`input_list` needs to be a list of Tensors, but given {type(input_list)}.")
        if output_list is not None:
            if not isinstance(output_list, list) or any(not _t.is_tensor(v) for v in output_list):
                raise TypeError(
                    f"`output_list` needs to be a list of Tensors, but given {type(output_list)}.")
            if len(output_list) != len(input_list):
                raise ValueError("`output_list` length doesn't match `input_list` length: "
                                 f"{len(output_list)} vs {len(input_list)}.")
        self._func, self._input_list, self._output_list = func, input_list, output_list
        self._total = 0
        self._tensor_bucket: list[Any] = []
        self._output_bucket: list[Any] | None = [] if output_list else None
        self._bucket_cap = bucket_cap_mb * 1024 * 1024
        self._out_tensors: list[Any] = []

    def flush(self) -> None:
        if len(self._tensor_bucket) == 1:
            output = self._output_bucket[0] if self._output_bucket else None
            self._out_tensors.append(self._func(self._tensor_bucket[0], output))
        elif self._tensor_bucket:
            self._out_tensors.extend(self._func(self._tensor_bucket, self._output_bucket))
        self._total = 0
        self._tensor_bucket = []
        self._output_bucket = [] if self._output_list else None

    def add(self, tensor: Any, idx: int) -> None:
        self._total += tensor.numel() * tensor.element_size()
        self._tensor_bucket.append(tensor)
        if self._output_list is not None:
            self._output_bucket.append(self._output_list[idx])

    def __call__(self) -> Any:
        for idx, tensor in enumerate(self._input_list):
            tensor_bytes = tensor.numel() * tensor.element_size()
            total_new = self._total + tensor_bytes
            if (tensor_bytes > self._bucket_cap and self._total < 0.5 * self._bucket_cap
                    and total_new <= 2 * self._bucket_cap):
                self.add(tensor, idx)
                self.flush()
            else:
                if total_new > self._bucket_cap:
                    self.flush()
                self.add(tensor, idx)
        self.flush()
        assert len(self._out_tensors) == len(self._input_list)
        return self._out_tensors


def all_gather_bucketized(input_list: list[Any], dim: int = 0,
                          groups: list[list[int]] | None = None, output: Any = None,
                          pin_layout: bool = False, bucket_cap_mb: int = 160) -> list[Any]:
    """``all_gather`` of each tensor, in buckets of at most ``bucket_cap_mb``."""
    if pin_layout:
        raise RuntimeError("For xm.all_gather_bucketized, pin_layout=True is not yet supported.")

    def gather(inputs: Any, outputs: Any = None) -> Any:
        return all_gather(value=inputs, dim=dim, groups=groups, output=outputs,
                          pin_layout=pin_layout)

    return CoalescingBuckets(gather, input_list, output, bucket_cap_mb=bucket_cap_mb)()


def reduce_scatter_bucketized(reduce_type: str, input_list: Any, scale: float,
                              scatter_dim: int, shard_count: int,
                              groups: list[list[int]] | None = None, output: Any = None,
                              pin_layout: bool = False, bucket_cap_mb: int = 160) -> list[Any]:
    """``reduce_scatter`` of each tensor, in buckets of at most ``bucket_cap_mb``."""

    def scatter(inputs: Any, outputs: Any = None) -> Any:
        return reduce_scatter(reduce_type=reduce_type, input=inputs, scale=scale,
                              scatter_dim=scatter_dim, shard_count=shard_count, groups=groups,
                              output=outputs, pin_layout=pin_layout)

    return CoalescingBuckets(scatter, input_list, output, bucket_cap_mb=bucket_cap_mb)()


def all_reduce_bucketized_gradients(gradients: list[Any], scale: float,
                                    groups: list[list[int]] | None, pin_layout: bool,
                                    bucket_cap_mb: int = 0) -> None:
    """In-place SUM all_reduce of ``gradients``, one list all_reduce per bucket of at most
    ``bucket_cap_mb`` (0: one per gradient)."""
    total, bucket = 0, []
    cap = bucket_cap_mb * 1024 * 1024
    for grad in gradients:
        grad_bytes = grad.numel() * grad.element_size()
        total += grad_bytes
        if total > cap and bucket:
            all_reduce(REDUCE_SUM, bucket, scale=scale, groups=groups, pin_layout=pin_layout)
            total, bucket = grad_bytes, []
        bucket.append(grad)
    if bucket:
        all_reduce(REDUCE_SUM, bucket, scale=scale, groups=groups, pin_layout=pin_layout)


# -- random numbers and memory -------------------------------------------------

_rng_seed = 101  # the XLA device context's initial seed


def set_rng_state(seed: int, device: Any = None) -> None:
    """The device's RNG seed. The shim's device generator is torch's CPU one, so it is
    seeded too: random ops on the device repeat for a seed, as on a TPU."""
    global _rng_seed
    link.use()
    _rng_seed = int(seed)
    _t.torch().manual_seed(_rng_seed)


def get_rng_state(device: Any = None) -> int:
    """The seed last set (the real one also advances it as random ops run on the device)."""
    link.use()
    return _rng_seed


@contextlib.contextmanager
def fork_rng(device: Any = None, enabled: bool = True) -> Iterator[None]:
    """Restore the device RNG seed (and torch's CPU generator, the shim's device one) on exit."""
    if not enabled:
        yield
        return
    seed, state = get_rng_state(device), _t.torch().get_rng_state()
    try:
        yield
    finally:
        set_rng_state(seed, device)
        _t.torch().set_rng_state(state)


class MemoryInfo(TypedDict):
    bytes_used: str
    bytes_limit: int


def get_memory_info(device: Any = None) -> MemoryInfo:
    """The rank's memory as the device's: this process's resident and peak bytes, and its
    share of the machine's memory (the host's memory over its ranks) as the limit."""
    runtime = link.use()
    status: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                status[key] = int(value.split()[0]) * 1024
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"bytes_used": status.get("VmRSS", 0),  # type: ignore[typeddict-item]
            "bytes_limit": total // max(1, runtime.ranks_per_host()),
            "peak_bytes_used": status.get("VmHWM", 0)}  # type: ignore[typeddict-unknown-key]


# Looked up when used, so that the profile is the installed runtime's.
__getattr__ = link.legacy_only(__name__, get_ordinal, xrt_world_size)
del get_ordinal, xrt_world_size
