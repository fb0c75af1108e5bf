"""``harness explore --crash-states``: the crash model (pure: operations in, states out, per
mount consistency), the host-crash fault, and the explorer on the reference targets and on
a stranger's worker, each judged by its workload's checker in real worlds."""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from harness import PASS, run_world
from harness.explore.crash import CrashError, explore_crash_states
from harness.explore.crash_model import (
    HOST,
    PROCESS,
    FileOp,
    enumerate_states,
    ops_of,
    patterns,
    writers,
)
from harness.explore.crash_report import render_crash_report
from harness.faults.kinds import ValidationError, parse_fault
from harness.reports.diagnosis import describe
from harness.runner.run import CellPlan, run_cell
from harness.scenarios import load_scenario
from harness.workloads.registry import target

from support import REPO, ctrl_c, seed_fix_reaches_its_fsync, start_cli, worlds_of

CKPT, TMP = "/w/ckpt.json", "/w/ckpt.json.tmp"
STRANGER = "tests/crash_stranger_worker.py"
FLAG = "tests/crash_stranger_flag.py"


def seq(*ops: tuple) -> list[FileOp]:
    """Operations as a recording tells them: each (op, path, fields), occurrences counted."""
    counts: Counter = Counter()
    out = []
    for i, (op, path, fields) in enumerate(ops):
        counts[(op, path)] += 1
        out.append(FileOp(i, op, path, counts[(op, path)], **fields))
    return out


def in_place(times: int = 2, path: str = CKPT) -> list[tuple]:
    ops: list[tuple] = []
    for k in range(times):
        ops += [("open-write", path, {"trunc": True, "new": k == 0, "line": "a.py:1 in save"}),
                ("write", path, {"offset": 0, "size": 100 + k, "line": "a.py:2 in save"}),
                ("close", path, {"size": 100 + k})]
    return ops


def atomic(times: int = 2, fsync: bool = True) -> list[tuple]:
    ops: list[tuple] = []
    for _ in range(times):
        ops += [("open-write", TMP, {"trunc": True, "new": True, "line": "r.py:1 in save"}),
                ("write", TMP, {"offset": 0, "size": 100, "line": "r.py:2 in save"})]
        if fsync:
            ops.append(("fsync", TMP, {"line": "r.py:3 in save"}))
        ops += [("close", TMP, {"size": 100}), ("rename", TMP, {"dst": CKPT, "line": "r.py:4 in save"})]
        if fsync:
            ops.append(("fsync", "/w", {"dir": True, "line": "r.py:5 in save"}))
    return ops


def local(path: str) -> str:
    return "local"


def states_of(ops: list[tuple], consistency=local):
    return enumerate_states(seq(*ops), 0, consistency)


# -- the model ------------------------------------------------------------------------

def test_an_in_place_rewrite_on_a_local_disk_is_torn_emptied_and_lost():
    states = states_of(in_place(2) + [("mkdir", "/w/x", {"line": "a.py:9 in f"})])
    torn = [s for s in states if s.torn]
    assert [(s.at.op, s.at.occurrence, s.damaged) for s in torn] == \
        [("write", 1, CKPT), ("write", 2, CKPT)]
    emptied = [s for s in states if s.crash == PROCESS and not s.torn and s.damaged == CKPT]
    assert [s.depends.op for s in emptied] == ["open-write", "open-write"]  # between open and write
    host = [s for s in states if s.crash == HOST]
    assert host and all(dict(s.cut) == {CKPT: 0} for s in host)  # never fsynced: empty
    assert {s.depends.occurrence for s in host} == {1, 2}  # blamed on the truncating open
    assert all(s.depends.op == "open-write" for s in host)


def test_tmp_fsync_rename_fsync_dir_never_damages_the_checkpoint():
    states = states_of(atomic(3))
    assert states, "the temporary file has crash states of its own"
    assert all(s.damaged in (None, TMP) for s in states)
    assert all(CKPT not in s.cut for s in states)
    # only the temporary file, before its fsync, loses data to a host crash
    assert {s.at.op for s in states if s.crash == HOST} == {"fsync"}


def test_a_rename_without_fsync_is_lost_to_a_host_crash_only():
    states = states_of(atomic(2, fsync=False) + [("mkdir", "/w/y", {"line": "r.py:9 in f"})])
    assert all(s.damaged in (None, TMP) for s in states if s.crash == PROCESS)
    blamed = [s for s in states if s.crash == HOST and s.damaged == CKPT]
    assert blamed and all(s.cut[CKPT] == 0 and s.depends.op == "rename" for s in blamed)
    assert "never fsynced" in blamed[0].why


def test_an_object_appears_whole_at_close_or_not_at_all():
    bucket = "/mnt/bucket/a.jsonl"
    ops = in_place(2, bucket) + [("mkdir", "/w/x", {"line": "a.py:9 in f"})]
    states = states_of(ops, lambda p: "object" if p.startswith("/mnt/bucket") else "local")
    assert not any(s.torn for s in states)
    assert not any(s.crash == HOST for s in states)
    assert all(s.damaged is None for s in states)
    # the only new states are the ones after an upload (a close)
    assert [s.at.op for s in states] == ["open-write", "mkdir"]


def test_nfs_data_is_durable_at_close():
    closed = in_place(1) + [("mkdir", "/w/x", {"line": "a.py:9 in f"})]
    assert [(s.at.op, dict(s.cut)) for s in states_of(closed) if s.crash == HOST] == \
        [("mkdir", {CKPT: 0})]  # a local disk loses what was never fsynced, closed or not
    nfs = states_of(closed, lambda p: "close-to-open")
    assert not any(s.crash == HOST for s in nfs) and any(s.torn for s in nfs)
    open_ = [("open-write", CKPT, {"trunc": True, "new": True, "line": "a.py:1 in save"}),
             ("write", CKPT, {"offset": 0, "size": 10, "line": "a.py:2 in save"}),
             ("mkdir", "/w/x", {"line": "a.py:9 in f"}), ("close", CKPT, {"size": 10})]
    host = [s for s in states_of(open_, lambda p: "close-to-open") if s.crash == HOST]
    assert [(s.at.op, dict(s.cut)) for s in host] == [("mkdir", {CKPT: 0})]  # not yet closed


def test_only_the_first_two_occurrences_of_a_site_are_crash_points():
    states = states_of(in_place(5))
    assert max(s.at.occurrence for s in states) == 2
    assert len(states_of(in_place(5))) == len(states_of(in_place(2) + in_place(3)[:1]))


def test_occurrences_count_every_attempt_as_a_trigger_does():
    history = [
        {"kind": "file", "rank": 1, "op": "mkdir", "detail": {"path": "/d", "ok": False, "errno": 17}},
        {"kind": "file", "rank": 1, "op": "mkdir", "detail": {"path": "/d", "ok": True}},
        {"kind": "file", "rank": 0, "op": "mkdir", "detail": {"path": "/d", "ok": True}},
        {"kind": "file", "rank": 1, "op": "open-read", "detail": {"path": "/d/f", "ok": True}},
        {"kind": "call", "rank": 1, "op": "rendezvous"},
        {"kind": "file", "rank": 1, "op": "open-write",
         "detail": {"path": "/d/f", "ok": True, "trunc": True, "line": "x.py:3 in f"}},
    ]
    ops = ops_of(history, 1)
    assert [(o.op, o.occurrence) for o in ops] == [("mkdir", 2), ("open-write", 1)]
    assert ops[1].trunc and ops[1].line == "x.py:3 in f"


def test_workers_doing_the_same_on_their_own_files_are_crashed_once():
    def worker(n):
        return seq(("mkdir", f"/b/tpu_{n}", {"line": "w.py:1 in run"}),
                   ("open-write", f"/b/tpu_{n}/shard_{n}_{'ab' * 6}.jsonl", {"line": "w.py:2 in up"}))
    other = seq(("open-write", "/tmp/flag", {"line": "w.py:9 in flag"}))
    assert writers({0: worker(0), 1: worker(1), 2: other, 3: []}) == [0, 2]


def test_what_the_operations_alone_show():
    assert [p.kind for p in patterns(seq(*in_place(2)), local)] == ["in-place"]
    assert patterns(seq(*atomic(2)), local) == []
    unsynced = patterns(seq(*atomic(2, fsync=False)), local)
    assert [p.kind for p in unsynced] == ["rename-unsynced"]
    probe = seq(("open-write", "/c/.probe", {"trunc": True, "new": True, "line": "p.py:1 in f"}),
                ("write", "/c/.probe", {"offset": 0, "size": 4}), ("close", "/c/.probe", {"size": 4}))
    assert patterns(probe, local, scratch={"/c/.probe"}) == []  # removed again: a probe


# -- the host-crash fault -----------------------------------------------------------------

def test_host_crash_takes_exact_absolute_paths():
    fault = parse_fault({"kind": "host-crash", "op": "write", "path": "/w/*", "cut": {"/w/a": 0}})
    assert fault.cut == {"/w/a": 0} and fault.restarts and not fault.partial
    for bad in ({"w/a": 0}, {"/w/*": 0}, {"/w/a": -1}):
        with pytest.raises(ValidationError):
            parse_fault({"kind": "host-crash", "op": "write", "path": "/w/*", "cut": bad})


# -- the recording the model reads -----------------------------------------------------------

def test_the_recording_tells_writes_fsyncs_and_the_targets_line():
    result = run_world(f"{STRANGER}:record_me", topology="4x1", timeout=20, record_files=True)
    assert result.outcome == PASS, describe(result)
    ops = ops_of(result.history, 0)
    source = (REPO / STRANGER).read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "os.fsync(f.fileno())" in text)
    assert [(o.op, o.path) for o in ops] == [
        ("mkdir", "/tmp/r"), ("open-write", "/tmp/r/a.bin"), ("write", "/tmp/r/a.bin"),
        ("fsync", "/tmp/r/a.bin"), ("write", "/tmp/r/a.bin"), ("close", "/tmp/r/a.bin"), ("fsync", "/tmp/r")]
    assert [(o.offset, o.size) for o in ops if o.op == "write"] == [(0, 5), (5, 3)]
    assert ops[1].trunc and ops[1].new
    assert ops[3].line == f"crash_stranger_worker.py:{line} in record_me"
    assert ops[-1].dir and not ops[3].dir


# -- the explorer, in worlds ----------------------------------------------------------------

def _line_of(path: Path, needle: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text)


@pytest.fixture(scope="module")
def naive():
    return explore_crash_states(target("naive-worker"), "checkpoint-resume", jobs=2)


def test_naive_workers_in_place_checkpoint_is_reported_with_its_line(naive):
    assert naive.baseline_outcome == PASS and naive.confirmed
    line = _line_of(REPO / "harness/workloads/checkpoint_resume/naive.py", 'open(checkpoint_path, "w")')
    where = f"naive.py:{line} in save_checkpoint"
    torn = [v for v in naive.vulnerabilities if v.first.state.torn]
    assert torn and torn[0] is naive.vulnerabilities[0]
    assert torn[0].depends.op == "write" and torn[0].depends.line == where
    assert torn[0].file.endswith("/checkpoints/checkpoint_worker_0.json")
    assert "JSONDecodeError" in torn[0].first.detail and "written in place" in torn[0].protocol
    host = [v for v in naive.vulnerabilities if v.crash == HOST]
    assert host and host[0].depends.line == where and host[0].first.faults[0]["kind"] == "host-crash"
    text = render_crash_report(naive)
    assert "a crash during write 1 of `checkpoint_worker_0.json` leaves a torn file" in text
    assert where in text
    json.dumps(naive.to_dict())  # the JSON report holds only JSON


def test_a_vulnerability_replays_from_its_scenario(naive, tmp_path):
    v = naive.vulnerabilities[0]
    path = tmp_path / f"{v.scenario_name}.yaml"
    path.write_text(v.scenario_yaml)
    scenario = load_scenario(path)
    assert [f.kind for f in scenario.faults] == ["preempt"]
    cell = run_cell(CellPlan(scenario, target("naive-worker"), 0, scenario.topology, scenario.timeout))
    assert cell.outcome == v.first.outcome and "JSONDecodeError" in cell.detail
    assert v.replay == f"harness run --scenario {v.scenario_name}.yaml --target naive-worker"


def test_robust_workers_protocol_reports_nothing():
    report = explore_crash_states(target("robust-worker"), "checkpoint-resume", jobs=2)
    assert report.baseline_outcome == PASS and report.confirmed
    assert report.states and all(s.outcome == PASS for s in report.states), \
        [(s.state.why, s.detail) for s in report.states if s.outcome != PASS]
    assert report.vulnerabilities == [] and report.patterns == []
    assert "no vulnerability" in render_crash_report(report)


def test_a_strangers_replace_without_fsync_fails_on_a_host_crash_only():
    report = explore_crash_states(target(f"{STRANGER}:run", "checkpoint-resume"),
                                  "checkpoint-resume", jobs=2)
    assert report.baseline_outcome == PASS
    assert report.vulnerabilities and {v.crash for v in report.vulnerabilities} == {HOST}
    rename = _line_of(REPO / STRANGER, "os.replace(tmp, path)")
    v = report.vulnerabilities[0]
    assert v.depends.op == "rename" and v.depends.line == f"crash_stranger_worker.py:{rename} in save"
    assert "renamed onto" in v.protocol and "--workload checkpoint-resume" in v.replay
    assert all(s.outcome == PASS for s in report.states if s.state.crash == PROCESS)


def test_seed_fix_sync_cannot_be_judged_and_says_what_it_shows():
    report = explore_crash_states(target("seed-fix-sync"), "config-sync",
                                  seed=seed_fix_reaches_its_fsync())
    assert report.baseline_outcome != PASS and not report.confirmed
    assert report.vulnerabilities == [] and report.worlds == 1
    source = REPO / "harness/workloads/config_sync/seed_fix.py"
    fsync = _line_of(source, "os.fsync(f.fileno()) if hasattr")
    write = _line_of(source, "with open(temp_config_path, 'w')")
    assert report.baseline_raised_at == f"seed_fix.py:{fsync} in load_synced_config"
    config = [p for p in report.patterns if p.op.path.endswith("/temp_config.yaml")]
    assert [p.kind for p in config] == ["in-place"]
    assert config[0].op.line == f"seed_fix.py:{write} in load_synced_config" and config[0].rank == 0
    assert not any(".test_write" in p.op.path for p in report.patterns)  # a probe, removed again
    text = render_crash_report(report)
    assert "does not pass" in text and "unconfirmed" in text and "never ran" in text


def test_a_flag_made_durable_before_its_config_is_an_ordering_vulnerability():
    """Only a host crash that keeps the flag and empties the config fails: reported by the
    config's write, with the flag's creation as what the failure also needs."""
    report = explore_crash_states(target(f"{FLAG}:made_early", "config-sync"), "config-sync",
                                  jobs=2)
    assert report.baseline_outcome == PASS
    assert [(v.crash, v.first.outcome) for v in report.vulnerabilities] == [(HOST, "FAIL")]
    v = report.vulnerabilities[0]
    source = REPO / FLAG
    config = _line_of(source, 'with open(PATH, "w")')
    flag = _line_of(source, 'with open(FLAG, "w")')
    assert v.depends.line == f"crash_stranger_flag.py:{config} in made_early"
    assert [(op.op, op.path) for op in v.needs] == [("open-write", "/tmp/team/config.yaml.ready")]
    assert v.ordering == (
        "the restart survives an empty `config.yaml` on its own and fails once "
        f"`config.yaml.ready` (created at crash_stranger_flag.py:{flag} in made_early) also "
        "exists: `config.yaml` must be durable (fsync) before it is created")
    assert "returned no config: NoneType" in v.first.detail
    assert f"ordering: {v.ordering}" in render_crash_report(report)
    assert v.reproduced and v.again[0] == "FAIL", v.again  # its scenario, run once more
    assert "NOT reproduced" not in render_crash_report(report)
    v.again = ("PASS", "all 8 ranks hold the same config")  # as a race that went the other way
    assert not v.to_dict()["reproduced"]
    assert "NOT reproduced: run again from its scenario, the recovery ended PASS (all 8 ranks " \
        "hold the same config): its outcome depends on timing" in render_crash_report(report)
    # the same damage without the flag was tried, and passed
    assert any(s.outcome == PASS and s.state.crash == HOST and s.state.damaged == v.file
               and v.needs[0].path not in s.state.files for s in report.states)


def test_seed_001s_flag_protocol_as_its_author_meant_it_survives_every_crash_state():
    """With the fsyncs where the file is still open, the rendezvous orders every read after
    the write: no state a crash leaves hurts the restarted job (the flag adds nothing)."""
    report = explore_crash_states(target(f"{FLAG}:as_meant", "config-sync"), "config-sync",
                                  jobs=2)
    assert report.baseline_outcome == PASS and report.confirmed
    assert len(report.states) >= 6
    assert [(s.state, s.outcome, s.detail) for s in report.states if s.outcome != PASS] == []
    assert report.vulnerabilities == []


def test_a_job_restarts_on_what_the_killed_writer_left():
    """config-sync has no restart inside a world: the rank is killed, and a fresh job starts
    with the files it left in place. naive-sync's rank 0 rewrites its file before anyone
    reads it, so no state it leaves is a vulnerability."""
    report = explore_crash_states(target("naive-sync"), "config-sync", jobs=2)
    assert report.baseline_outcome == PASS and report.vulnerabilities == []
    placed = {s.state.torn: s.faults for s in report.states}
    assert set(placed) == {False, True} and all(s.worlds == 2 for s in report.states)
    for faults in placed.values():
        assert [(f["kind"], f["path"], f["hosts"]) for f in faults] == \
            [("stale-leftover", "/tmp/temp_config.yaml", [0])]
    assert placed[False][0]["content"] == ""  # killed between the truncating open and the write
    assert placed[True][0]["content"].startswith("arch:")  # a torn prefix of the YAML
    assert all(s.outcome == PASS for s in report.states)


def test_robust_sync_has_nothing_to_crash():
    report = explore_crash_states(target("robust-sync"), "config-sync")
    assert report.baseline_outcome == PASS and report.states == [] and report.writers == []
    assert report.note.startswith("nothing to crash: robust-sync changes no file")
    assert re.search(r"0 file operations, no crash point; 1 world in", render_crash_report(report))


def test_ctrl_c_ends_the_crash_state_in_flight(tmp_path):
    """A restart that would take two minutes on a crash state's leftovers: Ctrl-C ends its
    world at once, exit 130, and no rank or sandbox of it is left."""
    (tmp_path / "slow.py").write_text(
        "import os, select\nimport torch_xla.core.xla_model as xm\n\n"
        "def sync(cfg):\n"
        "    if xm.get_ordinal() == 0:\n"
        "        if os.path.exists('/tmp/cfg.txt'):  # what a crash left: a slow recovery\n"
        "            select.select([], [], [], 120)  # of the machine's time\n"
        "        with open('/tmp/cfg.txt', 'w') as f:\n"
        "            f.write('x' * 100)\n"
        "    xm.rendezvous('cfg')\n"
        "    return cfg\n")
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / ".cache")}
    run = start_cli("explore", "--target", "slow.py:sync", "--crash-states", "--timeout", "300",
                    cwd=tmp_path, env=env)
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    deadline = time.monotonic() + 120
    seen: dict[str, float] = {}
    while time.monotonic() < deadline:  # a world up for a second: the slow recovery
        now = time.monotonic()
        for path in worlds_of(run.pid):
            seen.setdefault(path, now)
        if any(now - t >= 1.0 and os.path.exists(p) for p, t in seen.items()):
            break
        time.sleep(0.1)
    assert seen, "no crash state's world started"
    out, err = ctrl_c(run)
    assert run.returncode == 130, err
    assert "interrupted" in err
    assert not worlds_of(run.pid, ended=True)  # its worlds and their ranks are gone


def test_bad_input_is_named():
    with pytest.raises(CrashError, match="unknown workload 'nope'"):
        explore_crash_states(target("naive-worker"), "nope")
    with pytest.raises(CrashError, match="naive-worker belongs to workload checkpoint-resume"):
        explore_crash_states(target("naive-worker"), "config-sync")
    with pytest.raises(ValueError, match="unknown target 'nope'"):
        target("nope")
