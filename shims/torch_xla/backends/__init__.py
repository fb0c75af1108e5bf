"""``torch_xla.backends``: the mat mul precision switch (kept and read back; the shim's CPU
matmuls are float32 whatever it says)."""

from __future__ import annotations

import logging

import torch_xla

logger = logging.getLogger(__name__)

__all__ = ["set_mat_mul_precision", "get_mat_mul_precision"]


def set_mat_mul_precision(precision: str) -> None:
    if precision not in ("default", "high", "highest"):
        raise ValueError(f"Invalid precision: {precision}. Must be one of default, high, highest.")
    logger.warning("Setting mat mul precision multiple times is not recommended. If you need to "
                   "do so, please empirically verify that the precision setting is behaving as "
                   "expected.")
    torch_xla._XLAC._xla_set_mat_mul_precision(precision)


def get_mat_mul_precision() -> str:
    return torch_xla._XLAC._xla_get_mat_mul_precision()
