"""JSON through pathlib like everybody else, but validated with our own pydantic schema."""

import json
from pathlib import Path

import torch_xla.core.xla_model as xm
from pydantic import BaseModel, Field

SHARE = Path("/tmp/sync_schema/train_config.json")


class TrainConfig(BaseModel):
    model_name: str
    lr: float = Field(gt=0)
    batch_size: int = Field(gt=0)
    epochs: int = Field(gt=0)
    seed: int = 0


def _from_inputs(cfg: dict) -> TrainConfig:
    return TrainConfig(model_name=cfg["arch"]["name"], lr=cfg["lr"],
                       batch_size=cfg["global_batch_size"], epochs=cfg["epochs"],
                       seed=cfg.get("seed", 0))


def sync(inputs: dict) -> dict:
    if xm.get_ordinal() == 0:
        cfg = _from_inputs(inputs["config"])
        SHARE.parent.mkdir(parents=True, exist_ok=True)
        SHARE.write_text(cfg.model_dump_json())
    xm.rendezvous("train_config")
    cfg = TrainConfig.model_validate(json.loads(SHARE.read_text()))
    return cfg.model_dump()
