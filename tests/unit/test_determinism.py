"""``--check-determinism``: where two runs of one cell differ, said in a line."""

import dataclasses

from harness.runner.cells import Cell, RankRow
from harness.runner.determinism import first_difference, twice
from harness.vocabulary import OK, UNEXPECTED


def _cell(values=("1", "2"), history=None, detail="") -> Cell:
    ranks = [RankRow(rank=r, host=0, outcome="PASS", exit_code=0, error=None, value=v)
             for r, v in enumerate(values)]
    history = history if history is not None else [
        {"t": 0.0, "kind": "call", "rank": 0, "op": "rendezvous", "tag": "sync"},
        {"t": 0.0, "kind": "race", "rank": 1, "detail": {"message": "race on /tmp/x"}}]
    return Cell(scenario="baseline", target="t", topology="1x2", seed=3, outcome="PASS",
                expected="pass", verdict=OK, duration_s=0.1, detail=detail, replay="r",
                ranks=ranks, history=history, met=True)


def test_two_equal_runs_agree():
    assert first_difference(_cell(), _cell()) is None


def test_a_value_that_differs_names_the_rank_and_both_values():
    said = first_difference(_cell(values=("1", "b'\\x8f'")), _cell(values=("1", "b'\\x12'")))
    assert said == "rank 1's value: \"b'\\\\x8f'\" in the first run, \"b'\\\\x12'\" in the second"


def test_the_first_event_that_differs_is_named_with_its_number():
    a = _cell()
    b = _cell(history=[a.history[0], {"t": 0.0, "kind": "race", "rank": 0,
                                      "detail": {"message": "race on /tmp/y"}}])
    said = first_difference(a, b)
    assert said.startswith("event 2 of the history: t=0.0 s rank 1 race: race on /tmp/x in "
                           "the first run, t=0.0 s rank 0 race: race on /tmp/y in the second")


def test_a_longer_history_is_a_difference():
    a = _cell()
    b = _cell(history=a.history[:1])
    assert first_difference(a, b) == ("the first run's history goes on: t=0.0 s rank 1 race: "
                                      "race on /tmp/x")


def test_twice_keeps_an_agreeing_cell_and_fails_one_that_differs():
    runs = iter([_cell(), _cell()])
    assert twice(lambda plan: next(runs))(None).verdict == OK
    runs = iter([_cell(values=("1", "2")), _cell(values=("1", "3"))])
    cell = twice(lambda plan: next(runs))(None)
    assert cell.verdict == UNEXPECTED and not cell.met
    assert cell.detail.startswith("not deterministic: two runs of seed 3 differ at rank 1's value")
    assert dataclasses.replace(cell, verdict=OK, met=True, detail="") == _cell()


def test_a_worlds_history_is_in_time_then_decision_then_rank_order():
    from harness.history import Event, in_world_order

    events = [Event(0.0, "fault", rank=3, stamp=0), Event(0.0, "fault", rank=1, stamp=0),
              Event(0.0, "file", rank=2, op="write", stamp=1),
              Event(0.0, "file", rank=0, op="open-read", stamp=2),  # a decision after: kept
              Event(0.0, "complete", stamp=3), Event(0.0, "race", rank=2, stamp=3),
              Event(0.0, "file", rank=0, stamp=3), Event(0.0, "race", rank=2, stamp=3),
              Event(0.5, "exit", rank=1, stamp=4), Event(0.5, "exit", rank=0, stamp=4),
              Event(0.25, "call", rank=5, stamp=3)]
    ordered = [(e.t, e.kind, e.rank, e.stamp) for e in in_world_order(events)]
    assert ordered == [(0.0, "fault", 1, 0), (0.0, "fault", 3, 0), (0.0, "file", 2, 1),
                       (0.0, "file", 0, 2), (0.0, "file", 0, 3), (0.0, "race", 2, 3),
                       (0.0, "race", 2, 3), (0.0, "complete", None, 3), (0.25, "call", 5, 3),
                       (0.5, "exit", 0, 4), (0.5, "exit", 1, 4)]
    assert "stamp" not in events[0].to_dict(), "the report never shows it"
