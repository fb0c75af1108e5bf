"""A team's config sync that stages through its pod's NFS mount: rank 0 writes
/mnt/shared/jobcfg/config.json (tmp + rename), the others poll for it for 20 seconds of
their own clock and give up with a TimeoutError. Correct on a pod whose /mnt/shared is one
filesystem; on hosts that each have their own /mnt/shared it cannot work."""

import json
import os
import time

import torch_xla.runtime as xr

STAGE = "/mnt/shared/jobcfg"


def sync(inputs):
    path = os.path.join(STAGE, "config.json")
    if xr.global_ordinal() == 0:
        os.makedirs(STAGE, exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump(inputs["config"], f)
        os.replace(path + ".tmp", path)
    deadline = time.time() + 20
    while not os.path.exists(path):
        if time.time() > deadline:
            raise TimeoutError(f"no config at {path} after 20s")
        time.sleep(0.2)
    with open(path) as f:
        return json.load(f)
