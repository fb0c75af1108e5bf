"""A team's config sync that validates with its own strict schema (unknown keys refused):
the sample config would fail it on rank 0, so it is run with its own config (--config)."""

import json
from pathlib import Path

import pydantic
import torch_xla.core.xla_model as xm


class Model(pydantic.BaseModel, extra="forbid"):
    name: str
    layers: int


class Optimizer(pydantic.BaseModel, extra="forbid"):
    learning_rate: float
    warmup_steps: int


class TrainConfig(pydantic.BaseModel, extra="forbid"):
    model: Model
    optimizer: Optimizer
    batch_size: int


def sync_config(inputs):
    path = Path("/tmp/ourjob/config.json")
    if xm.get_ordinal() == 0:
        config = TrainConfig(**inputs["config"])  # our schema: refuses a config it does not know
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config.model_dump_json())
    xm.rendezvous("config_written")
    return TrainConfig(**json.loads(path.read_text())).model_dump()
