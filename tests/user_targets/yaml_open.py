"""Config sync the way most people first write it: YAML in /tmp, a barrier, read it back."""

import os

import torch_xla.core.xla_model as xm
import yaml

CFG_DIR = "/tmp/mycfg"
CFG_PATH = os.path.join(CFG_DIR, "config.yaml")


def sync(inputs):
    cfg = inputs["config"]
    if xm.get_ordinal() == 0:
        os.makedirs(CFG_DIR, exist_ok=True)
        with open(CFG_PATH, "w") as f:
            yaml.safe_dump(cfg, f)
    xm.rendezvous("mycfg_written")
    if xm.get_ordinal() != 0:
        with open(CFG_PATH) as f:
            cfg = yaml.safe_load(f)
    return cfg
