"""A rank target whose file imports nothing installed, so its fork server preloads
nothing (no torch): ``bench_world.py`` uses it to show what forking a
torch-sized interpreter costs a world."""

from __future__ import annotations


def ordinal() -> int:
    import torch_xla.runtime as xr

    return xr.global_ordinal()


def busy() -> int:
    """About a second of computing without a time call (the world's clock is held all along),
    then the rank's ordinal."""
    total = 0
    for i in range(20_000_000):
        total += i
    import torch_xla.core.xla_model as xm

    return xm.get_ordinal()
