"""The shim's collectives as torch ops, for ``torch.compile``.

The real collectives are ops of the traced graph (``torch.ops._c10d_functional``,
``torch.ops.xla``), so dynamo traces ``xm.all_reduce`` and its kin into one graph,
even with ``fullgraph=True``. The shim's are Python that talks to the harness
over a socket, which dynamo cannot trace: under ``torch.compile`` each ``xm``
collective calls its op here instead, which dynamo records as one node (its
shape from the fake implementation) and which runs the eager collective when
the graph runs. Registered when torch is imported (``torch_xla/__init__.py``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.library import custom_op
from torch_xla._internal import link
from torch_xla._internal import tensors as _t


def _groups(groups: str) -> list[list[int]] | None:
    return _t.decode_lists(groups) or None


def _group_size(groups: str) -> int:
    decoded = _groups(groups)
    return len(decoded[0]) if decoded else link.world_size()


@custom_op("harness_xla::all_reduce", mutates_args=())
def all_reduce(x: torch.Tensor, reduce_type: str, scale: float, groups: str,
               pin_layout: bool) -> torch.Tensor:
    from torch_xla.core import xla_model as xm

    return xm.all_reduce(reduce_type, x, scale=scale, groups=_groups(groups),
                         pin_layout=pin_layout).clone()


@all_reduce.register_fake
def _(x: torch.Tensor, reduce_type: str, scale: float, groups: str,
      pin_layout: bool) -> torch.Tensor:
    return torch.empty_like(x)


@custom_op("harness_xla::all_gather", mutates_args=())
def all_gather(x: torch.Tensor, dim: int, groups: str, pin_layout: bool) -> torch.Tensor:
    from torch_xla.core import xla_model as xm

    return xm.all_gather(x, dim=dim, groups=_groups(groups), pin_layout=pin_layout)


@all_gather.register_fake
def _(x: torch.Tensor, dim: int, groups: str, pin_layout: bool) -> torch.Tensor:
    shape = list(x.shape)
    shape[dim] *= _group_size(groups)
    return x.new_empty(shape)


@custom_op("harness_xla::reduce_scatter", mutates_args=())
def reduce_scatter(x: torch.Tensor, reduce_type: str, scale: float, scatter_dim: int,
                   shard_count: int, groups: str, pin_layout: bool) -> torch.Tensor:
    from torch_xla.core import xla_model as xm

    return xm.reduce_scatter(reduce_type, x, scale, scatter_dim, shard_count,
                             groups=_groups(groups), pin_layout=pin_layout)


@reduce_scatter.register_fake
def _(x: torch.Tensor, reduce_type: str, scale: float, scatter_dim: int, shard_count: int,
      groups: str, pin_layout: bool) -> torch.Tensor:
    shape = list(x.shape)
    shape[scatter_dim] //= shard_count
    return x.new_empty(shape)


@custom_op("harness_xla::all_to_all", mutates_args=())
def all_to_all(x: torch.Tensor, split_dimension: int, concat_dimension: int, split_count: int,
               groups: str, pin_layout: bool) -> torch.Tensor:
    from torch_xla.core import xla_model as xm

    return xm.all_to_all(x, split_dimension, concat_dimension, split_count,
                         groups=_groups(groups), pin_layout=pin_layout).clone()


@all_to_all.register_fake
def _(x: torch.Tensor, split_dimension: int, concat_dimension: int, split_count: int,
      groups: str, pin_layout: bool) -> torch.Tensor:
    shape = list(x.shape)
    shape[split_dimension] //= split_count
    shape[concat_dimension] *= split_count
    return x.new_empty(shape)


@custom_op("harness_xla::collective_permute", mutates_args=())
def collective_permute(x: torch.Tensor, pairs: str) -> torch.Tensor:
    from torch_xla.core import xla_model as xm

    return xm.collective_permute(x, _t.decode_lists(pairs)).clone()


@collective_permute.register_fake
def _(x: torch.Tensor, pairs: str) -> torch.Tensor:
    return torch.empty_like(x)


def traced(name: str, *args: Any) -> Any:
    """Call the op ``name`` (from inside a function dynamo is tracing)."""
    return getattr(torch.ops.harness_xla, name)(*args)
