"""harness explore: plans drawn from the kinds and the target's roles, shrunk
failures written as scenario files that replay, the same seed finding the same
plans, and the example database tried first."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.durations import parse_duration
from harness.explore.search import explore
from harness.explore.space import Plan, Space
from harness.faults.kinds import KINDS
from harness.roles import FileUse, Roles
from harness.scenarios import base_scenario, load_scenario
from harness.topology import get_topology
from harness.workloads.registry import target

from support import TESTS, ctrl_c, seed_fix_reaches_its_fsync, start_cli, worlds_of

HERE = TESTS
STRANGER = '''\
import json, os
import torch_xla.core.xla_model as xm

def sync(cfg):
    path = "/tmp/team/cfg.json"
    if xm.get_ordinal() == 0:
        os.makedirs("/tmp/team", exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump(cfg, f)
        os.replace(path + ".tmp", path)
    xm.rendezvous("cfg")
    with open(path) as f:
        return json.load(f)
'''

ROLES = Roles({"handoff": (FileUse("/tmp/c.yaml", (0,), (1, 2)),),
               "handoff-dir": (FileUse("/tmp", (0,), (1, 2)),),
               "output": (FileUse("/tmp/out.json", (0,)),)})


def _cli(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cwd / ".cache")}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


# -- the space ---------------------------------------------------------------------------

@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_every_plan_drawn_is_a_scenario_the_loader_accepts(tmp_path_factory, data):
    space = Space.of(base_scenario("config-sync"), ROLES)
    plan = data.draw(space.plans())
    path = tmp_path_factory.mktemp("plan") / "drawn.yaml"
    path.write_text(yaml.safe_dump(plan.scenario(space.base, "drawn", "a drawn plan")))
    scenario = load_scenario(path)  # raises, naming the field, on a plan the space got wrong
    world = get_topology(plan.topology).world_size
    assert len(scenario.faults) <= 3
    ending = [f for f in scenario.faults if f.kind in ("kill", "never-arrive")]
    assert all(f.rank for f in ending)  # each at a rank, and never every rank
    assert len({r for f in ending for r in f.rank}) < world
    for fault in scenario.faults:
        if "collective" in KINDS[fault.kind].ops and set(KINDS[fault.kind].ops) == {"collective"}:
            assert fault.role is None
        if fault.kind == "preempt":
            assert fault.lives == [0]  # pre-empted in every life, a rank never ends


def test_a_target_with_no_files_is_never_drawn_file_faults_and_is_told_why():
    space = Space.of(base_scenario("config-sync"), Roles())
    assert "torn-write" not in space.kinds and "kill" in space.kinds
    assert "it acts at files, and the target's fault-free run made none" in space.left_out["torn-write"]
    assert "name them in a scenario" in space.left_out["env-skew"]  # env-skew is the user's own


def test_a_plan_expects_fail_loudly_only_when_a_fault_ends_a_rank_for_good():
    assert Plan("1x2", ({"kind": "torn-write", "role": "handoff"},)).expect == "pass"
    assert Plan("1x2", ({"kind": "preempt", "rank": 0, "lives": [0]},)).expect == "pass"
    for kind in ("kill", "never-arrive", "raise"):
        assert Plan("1x2", ({"kind": kind, "rank": 0},)).expect == "fail-loudly"
    # a handoff's file can be written elsewhere; the data a loader must read cannot
    denied = {"kind": "permission-denied"}
    assert Plan("1x2", ({**denied, "role": "handoff"},)).expect == "pass"
    assert Plan("1x2", ({**denied, "role": "input"},)).expect == "fail-loudly"


def test_transient_errors_stacked_at_the_same_files_expect_only_a_loud_failure():
    """Found exploring robust-loader: EIO once, then twice more on the same file, outlasts
    its three attempts; a retry loop must end somewhere, and ending loudly is correct."""
    once = {"kind": "eio", "role": "input"}
    assert Plan("1x2", (once,)).expect == "pass"
    assert Plan("1x2", (once, {"kind": "eio", "role": "output"})).expect == "pass"
    assert Plan("1x2", (once, {"kind": "eio", "role": "input", "rank": 0, "count": 2})).expect \
        == "fail-loudly"
    lost = {"kind": "lost-write", "role": "handoff"}  # not transient: twice is still one loss
    assert Plan("1x2", (lost, {**lost, "rank": 1})).expect == "pass"


def test_the_space_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="unknown fault kind 'tron-write'"):
        Space.of(base_scenario("config-sync"), ROLES, kinds=["tron-write"])


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("5m", 300), ("1h", 3600),
                                           ("1m30s", 90), ("0.5m", 30), ("1h30m", 5400)])
def test_budgets_are_read_as_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "m", "-1m", "0", "1m 30s", "30s1"])
def test_a_budget_that_is_not_a_duration_says_how_to_write_one(text):
    with pytest.raises(ValueError, match="duration|more than 0"):
        parse_duration(text)


# -- the search --------------------------------------------------------------------------

def test_naive_sync_torn_write_is_found_shrunk_and_written_as_a_scenario_that_replays(tmp_path):
    """The catalog's partial-write, found with no catalog: one torn write on the smallest
    world, and ``harness run --scenario`` reproduces it from the file written."""
    run = _cli("explore", "--target", "naive-sync", "--kinds", "torn-write,latency",
               "--examples", "80", "--seed", "7", "--format", "json", "--out", "found",
               cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    torn = [f for f in report["findings"] if f["needs"] == ["torn-write"]]
    assert len(torn) == 1, report["findings"]
    found = torn[0]
    assert found["faults"] == [{"kind": "torn-write", "role": "handoff"}]  # shrunk: no rank,
    assert found["topology"] == "1x2"  # no occurrence, the smallest world
    assert found["reproduced"] and found["outcome"] in ("ERROR", "FAIL")
    assert all("latency" not in f["needs"] for f in report["findings"])  # a latency is survived
    scenario = load_scenario(tmp_path / found["scenario"])
    assert scenario.expect == "pass" and "harness explore" in scenario.finding
    replay = _cli(*found["replay"].split()[1:], "--format", "json", "--report-dir", "r",
                  cwd=tmp_path)
    assert replay.returncode == 1, replay.stderr
    cell = json.loads(next((tmp_path / "r").glob("*/matrix.json")).read_text())["cells"][0]
    assert cell["outcome"] == found["outcome"] and cell["detail"] == found["detail"]


def test_the_same_seed_finds_the_same_plans_and_another_draws_others(tmp_path):
    naive = target("naive-sync")
    base = base_scenario("config-sync")

    def plans(seed: int) -> list[tuple[str, str]]:
        result = explore(naive, base, seed=seed, max_worlds=30, kinds=["lost-write", "corrupt"])
        return [(f.plan.key(), f.outcome) for f in result.findings]

    first = plans(11)
    assert first and plans(11) == first


def test_robust_sync_survives_every_plan_drawn(tmp_path):
    result = explore(target("robust-sync"), base_scenario("config-sync"), seed=0, max_worlds=25,
                     kinds=["straggle", "divergent-rng", "kill", "torn-write", "preempt"])
    assert result.worlds >= 20 and result.findings == []
    assert "torn-write" in result.space.left_out  # it hands no file over: nothing to tear
    assert "never comes back alone" in result.space.left_out["preempt"]


def test_a_finding_saved_in_the_database_is_tried_first_next_time(tmp_path):
    naive = target("naive-sync")
    base = base_scenario("config-sync")
    db = tmp_path / "db"
    first = explore(naive, base, seed=1, max_worlds=60, kinds=["lost-write"], database=db)
    assert first.findings and any(db.rglob("*"))
    # Another seed draws other plans, but replays the saved finding before any of them.
    again = explore(naive, base, seed=99, max_worlds=60, kinds=["lost-write"], database=db)
    assert [f.plan for f in again.findings][:1] == [first.findings[0].plan]
    assert again.findings[0].worlds <= first.findings[0].worlds


def test_a_strangers_target_is_explored_in_its_own_directory(tmp_path):
    (tmp_path / "atomic.py").write_text(STRANGER)
    run = _cli("explore", "--target", "atomic.py:sync", "--kinds", "lost-write",
               "--examples", "40", "--seed", "2", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert "  space: kinds lost-write; topologies 1x2, 2x1, 1x4, single-host-8, v4-64\n" \
        in run.stdout
    # its /tmp handoff fails on two hosts with no fault at all (the seed's isolated-tmp)
    assert "✗ ERROR 2x1; no fault" in run.stdout
    (lost,) = [p for p in (tmp_path / "found").glob("*.yaml") if "lost-write" in p.name]
    assert lost.name.startswith("atomic-sync-lost-write-"), run.stdout
    assert f"replay: harness run --scenario found/{lost.name} --target atomic.py:sync " \
           "--seed 2" in run.stdout


@pytest.mark.parametrize("args, message", [
    (["--target", "nosuch"], "unknown target 'nosuch'"),
    (["--target", "naive-sync", "--kinds", "tron-write"], "unknown fault kind 'tron-write'"),
    (["--target", "naive-sync", "--budget", "5x"], "is not a duration"),
    (["--target", "naive-sync", "--scenario", "preempt-mid-shard"],
     "belongs to workload checkpoint-resume"),
    (["--target", "naive-sync", "--topology", "3y"], "unknown topology '3y'"),
    (["--target", "naive-sync", "--scenario", "no-such-scenario"], "unknown scenario"),
    (["--target", "naive-sync", "--out", "/proc/found"], "cannot write scenario files under"),
    (["--target", "naive-sync", "--out", "README"], "'README' is a file"),
])
def test_bad_input_is_a_usage_error_naming_what_is_wrong(tmp_path, args, message):
    (tmp_path / "README").write_text("a file, not a directory")
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    run = _cli("explore", *args, cwd=tmp_path, timeout=60)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert message in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "found").exists()  # nothing written before the search starts


# -- the pytest face ---------------------------------------------------------------------

def test_a_property_test_of_ones_own_fails_with_the_shrunk_plan_and_its_replay(tmp_path):
    (tmp_path / "atomic.py").write_text(STRANGER)
    (tmp_path / "test_mine.py").write_text('''\
from hypothesis import given, settings, HealthCheck
from harness.explore import check_plan, fault_plans

@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(fault_plans("atomic.py:sync", kinds=["corrupt"], topologies=["1x2"]))
def test_sync_survives(case):
    check_plan(case)
''')
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / ".cache")}
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_mine.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=240)
    assert run.returncode == 1, run.stdout[-3000:]
    # Hypothesis shrank it to one corrupt handoff on the one topology allowed
    assert "faults=({'kind': 'corrupt', 'role': 'handoff'},)" in run.stdout, run.stdout[-3000:]
    assert "replay: harness run --scenario found/atomic-sync-plan-" in run.stdout
    assert "/tmp/harness-explore-" not in run.stdout  # the search's own files are not shown
    assert "UnicodeDecodeError" in run.stdout or "JSONDecodeError" in run.stdout


def test_ctrl_c_ends_the_world_in_flight_and_reports_what_was_found(tmp_path):
    """A plan's world that would take two minutes: Ctrl-C ends it at once, exit 130, the
    report says the search was interrupted, and no rank of it is left."""
    (tmp_path / "sleepy.py").write_text(
        "import select\nimport torch_xla.core.xla_model as xm\n\n"
        "def sync(cfg):\n"
        "    if xm.xrt_world_size() != 8:  # the fault-free run (8 ranks) is quick; plans' not\n"
        "        select.select([], [], [], 120)  # two minutes of the machine's time\n"
        "    return cfg\n")
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / ".cache")}
    explore_run = start_cli("explore", "--target", "sleepy.py:sync", "--kinds", "straggle",
                            "--timeout", "300", "--budget", "10m", cwd=tmp_path, env=env)
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    deadline = time.monotonic() + 120
    while not (tmp_path / ".cache" / "discovery").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the fault-free run is learned
    while not worlds_of(explore_run.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # and a plan's world is up
    assert worlds_of(explore_run.pid), "no world started"
    out, err = ctrl_c(explore_run)
    assert explore_run.returncode == 130, err
    assert "stopped: interrupted" in out
    assert not worlds_of(explore_run.pid, ended=True)  # its worlds and their ranks are gone


def test_the_checkpoint_workload_breaks_naive_worker_and_not_robust_worker():
    """Pre-empted while it rewrites its checkpoint in place, naive-worker's restart reads a
    torn file; robust-worker (tmp, fsync, rename, fsync the directory) survives the same
    plans: pre-emptions at any file operation, workers lost for good, a slow disk."""
    base = base_scenario("checkpoint-resume")
    naive = explore(target("naive-worker"), base, seed=0, max_worlds=75)
    assert any(f.needs == {"preempt"} and "JSONDecodeError" in f.cell.detail
               and len(f.plan.faults) == 1 for f in naive.findings), \
        [f.cell.detail for f in naive.findings]
    robust = explore(target("robust-worker"), base, seed=0, max_worlds=30)
    assert robust.space.kinds == ("preempt", "kill", "latency")  # the workload's own
    assert robust.worlds == 30 and robust.findings == []


def test_the_data_sharding_workload_breaks_seed_loader_and_not_robust_loader():
    """A transient EIO on the data: seed-loader raises (or, on one rank, hangs the others);
    robust-loader reads again, and reports what it cannot read, on every rank."""
    base = base_scenario("data-sharding")
    seed = explore(target("seed-loader"), base, seed=0, max_worlds=60)
    assert any(f.needs == {"eio"} and "Input/output error" in f.cell.detail
               and len(f.plan.faults) == 1 for f in seed.findings), \
        [f.cell.detail for f in seed.findings]
    robust = explore(target("robust-loader"), base, seed=0, max_worlds=40)
    assert "kill" not in robust.space.kinds and "eio" in robust.space.kinds
    assert robust.worlds == 40 and robust.findings == [], \
        [(f.plan.describe(), f.cell.detail) for f in robust.findings]


def test_crash_states_from_the_command_line_write_each_vulnerability_as_a_replayable_scenario(
        tmp_path):
    run = _cli("explore", "--target", "naive-worker", "--crash-states", "--format", "json",
               "--out", "crashes", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    in_place = [v for v in report["vulnerabilities"] if "written in place" in v["protocol"]]
    assert in_place and all(v["line"].startswith("naive.py:")
                            and v["line"].endswith("in save_checkpoint")
                            for v in in_place), report["vulnerabilities"]
    first = in_place[0]
    assert (tmp_path / first["path"]).is_file()
    replay = _cli(*first["replay"].split()[1:], "--format", "json", "--report-dir", "r",
                  cwd=tmp_path)
    cell = json.loads(next((tmp_path / "r").glob("*/matrix.json")).read_text())["cells"][0]
    assert replay.returncode == 1 and cell["outcome"] == first["outcome"]


def test_crash_states_of_a_target_whose_fault_free_run_fails_list_its_operations_unconfirmed(
        tmp_path):
    run = _cli("explore", "--target", "seed-fix-sync", "--crash-states", "--seed",
               str(seed_fix_reaches_its_fsync()), cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert "the fault-free run does not pass" in run.stdout
    assert "`temp_config.yaml` is written in place" in run.stdout
    assert "seed_fix.py:" in run.stdout and "in load_synced_config" in run.stdout
    assert not (tmp_path / "found").exists()  # nothing confirmed: no scenario written


def test_lanes_draw_apart_keep_the_worlds_seed_and_merge_each_finding_once(tmp_path):
    from harness.explore.lanes import Lanes, lane_seed, merge, run_here
    from harness.explore.search import Search

    spec = Lanes("naive-sync", "config-sync", None, 5, 2, None, 30, ["lost-write"], None, None)
    items = spec.items()
    assert [i["seed"] for i in items] == [5, 5]  # every lane's worlds: a finding replays with 5
    assert items[0]["draw_seed"] == 5 and items[1]["draw_seed"] == lane_seed(5, 1) != 5
    results = [r for _, r in run_here(items)]
    assert all(r["findings"] for r in results)  # each lane found the lost write on its own
    search = Search.start(target("naive-sync"), base_scenario("config-sync"), seed=5,
                          kinds=["lost-write"])
    kept = merge(search, results, None)
    both = [f for r in results for f in r["findings"]]
    assert len(kept) < len(both)  # what both lanes found is kept once
    kept_needs = [(tuple(sorted(f.needs)), f.outcome) for f in kept]
    assert len(set(kept_needs)) == len(kept_needs)
    assert set(kept_needs) == {(tuple(f["needs"]), f["outcome"]) for f in both}
    again = [r for _, r in run_here(items)]
    assert [r["findings"] for r in again] == [r["findings"] for r in results]  # deterministic


def test_a_lane_takes_this_machines_example_database_along(tmp_path):
    """What one run's lanes found is saved here; the next run's lanes (another seed, so
    other draws) replay it before anything new, wherever they run."""
    from harness.explore.lanes import Lanes, database_at, merge, pack, run_here
    from harness.explore.search import Search

    db = tmp_path / "db"
    first = Lanes("naive-sync", "config-sync", None, 5, 2, None, 20, ["lost-write"], None, None)
    search = Search.start(target("naive-sync"), base_scenario("config-sync"), seed=5,
                          kinds=["lost-write"])
    saved = merge(search, [r for _, r in run_here(first.items())], database_at(db))
    assert saved and pack(db)
    bare = Lanes("naive-sync", "config-sync", None, 11, 2, None, 20, ["lost-write"], None, None)
    taken = dataclasses.replace(bare, examples=pack(db))
    assert all(item["examples"] == pack(db) for item in taken.items())
    without = [r for _, r in run_here(bare.items())]
    withdb = [r for _, r in run_here(taken.items())]
    plans = {json.dumps([f.plan.topology, [dict(x) for x in f.plan.faults]]) for f in saved}
    for lane_without, lane_with in zip(without, withdb):
        first_found = lane_with["findings"][0]
        assert json.dumps([first_found["topology"], first_found["faults"]]) in plans
        assert first_found["worlds"] <= lane_without["findings"][0]["worlds"]
    assert any(w["findings"][0]["worlds"] < o["findings"][0]["worlds"]
               for o, w in zip(without, withdb)), \
        [(o["findings"][0]["worlds"], w["findings"][0]["worlds"]) for o, w in zip(without, withdb)]


def test_a_packed_example_database_cannot_write_outside_its_directory(tmp_path):
    from harness.explore.lanes import _unpack

    with pytest.raises(ValueError, match="'../escape' is outside the database"):
        _unpack({"../escape": "00"}, str(tmp_path / "db"))
    assert not (tmp_path / "escape").exists()


def test_lanes_on_a_local_cluster_find_what_the_same_lanes_find_here(tmp_path):
    pytest.importorskip("distributed")
    args = ["explore", "--target", "naive-sync", "--kinds", "torn-write,lost-write",
            "--lanes", "2", "--examples", "30", "--seed", "4", "--format", "json",
            "--no-database"]
    here = _cli(*args, "--out", "here", cwd=tmp_path)
    there = _cli(*args, "--out", "there", "--cluster", "local:2", cwd=tmp_path)
    assert here.returncode == there.returncode == 1, (here.stderr, there.stderr)
    ours, theirs = json.loads(here.stdout), json.loads(there.stdout)
    assert theirs["campaign"]["cluster"] == "local:2" and ours["campaign"] is None
    for report in (ours, theirs):
        report.pop("duration_s"), report.pop("campaign")
        for finding in report["findings"]:
            finding["scenario"] = Path(finding["scenario"]).name
            finding["replay"] = finding["replay"].replace("there/", "here/")
    assert ours == theirs and ours["findings"]
