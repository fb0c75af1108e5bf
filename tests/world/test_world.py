"""The world: ranks as real processes, results, hangs, crashes, leaks, exec mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import CRASH, ERROR, HANG, PASS, WorldConfig, get_topology, run_world
from harness.filesystem.mounts import Mount
from harness.pytest_plugin import WorldFailed, assert_world_passed
from harness.reports.diagnosis import describe

from support import TESTS, alive, line_in, processes_of_world, run_cli

HERE = TESTS
TARGETS = HERE / "targets" / "world_targets.py"



def target(name: str) -> str:
    return f"{TARGETS}:{name}"


def machine_dir(path: Path) -> Mount:
    """Let the ranks write to a real directory the test reads afterwards."""
    return Mount(str(path), scope="shared", base="passthrough")


def line_of(function: str, text: str) -> int:
    """The line of ``text`` inside ``function`` in the targets file."""
    return line_in(TARGETS, function, text)


@pytest.mark.parametrize("topology", ["v4-64", "single-host-8", "v4-64-pjrt"])
def test_every_rank_returns_its_identity(topology):
    topo = get_topology(topology)
    result = run_world(target("identity"), topology=topology, timeout=20)
    assert result.outcome == PASS, describe(result)
    assert [r.value["ordinal"] for r in result.ranks] == list(range(topo.world_size))
    assert {r.value["world"] for r in result.ranks} == {topo.world_size}
    for r in result.ranks:
        assert r.value["host"] == topo.host_of(r.rank) == r.host
        assert r.value["worker_id"] == str(r.host)
        assert r.value["local"] == topo.local_rank(r.rank)
        assert r.exit_code == 0 and r.signal is None
    assert len({r.value["pid"] for r in result.ranks}) == topo.world_size, "one process per rank"
    assert processes_of_world(result.world_id) == []


def test_ps_names_the_harness_processes_and_a_rank_as_its_interpreter():
    result = run_world(target("process_names"), topology="single-host-8", timeout=20)
    assert result.outcome == PASS, describe(result)
    interpreter = os.path.basename(sys.executable)[:15]
    # under kernel isolation the leader is outside the world's PID namespace: no rank sees it
    leader = "harness-leader" if result.isolation == "python" else None
    assert {tuple(r.value) for r in result.ranks} == {(interpreter, leader)}


def test_a_hang_names_who_waits_where_with_stacks_and_leaves_nothing():
    result = run_world(target("rank0_skips_rendezvous"), topology="v4-64", timeout=3)
    assert result.outcome == HANG
    assert result.ranks[0].outcome == PASS and result.ranks[0].value == "skipped"
    assert [r.outcome for r in result.ranks[1:]] == [HANG] * 7
    assert result.hang_report.startswith("ranks 1-7 wait in rendezvous 'config_save' (step 0)")
    line = line_of("rank0_skips_rendezvous", 'xm.rendezvous("config_save")')
    assert f"at world_targets.py:{line} in rank0_skips_rendezvous" in result.hang_report
    assert "rank 0 returned" in result.hang_report
    assert " since t=0." in result.hang_report, "when they began to wait, on the world's clock"
    assert result.hang_report.endswith("; deadline 3 s (nothing could happen any more after "
                                       "t=0.0 s: the world's clock went straight to the deadline)"), \
        result.hang_report
    for r in result.ranks[1:]:
        assert 'xm.rendezvous("config_save")' in r.stack, r.stack
        assert "harness/world" not in r.stack, "the harness's own frames are left out"
    assert any("rank 0 exited while ranks 1-7 wait for it in rendezvous 'config_save'" in m
               for m in result.mismatches), result.mismatches
    # The watchdog ends the world by its deadline, not after it.
    assert result.duration_s < 3 + 2.5  # the hard end: deadline + the leader's last 2 s
    assert processes_of_world(result.world_id) == []


def test_a_sigkilled_rank_is_a_crash_and_its_peers_hang():
    result = run_world(target("rank0_sigkilled_before_rendezvous"), topology="v4-64", timeout=3)
    assert result.outcome == HANG
    assert result.ranks[0].outcome == CRASH
    assert result.ranks[0].signal == 9 and result.ranks[0].exit_code is None
    assert "rank 0 was killed by SIGKILL" in result.hang_report
    assert "ranks 1-7 wait in rendezvous 'config_save'" in result.hang_report
    exits = [e for e in result.history if e.kind == "exit"]
    assert [e.rank for e in exits][:1] == [0]


def test_teardown_on_failure_ends_the_world_at_the_first_death_as_a_launcher_does():
    # Without it the pollers would run to the deadline and the world would be a HANG.
    result = run_world(target("rank0_sigkilled_while_others_poll"), topology="2x2",
                       timeout=30, teardown_on_failure=True)
    assert result.hang_report is None, result.hang_report
    assert result.ranks[0].signal == 9
    assert [r.signal for r in result.ranks[1:]] == [9, 9, 9], "torn down by SIGKILL"
    teardown = [e for e in result.history if e.kind == "teardown"]
    assert len(teardown) == 1 and teardown[0].rank == 0
    assert "rank 0 was killed by SIGKILL: the job is torn down" in teardown[0].detail["message"]
    assert processes_of_world(result.world_id) == []


def test_a_hang_shows_ranks_that_wait_in_their_own_poll_loop_with_its_line():
    result = run_world(target("rank0_sigkilled_while_others_poll"), topology="2x2", timeout=2)
    assert result.outcome == HANG
    line = line_of("rank0_sigkilled_while_others_poll", "time.sleep(0.01)")
    assert (f"ranks 1-3 wait in their own code at world_targets.py:{line} in "
            f"rank0_sigkilled_while_others_poll: `time.sleep(0.01)`") in result.hang_report, \
        result.hang_report
    assert "outside any collective" not in result.hang_report
    assert result.hang_report.startswith("rank 0 was killed by SIGKILL; ranks 1-3 wait"), \
        result.hang_report  # the cause first
    assert ", next due at t=2.0 s; deadline 2 s" in result.hang_report, result.hang_report
    assert result.hang_report.endswith("; deadline 2 s (a wait of the target's own was still "
                                       "going: a longer --timeout shows how it ends)"), \
        result.hang_report


def test_teardown_on_failure_leaves_a_passing_world_alone():
    result = run_world(target("raises_on"), topology="2x1", timeout=10, args=(5,),
                       teardown_on_failure=True)
    assert result.outcome == PASS
    assert [e for e in result.history if e.kind == "teardown"] == []


def test_a_target_that_ignores_signals_and_forks_daemons_leaves_no_process(tmp_path):
    result = run_world(target("stubborn"), topology="2x2", timeout=4, args=(str(tmp_path),),
                       mounts=[machine_dir(tmp_path)])
    assert result.outcome == HANG
    assert all(r.outcome == HANG for r in result.ranks)
    assert "still running outside any collective, in world_targets.py" in result.hang_report
    recorded = [pid for f in tmp_path.glob("rank-*.json") for pid in json.loads(f.read_text())]
    assert len(recorded) == 4 * 3, "every rank wrote itself, its child and its daemon"
    if result.isolation == "python":  # else the pids are the world's PID namespace's
        assert [pid for pid in recorded if alive(pid)] == []
    assert processes_of_world(result.world_id) == []


def test_children_left_behind_by_a_passing_rank_are_killed_with_the_world(tmp_path, monkeypatch):
    """By its leader, their subreaper, which says it has no child left: the harness does not
    look through every process of the machine for them (it does when the leader could not
    say so: ``test_daemons_of_a_world_whose_fork_server_was_killed_end_with_the_world``)."""
    from harness.rank import sweep

    swept, end_world = [], sweep.end_world
    monkeypatch.setattr(sweep, "end_world", lambda world: swept.append(world) or end_world(world))
    result = run_world(target("spawns_daemon_and_returns"), topology="2x1", timeout=10,
                       args=(str(tmp_path),), mounts=[machine_dir(tmp_path)])
    assert result.outcome == PASS
    assert result.leftovers == 2
    assert swept == []
    recorded = [pid for f in tmp_path.glob("rank-*.json") for pid in json.loads(f.read_text())]
    assert len(recorded) == 2
    if result.isolation == "python":  # else the pids are the world's PID namespace's
        assert not any(alive(p) for p in recorded)
    assert processes_of_world(result.world_id) == []


def test_an_exception_on_one_rank_is_an_error_with_its_traceback():
    result = run_world(target("raises_on"), topology="v4-64", timeout=10, args=(3,))
    assert result.outcome == ERROR
    assert [r.outcome for r in result.ranks] == [PASS] * 3 + [ERROR] + [PASS] * 4
    err = result.ranks[3].error
    assert err["type"] == "ValueError" and err["message"] == "bad config on rank 3"
    assert "world_targets.py" in err["traceback"] and "raise ValueError" in err["traceback"]
    assert result.ranks[3].exit_code == 1
    assert result.detail() == "rank 3 raised ValueError: bad config on rank 3"
    assert "ValueError: bad config on rank 3" in result.ranks[3].stderr


def test_an_exit_without_exception_is_a_crash():
    result = run_world(target("exits_hard_on"), topology="4x1", timeout=10, args=(2,))
    assert result.outcome == CRASH
    assert result.ranks[2].outcome == CRASH and result.ranks[2].exit_code == 3
    assert result.detail() == "rank 2 exited with code 3 without a Python exception"


@pytest.mark.parametrize("code,outcome", [(0, PASS), (4, ERROR)])
def test_sys_exit_is_judged_by_its_code(code, outcome):
    result = run_world(target("sys_exit"), topology="2x1", timeout=10, args=(code,))
    assert result.outcome == outcome
    assert {r.exit_code for r in result.ranks} == {code}


def test_output_is_captured_per_rank():
    result = run_world(target("prints"), topology="2x1", timeout=10, args=("hello",))
    assert [r.stdout for r in result.ranks] == ["hello from 0\n", "hello from 1\n"]
    assert [r.stderr for r in result.ranks] == ["err 0\n", "err 1\n"]


def test_a_shape_mismatch_is_named_and_hangs_as_on_a_pod():
    result = run_world(target("shape_mismatch"), topology="4x1", timeout=4)
    assert result.outcome == HANG
    assert ("collective mismatch at step 0: ranks 0,2-3: all_reduce(float32[4]); "
            "rank 1: all_reduce(float32[3])") in " ".join(result.mismatches)
    assert any(e.kind == "mismatch" for e in result.history)


def test_an_op_mismatch_is_named():
    result = run_world(target("op_mismatch"), topology="4x1", timeout=4)
    assert result.outcome == HANG
    text = " ".join(result.mismatches)
    assert "ranks 0-1,3: all_reduce(float32[2])" in text and "rank 2: rendezvous 'odd_one_out'" in text


def test_rendezvous_tags_that_differ_still_pair_up_but_are_reported():
    result = run_world(target("tag_mismatch"), topology="4x1", timeout=10)
    assert result.outcome == PASS
    assert {tuple(r.value) for r in result.ranks} == {(b"0", b"1", b"2", b"3")}
    assert any("rendezvous tags differ at step 0" in m and "'config_load'" in m
               for m in result.mismatches), result.mismatches


def test_an_unpicklable_return_value_is_reported_by_repr():
    result = run_world(target("unpicklable_result"), topology="1x1", timeout=10)
    assert result.outcome == PASS
    assert "<function unpicklable_result.<locals>.<lambda>" in result.ranks[0].value_repr


def test_a_target_that_cannot_be_imported_is_an_error_on_every_rank(tmp_path):
    result = run_world(f"{tmp_path}/missing.py:fn", topology="2x1", timeout=10)
    assert result.outcome == ERROR
    assert {r.error["type"] for r in result.ranks} == {"FileNotFoundError"}
    result = run_world(f"{TARGETS}:no_such_function", topology="2x1", timeout=10)
    assert {r.error["type"] for r in result.ranks} == {"AttributeError"}
    assert "no_such_function" in result.ranks[0].error["message"]


@pytest.mark.parametrize("kwargs,message", [
    ({"topology": "v9-1000"}, "unknown topology 'v9-1000'"),
    ({"topology": "0x4"}, "hosts and ranks per host must be >= 1"),
    ({"profile": "ancient"}, "unknown profile 'ancient'"),
    ({"timeout": 0}, "timeout must be positive"),
    ({"args": (lambda: 1,)}, "args and kwargs must be picklable"),
])
def test_bad_arguments_are_refused_with_a_clear_message(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        run_world(target("identity"), **kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        WorldConfig(**kwargs)  # the config checks itself: a config that exists is valid


def test_a_config_is_built_once_and_varied_by_overrides():
    config = WorldConfig(topology="2x1", timeout=10, kwargs={}, faults=[])
    assert config.topo.world_size == 2 and config.args == () and config.plan.faults == ()
    with pytest.raises(ValueError, match="filesystem faults need the sandbox"):
        WorldConfig(sandbox=False, faults=[{"kind": "eio", "path": "/tmp/x", "op": "open-read"}])
    result = run_world(target("identity"), config, topology="4x1")
    assert result.outcome == PASS and result.topology == "4x1"


def test_a_local_function_cannot_be_a_target():
    def local():
        return 1
    with pytest.raises(ValueError, match="define it at module level"):
        run_world(local)


def test_assert_world_passed_prints_the_diagnosis():
    result = run_world(target("raises_on"), topology="2x1", timeout=10, args=(1,))
    with pytest.raises(WorldFailed, match="rank 1 raised ValueError: bad config on rank 1"):
        assert_world_passed(result)


# -- exec mode ------------------------------------------------------------------

SPAWN_SCRIPT = """
import sys
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr

def _mp_fn(index, mode):
    if mode == "raise" and index == 1:
        raise KeyError("missing key on rank 1")
    if mode == "kill" and index == 2:
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    got = xm.rendezvous("sync", str(index).encode())
    xm.master_print("joined", b",".join(got).decode())
    assert index == xr.global_ordinal()

if __name__ == "__main__":
    try:
        xmp.spawn(_mp_fn, args=(sys.argv[1],))
    except BaseException as exc:
        print("launcher caught", type(exc).__name__, file=sys.stderr)
        raise
"""


@pytest.fixture
def spawn_script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SPAWN_SCRIPT)
    return path


def test_exec_runs_the_scripts_own_spawn_on_every_host(spawn_script):
    result = run_world(argv=(str(spawn_script), "ok"), topology="2x2", timeout=20)
    assert result.outcome == PASS, describe(result)
    assert [h.outcome for h in result.hosts] == [PASS, PASS]
    assert [r.outcome for r in result.ranks] == [PASS] * 4
    assert result.ranks[0].stdout == "joined 0,1,2,3\n"
    assert [r.stdout for r in result.ranks[1:]] == ["", "", ""]
    assert {r.host for r in result.ranks} == {0, 1}


def test_exec_a_childs_exception_reaches_the_launcher_with_its_type(spawn_script):
    result = run_world(argv=(str(spawn_script), "raise"), topology="1x2", timeout=4)
    assert result.ranks[1].outcome == ERROR and result.ranks[1].error["type"] == "KeyError"
    # Rank 0 waits forever for rank 1 in the rendezvous, so the launcher's spawn
    # (which joins every child, as ProcessPoolExecutor does) never returns.
    assert result.ranks[0].outcome == HANG
    assert result.outcome == HANG


def test_exec_a_hard_killed_child_is_a_broken_process_pool(spawn_script):
    result = run_world(argv=(str(spawn_script), "kill"), topology="1x4", timeout=10)
    launcher = result.hosts[0]
    assert launcher.outcome == ERROR
    assert launcher.error["type"] == "concurrent.futures.process.BrokenProcessPool"
    assert "launcher caught BrokenProcessPool" in launcher.stderr
    assert result.ranks[2].signal == 9


def test_exec_the_legacy_xla_dist_launcher(spawn_script):
    argv = ("-m", "torch_xla.distributed.xla_dist", "--tpu=test-pod", "--",
            "python", str(spawn_script), "ok")
    result = run_world(argv=argv, topology="v4-64", timeout=20)
    assert result.outcome == PASS, describe(result)
    assert result.ranks[0].stdout == "joined 0,1,2,3,4,5,6,7\n"


def test_exec_xla_dist_is_gone_under_the_current_profile(spawn_script):
    argv = ("-m", "torch_xla.distributed.xla_dist", "--", "python", str(spawn_script), "ok")
    result = run_world(argv=argv, topology="2x1", timeout=10, profile="current")
    assert result.outcome == ERROR
    assert result.hosts[0].error["type"] == "ModuleNotFoundError"


def test_exec_a_launcher_using_the_device_before_spawn_is_refused(tmp_path):
    script = tmp_path / "early.py"
    script.write_text("import torch_xla.core.xla_model as xm\n"
                      "import torch_xla.distributed.xla_multiprocessing as xmp\n"
                      "xm.get_xla_supported_devices()\n"
                      "xmp.spawn(print)\n")
    result = run_world(argv=(str(script),), topology="1x2", timeout=10)
    assert result.outcome == ERROR
    assert "xmp.spawn on a host of 2 ranks" in result.hosts[0].error["message"]


def test_cli_exec_exit_codes(spawn_script):
    ok = run_cli("exec", "-t", "2x2", "--", "python", str(spawn_script), "ok")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS: all 4 ranks returned" in ok.stdout
    failed = run_cli("exec", "-t", "1x2", "--timeout", "3", "--", "python", str(spawn_script), "raise")
    assert failed.returncode == 1
    assert "KeyError" in failed.stdout
    missing = run_cli("exec", "--", "python", "no/such/script.py")
    assert missing.returncode == 2
    assert "no such script: no/such/script.py" in missing.stderr
    bad_topology = run_cli("exec", "-t", "v9", "--", "python", str(spawn_script))
    assert bad_topology.returncode == 2 and "unknown topology 'v9'" in bad_topology.stderr


def test_a_fork_server_outlives_the_thread_that_started_it():
    """PR_SET_PDEATHSIG follows a thread: cells start servers from worker threads."""
    import threading
    import time

    from harness.world import pool

    results = []
    thread = threading.Thread(target=lambda: results.append(
        run_world(target("identity"), topology="2x1", timeout=10, preload=("json",))))
    thread.start()
    thread.join()
    time.sleep(0.3)
    assert pool.fork_server(("json",)).alive()
    again = run_world(target("identity"), topology="2x1", timeout=10, preload=("json",))
    assert results[0].outcome == again.outcome == PASS


_STARTED_EARLY = """
import json, os, sys
from harness import run_world
from harness.world import pool

pool.start(["json"])  # returns at once: the server imports meanwhile
server = pool._servers[-1]
ready_at_once = server.ready
# as it started, the server carried the run's token: the reaper finds it, and every process
# forked under it, if the harness is killed
from harness.rank import sweep
from harness.world import reaper
marked = server.process.pid in sweep.marked((reaper.RUN_KEY, os.environ.get(reaper.RUN_KEY)))
pool.start(["email"])  # one is running: nothing more
servers = len(pool._servers)
if sys.argv[1] == "leave":  # the harness ends while its server still imports
    print(json.dumps({"pid": server.process.pid}))
    sys.exit(0)
result = run_world(sys.argv[1] + ":identity", topology="2x1", timeout=10, preload=("json",))
print(json.dumps({"ready_at_once": ready_at_once, "servers": servers, "same": pool._servers[-1]
                  is server, "ready": server.ready, "outcome": result.outcome, "marked": marked}))
"""


def test_a_fork_server_started_early_is_the_one_the_first_world_waits_for():
    """Started before any world (``pool.start``), the server still carries the run's token
    (a soak's SIGTERM left 94 processes of a fork-bomb target when it did not)."""
    done = subprocess.run([sys.executable, "-c", _STARTED_EARLY, str(TARGETS)],
                          capture_output=True, text=True,
                          timeout=120)  # a guard: one small world takes seconds, never this
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"ready_at_once": False, "servers": 1, "same": True,
                                       "ready": True, "outcome": PASS, "marked": True}


def test_a_harness_that_ends_while_its_fork_server_still_imports_leaves_no_process():
    done = subprocess.run([sys.executable, "-c", _STARTED_EARLY, "leave"], capture_output=True,
                          text=True, timeout=120)  # a guard: an exit takes a moment, never this
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert not alive(json.loads(done.stdout)["pid"])


_BEGUN = """
import json, sys
from harness import run_world
from harness.world import pool

pool.begin()  # before the harness knows its targets: torch first, then it waits for the rest
server = pool._servers[-1]
first = (server.preload, server.awaiting)
if sys.argv[2] == "rest":
    pool.start(["xml.dom.minidom"])  # the targets' modules: the same server imports them next
result = run_world(sys.argv[1], topology="2x1", timeout=30)
print(json.dumps({"first": first, "servers": len(pool._servers), "outcome": result.outcome,
                  "values": result.values}))
"""

PRELOADED = """
import sys

def fn():
    return "xml.dom.minidom" in sys.modules, "torch" in sys.modules
"""


@pytest.mark.parametrize("rest", ["rest", "none"])
def test_a_fork_server_begun_before_the_targets_are_known_imports_torch_then_their_modules(
        tmp_path, rest):
    """``pool.begin`` starts the server at the command's first line (torch's import beside the
    harness's own start-up); ``pool.start`` hands it the targets' modules, imported before
    its first world. With no ``start`` the first world tells it there is nothing more."""
    path = tmp_path / "preloaded.py"
    path.write_text(PRELOADED)
    done = subprocess.run([sys.executable, "-c", _BEGUN, f"{path}:fn", rest],
                          capture_output=True, text=True,
                          timeout=120)  # a guard: one small world takes seconds, never this
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout)
    assert said["first"] == [["torch"], True]
    assert said["servers"] == 1 and said["outcome"] == PASS
    assert said["values"] == [[rest == "rest", True]] * 2


PREEMPTED_IN_A_COLLECTIVE = """
import os, time
import torch_xla.core.xla_model as xm

def fn():
    life = int(os.environ["HARNESS_LIFE"])
    if xm.get_ordinal() == 0:
        time.sleep(0.8)  # rank 1's first life arrives, and dies, before rank 0 comes
        return xm.rendezvous("x", b"zero")
    return xm.rendezvous("x", b"life %d" % life)
"""


def test_a_rank_preempted_inside_a_collective_does_not_leave_its_arrival_behind(tmp_path):
    path = tmp_path / "preempted.py"
    path.write_text(PREEMPTED_IN_A_COLLECTIVE)
    result = run_world(f"{path}:fn", topology="1x2", timeout=10,
                       faults=[{"kind": "preempt", "rank": 1, "after_ms": 300, "lives": [0]}])
    assert result.outcome == PASS, describe(result)
    assert result.ranks[1].restarts == 1
    assert [r.value for r in result.ranks] == [[b"zero", b"life 1"]] * 2


def test_tempfile_names_are_the_same_in_every_run_and_differ_between_ranks():
    """Reproducible to its paths: a staging name learned from one run is the next run's."""
    first = run_world(f"{TARGETS}:temp_names", topology="v4-8", timeout=20)
    again = run_world(f"{TARGETS}:temp_names", topology="v4-8", timeout=20, seed=7)
    assert first.outcome == PASS, describe(first)
    assert first.values == again.values
    assert len({tuple(v) for v in first.values}) == len(first.ranks)


ENVIRONMENT = """
import os

def fn():
    return dict(os.environ)
"""


def test_a_rank_environment_is_the_world_one_and_nothing_of_the_fork_server(tmp_path, monkeypatch):
    """A rank changes only what differs from the environment it inherits; what the fork
    server had of its own (its heap's ``GLIBC_TUNABLES``, the harness's ``PYTHONPATH``) is
    gone, what the world sets is there, and the C library's copy is the same."""
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)  # the server sets its own
    monkeypatch.setenv("TEAM_SETTING_KEPT", "kept")
    path = tmp_path / "environment.py"
    path.write_text(ENVIRONMENT)
    result = run_world(f"{path}:fn", topology="2x1", timeout=30, env={"TEAM_SETTING_SET": "set"})
    assert result.outcome == PASS, describe(result)
    for rank in result.ranks:
        env = rank.value
        assert "GLIBC_TUNABLES" not in env
        assert env["TEAM_SETTING_KEPT"] == "kept" and env["TEAM_SETTING_SET"] == "set"
        assert env["HARNESS_WORLD_ID"] and env["TPU_WORKER_ID"] == str(rank.rank)
