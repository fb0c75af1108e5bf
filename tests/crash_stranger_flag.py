"""Two flag-file config handoffs as a stranger might write them (config-sync's contract:
``sync(cfg)`` returns the config on every rank). Used by tests/world/test_crash_states.py.

``made_early`` is the pattern seed 001's "Fixed Version" aims at, with the flag as the only
signal: the flag is fsynced, the config it vouches for is not. ``as_meant`` is seed 001's
fix as its author meant it (each ``os.fsync`` inside its ``with`` block, where the file is
still open; the seed's own places raise ValueError), the rendezvous kept."""

import os
import time

import torch_xla.core.xla_model as xm
import yaml

PATH = "/tmp/team/config.yaml"
FLAG = PATH + ".ready"


def made_early(cfg):
    if xm.get_ordinal() == 0:
        time.sleep(0.5)  # building the config takes a while; the readers are already polling
        os.makedirs(os.path.dirname(PATH), exist_ok=True)
        with open(PATH, "w") as f:
            yaml.dump(cfg, f)
        with open(FLAG, "w") as f:
            f.write("ready")
            f.flush()
            os.fsync(f.fileno())
        return cfg
    while not os.path.exists(FLAG):
        time.sleep(0.01)
    with open(PATH) as f:
        return yaml.safe_load(f)


def as_meant(cfg):
    path, flag = "/tmp/temp_config.yaml", "/tmp/temp_config.yaml.ready"
    if xm.get_ordinal() == 0:
        with open(path, "w") as f:
            yaml.dump(cfg, f)
            f.flush()
            os.fsync(f.fileno())
        with open(flag, "w") as flag_f:
            flag_f.write("ready")
            flag_f.flush()
            os.fsync(flag_f.fileno())
    xm.rendezvous("config_save")
    if xm.get_ordinal() != 0:
        for _ in range(100):
            if os.path.exists(flag):
                break
            time.sleep(0.01)
        with open(path) as f:
            return yaml.safe_load(f)
    return cfg
