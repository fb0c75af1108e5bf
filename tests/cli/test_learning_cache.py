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
        "--config", str(USER / "own_config" / "train.yaml")],
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
    assert len(fresh) == {"config-sync": 19, "data-sharding": 9, "checkpoint-resume": 7}[
        workload], "every scenario of the workload's catalog"
    if workload == "data-sharding":  # string ids, its own data: the correct loader passes
        outcome = {scenario: outcome for scenario, outcome, _, _ in fresh}
        assert outcome["readonly-data-mount"] == outcome["uneven-shards"] == "PASS", fresh


def test_a_change_to_the_targets_own_code_or_an_entry_that_does_not_fit_is_learned_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.runner import discovery
    from harness.workloads.registry import WORKLOADS, target

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "helper.py").write_text("DATA = 'train'\n")
    (tmp_path / "loader.py").write_text(
        "import helper\n\n\nclass Shards:\n    def __init__(self, data_dir, rank, world_size):\n"
        "        self.items = list(range(rank, 8, world_size))\n")
    runs: list[str] = []
    monkeypatch.setattr(discovery, "_run", lambda *args: runs.append("learned") or
                        discovery.Discovery(imported=(f"run-{len(runs)}",)))
    loader, workload = target("loader.py:Shards", "data-sharding"), WORKLOADS["data-sharding"]

    def learned() -> tuple[str, ...]:
        return discovery.discover(loader, workload).imported

    assert learned() == learned() == ("run-1",), "learned once, then read back"
    (tmp_path / "helper.py").write_text("DATA = 'eval'\n")  # a module of its own it imports
    assert learned() == ("run-2",)
    (tmp_path / "loader.py").write_text((tmp_path / "loader.py").read_text() + "# v2\n")
    assert learned() == ("run-3",), "the loader's own file, not the adapter that runs it"
    entry = tmp_path / "cache" / "discovery" / f"{discovery.cache_key(loader, workload, False)}.json"
    data = json.loads(entry.read_text())
    data["fits"][4] = "config-sync"  # an entry written for another workload under this key
    entry.write_text(json.dumps(data))
    assert learned() == ("run-4",)
    assert learned() == ("run-4",)
