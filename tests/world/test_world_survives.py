"""The harness survives its targets (issue 10): what a target leaves behind or
keeps open may make a cell fail, never stop or mislead the harness itself."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness import HANG, PASS, get_topology, run_world
from harness.filesystem import sandbox as sandbox_layout
from harness.filesystem import snapshot as snapshot_module
from harness.filesystem.mounts import default_table, real_root
from harness.filesystem.snapshot import SIZE_CAP, content_bytes, snapshot
from harness.rank import sweep
from harness.reports.diagnosis import describe

from support import REPO, TESTS, alive, processes_of_world, run_cli, start_cli, worlds_of

HERE = TESTS
TARGETS = HERE / "targets" / "survival_targets.py"
WATCHED = "/tmp/out"


def target(name: str) -> str:
    return f"{TARGETS}:{name}"


# -- snapshots of watched files ----------------------------------------------------

def test_a_fifo_at_a_watched_path_is_recorded_as_a_fifo_not_read():
    """Reading a FIFO nobody writes blocks forever: the world runs in a subprocess so
    that a harness stuck in it fails this test (by the guard) instead of hanging it."""
    script = textwrap.dedent(f"""
        import json
        from harness import run_world
        result = run_world({target("leaves_a_fifo")!r}, topology="1x1", timeout=20,
                           args=({WATCHED!r},), watch=[{WATCHED + "/*"!r}])
        exits = [e.detail["files"] for e in result.history if e.kind == "snapshot"]
        print(json.dumps({{"outcome": result.outcome, "files": result.files[0],
                          "at_exit": exits}}))
    """)
    try:
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                              text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("the harness blocked on the FIFO and never ended the world") from exc
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["outcome"] == PASS
    expected = {f"{WATCHED}/note.txt": "written", f"{WATCHED}/pipe": "not read: fifo"}
    assert report["files"] == expected
    assert report["at_exit"] == [expected]


def test_a_huge_sparse_file_is_recorded_by_its_size_never_read():
    size = 600 * 1024 * 1024
    result = run_world(target("leaves_a_sparse_file"), topology="1x1", timeout=20,
                       args=(WATCHED, size), watch=[WATCHED + "/*"])
    assert result.outcome == PASS, describe(result)
    content = result.files[0][f"{WATCHED}/huge.bin"]
    assert content == f"not read: {size} bytes, larger than the {SIZE_CAP} bytes read at most"
    assert content_bytes(content) is None


def test_a_symlink_at_a_watched_path_is_recorded_as_a_link_not_followed():
    """The target's links hold virtual paths: followed on the machine, they lead out."""
    result = run_world(target("leaves_a_symlink"), topology="1x1", timeout=20,
                       args=(WATCHED,), watch=[WATCHED + "/*"])
    assert result.outcome == PASS, describe(result)
    assert result.files[0] == {f"{WATCHED}/latest": "not read: symlink -> /nonexistent/elsewhere"}


def _sandbox(tmp_path: Path) -> tuple[str, object, object, str]:
    topology = get_topology("1x1")
    table = default_table(topology, str(tmp_path / "home"), str(tmp_path / "cwd"))
    sandbox = str(tmp_path / "sandbox")
    sandbox_layout.create(sandbox, table, topology)
    tmp = table.match("/tmp")
    return sandbox, table, topology, real_root(sandbox, tmp, tmp.scope_key(0, 0))


def test_snapshot_records_what_each_file_is_and_reads_at_most_the_cap(tmp_path):
    sandbox, table, topology, root = _sandbox(tmp_path)
    out = Path(root) / "out"
    out.mkdir()
    (out / "small.txt").write_text("hello")
    (out / "binary.bin").write_bytes(b"\xff\x00")
    with open(out / "at_cap.bin", "wb") as f:
        f.truncate(SIZE_CAP)
    with open(out / "over_cap.bin", "wb") as f:
        f.truncate(SIZE_CAP + 1)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(out / "sock"))
        files = snapshot(sandbox, table, topology, 0, ["/tmp/out/*"], str(tmp_path), str(tmp_path))
    finally:
        listener.close()
    assert files["/tmp/out/small.txt"] == "hello"
    assert content_bytes(files["/tmp/out/binary.bin"]) == b"\xff\x00"
    at_cap = files["/tmp/out/at_cap.bin"]
    assert at_cap.startswith("sha256:") and at_cap.endswith(f"({SIZE_CAP} bytes)")
    assert files["/tmp/out/over_cap.bin"] == \
        f"not read: {SIZE_CAP + 1} bytes, larger than the {SIZE_CAP} bytes read at most"
    assert files["/tmp/out/sock"] == "not read: socket"
    assert all(content_bytes(files[f"/tmp/out/{n}"]) is None
               for n in ("at_cap.bin", "over_cap.bin", "sock"))


def test_a_file_removed_while_the_snapshot_runs_is_left_out(tmp_path, monkeypatch):
    """Ranks still running may delete a watched file between the walk and the read."""
    sandbox, table, topology, root = _sandbox(tmp_path)
    out = Path(root) / "out"
    out.mkdir()
    (out / "kept.txt").write_text("kept")
    (out / "gone.txt").write_text("gone")
    real_walk = os.walk

    def walk_then_delete(top, *args, **kwargs):
        for entry in real_walk(top, *args, **kwargs):
            (out / "gone.txt").unlink(missing_ok=True)
            yield entry

    monkeypatch.setattr(os, "walk", walk_then_delete)
    files = snapshot(sandbox, table, topology, 0, ["/tmp/out/*"], str(tmp_path), str(tmp_path))
    assert files == {"/tmp/out/kept.txt": "kept"}


def test_one_snapshot_reads_at_most_its_budget_the_same_files_every_time(tmp_path, monkeypatch):
    """A glob may match many files under the cap: what one snapshot reads is bounded too,
    and its walk is sorted, so the same files are read on every run."""
    sandbox, table, topology, root = _sandbox(tmp_path)
    out = Path(root) / "out"
    (out / "b").mkdir(parents=True)
    for name in ("b/3.txt", "a.txt", "c.txt"):
        (out / name).write_text("123456")
    monkeypatch.setattr(snapshot_module, "SNAPSHOT_BUDGET", 13)
    files = snapshot(sandbox, table, topology, 0, ["/tmp/out/*", "/tmp/out/**"],
                     str(tmp_path), str(tmp_path))
    assert files == {"/tmp/out/a.txt": "123456", "/tmp/out/c.txt": "123456",
                     "/tmp/out/b/3.txt": "not read: 6 bytes, past the 13 bytes one snapshot "
                                         "reads at most"}


# -- a rank's socket held by a child it forked ---------------------------------------

def test_ranks_whose_forked_children_hold_their_sockets_pass_and_the_children_die():
    """32 ranks return at once, each leaving a child that holds the rank's socket open:
    the exit of each must not cost the single-threaded loop a wait for an EOF that only
    the world's end brings (0.5 s each used to turn this world into a HANG)."""
    result = run_world(target("forks_a_child_that_keeps_the_socket"), topology="v4-64-pjrt",
                       timeout=8, args=(30,))
    assert result.outcome == PASS, describe(result)
    assert [r.value for r in result.ranks] == list(range(32))
    assert result.leftovers == 32, "every child was still alive at the end, and killed"
    assert processes_of_world(result.world_id) == []


# -- exec mode: a script that starts no rank -------------------------------------------

def test_exec_of_a_script_that_starts_no_rank_tested_nothing_and_says_so(tmp_path):
    """The script ran on every host and exited 0: on a pod that is a run that did not
    fail, but no rank was started, so nothing of the world was tested: NOT-EXERCISED
    (exit 0, as a catalog cell that tested nothing), never PASS."""
    script = tmp_path / "hello.py"
    script.write_text('print("hello from the launcher")\n')
    done = run_cli("exec", "--", "python", str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("NOT-EXERCISED: no rank started: launchers 0-7 ran the script to its end (exit 0) "
            "without xmp.spawn or the XLA runtime: nothing of the world was tested"
            ) in " ".join(done.stdout.split())
    assert "CRASH" not in done.stdout and "still running" not in done.stdout
    shown = run_cli("exec", "-t", "2x2", "--output", "--", "python", str(script))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "hello from the launcher" in shown.stdout


def test_exec_a_launcher_that_starts_no_rank_while_others_do_is_named(tmp_path):
    """Host 1 skips xmp.spawn: host 0's ranks wait for its ranks forever, and the report
    says that they never started, and why, rather than that they are still running."""
    script = tmp_path / "skips.py"
    script.write_text(textwrap.dedent("""
        import os
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.xla_multiprocessing as xmp

        def _mp_fn(index):
            xm.rendezvous("sync")

        if __name__ == "__main__" and os.environ["TPU_WORKER_ID"] != "1":
            xmp.spawn(_mp_fn)
    """))
    result = run_world(argv=(str(script),), topology="2x2", timeout=3)
    assert result.outcome == HANG
    assert [h.outcome for h in result.hosts] == [HANG, PASS]
    never = result.ranks[2:]
    assert [r.summary() for r in never] == \
        ["never started: launcher 1 exited 0 without starting it"] * 2


# -- no process outlives its world, whatever happens to the harness ---------------------

def _daemons(pid_dir):
    return [int(p.read_text()) for p in pid_dir.glob("daemon-*") if p.read_text()]


def test_daemons_of_a_world_whose_fork_server_was_killed_end_with_the_world(tmp_path):
    """setsid daemons reparented to init when the fork server (our subreaper) dies: found by
    the world's mark in their environment and ended with the world."""
    result = run_world(f"{TARGETS}:daemon_then_kill_the_fork_server", topology="v4-8",
                       timeout=20, args=(str(tmp_path),), sandbox=False)
    daemons = _daemons(tmp_path)
    assert len(daemons) == 4, describe(result)
    assert [p for p in daemons if alive(p)] == []
    assert processes_of_world(result.world_id) == []
    # Its leader died with the fork server: the world ends then, not at its deadline; a rank
    # that returned is judged as returned, one the leader's death took with it as a CRASH
    # (which ranks get there first is the scheduler's), none as a hang. Every rank may also
    # have returned before the leader's death was seen (seen once on 3.10, a quick machine):
    # then there was nothing left to end, and nothing to report.
    outcomes = [r.outcome for r in result.ranks]
    assert set(outcomes) <= {"PASS", "CRASH"}, outcomes
    if "CRASH" in outcomes:
        assert "the world's leader process died" in (result.hang_report or ""), describe(result)


def test_daemons_of_a_world_whose_leader_was_killed_are_ended_by_the_fork_server(
        tmp_path, monkeypatch):
    """Their subreaper gone, they come back to the fork server, which reaps the leader that
    ended other than cleanly and kills what came back, without the harness's sweep of
    /proc (left out here). Python isolation: in kernel isolation no rank can signal its
    leader, outside its PID namespace."""
    monkeypatch.setattr(sweep, "end_world", lambda world: 0)
    result = run_world(f"{TARGETS}:daemon_then_kill_the_leader", topology="v4-8", timeout=20,
                       args=(str(tmp_path),), sandbox=False, isolation="python")
    daemons = _daemons(tmp_path)
    assert len(daemons) == 4, describe(result)
    assert "the world's leader process died" in result.hang_report
    # the machine's time, a bound: a SIGKILLed daemon is gone in milliseconds, never this
    assert sweep.wait_gone(daemons, limit=10), [p for p in daemons if alive(p)]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_harness_killed_mid_run_leaves_no_process_and_no_world_directory(tmp_path, sig):
    script = ("from harness import run_world\n"
              f"run_world({str(TARGETS) + ':daemon_then_wait'!r}, topology='v4-8', timeout=60,"
              f" args=({str(tmp_path)!r}, 60), sandbox=False)\n")
    harness = subprocess.Popen([sys.executable, "-c", script], cwd=str(REPO))
    try:
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        deadline = time.monotonic() + 60
        while len(_daemons(tmp_path)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        daemons = _daemons(tmp_path)
        assert len(daemons) == 4
        harness.send_signal(sig)
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        harness.wait(timeout=30)
        gone = time.monotonic() + 30  # the reaper's sweep: a condition waited for, not timed
        while any(alive(p) for p in daemons) and time.monotonic() < gone:
            time.sleep(0.1)
        assert [p for p in daemons if alive(p)] == []
        left = worlds_of(harness.pid, ended=True)
        while left and time.monotonic() < gone:
            time.sleep(0.1)
            left = worlds_of(harness.pid, ended=True)
        assert left == []
    finally:
        harness.kill()
        for pid in _daemons(tmp_path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("sig, status, inherited, group", [
    (signal.SIGINT, 130, signal.SIG_DFL, False),  # Ctrl-C
    (signal.SIGTERM, 143, signal.SIG_DFL, True),  # a CI job's timeout, to its whole group
    (signal.SIGHUP, 129, signal.SIG_DFL, False),  # the terminal closed
    (signal.SIGINT, 130, signal.SIG_IGN, True),  # `cmd &` in a script, its group interrupted
], ids=["ctrl-c", "sigterm-to-the-group", "sighup", "ignored-sigint-to-the-group"])
def test_a_stop_signal_cancels_the_queue_ends_the_worlds_in_flight_and_writes_the_partial_matrix(
        tmp_path, sig, status, inherited, group):
    """Before: the run went on with every queued cell, then printed "aborted", exit 1, and
    wrote no report; SIGTERM and SIGHUP left an empty report directory, and a SIGINT to the
    group of a harness that inherited it ignored reported its ranks as crashed. Its cells
    take two minutes each: only a stopped run ends in one."""
    reports = tmp_path / "reports"
    harness = start_cli("run", "-T", f"{TARGETS}:sleepy_sync", "-s", "baseline",
                        "-s", "divergent-slugs", "-s", "api-drift", "-j", "1", "--timeout", "300",
                        "--report-dir", str(reports), "--format", "json", cwd=str(REPO),
                        sigint=inherited, group=group)
    try:
        deadline = time.monotonic() + 60  # until its first world is up
        while not worlds_of(harness.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert worlds_of(harness.pid), "no world started"
        if group:
            os.killpg(harness.pid, sig)
        else:
            harness.send_signal(sig)
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        out, err = harness.communicate(timeout=60)
    finally:
        harness.kill()
    assert harness.returncode == status, err
    summary = json.loads((reports / "latest" / "matrix.json").read_text())["summary"]
    assert summary["interrupted"] is True and summary["planned"] == 3
    assert summary["outcomes"].get("CRASH", 0) == 0
    assert "interrupted:" in out


def test_a_ctrl_c_while_the_harness_still_imports_its_worlds_module_is_a_plain_interrupt(
        monkeypatch):
    """A Ctrl-C in the middle of importing ``harness.world.world`` (the module is in
    sys.modules, half made, without ``ABORT``): no world is running yet, and the handler
    raised AttributeError, which the command line reported as an internal error (exit 3,
    once in a soak of 16 rounds)."""
    import types

    from harness.cli.stop import stopped as _interrupted

    monkeypatch.setitem(sys.modules, "harness.world.world", types.ModuleType("harness.world.world"))
    with pytest.raises(KeyboardInterrupt):
        _interrupted(signal.SIGINT, None)


def test_a_ctrl_c_whose_keyboardinterrupt_was_swallowed_still_ends_the_run():
    """The Ctrl-C handler marks every world to end (``ABORT``) before it raises; where the
    KeyboardInterrupt is swallowed on its way (a garbage collector's callback running just
    then prints "Exception ignored" and goes on: an explore run kept waiting two minutes),
    the world in flight still ends, and run_world raises it again in the main thread."""
    from harness.cli.stop import stopped as _interrupted
    from harness.world.world import ABORT

    try:
        with pytest.raises(KeyboardInterrupt):
            _interrupted(signal.SIGINT, None)
        assert ABORT.is_set()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):  # the world would take two minutes
            run_world(target("sleepy_sync"), topology="2x1", timeout=300,
                      args=({"config": {}},))
        assert time.monotonic() - started < 60  # the machine's time: bounds a stuck world
    finally:
        ABORT.clear()


def test_a_second_ctrl_c_exits_at_once_and_leaves_nothing(tmp_path):
    """The second Ctrl-C does not wait for the worlds to end: exit 130, and the reaper ends
    every process the run started (found by a mark in their environment)."""
    soak = f"second-ctrl-c-{os.getpid()}-{time.monotonic_ns()}"
    harness = start_cli("run", "-T", f"{TARGETS}:sleepy_sync", "-s", "baseline",
                        "-s", "api-drift", "-j", "1", "--timeout", "300", "--report-dir",
                        str(tmp_path), "--format", "json", cwd=str(REPO),
                        env={**os.environ, "SOAK_MARK": soak})
    try:
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        deadline = time.monotonic() + 60
        while not worlds_of(harness.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        harness.send_signal(signal.SIGINT)
        harness.send_signal(signal.SIGINT)
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        _, err = harness.communicate(timeout=60)
    finally:
        harness.kill()
    assert harness.returncode == 130, err
    left = _marked("SOAK_MARK", soak)
    gone = time.monotonic() + 30  # the reaper's sweep: a condition waited for
    while left and time.monotonic() < gone:
        time.sleep(0.2)
        left = _marked("SOAK_MARK", soak)
    assert left == []


def _marked(key, value):
    from harness.rank.sweep import marked

    return [p for p in marked((key, value)) if alive(p)]


def test_the_harness_returns_only_once_its_reaper_has_ended_what_the_run_left():
    """At exit the harness lets its reaper sweep at once and waits for it: when the process
    returns, nothing it started runs on (the reaper neither), and Python's development mode
    has no still-running subprocess to warn about."""
    soak = f"reaper-at-exit-{os.getpid()}-{time.monotonic_ns()}"
    identity = f"{HERE / 'targets' / 'world_targets.py'}:identity"
    code = ("from harness import describe, run_world\n"
            f"r = run_world({identity!r}, topology='1x2', timeout=60)\n"
            "assert r.outcome == 'PASS', describe(r)\n")
    done = subprocess.run([sys.executable, "-X", "dev", "-c", code], cwd=str(REPO),
                          env={**os.environ, "SOAK_MARK": soak}, capture_output=True, text=True,
                          timeout=120)  # the machine's time: a bound, so a stuck run fails
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr
    assert _marked("SOAK_MARK", soak) == []  # at once: no wait for a sweep still under way
