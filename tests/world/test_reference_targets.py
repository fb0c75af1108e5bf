"""The three config-sync reference targets do what the seeds (and our recipe) say.

The targets run as real rank processes; the helper targets at the bottom of this
file are loaded by the ranks as ``tests/world/test_reference_targets.py:name``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from harness import CRASH, ERROR, HANG, PASS, run_world
from harness.reports.diagnosis import describe
from harness.workloads.config_sync import PRELOAD, TARGETS
from harness.workloads.config_sync.model import (
    PretrainConfig,
    compose,
    default_config,
    digest,
    parse_overrides,
)

from support import REPO

HERE = Path(__file__).resolve()
NAIVE, SEED_FIX, ROBUST = TARGETS["naive-sync"], TARGETS["seed-fix-sync"], TARGETS["robust-sync"]
KILL_WRITER = {"kind": "kill", "rank": 0, "op": "collective", "tag": "config_save"}


def inputs(**changes: Any) -> dict[str, Any]:
    config = default_config()
    config.update(changes)
    return {"config": config, "sync_timeout_s": 2.0}


def world(target: str, topology: str = "v4-64", timeout: float = 15.0, args: Any = None,
          **kwargs: Any):
    return run_world(target, topology=topology, timeout=timeout, preload=PRELOAD, cwd=str(REPO),
                     args=args if isinstance(args, tuple) else (args or inputs(),), **kwargs)


def helper(name: str) -> str:
    return f"{HERE}:{name}"


def assert_one_valid_config(result) -> dict[str, Any]:
    assert result.outcome == PASS, describe(result)
    assert len({digest(v) for v in result.values}) == 1, result.values
    PretrainConfig(**result.values[0])
    return result.values[0]


# -- composition ---------------------------------------------------------------

def test_overrides_are_parsed_like_hydra_and_merged_deeply():
    assert parse_overrides("lr=0.5,arch.name=trm@big,data_paths=[a,b],run_name=") == {
        "lr": 0.5, "arch": {"name": "trm@big"}, "data_paths": ["a", "b"], "run_name": None}
    base = {"arch": {"name": "trm@tiny", "depth": 2}, "lr": 1e-4}
    composed = compose(base, {"TRM_OVERRIDES": "arch.name=trm@big"})
    assert composed == {"arch": {"name": "trm@big", "depth": 2}, "lr": 1e-4}
    assert base["arch"]["name"] == "trm@tiny", "the base config is not modified"
    with pytest.raises(ValueError, match="TRM_OVERRIDES"):
        parse_overrides("lr")


# -- naive-sync ----------------------------------------------------------------

def test_naive_passes_where_tmp_is_shared():
    config = assert_one_valid_config(world(NAIVE, "single-host-8"))
    assert config["project_name"] == "Harness-TRM-TPU"
    assert config["run_name"].startswith("tiny_") and "-" in config["run_name"], "a coolname slug"
    assert config["checkpoint_path"] == f"kellen/checkpoints/Harness-TRM-TPU/{config['run_name']}"


def test_naive_readers_find_no_file_on_a_real_v4_64():
    result = world(NAIVE, "v4-64")
    assert result.outcome == ERROR
    assert result.ranks[0].outcome == PASS
    for r in result.ranks[1:]:
        assert r.error["type"] == "FileNotFoundError", r.summary()
        assert "/tmp/temp_config.yaml" in r.error["message"]


def test_naive_run_name_is_random_state_not_config():
    one, two = (world(NAIVE, "single-host-8", seed=s).values[0]["run_name"] for s in (1, 2))
    assert one != two, "coolname draws from the rank's random state: another seed, another name"


def test_naive_uses_the_legacy_api_that_2_7_removed():
    result = world(NAIVE, "v4-64", profile="current")
    assert result.outcome == ERROR
    assert {r.error["type"] for r in result.ranks} == {"AttributeError"}
    assert "get_ordinal" in result.ranks[0].error["message"]


# -- seed-fix-sync ---------------------------------------------------------------

def test_seed_fix_fsyncs_a_closed_file_and_the_readers_wait_forever():
    # Every rank probes its sync directory with the same `.test_write` file: a rank whose
    # probe another's os.remove beat fails over to /tmp, and one beaten twice raises the
    # seed's RuntimeError. Ranks at one instant act in the seed's order (issue 45), so
    # which ranks are beaten is the seed's: at some seeds rank 0 gets through to the fsync.
    def through(seed: int):
        result = world(SEED_FIX, "single-host-8", timeout=5, seed=seed)
        return result if result.ranks[0].error["type"] == "ValueError" else None

    result = next(r for r in map(through, range(30)) if r is not None)
    assert result.outcome == HANG
    assert result.ranks[0].error["type"] == "ValueError"
    assert "closed file" in result.ranks[0].error["message"]
    for r in result.ranks[1:]:
        assert r.outcome == HANG or (r.outcome == ERROR and "shared writable directory"
                                     in r.error["message"]), describe(result)
    assert any(r.outcome == HANG for r in result.ranks[1:]), describe(result)
    assert "config_save" in result.detail()


def test_seed_fix_probes_one_file_from_every_rank_and_the_race_is_named():
    result = world(SEED_FIX, "single-host-8", timeout=5, seed=0)
    raced = {e.detail["path"] for e in result.history if e.kind == "race"}
    assert "/tmp/.test_write" in raced, describe(result)
    beaten = [r for r in result.ranks if r.outcome == ERROR]
    # Who wins the probe is the seed's order of ranks: the losers cannot find a directory;
    # a winner that goes on meets the seed's other bug (fsync of a closed file, 001:105).
    assert beaten and all(
        (r.error["type"] == "RuntimeError"
         and "Cannot find a shared writable directory" in r.error["message"])
        or (r.error["type"] == "ValueError" and "I/O operation on closed file" in r.error["message"])
        for r in beaten), describe(result)
    assert any(r.error["type"] == "RuntimeError" for r in beaten), describe(result)


def test_seed_fix_alone_names_the_run_by_md5_and_checks_data_paths():
    # World size 1 skips the sync, so the seed's naming and validation show on their own.
    config = assert_one_valid_config(world(SEED_FIX, "1x1"))
    assert config["run_name"] == "tiny_" + hashlib.md5(b"trm@tiny_0_768").hexdigest()[:6]
    missing = world(SEED_FIX, "1x1", args=inputs(data_paths=["data/sudoku-extreme-1k"]))
    assert missing.ranks[0].error["type"] == "AssertionError"
    assert "Data path not found: data/sudoku-extreme-1k" in missing.ranks[0].error["message"]


# -- robust-sync ------------------------------------------------------------------

@pytest.mark.parametrize("topology,profile", [("single-host-8", "legacy"), ("v4-64", "legacy"),
                                              ("v4-64", "current")])
def test_robust_passes(topology, profile):
    config = assert_one_valid_config(world(ROBUST, topology, profile=profile))
    composed = json.dumps(PretrainConfig(**default_config()).model_dump(), sort_keys=True,
                          separators=(",", ":"))
    assert config["run_name"] == "tiny_" + hashlib.sha256(composed.encode()).hexdigest()[:8]
    assert config["checkpoint_path"] == f"checkpoints/Harness-TRM-TPU/{config['run_name']}"


def test_robust_run_name_is_derived_from_the_config():
    names = {world(ROBUST, "v4-64", seed=s).values[0]["run_name"] for s in (1, 2)}
    assert len(names) == 1, "the seed of the ranks' generators does not matter"
    other = world(ROBUST, "v4-64", args=inputs(lr=0.5)).values[0]["run_name"]
    assert other not in names, "another config, another name"


def test_robust_survivors_fail_loudly_when_the_writer_dies():
    result = world(ROBUST, "v4-64", timeout=20, faults=[KILL_WRITER])
    assert result.outcome == CRASH and result.ranks[0].killed_by_fault, describe(result)
    for r in result.ranks[1:]:
        assert r.error["type"] == "TimeoutError", r.summary()
        assert "'config_save'" in r.error["message"] and "2 s" in r.error["message"]


def test_robust_brings_rank0s_error_to_every_rank_at_once():
    result = world(ROBUST, "v4-64", args=inputs(global_batch_size="lots"))
    assert result.outcome == ERROR, describe(result)
    assert {r.error["type"] for r in result.ranks} == {
        "harness.workloads.config_sync.robust.ConfigSyncError"}
    assert len({r.error["message"] for r in result.ranks}) == 1
    assert "rank 0 could not build the config" in result.ranks[3].error["message"]
    assert "global_batch_size" in result.ranks[3].error["message"]


def test_robust_every_rank_ends_with_rank0s_config_when_a_host_composes_another():
    skew = {"kind": "env-skew", "hosts": [3], "env": {"TRM_OVERRIDES": "lr=0.5,arch.name=trm@big"}}
    config = assert_one_valid_config(world(ROBUST, "v4-64", faults=[skew]))
    assert config["lr"] == 1e-4 and config["arch"]["name"] == "trm@tiny"


def test_robust_digest_check_catches_a_host_running_other_code():
    result = world(helper("rank3_has_newer_config_model"), "v4-64")
    assert result.outcome == ERROR
    messages = {r.error["message"] for r in result.ranks}
    assert len(messages) == 1, messages
    message = messages.pop()
    assert "do not hold the same config" in message and "rank 3:" in message


# -- helper targets, run inside the ranks -------------------------------------------

def rank3_has_newer_config_model(inputs: dict[str, Any]) -> dict[str, Any]:
    """Rank 3's host runs a newer PretrainConfig (one more field with a default)."""
    import torch_xla.runtime as xr

    from harness.workloads.config_sync import robust

    if xr.global_ordinal() == 3:
        class NewerConfig(PretrainConfig):
            grad_clip: float = 1.0

        robust.PretrainConfig = NewerConfig  # type: ignore[misc]
    return robust.run(inputs)
