"""The config model and the composition every rank does, shared by the three targets.

``PretrainConfig`` mirrors the seed's training script (seed 000/001, docs/seeds.md: a TPU fork of
TinyRecursiveModels' ``pretrain.py``): a pydantic model with a nested ``arch``
model, the data paths, the hyperparameters and the names that rank 0 fills in
(``project_name``, ``run_name``, ``checkpoint_path``). The fields without a default
are those of the real script: ``arch`` (``name`` and ``loss``, itself ``name`` and
``loss_type``), the data paths and every hyperparameter; only the names (None)
and ``seed`` (0) have defaults, so a config missing ``weight_decay`` is refused
here as it is in the real code.

``compose`` plays Hydra's part: every rank composes its own ``hydra_config``
from the base config and its host's overrides (``TRM_OVERRIDES``), which is how
one host with a different environment ends up with a different config.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from typing import Any, Optional

import pydantic
import yaml

#: The environment variable a host's overrides come from, e.g. "lr=0.5,arch.name=trm@big".
OVERRIDES_ENV = "TRM_OVERRIDES"

#: A directory that exists on every host of every world wherever the harness runs
#: (the harness package itself: a host's "/" is an overlay of this machine). It is
#: the default data path because seed 001's validation (Issue 6) asserts on rank 0
#: that every data path exists; "data/sudoku-extreme-1k" would fail that everywhere.
DATA_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class LossConfig(pydantic.BaseModel):
    """The loss head (``arch.loss``: ``name`` like ``losses@ACTLossHead``); extra keys are kept."""

    model_config = pydantic.ConfigDict(extra="allow")

    name: str
    loss_type: str


class ArchConfig(pydantic.BaseModel):
    """The model architecture (``arch.name`` like ``trm@tiny``); extra keys are kept."""

    model_config = pydantic.ConfigDict(extra="allow")

    name: str
    loss: LossConfig


class PretrainConfig(pydantic.BaseModel):
    """The training config every rank must end up holding identically."""

    arch: ArchConfig
    # Data
    data_paths: list[str]
    data_paths_test: list[str] = []
    # Hyperparameters
    global_batch_size: int
    epochs: int
    lr: float
    lr_min_ratio: float
    lr_warmup_steps: int
    weight_decay: float
    beta1: float
    beta2: float
    puzzle_emb_lr: float
    puzzle_emb_weight_decay: float
    # Names (rank 0 fills them in when they are None)
    project_name: Optional[str] = None
    run_name: Optional[str] = None
    load_checkpoint: Optional[str] = None
    checkpoint_path: Optional[str] = None
    # Extras
    seed: int = 0
    checkpoint_every_eval: bool = False
    eval_interval: Optional[int] = None
    ema: bool = False
    ema_rate: float = 0.999


def default_config() -> dict[str, Any]:
    """The base config a scenario uses when its inputs give none."""
    return {
        "arch": {"name": "trm@tiny",
                 "loss": {"name": "losses@ACTLossHead", "loss_type": "stablemax_cross_entropy"}},
        "data_paths": [DATA_DIR],
        "global_batch_size": 768,
        "epochs": 100,
        "lr": 1e-4,
        "lr_min_ratio": 1.0,
        "lr_warmup_steps": 2000,
        "weight_decay": 0.1,
        "beta1": 0.9,
        "beta2": 0.95,
        "puzzle_emb_lr": 1e-2,
        "puzzle_emb_weight_decay": 0.1,
        "seed": 0,
    }


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in, mapping by mapping; neither is modified."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets, so ``data_paths=[a,b]`` stays one override."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_overrides(text: str | None) -> dict[str, Any]:
    """``"lr=0.5,arch.name=trm@big"`` -> ``{"lr": 0.5, "arch": {"name": "trm@big"}}``.

    Values are parsed with ``yaml.safe_load`` as Hydra parses its command line.
    """
    result: dict[str, Any] = {}
    for item in _split_top_level(text or ""):
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{OVERRIDES_ENV}: {item!r} is not key=value")
        value = yaml.safe_load(raw) if raw.strip() else None
        *parents, leaf = key.strip().split(".")
        node = result
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"{OVERRIDES_ENV}: {key!r} goes through a non-mapping value")
        node[leaf] = value
    return result


def compose(config: dict[str, Any], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """This rank's ``hydra_config``: the base config with this host's overrides merged in."""
    env = os.environ if environ is None else environ
    return deep_merge(config, parse_overrides(env.get(OVERRIDES_ENV)))


def hydra_config_of(inputs: dict[str, Any]) -> dict[str, Any]:
    """The calling convention's ``inputs`` -> this rank's composed config."""
    base = inputs.get("config")
    return compose(default_config() if base is None else base)


def digest(config: dict[str, Any]) -> str:
    """sha256 of the config as canonical JSON: equal digests, equal configs."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
