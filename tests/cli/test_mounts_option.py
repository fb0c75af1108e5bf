"""``--mount PATH=KIND[,CONSISTENCY]``: what a path is on the user's pod, on run, replay and
the pytest plugin; without it, a cell whose ranks could not see a file because it is per
host on the cell's topology says so in its one-line reason."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from harness.pytest_plugin import catalog_cases
from harness.scenarios import MountSpec

from support import REPO, run_cli

STAGE = "tests/user_targets/nfs_stage.py:sync"
SCENARIOS = ("isolated-tmp", "divergent-input")


def _cells(tmp_path: Path, *extra: str) -> dict[str, dict]:
    out = tmp_path / "out"
    done = run_cli("run", "-T", STAGE, *(a for s in SCENARIOS for a in ("-s", s)), *extra,
                   "--format", "json", "--report-dir", str(out))
    assert done.returncode in (0, 1), done.stderr
    return {c["scenario"]: c for c in
            json.loads((out / "latest" / "matrix.json").read_text())["cells"]}


def test_a_sync_through_a_shared_mount_passes_once_the_mount_is_said(tmp_path: Path) -> None:
    without = _cells(tmp_path / "a")
    assert without["divergent-input"]["outcome"] == "ERROR"
    assert without["divergent-input"]["detail"].startswith(
        "'/mnt/shared/jobcfg/config.json' is per host on 2x4: ranks 4-7 on host 1 never see "
        "what rank 0 wrote on host 0 (if /mnt/shared is one filesystem on your pod: --mount "
        "/mnt/shared=shared); ranks 4-7 raised TimeoutError")
    assert without["isolated-tmp"]["detail"].startswith(
        "'/mnt/shared/jobcfg/config.json' is per host on v4-64: ranks 1-7 on hosts 1-7")
    given = _cells(tmp_path / "b", "--mount", "/mnt/shared=shared,close-to-open")
    for scenario in SCENARIOS:
        cell = given[scenario]
        assert (cell["outcome"], cell["verdict"]) == ("PASS", "ok"), cell["detail"]
        assert cell["replay"].endswith("--mount /mnt/shared=shared,close-to-open")
    # the replay line reruns the cell from any directory: its target's path is absolute
    replay = run_cli(*shlex.split(given["divergent-input"]["replay"])[1:], cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert f"divergent-input[{REPO / STAGE}] on 2x4, seed 0: PASS" in replay.stdout


@pytest.mark.parametrize(("text", "words"), [
    ("/mnt/shared", "is not PATH=KIND[,CONSISTENCY]"),
    ("/mnt/shared=nfs", "'nfs' is not a kind of mount (one of shared: "),
    ("mnt/shared=shared", "the path must be an absolute path"),
    ("/proc/x=shared", "cannot mount over the kernel's"),
    ("/mnt/d=ro,object", "'object' is not a consistency a ro mount takes (none)"),
    ("/mnt/s=shared,fast", "'fast' is not a consistency a shared mount takes (local, "
                           "close-to-open, delayed, object)"),
])
def test_a_mount_that_cannot_be_is_a_usage_error_naming_it(text: str, words: str) -> None:
    done = run_cli("run", "-T", STAGE, "-s", "baseline", "--mount", text)
    assert done.returncode == 2 and words in done.stderr and "'--mount'" in done.stderr, \
        done.stderr
    assert "Traceback" not in done.stderr


def test_the_same_path_twice_is_refused() -> None:
    done = run_cli("run", "-T", STAGE, "-s", "baseline", "--mount", "/mnt/a=shared",
                   "--mount", "/mnt/a/=host")
    assert done.returncode == 2 and "/mnt/a given twice" in done.stderr, done.stderr


def test_each_kind_is_the_mount_it_says_and_reads_back_as_it_was_given() -> None:
    got = {t: MountSpec.parse_option(t) for t in (
        "/mnt/s=shared", "/mnt/n=shared,close-to-open", "/mnt/d=ro", "/mnt/b=gcsfuse",
        "/scratch=host")}
    assert (got["/mnt/s=shared"].scope, got["/mnt/s=shared"].mode) == ("shared", "rw")
    assert got["/mnt/n=shared,close-to-open"].consistency == "close-to-open"
    assert (got["/mnt/d=ro"].mode, got["/mnt/d=ro"].base) == ("ro", "overlay")
    assert got["/mnt/b=gcsfuse"].consistency == "object"
    assert (got["/scratch=host"].scope, got["/scratch=host"].base) == ("host", "overlay")
    assert {t: m.option() for t, m in got.items()} == {t: t for t in got}


def test_a_scenarios_own_mount_at_the_path_stays_its_fault() -> None:
    (case,) = catalog_cases("tests/user_targets/shard_loader.py:ShardDataset",
                            ["readonly-data-mount"], workload="data-sharding",
                            mounts=["/mnt/data=shared", "/mnt/other=gcsfuse"])
    plan = case.values[0]
    by_path = {m.path: m for m in plan.scenario.mounts}
    assert by_path["/mnt/data"].mode == "ro", "the scenario's read-only data mount is its fault"
    assert by_path["/mnt/other"].consistency == "object"
    assert plan.scenario.mounts_given == ("/mnt/data=shared", "/mnt/other=gcsfuse")
    with pytest.raises(ValueError, match="'nfs' is not a kind of mount"):
        catalog_cases(STAGE, ["baseline"], mounts=["/mnt/x=nfs"])


def test_explore_searches_the_pod_the_mounts_say(tmp_path: Path) -> None:
    """Without the mount, two hosts with no fault are a finding (each has its own
    /mnt/shared); with it, that is no finding, and every plan written keeps the mount."""
    def findings(where: Path, *extra: str) -> dict[str, str]:
        done = run_cli("explore", "-T", STAGE, "--examples", "20", "--no-database",
                       "--out", str(where), *extra)
        assert done.returncode in (0, 1), done.stderr
        return {p.name: p.read_text() for p in where.glob("*.yaml")}

    without = findings(tmp_path / "a")
    assert "nfs-stage-sync-several-hosts-error.yaml" in without, sorted(without)
    given = findings(tmp_path / "b", "--mount", "/mnt/shared=shared")
    assert given and not any("several-hosts" in name for name in given), sorted(given)
    assert all("- path: /mnt/shared\n  scope: shared" in text for text in given.values())
