"""The bounded history: a long run keeps the head and the tail of its collective and
file events, every other event, and says what it dropped."""

from __future__ import annotations

import json

from harness import PASS, run_world
from harness.checkers import config_sync
from harness.history import DROPPABLE, HISTORY_HEAD, HISTORY_TAIL, Event, History
from harness.reports.diagnosis import describe, diagnose
from harness.reports.json_report import load, to_json
from harness.runner.cells import Cell, FaultRow, Matrix, RankRow
from harness.world.coordinator import Coordinator
from harness.world.result import WorldResult

from support import TARGETS_DIR, all_reduce, rendezvous

TARGETS = str(TARGETS_DIR / "history_targets.py")


def test_a_history_under_its_bound_keeps_everything_in_order():
    history = History(head=3, tail=3)
    events = [Event(t=i / 10, kind="call", rank=0, step=i) for i in range(6)]
    for e in events:
        history.append(e)
    assert list(history) == events and len(history) == 6 and history.dropped.count == 0


def test_a_long_history_keeps_head_tail_and_every_event_a_diagnosis_needs():
    history = History(head=3, tail=3)
    events = []
    for i in range(20):
        kind = "file" if i % 5 == 4 else "call"
        events.append(Event(t=float(i), kind=kind, rank=0, step=i))
        if i in (6, 12):  # in the middle: must survive
            events.append(Event(t=i + 0.5, kind="fault", rank=1, op="kill"))
        if i == 13:
            events.append(Event(t=i + 0.5, kind="exit", rank=1, detail={"message": "was killed"}))
    for e in events:
        history.append(e)
    kept = list(history)
    repetitive = [e for e in events if e.kind in DROPPABLE]
    assert [e for e in kept if e.kind in DROPPABLE] == repetitive[:3] + repetitive[-3:]
    others = [e for e in events if e.kind not in DROPPABLE]
    assert [e for e in kept if e.kind not in DROPPABLE | {"dropped"}] == others
    [marker] = [e for e in kept if e.kind == "dropped"]
    assert history.dropped.count == 14 and history.dropped.kinds == {"call": 11, "file": 3}
    assert (history.dropped.first_t, history.dropped.last_t) == (3.0, 16.0)
    assert marker.detail["message"].startswith(
        "14 events dropped (collective 11, file 3) between 3.0 s and 16.0 s")
    assert [e.t for e in kept] == sorted(e.t for e in kept), "still in time order"
    assert len(history) == len(kept) and history[-1] == events[-1]


def test_the_coordinators_history_is_bounded_and_keeps_faults_and_mismatches():
    c = Coordinator(2)
    steps = HISTORY_HEAD + HISTORY_TAIL  # 2 calls and a completion each: 3x the bound
    for step in range(steps):
        if step == steps // 2:
            c.record("fault", rank=1, op="delay", detail={"message": "rank 1 was delayed"})
        c.collective(0, rendezvous("s", b""))
        c.collective(1, rendezvous("s", b""))
    c.collective(0, rendezvous("s", b""))
    c.collective(1, all_reduce(1))  # a mismatch after the drop
    kinds = [e.kind for e in c.history]
    assert kinds.count("call") + kinds.count("complete") == HISTORY_HEAD + HISTORY_TAIL
    assert kinds.count("fault") == 1 and kinds.count("mismatch") == 1 and kinds.count("dropped") == 1
    assert c.history.dropped.count == 3 * steps + 2 - HISTORY_HEAD - HISTORY_TAIL
    assert set(c.history.dropped.kinds) == {"call", "complete"}


def test_a_world_of_many_collectives_drops_the_middle_and_every_report_says_so(tmp_path):
    steps = (HISTORY_HEAD + HISTORY_TAIL) // 2  # 2 ranks: 3 events a step, 1.5x the bound
    result = run_world(f"{TARGETS}:long_run", topology="2x1", timeout=120, args=(steps,),
                       preload=())
    assert result.outcome == PASS, describe(result)
    assert result.dropped is not None and result.dropped.count == 3 * steps - HISTORY_HEAD - HISTORY_TAIL
    assert len(result.history) == HISTORY_HEAD + HISTORY_TAIL + 1 + 2  # the marker, two exits
    assert sorted(e.rank for e in result.history if e.kind == "exit") == [0, 1]
    assert config_sync.check(result).outcome == PASS, "a checker judges a truncated history"
    line = result.dropped.message()
    assert f"{result.dropped.count:,} events dropped (collective {result.dropped.count:,})" in line
    assert f"  history: {line}" in describe(result)
    # A report keeps the marker: read back, its cell is diagnosed with the same line.
    cell = _cell(result)
    matrix = Matrix(cells=[cell], seed=0, created="2026-11-23T00:00:00+00:00", harness_version="0")
    path = tmp_path / "report.json"
    path.write_text(to_json(matrix))
    [dropped] = [e for e in json.loads(path.read_text())["cells"][0]["history"]
                 if e["kind"] == "dropped"]
    assert dropped["detail"]["count"] == result.dropped.count
    assert diagnose(load(path).cells[0]).dropped == line


def _cell(result: WorldResult) -> Cell:
    return Cell(scenario="long-run", target="long_run", topology=result.topology, seed=result.seed,
                outcome=result.outcome, expected="pass", verdict="ok",
                duration_s=result.duration_s, detail=result.detail(), replay="",
                ranks=[RankRow.of(r) for r in result.ranks],
                faults_fired=FaultRow.fired(result.history), mismatches=list(result.mismatches),
                history=[e.to_dict() for e in result.history])


def test_an_event_and_a_cell_copy_as_asdict_does_and_share_nothing_with_the_original():
    """``to_dict`` is by hand for speed: it must still say what ``asdict`` says, to the
    type of each value (a tuple stays a tuple, a namedtuple its own class, a nested
    dataclass a dict), and a report's copy must not be the event's own detail."""
    from collections import namedtuple
    from dataclasses import asdict

    from harness.history import plain

    Point = namedtuple("Point", "x y")
    detail = {"files": {"/a": "b"}, "path": ["x", ("y", 1)], "at": Point(1, [2]), "n": None,
              "empty": {}, "row": FaultRow(t=0.5, rank=1, fault="kill", op=None, path=None, message="")}
    events = [Event(0.25, "call", 3, "all_reduce", "cfg", 2, "sync.py:9", detail),
              Event(0.0, "exit"), Event(1.0, "file", 0, detail={}), Event(2.0, "", 0, "", None, 0, "")]
    for event in events:
        mine = event.to_dict()
        theirs = {k: v for k, v in asdict(event).items()
                  if v not in (None, {}) and k != "stamp"}  # the world's own sort key, unsaid
        assert mine == theirs
        assert [type(v) for v in mine.get("detail", {}).values()] == \
               [type(v) for v in theirs.get("detail", {}).values()]
        assert plain(event) == asdict(event)
    copied = events[0].to_dict()["detail"]
    copied["files"]["/a"] = "changed"
    copied["path"].append("more")
    assert detail["files"] == {"/a": "b"} and detail["path"] == ["x", ("y", 1)]
    cell = Cell(scenario="s", target="t", topology="single-host-8", seed=0, outcome=PASS,
                expected="pass", verdict="ok", duration_s=1.0, detail="", replay="r",
                ranks=[RankRow(rank=0, host=0, outcome=PASS, exit_code=0, error=None)],
                history=[events[0].to_dict()])
    assert cell.to_dict() == {k: v for k, v in asdict(cell).items() if k != "isolation"}
