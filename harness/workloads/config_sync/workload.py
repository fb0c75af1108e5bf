"""The config-sync workload: its inputs, checker and known failures (see ``__init__``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harness.checkers import config_sync
from harness.checkers.common import Judgement
from harness.workloads.base import Workload, WorkloadInputs
from harness.workloads.config_sync import PRELOAD, TARGETS
from harness.workloads.config_sync.model import default_config
from harness.world.result import WorldResult


def _default_config() -> dict[str, Any]:
    """The model's base config, as the harness's scenarios name their data and arch."""
    config = default_config()
    arch = config["arch"]  # key order kept: a target's bytes (and a torn write's cut) follow it
    config["arch"] = {"name": arch["name"], "hidden_size": 512, "num_layers": 2, "loss": arch["loss"]}
    config["data_paths"] = ["harness"]
    return config


class ConfigSyncInputs(WorkloadInputs):
    """What every config-sync cell starts from; a scenario's ``inputs`` replace keys of it."""

    #: The base config every rank composes. Free-form on purpose: a scenario may hand the
    #: targets an invalid config, and the checker (not the loader) judges what they make of it.
    config: dict[str, Any] = Field(default_factory=_default_config)
    #: robust-sync's deadline for each of its waits; below the scenarios' deadlines, so that
    #: the survivors of a dead rank fail loudly before the harness calls the world a hang.
    sync_timeout_s: float = Field(default=2.0, gt=0, le=600)
    #: unused by the seed's code (it hard-codes its paths)
    sync_dir: str | None = Field(default=None, max_length=4096)


def _validate_config(config: dict[str, Any]) -> str | None:
    from pydantic import ValidationError

    from harness.workloads.config_sync.model import PretrainConfig

    try:
        PretrainConfig.model_validate(config)
    except ValidationError as exc:
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
    return None


def _another_run(inputs: ConfigSyncInputs) -> ConfigSyncInputs:
    """Another run of the same job: another name, learning rate and seed."""
    config = dict(inputs.config)
    config["lr"] = float(config.get("lr") or 1e-4) * 10
    config["seed"] = int(config.get("seed") or 0) + 1
    if config.get("run_name") is not None:
        config["run_name"] = f"{config['run_name']}-previous"
    return inputs.model_copy(update={"config": config})


def check(result: WorldResult) -> Judgement:
    return config_sync.check(result, validate=_validate_config)


def check_users(result: WorldResult) -> Judgement:
    """A user's config need not be the seed's: every rank ends with the same one."""
    return config_sync.check(result)


# Which catalog cells the seed's code fails: recorded as the strict xfails of
# pytest. A known failure that starts passing is reported as unexpected.
CATALOG = (
    "baseline", "missing-file", "partial-write", "empty-file", "corrupt-file", "stale-leftover",
    "isolated-tmp", "transient-eio", "disk-full", "permission-denied", "read-only-fs",
    "slow-writer", "visibility-delay", "writer-killed", "rank0-raises", "divergent-slugs",
    "divergent-input", "concurrent-jobs", "api-drift")
# The seed's current code survives only what a shared /tmp and luck allow.
_NAIVE_KNOWN = frozenset(CATALOG) - {"baseline", "divergent-slugs", "divergent-input"}
# The seed's proposed fix calls os.fsync on a file its `with` block already closed:
# rank 0 raises ValueError before the rendezvous, every time, so it fails everything.
_SEED_FIX_KNOWN = frozenset(CATALOG)

WORKLOAD = Workload(
    "config-sync", ConfigSyncInputs, check, targets=TARGETS,
    known_failures={"naive-sync": _NAIVE_KNOWN, "seed-fix-sync": _SEED_FIX_KNOWN},
    preload=PRELOAD, catalog_order=CATALOG, another_run=_another_run,
    user_checker=check_users)
