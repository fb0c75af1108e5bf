"""``record_files``: every file operation a rank makes through the view, in the history."""

from __future__ import annotations

from harness import PASS, run_world
from harness.reports.diagnosis import describe

from support import TARGETS_DIR

TARGETS = TARGETS_DIR / "recording_targets.py"
HANDOFF = f"{TARGETS}:handoff"


def file_events(result, **match):
    return [e for e in result.history if e.kind == "file"
            and all(getattr(e, k, None) == v for k, v in match.items())]


def test_a_handoff_shows_its_writer_its_readers_and_the_pollers_attempts():
    result = run_world(HANDOFF, topology="single-host-8", timeout=20, record_files=True)
    assert result.outcome == PASS, describe(result)
    writes = file_events(result, op="open-write")
    assert {e.rank for e in writes} == {0}
    assert {e.detail["path"] for e in writes} == {"/tmp/x/cfg.json.part", "/tmp/x/ready"}
    closes = [e for e in file_events(result, op="close")
              if e.detail["path"] == "/tmp/x/cfg.json.part"]
    assert [(e.rank, e.detail["ok"], e.detail["size"]) for e in closes] == [(0, True, 11)]
    renames = file_events(result, op="rename")
    assert [(e.rank, e.detail) for e in renames] == [
        (0, {"path": "/tmp/x/cfg.json.part", "ok": True, "dst": "/tmp/x/cfg.json",
             "line": "recording_targets.py:18 in handoff"})]  # the target's own line
    reads = [e for e in file_events(result, op="open-read") if e.detail["path"] == "/tmp/x/cfg.json"]
    assert {e.rank for e in reads} == set(range(8))
    assert all(e.detail["ok"] for e in reads)
    failed = [e for e in file_events(result, op="open-read") if e.detail["path"] == "/tmp/x/never"]
    assert {e.rank for e in failed} == set(range(1, 8))
    assert all(e.detail == {"path": "/tmp/x/never", "ok": False, "errno": 2} for e in failed)
    # The pollers' stats: attempts that failed, then one that found the flag.
    polls = [e for e in file_events(result, op="stat") if e.detail["path"] == "/tmp/x/ready"]
    assert {e.rank for e in polls if not e.detail["ok"]} <= set(range(1, 8))
    assert {e.rank for e in polls if e.detail["ok"]} == set(range(1, 8))
    assert len(polls) < 8 * 20, "a polling loop is collapsed, not recorded poll by poll"
    # In arrival order, with the writer's rename before any reader's open.
    order = [e for e in result.history if e.kind == "file"]
    first_read = min(order.index(e) for e in reads)
    assert order.index(renames[0]) < first_read
    # Only the view's virtual paths: nothing of the harness, nothing passed through.
    paths = {e.detail["path"] for e in order}
    assert all(p == "/tmp" or p.startswith("/tmp/x") for p in paths), paths


def test_nothing_is_recorded_when_record_files_is_off():
    result = run_world(HANDOFF, topology="v4-8", timeout=20)
    assert result.outcome == PASS, describe(result)
    assert file_events(result) == []


def test_a_rank_records_at_most_ten_thousand_file_events_then_one_warning():
    result = run_world(f"{TARGETS}:many_attempts", topology="v4-8", timeout=60, record_files=True,
                       args=(10_050,))
    assert result.outcome == PASS, describe(result)
    assert len(file_events(result, rank=0)) == 10_000
    warnings = [e for e in result.history if e.kind == "warning" and e.rank == 0]
    assert len(warnings) == 1 and "dropped" in warnings[0].detail["message"]
