"""A failure of the harness's own code inside a rank is the harness's bug: exit 3, saying so,
never the target's ERROR, never a verdict (on a fault scenario that expects a loud failure,
an ERROR would be a false green)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support import REPO, run_cli

LOADER = "tests/user_targets/shard_loader.py:ShardDataset"

# Started in every Python of the run (the CLI, its fork server, so every rank): the
# adapter's training step, harness code that runs in each rank around the loader, made to
# raise as a bug of ours would (int(ids): a TypeError in the adapter's own frame).
BROKEN_ADAPTER = """\
import harness.workloads.data_sharding.adapter as adapter
adapter.train_step = int
"""


def _env(site: Path) -> dict[str, str]:
    site.mkdir()
    (site / "sitecustomize.py").write_text(BROKEN_ADAPTER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_a_harness_bug_inside_the_ranks_exits_3_and_is_no_cells_verdict(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_cli("run", "-T", LOADER, "-w", "data-sharding", "-s", "uneven-shards",
                   "-s", "missing-data-on-host", "--format", "json", "--report-dir", str(out),
                   env=_env(tmp_path / "site"))
    assert done.returncode == 3, done.stderr
    for scenario in ("uneven-shards", "missing-data-on-host"):
        assert (f"harness: internal error in {scenario}[{LOADER}] seed 0: rank "
                in done.stderr), done.stderr
    assert "TypeError: int() argument must be" in done.stderr
    assert "this is a bug in the harness, not a verdict on the target" in done.stderr
    # The report holds no verdict on a cell the harness failed in (missing-data-on-host
    # expects a loud failure: an ERROR there would have been counted as met).
    report = json.loads((out / "latest" / "matrix.json").read_text())
    assert report["cells"] == []


def test_the_same_loader_with_the_harness_whole_gets_its_verdicts(tmp_path: Path) -> None:
    """The twin of the test above: only the broken adapter made those cells no verdict."""
    out = tmp_path / "out"
    done = run_cli("run", "-T", LOADER, "-w", "data-sharding", "-s", "uneven-shards",
                   "--format", "json", "--report-dir", str(out), cwd=REPO)
    assert done.returncode == 0, done.stderr
    cells = json.loads((out / "latest" / "matrix.json").read_text())["cells"]
    assert [(c["scenario"], c["outcome"]) for c in cells] == [("uneven-shards", "PASS")]
