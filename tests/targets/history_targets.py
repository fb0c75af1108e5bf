"""Rank-side targets for tests/world/test_history.py: runs long enough to outgrow the history."""

import torch_xla.core.xla_model as xm


def long_run(steps: int) -> dict:
    """``steps`` empty rendezvous, then the same config on every rank."""
    for _ in range(steps):
        xm.rendezvous("step")
    return {"lr": 0.1, "steps": steps}
