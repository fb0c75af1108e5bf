"""What a target's fault-free run taught the harness is cached (``HARNESS_CACHE_DIR``); a
run that reads it back must give what a run that learns gives, cell for cell: the same
command twice, fresh then cached, for each workload, with a stranger's code, its own data
and its own config."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from support import REPO, run_cli

USER = REPO / "tests" / "user_targets"


def _npz_shards(root: Path) -> Path:
    rng = np.random.default_rng(7)
    root.mkdir()
    for i in range(4):
        np.savez(root / f"shard_{i}.npz", x=rng.normal(size=(25 + i, 4)).astype("float32"))
    return root


def _run(tmp_path: Path, cache: Path, args: list[str]) -> list[tuple[str, str, str, str]]:
    out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache)}
    done = run_cli("run", *args, "--format", "json", "--report-dir", str(out), env=env,
                   cwd=tmp_path, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    cells = json.loads((out / "latest" / "matrix.json").read_text())["cells"]
    return [(c["scenario"], c["outcome"], c["verdict"], c["detail"]) for c in cells]


CASES = {
    "config-sync": lambda tmp: [
        "-T", f"{USER / 'own_config' / 'strict_sync.py'}:sync_config",
        "--config", str(USER / "own_config" / "train.yaml"),
        *("-s baseline -s stale-leftover -s concurrent-jobs -s divergent-input -s isolated-tmp "
          "-s partial-write").split()],
    "data-sharding": lambda tmp: [
        "-T", f"{USER / 'npz_strided.py'}:Sharded", "-w", "data-sharding",
        "--data", str(_npz_shards(tmp / "data"))],
    "checkpoint-resume": lambda tmp: [
        "-T", f"{USER / 'ckpt_worker.py'}:main", "-w", "checkpoint-resume"],
}


@pytest.mark.parametrize("workload", list(CASES))
def test_a_cached_learning_gives_every_cell_what_a_fresh_one_gives(tmp_path: Path,
                                                                   workload: str) -> None:
    args = CASES[workload](tmp_path)
    cache = tmp_path / "cache"
    fresh = _run(tmp_path, cache, args)
    learned = sorted(p.name for p in (cache / "discovery").iterdir())
    assert learned, "the fresh run cached what it learned"
    cached = _run(tmp_path, cache, args)
    assert sorted(p.name for p in (cache / "discovery").iterdir()) == learned, \
        "the second run read the cache and learned nothing again"
    assert cached == fresh
    if workload == "data-sharding":  # string ids, their own data: the correct loader passes
        assert all(outcome in ("PASS", "ERROR") for _, outcome, _, _ in fresh), fresh
        assert [c for c in fresh if c[0] == "readonly-data-mount"][0][1] == "PASS", fresh
