"""``torch_xla.core.functions``: the collectives autograd can differentiate through,
built on ``xm``'s (which go through the runtime protocol), as the real ones are."""

from __future__ import annotations

from typing import Any

import torch
import torch_xla.core.xla_model as xm
from torch_xla import runtime as xr


class AllReduce(torch.autograd.Function):
    """``xm.all_reduce`` with a gradient: SUM passes it through (scaled), MUL scales it by the
    product of the others, MIN/MAX route it to the ranks whose input was the result."""

    @staticmethod
    def forward(ctx: Any, input: Any, reduce_type: str, scale: float, groups: Any) -> Any:  # noqa: A002
        ctx.reduce_type, ctx.scale = reduce_type, scale
        output = xm.all_reduce(reduce_type, input, scale=scale, groups=groups)
        ctx.save_for_backward(input, output)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        input, output = ctx.saved_tensors  # noqa: A001
        grad = grad_output * ctx.scale if ctx.scale != 1.0 else grad_output
        if ctx.reduce_type == xm.REDUCE_SUM:
            return grad, None, None, None
        if ctx.reduce_type == xm.REDUCE_MUL:
            scaler = torch.where(input != 0, output / input, torch.zeros_like(input))
            return grad * scaler, None, None, None
        if ctx.reduce_type in (xm.REDUCE_MIN, xm.REDUCE_MAX):
            return torch.where(input == output, grad, torch.zeros_like(grad)), None, None, None
        raise RuntimeError(f"Unsupported reduce type: {ctx.reduce_type}")


def all_reduce(reduce_type: str, value: Any, scale: float = 1.0, groups: Any = None) -> Any:
    """``xm.all_reduce`` that autograd differentiates."""
    return AllReduce.apply(value, reduce_type, scale, groups)


class AllGather(torch.autograd.Function):
    """``xm.all_gather``; the gradient of this rank's input is its slice of the output's."""

    @staticmethod
    def forward(ctx: Any, input: Any, dim: int) -> Any:  # noqa: A002
        ctx.dim, ctx.ordinal, ctx.world_size = dim, xr.global_ordinal(), xr.world_size()
        return xm.all_gather(input, dim=dim)

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        slice_size = grad_output.size(ctx.dim) // ctx.world_size
        return torch.narrow(grad_output.clone(), ctx.dim, ctx.ordinal * slice_size,
                            slice_size), None


def all_gather(value: Any, dim: int = 0) -> Any:
    """``xm.all_gather`` that autograd differentiates."""
    return AllGather.apply(value, dim)


def distributed_mm(w: Any, x: Any, split: int = 1) -> Any:
    """``w @ x`` with ``w`` sharded on its columns across the ranks (``x``'s rows are
    ``w.size(1) * world_size``), optionally in ``split`` pieces of ``x``'s columns."""
    ordinal = xr.global_ordinal()
    assert x.size(0) // xr.world_size() == w.size(1)
    if split != 1:
        size = x.size(1)
        assert size % split == 0
        splits = list(torch.split(x, size // split, dim=1))
    else:
        splits = [x]
    results = []
    for xs in splits:
        xg = all_gather(xs, dim=1)
        xgn = torch.narrow(xg, 0, ordinal * w.size(1), w.size(1))
        rwxg = all_reduce(xm.REDUCE_SUM, w @ xgn)
        results.append(torch.narrow(rwxg, 1, ordinal * xs.size(1), xs.size(1)))
    return torch.cat(results, dim=1) if len(results) > 1 else results[0]


class SyncBatchNorm(torch.nn.Module):
    """Batch norm whose statistics are the mean over every rank's batch."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = torch.nn.Parameter(torch.ones(num_features))
        self.bias = torch.nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        assert 2 <= batch.ndim <= 5 and batch.shape[1] == self.num_features
        reduce_dims = [d for d in range(batch.ndim) if d != 1]  # all but the channels
        if self.training:
            local_mean = torch.mean(batch, dim=reduce_dims)
            local_sqr_mean = torch.mean(batch * batch, dim=reduce_dims)
            scale = 1.0 / xr.world_size()
            mean = AllReduceSumLayer.apply(local_mean) * scale
            sqr_mean = AllReduceSumLayer.apply(local_sqr_mean) * scale
            var = sqr_mean - mean.pow(2)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        else:
            mean, var = self.running_mean, self.running_var
        res = torch.empty_like(batch)
        for c in range(self.num_features):
            if batch.ndim == 2:
                res = ((batch - mean) / torch.sqrt(var + self.eps)) * self.weight + self.bias
            else:
                res[:, c, ...] = ((batch[:, c, ...] - mean[c]) / torch.sqrt(var[c] + self.eps)
                                  ) * self.weight[c] + self.bias[c]
        return res

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


class AllReduceSumLayer(torch.autograd.Function):
    """A SUM all_reduce whose gradient is the SUM all_reduce of the output's gradient."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return xm.all_reduce(xm.REDUCE_SUM, x)

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        return xm.all_reduce(xm.REDUCE_SUM, grad_output)
