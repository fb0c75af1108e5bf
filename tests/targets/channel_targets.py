"""Targets for the world's channel: every rank meets the others, then raises."""

import torch_xla.core.xla_model as xm


def raises_after_rendezvous() -> None:
    xm.rendezvous("met")
    raise RuntimeError("this target always raises")
