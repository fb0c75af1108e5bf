"""Campaigns on a Dask cluster (harness.runner.cluster): a LocalCluster of worker processes.

CI installs ``distributed`` (the ``test`` extra): these tests skip only where it is absent.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from harness.reports.diff import AGREE, compare, sides
from harness.reports.json_report import load, to_dict
from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import select
from harness.workloads.registry import BUILTIN_TARGETS, target

from support import REPO, run_cli, start_cli

needs_dask = pytest.mark.skipif(find_spec("distributed") is None,
                                reason="Dask distributed is not installed (the 'cluster' extra)")

SLEEPY = """\
import select

from harness.workloads.config_sync.robust import run


def sync(inputs):
    select.select([], [], [], {seconds})  # the machine's time: a wait the world's clock cannot see
    return run(inputs)
"""


def _sleepy(tmp_path: Path, seconds: float) -> str:
    path = tmp_path / "sleepy.py"
    path.write_text(SLEEPY.format(seconds=seconds))
    return f"{path}:sync"


def _comparable(matrix: Any) -> dict[str, Any]:
    """The JSON report less what a run may change by itself: when it ran and how long it
    took, where (``campaign``), and the order in which events happened (which events each
    rank saw is fixed by the seed; their interleaving is the scheduler's)."""
    data = to_dict(matrix)
    data.pop("created")
    data.pop("campaign", None)
    data["summary"].pop("duration_s")
    for cell in data["cells"]:
        cell.pop("duration_s")
        for fault in cell["faults_fired"]:
            fault.pop("t")
        by_rank: dict[str, list[str]] = {}
        for event in cell["history"]:
            event.pop("t", None)
            by_rank.setdefault(str(event.get("rank")), []).append(json.dumps(event, sort_keys=True))
        # what each rank did; the order of what other ranks made happen to it (a held file
        # becoming visible, its own exit) is timing too
        cell["history"] = {rank: sorted(events) for rank, events in by_rank.items()}
    return data


@needs_dask
def test_a_cluster_campaign_over_seeds_reports_what_a_local_run_reports(tmp_path: Path) -> None:
    from harness.runner.cluster import Cluster

    scenarios = select(("baseline", "partial-write", "stale-leftover"))
    targets = [BUILTIN_TARGETS["naive-sync"], BUILTIN_TARGETS["robust-sync"]]
    plans = [p for seed in (0, 1) for p in plan_cells(scenarios, targets, seed)]
    local = run_matrix(plans, jobs=2, seed=0)
    with Cluster("local:2") as cluster:
        assert cluster.threads == 2
        remote = cluster.run_matrix(plans, seed=0)

    assert remote.campaign == {"cluster": "local:2", "workers": 2, "threads": 2, "retried": []}
    assert len(remote.cells) == 12 and remote.seeds == [0, 1]
    assert {(c.scenario, c.target, c.seed) for c in remote.cells} == \
        {(p.scenario.name, p.target.name, p.seed) for p in plans}
    # the faults fire, so the comparison says something
    assert any(c.faults_fired for c in remote.cells), \
        [(c.scenario, c.target, c.seed, c.outcome, c.detail[:160]) for c in remote.cells]
    a, b = _comparable(local), _comparable(remote)
    assert a.keys() == b.keys()
    for field in a:
        if field != "cells":
            assert a[field] == b[field], field
    for cell_a, cell_b in zip(a["cells"], b["cells"]):
        for field in cell_a:
            assert cell_a[field] == cell_b[field], (cell_a["scenario"], cell_a["target"],
                                                    cell_a["seed"], field)

    # saved and read back, harness diff finds every cell of every seed in agreement
    for name, matrix in (("local", local), ("cluster", remote)):
        (tmp_path / f"{name}.json").write_text(json.dumps(to_dict(matrix)))
    saved = load(tmp_path / "cluster.json")
    assert saved.campaign == remote.campaign and saved.seeds == [0, 1]
    comparison = compare(*sides(load(tmp_path / "local.json"), saved, "local.json", "cluster.json"))
    assert [r.group for r in comparison.rows] == [AGREE] * 12 and not comparison.notes
    assert {r.name for r in comparison.rows} >= {"partial-write[naive-sync] seed 0",
                                                 "partial-write[naive-sync] seed 1"}


def _executing(dask_worker: Any) -> tuple[int, int]:
    """On a worker (``Client.run``): its pid and how many tasks it is running now."""
    return os.getpid(), len(dask_worker.state.executing)


@needs_dask
def test_a_worker_killed_mid_cell_loses_no_cell(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from harness.runner.cluster import Cluster

    sleepy = target(_sleepy(tmp_path, 3), "config-sync", None)
    plans = plan_cells(select(("baseline",)), [sleepy], 3, timeout=60)
    caplog.set_level(logging.WARNING, logger="harness.runner.cluster")
    done: dict[str, Any] = {}
    with Cluster("local:2") as cluster:
        runner = threading.Thread(target=lambda: done.update(m=cluster.run_matrix(plans)))
        runner.start()
        victim = _kill_the_busy_worker(cluster, runner)
        runner.join()
    matrix = done["m"]
    assert [(c.outcome, c.verdict, c.seed) for c in matrix.cells] == [("PASS", "ok", 3)]
    assert matrix.campaign["retried"] == [{"scenario": "baseline", "target": sleepy.name,
                                           "seed": 3, "worker": victim[0], "attempt": 2}]
    said = [r.getMessage() for r in caplog.records if r.name == "harness.runner.cluster"]
    assert any(f"cell baseline[{sleepy.name}] seed 3" in m and victim[0] in m and "attempt 2" in m
               for m in said), said


def _kill_the_busy_worker(cluster: Any, runner: threading.Thread) -> tuple[str, int]:
    """SIGKILL the worker running a task as soon as one is (its address and pid)."""
    victim = None
    while victim is None and runner.is_alive():
        busy = {addr: pid for addr, (pid, n) in cluster.client.run(_executing).items() if n}
        victim = next(iter(busy.items()), None)
        time.sleep(0.1)
    assert victim is not None, "the cell never started"
    os.kill(victim[1], signal.SIGKILL)
    return victim


@needs_dask
def test_a_cell_whose_workers_all_die_is_lost_and_says_so(tmp_path: Path) -> None:
    import dask

    from harness.runner.cluster import Cluster

    sleepy = target(_sleepy(tmp_path, 2), "config-sync", None)
    plans = plan_cells(select(("baseline",)), [sleepy], 0, timeout=60)
    done: dict[str, Any] = {}
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            Cluster("local:1") as cluster:
        assert cluster.allowed_failures == 0
        runner = threading.Thread(target=lambda: done.update(m=cluster.run_matrix(plans)))
        runner.start()
        _kill_the_busy_worker(cluster, runner)
        runner.join()
    [cell] = done["m"].cells
    assert (cell.outcome, cell.verdict) == ("ERROR", "unexpected")
    assert f"cell baseline[{sleepy.name}] seed 0: lost: 1 workers died" in cell.detail
    assert done["m"].campaign["retried"] == []


@needs_dask
def test_map_brings_plain_results_back_as_they_complete() -> None:
    from harness.runner.cluster import Cluster

    with Cluster("local:1") as cluster:
        got = dict(cluster.map(math.factorial, [3, 5, 10]))
        assert got == {3: 6, 5: 120, 10: 3628800}
        with pytest.raises(ValueError, match="not defined for negative"):
            dict(cluster.map(math.factorial, [-1]))
        assert cluster.retried == []


@needs_dask
def test_an_address_that_does_not_answer_is_a_usage_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HARNESS_CLUSTER_TIMEOUT": "2"}
    r = run_cli("run", "-s", "baseline", "-T", "naive-sync", "--report-dir", str(tmp_path),
                "--cluster", f"tcp://127.0.0.1:{port}", env=env)
    assert r.returncode == 2, r.stderr
    assert f"--cluster tcp://127.0.0.1:{port}: no Dask scheduler answered within 2 s" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args, says", [
    (["--cluster", "nowhere"], "not a cluster address"),
    (["--cluster", "local:0"], "at least 1 worker"),
    (["--seeds", "5-2"], "runs backwards"),
    (["--seeds", "0,x"], "'x' is not a seed"),
    (["--seed", "1", "--seeds", "0-2"], "either --seed or --seeds"),
    (["--cluster", "local:1", "--jobs", "2"], "--jobs is the cluster's threads"),
])
def test_bad_campaign_options_are_usage_errors(tmp_path: Path, args: list[str], says: str) -> None:
    r = run_cli("run", "-s", "baseline", "-T", "naive-sync", "--report-dir", str(tmp_path), *args)
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_without_distributed_the_cluster_option_says_what_to_install(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['distributed'] = None; from harness.cli import main; "
            "sys.argv = ['harness'] + sys.argv[1:]; main()")
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    r = subprocess.run([sys.executable, "-c", code, "run", "-s", "baseline", "-T", "naive-sync",
                        "--report-dir", str(tmp_path), "--cluster", "local:1"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "needs Dask distributed, which is not installed: pip install 'distributed>=2024.1'" \
        in r.stderr


@needs_dask
def test_ctrl_c_cancels_the_cells_in_flight_and_writes_the_finished_ones(tmp_path: Path) -> None:
    sleepy = _sleepy(tmp_path, 2)
    proc = start_cli("run", "-s", "baseline", "-T", sleepy, "--seeds", "0-9", "--timeout", "60",
                     "--cluster", "local:2", "--format", "json", "--report-dir", str(tmp_path / "reports"),
                     cwd=REPO)
    assert proc.stderr is not None
    said = ""
    while "cells on local:2" not in said:  # the campaign has its cluster: the cells go out now
        line = proc.stderr.readline()
        assert line, f"the campaign ended before it started: {said}"
        said += line
    assert "harness: 10 cells on local:2 (2 threads)" in said
    time.sleep(5)  # a first pair of cells ends; whenever the signal lands, the checks hold
    proc.send_signal(signal.SIGINT)
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    matrix = load(tmp_path / "reports" / "latest" / "matrix.json")
    assert matrix.interrupted and matrix.planned == 10 and len(matrix.cells) < 10
    assert matrix.campaign is not None and matrix.campaign["cluster"] == "local:2"
    assert all(c.outcome == "PASS" for c in matrix.cells)


def _cell(scenario: str, target: str, seed: int, outcome: str = "PASS",
          verdict: str = "ok") -> Any:
    from harness.runner.cells import Cell

    return Cell(scenario=scenario, target=target, topology="single-host-8", seed=seed,
                outcome=outcome, expected="pass", verdict=verdict, duration_s=0.5,
                detail="it failed" if outcome != "PASS" else "",
                replay=f"harness replay --scenario {scenario} --target {target} --seed {seed}")


def test_every_report_names_each_seed_of_a_campaign() -> None:
    import re

    from harness.reports import render
    from harness.runner.cells import Matrix

    cells = [_cell("torn", "naive", s, *(("ERROR", "unexpected") if s == 1 else ()))
             for s in (0, 1, 2)] + [_cell("torn", "robust", s) for s in (0, 1, 2)]
    matrix = Matrix(cells=cells, seed=0, created="now", harness_version="0")
    assert matrix.several_seeds and matrix.to_dict()["seeds"] == [0, 1, 2]

    text = render(matrix, "terminal")
    assert "ERROR ✗ 1/3" in text and "torn[naive] seed 1" in text and "(seeds 0-2)" in text
    assert "torn[naive] seed 0" not in text  # a passing seed needs no look
    markdown = render(matrix, "markdown")
    assert "](#cell-torn--naive--seed-1)" in markdown and '<a id="cell-torn--naive--seed-1">' in markdown
    html = render(matrix, "html")
    ids = re.findall(r'id="(cell-[^"]+)"', html)
    assert len(ids) == 6 and len(set(ids)) == 6
    names = re.findall(r'testcase name="([^"]+)"', render(matrix, "junit"))
    assert sorted(names) == sorted(f"torn[{t}] seed {s}" for t in ("naive", "robust")
                                   for s in (0, 1, 2))

    # one seed's cell changing is that seed's difference, not the pair's
    after = Matrix(cells=[_cell(c.scenario, c.target, c.seed) for c in cells], seed=0,
                   created="now", harness_version="0")
    rows = compare(*sides(matrix, after, "a.json", "b.json")).rows
    assert [r.name for r in rows if r.group != AGREE] == ["torn[naive] seed 1"]
    assert len(rows) == 6

    # a run of one seed reads as before
    one = Matrix(cells=[c for c in cells if c.seed == 1], seed=1, created="now",
                 harness_version="0")
    assert "seeds" not in one.to_dict() and "torn[naive] seed" not in render(one, "terminal")
