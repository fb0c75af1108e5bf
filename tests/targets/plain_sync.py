"""A plain config sync of a user's, for heavy_sync and light_sync: rank 0 writes the config
as YAML, a rendezvous, the others read it (naive-sync's protocol, in the user's own code)."""

import os

import torch_xla.core.xla_model as xm
import yaml

PATH = "/tmp/plain_sync/config.yaml"


def sync(inputs):
    config = dict(inputs["config"])
    if xm.get_ordinal() == 0:
        os.makedirs(os.path.dirname(PATH), exist_ok=True)
        with open(PATH, "w") as f:
            yaml.safe_dump(config, f)
    xm.rendezvous("config")
    if xm.get_ordinal() != 0:
        with open(PATH) as f:
            config = yaml.safe_load(f)
    return config
