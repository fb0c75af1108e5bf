"""The reference config model requires what the real training script's PretrainConfig requires."""

from __future__ import annotations

import copy

import pydantic
import pytest

from harness.workloads.config_sync.model import PretrainConfig, default_config
from harness.workloads.config_sync.workload import _default_config

REQUIRED_TOP = ("arch", "data_paths", "global_batch_size", "epochs", "lr", "lr_min_ratio",
                "lr_warmup_steps", "weight_decay", "beta1", "beta2", "puzzle_emb_lr",
                "puzzle_emb_weight_decay")
REQUIRED_NESTED = (("arch", "name"), ("arch", "loss"), ("arch", "loss", "name"),
                   ("arch", "loss", "loss_type"))
OPTIONAL_NAMES = ("project_name", "run_name", "checkpoint_path", "load_checkpoint", "seed")


def _without(config: dict, path: tuple[str, ...]) -> dict:
    out = copy.deepcopy(config)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


@pytest.mark.parametrize("base", [default_config, _default_config], ids=["model", "workload"])
@pytest.mark.parametrize("path", [(f,) for f in REQUIRED_TOP] + list(REQUIRED_NESTED),
                         ids=lambda p: ".".join(p))
def test_a_config_missing_a_required_field_is_refused_naming_it(base, path):
    with pytest.raises(pydantic.ValidationError) as info:
        PretrainConfig.model_validate(_without(base(), path))
    locs = [tuple(str(p) for p in err["loc"]) for err in info.value.errors()]
    assert path in locs, locs
    assert all(err["type"] == "missing" for err in info.value.errors())


@pytest.mark.parametrize("base", [default_config, _default_config], ids=["model", "workload"])
def test_the_defaults_validate_and_only_the_names_and_seed_may_be_missing(base):
    config = base()
    for name in OPTIONAL_NAMES:
        config.pop(name, None)
    parsed = PretrainConfig.model_validate(config)
    assert parsed.project_name is None and parsed.run_name is None
    assert parsed.checkpoint_path is None and parsed.load_checkpoint is None
    assert parsed.seed == 0
    assert parsed.arch.loss.loss_type == "stablemax_cross_entropy"
