"""A stranger's asyncio config sync: rank 0 writes the config in place (``open("w")``, then
``json.dump``), the others poll ``os.path.exists`` a tenth of a second apart and read it
as soon as it is there. A reader that finds the file between rank 0's open and its write
reads it empty (``JSONDecodeError``): a race at one instant, real on a pod too."""

import asyncio
import json
import os

import torch_xla.core.xla_model as xm

CFG = "/tmp/async_cfg/config.json"


async def _publish(config):
    os.makedirs(os.path.dirname(CFG), exist_ok=True)
    with open(CFG, "w") as f:
        await asyncio.sleep(0)  # the loop may run something else between open and write
        json.dump(config, f)
    return config


async def _wait_for_config(deadline_s=30.0):
    loop = asyncio.get_running_loop()
    give_up = loop.time() + deadline_s
    while loop.time() < give_up:
        if os.path.exists(CFG):
            with open(CFG) as f:
                return json.load(f)
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{CFG} did not appear in {deadline_s} s")


def sync(inputs):
    if xm.get_ordinal() == 0:
        return asyncio.run(_publish(inputs["config"]))
    return asyncio.run(_wait_for_config())
