"""Config sync through a JSON file, pathlib style."""

import json
from pathlib import Path

import torch_xla.core.xla_model as xm

SYNC_FILE = Path("/tmp/sync/cfg.json")


def sync(inputs: dict) -> dict:
    rank = xm.get_ordinal()
    if rank == 0:
        SYNC_FILE.parent.mkdir(parents=True, exist_ok=True)
        SYNC_FILE.write_text(json.dumps(inputs["config"], indent=2))
    xm.rendezvous("cfg_json_ready")
    return json.loads(SYNC_FILE.read_text())
