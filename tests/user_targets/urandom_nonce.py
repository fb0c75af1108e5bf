"""A config sync that stamps its config with a nonce from ``/dev/urandom`` (a run id, as
people make them): the same seed cannot give the same result twice."""

import torch_xla.core.xla_model as xm


def sync(inputs):
    config = dict(inputs["config"])
    with open("/dev/urandom", "rb") as f:
        config["nonce"] = f.read(8).hex()
    xm.rendezvous("nonce")
    return config
