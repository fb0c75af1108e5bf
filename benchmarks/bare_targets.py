"""A rank target whose file imports nothing installed, so its fork server preloads
nothing (no torch): ``bench_world.py`` uses it to show what forking a
torch-sized interpreter costs a world."""

from __future__ import annotations


def ordinal() -> int:
    import torch_xla.runtime as xr

    return xr.global_ordinal()
