"""What both reference trainers share: the model, its data and its digest (pure)."""

from __future__ import annotations

import hashlib
from typing import Any

import torch


def make(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A small model and its optimizer, initialised from ``seed``."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(16, 4)
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def batch(seed: int, step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s batch at ``step``: the same in every run and every life."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1_009 + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def digest(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> str:
    """The training state (weights and the optimizer's momentum) as a short hash."""
    h = hashlib.sha256()
    for tensor in model.state_dict().values():
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    for state in optimizer.state_dict()["state"].values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, seed: int, step: int
               ) -> str:
    """One data-parallel step of this rank (gradients averaged by ``xm.optimizer_step``,
    which ends the step with its marker); the state's digest after it."""
    import torch_xla.core.xla_model as xm

    x, y = batch(seed, step, xm.get_ordinal())
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    xm.optimizer_step(optimizer, barrier=True)
    return digest(model, optimizer)


def restore(model: torch.nn.Module, optimizer: torch.optim.Optimizer, path: str) -> str:
    """Load the state ``state_of`` saved at ``path``; its digest."""
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return digest(model, optimizer)


def state_of(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int) -> dict[str, Any]:
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
