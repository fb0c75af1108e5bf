"""The config-sync workload: its inputs, checker and known failures (see ``__init__``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harness.checkers import config_sync
from harness.vocabulary import MAX_TIMEOUT
from harness.workloads.base import Learning, Workload, WorkloadInputs
from harness.workloads.config_sync import PRELOAD, TARGETS
from harness.workloads.config_sync.model import default_config

#: Where a target given its own config is learned: the baseline's setting.
LEARNING_TOPOLOGY = "single-host-8"


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
    #: robust-sync's deadline for each of its waits (half a minute: ranks of one job arrive
    #: seconds apart); below every deadline, a scenario's and a pod cell's, so that the
    #: survivors of a dead rank fail loudly before the harness calls the world a hang
    sync_timeout_s: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT)
    #: unused by the seed's code (it hard-codes its paths)
    sync_dir: str | None = Field(default=None, max_length=4096)


def _another_run(inputs: ConfigSyncInputs) -> ConfigSyncInputs:
    """Another run of the same job: another learning rate, seed and run name, each where
    the config has it. A user's config with none of them (``--config``) changes its first
    top-level number instead, so that no key its schema does not know is added."""
    config = dict(inputs.config)
    changed = False
    if isinstance(config.get("lr"), (int, float)) and not isinstance(config["lr"], bool):
        config["lr"], changed = float(config["lr"] or 1e-4) * 10, True
    if isinstance(config.get("seed"), int) and not isinstance(config["seed"], bool):
        config["seed"], changed = config["seed"] + 1, True
    if isinstance(config.get("run_name"), str):
        config["run_name"], changed = f"{config['run_name']}-previous", True
    if not changed:
        number = next((k for k, v in config.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)), None)
        if number is not None:
            config[number] = config[number] + 1
        else:  # nothing to change in its own keys: the sample's way
            config["lr"], config["seed"] = 1e-3, 1
    return inputs.model_copy(update={"config": config})


def _learning(inputs: ConfigSyncInputs) -> Learning | None:
    """A target given the user's own config (``--config``) is learned from a fault-free run
    with that config, on the plain setting (eight ranks on one host); the sample's is the
    workload's default learning."""
    if inputs.config == _default_config():
        return None
    plain = ConfigSyncInputs(config=inputs.config, sync_timeout_s=inputs.sync_timeout_s)
    return Learning(topology=LEARNING_TOPOLOGY, inputs=plain)


# Which catalog cells the seed's code fails: recorded as the strict xfails of
# pytest. A known failure that starts passing is reported as unexpected.
CATALOG = (
    "baseline", "missing-file", "partial-write", "empty-file", "corrupt-file", "stale-leftover",
    "isolated-tmp", "transient-eio", "disk-full", "permission-denied", "read-only-fs",
    "slow-writer", "visibility-delay", "writer-killed", "rank0-raises", "divergent-slugs",
    "divergent-input", "concurrent-jobs", "api-drift")
# The seed's current code survives only what a shared /tmp and luck allow, and a slow
# writer: its readers wait in the rendezvous rank 0 reaches only once the file is written
# (Issue 2's flag file and its 100 x 10 ms of polling is what a slow writer defeats).
_NAIVE_KNOWN = frozenset(CATALOG) - {"baseline", "divergent-slugs", "divergent-input",
                                     "slow-writer"}
# The seed's proposed fix calls os.fsync on a file its `with` block already closed:
# rank 0 raises ValueError before the rendezvous, every time, so it fails everything.
_SEED_FIX_KNOWN = frozenset(CATALOG)

WORKLOAD = Workload(
    "config-sync", ConfigSyncInputs, config_sync.check, targets=TARGETS,
    known_failures={"naive-sync": _NAIVE_KNOWN, "seed-fix-sync": _SEED_FIX_KNOWN},
    preload=PRELOAD, catalog_order=CATALOG, another_run=_another_run, learning=_learning,
    validator="harness.workloads.config_sync.model:PretrainConfig")
