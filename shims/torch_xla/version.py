"""``torch_xla.version``: the version the installed runtime's profile reports."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    if name == "__version__":
        import torch_xla

        return torch_xla.__version__
    raise AttributeError(f"module 'torch_xla.version' has no attribute {name!r}")
