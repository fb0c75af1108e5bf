"""No files at all: rank 0's config goes over xm.rendezvous as pickled bytes."""

import pickle

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr


def sync(inputs: dict) -> dict:
    payload = pickle.dumps(inputs["config"]) if xr.global_ordinal() == 0 else b""
    replies = xm.rendezvous("config_broadcast", payload)
    return pickle.loads(replies[0])
