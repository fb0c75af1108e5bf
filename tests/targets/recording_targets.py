"""Rank-side targets for tests/world/test_recording.py: a config handoff through a file
(rank 0 writes it atomically, the others read it after a rendezvous) and a
flag file other ranks poll for, as a user's own sync code would."""

import json
import os
import time

import torch_xla.core.xla_model as xm


def handoff():
    rank = xm.get_ordinal()
    os.makedirs("/tmp/x", exist_ok=True)
    if rank == 0:
        with open("/tmp/x/cfg.json.part", "w") as f:
            json.dump({"lr": 0.1}, f)  # 11 bytes
        os.rename("/tmp/x/cfg.json.part", "/tmp/x/cfg.json")
    xm.rendezvous("config")
    with open("/tmp/x/cfg.json") as f:
        cfg = json.load(f)
    # A flag file: rank 0 writes it late, the others poll for it.
    if rank == 0:
        time.sleep(0.3)
        with open("/tmp/x/ready", "w") as f:
            f.write("ok")
    else:
        deadline = time.monotonic() + 10
        while not os.path.exists("/tmp/x/ready") and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            open("/tmp/x/never")
        except FileNotFoundError:
            pass
    return cfg


def lazy_import():
    import lazy_dep

    return lazy_dep.VALUE


def slow_import():
    import slow_import_dep  # noqa: F401 - its import is what takes the time

    return "never"


def slow_package_import():
    import slow_pkg  # noqa: F401 - its import is what takes the time

    return "never"


def many_attempts(n):
    import torch_xla.core.xla_model as xm_

    if xm_.get_ordinal() == 0:
        for i in range(n):
            try:
                open(f"/tmp/missing-{i}")
            except FileNotFoundError:
                pass
    return n


def slow_to_sync(inputs):
    """A config sync whose rank 0 takes 3 s to build its config (a learning run's deadline
    below that ends HANG, above it PASS)."""
    import time

    import torch_xla.core.xla_model as xm_

    if xm_.get_ordinal() == 0:
        time.sleep(3)
    xm_.rendezvous("built")
    return dict(inputs["config"])


def loader_importing_inside(data_dir, rank, num_replicas, seed, global_batch_size):
    """A data loader factory whose model code, imported inside it, imports an installed
    package (iniconfig, through lazy_dep)."""
    import lazy_dep  # noqa: F401 - the user's own module: never preloaded itself
    import numpy as np_

    inputs = np_.load(f"{data_dir}/inputs.npy", mmap_mode="r")
    per_rank = global_batch_size // num_replicas
    rows = list(range(rank, len(inputs), num_replicas))
    return [np_.array(inputs[rows[i:i + per_rank]]) for i in range(0, len(rows) - per_rank + 1,
                                                                  per_rank)]
