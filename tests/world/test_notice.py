"""Pre-emption with notice: SIGTERM to every process of a host at one world instant, a
grace of world seconds, the hard stop, and the host back once all of it is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import PASS, run_world
from harness.filesystem.mounts import Mount
from harness.reports.diagnosis import describe

from support import TESTS, processes_of_world

TARGETS = TESTS / "targets" / "notice_targets.py"
MONOTONIC = 3600.0  # the world's monotonic() at its start (harness.rank.clock)


def at(seconds: float):
    """A world time, give or take the clock's ticks (each file operation costs 100 us)."""
    return pytest.approx(seconds, abs=0.005)


def noticed(tmp_path: Path, function: str, topology: str = "1x2", grace: float | str = 30,
            after_ms: int = 10_500, host: int | None = 0, seed: int = 0):
    """``host`` None: every host."""
    where = {} if host is None else {"host": host}
    return run_world(f"{TARGETS}:{function}", topology=topology, timeout=900, seed=seed,
                     args=(str(tmp_path),), mounts=[Mount(str(tmp_path), scope="shared",
                                                          base="passthrough")],
                     faults=[{"kind": "preempt", "notice": "sigterm", "grace": grace,
                              **where, "after_ms": after_ms, "lives": [0]}])


def events(result, kind: str) -> list:
    return [e for e in result.history if e.kind == kind]


def test_a_handler_runs_at_the_notice_and_its_save_costs_world_time(tmp_path):
    """The flag is set at 10.5 s, the step ends at 11 s, the save takes 5 s: the host is
    down at 16 s and comes back then, with what was saved; no hard stop was needed."""
    result = noticed(tmp_path, "saves_at_step_boundary")
    assert result.outcome == PASS, describe(result)
    for rank in result.ranks:
        assert rank.value["resumed"] == {"step": 11, "noticed_at": at(MONOTONIC + 10.5)}
        assert rank.value["life"] == 1 and rank.restarts == 1
    (notice,) = events(result, "notice")
    assert notice.t == at(10.5) and notice.detail["ranks"] == [0, 1]
    assert "30 s grace" in notice.detail["message"]
    assert [e.t for e in events(result, "restart")] == [at(16.0)] * 2
    assert events(result, "stop") == []


@pytest.mark.parametrize("function", ["ignores_notice", "blocks_notice"])
def test_a_rank_that_does_not_stop_is_killed_when_the_grace_ends(tmp_path, function):
    """SIG_IGN, or SIGTERM blocked: the hard stop comes 300 world seconds later, and says
    whom it killed; the ranks come back then."""
    result = noticed(tmp_path, function, grace="autocheckpoint")
    assert result.outcome == PASS, describe(result)
    (stop,) = events(result, "stop")
    assert stop.t == at(310.5) and stop.detail["ranks"] == [0, 1]
    assert "still ran when its 300 s grace ended: SIGKILLed" in stop.detail["message"]
    assert [r.value for r in result.ranks] == [{"life": 1, "now": at(MONOTONIC + 310.5)}] * 2


def test_the_default_action_ends_the_ranks_at_the_notice(tmp_path):
    result = noticed(tmp_path, "dies_of_notice")
    assert result.outcome == PASS, describe(result)
    assert [e.t for e in events(result, "restart")] == [at(10.5)] * 2
    assert [r.value for r in result.ranks] == [{"life": 1, "now": at(MONOTONIC + 10.5)}] * 2
    assert events(result, "stop") == []


def test_a_handler_waits_for_the_collective_it_arrives_in(tmp_path):
    """Rank 0 waits in a rendezvous rank 1 reaches at 20 s; its host's notice at 10.5 s runs
    its handler when the collective returns, as Python runs one after a C++ call."""
    result = noticed(tmp_path, "handler_waits_for_collective", topology="2x1")
    assert result.outcome == PASS, describe(result)
    assert result.ranks[0].value == {"handler_ran_at": [at(MONOTONIC + 20.0)]}
    assert result.ranks[1].value == {"handler_ran_at": []}  # host 1 had no notice
    # each returned its result within the grace: done, neither comes back
    assert [r.restarts for r in result.ranks] == [0, 0]


def test_a_handler_that_raises_ends_the_wait_and_its_finally_runs_on_the_clock(tmp_path):
    result = noticed(tmp_path, "raises_in_handler")
    assert result.outcome == PASS, describe(result)
    assert [r.value for r in result.ranks] == [{"step": 10, "finally_at": at(MONOTONIC + 12.5)}] * 2
    assert [e.t for e in events(result, "restart")] == [at(12.5)] * 2


def test_a_save_from_a_thread_the_handler_starts_is_waited_for(tmp_path):
    result = noticed(tmp_path, "saves_from_a_thread")
    assert result.outcome == PASS, describe(result)
    assert [r.value for r in result.ranks] == [{"saved_at": at(MONOTONIC + 13.5)}] * 2


def test_what_a_rank_started_goes_down_with_its_host(tmp_path):
    """A subprocess that ignores SIGTERM outlives its rank's exit: the host is down, and
    the subprocess with it, before the ranks come back; nothing outlives the world."""
    result = noticed(tmp_path, "child_ignores_notice", after_ms=1_500)
    assert result.outcome == PASS, describe(result)
    assert [r.restarts for r in result.ranks] == [1, 1]
    assert processes_of_world(result.world_id) == []
    assert result.leftovers == 0  # killed with the host, not swept at the world's end


def test_one_host_is_noticed_and_the_others_run_on(tmp_path):
    """A life that returns its result within the grace is done: it does not come back."""
    result = noticed(tmp_path, "handler_waits_for_collective", topology="2x1", host=1,
                     after_ms=5_000)
    assert result.outcome == PASS, describe(result)
    (notice,) = events(result, "notice")
    assert notice.detail["host"] == 1 and notice.detail["ranks"] == [1]
    # rank 1 sleeps until 20 s: its handler runs in the sleep, at the notice
    assert [r.value for r in result.ranks] == [{"handler_ran_at": []},
                                               {"handler_ran_at": [at(MONOTONIC + 5.0)]}]


@pytest.mark.parametrize("function, topology", [("saves_at_step_boundary", "1x2"),
                                                ("ignores_notice", "2x2")])
def test_the_same_seed_gives_the_same_notice_history(tmp_path, function, topology):
    """(2x2: both hosts noticed at one instant, each by both its ranks, and both hard
    stops due at one instant: the world's order, never the order their messages came in.)"""
    def history(run: int) -> list:
        out = tmp_path / str(run)
        out.mkdir()
        result = noticed(out, function, topology=topology, seed=5,
                         host=None if topology == "2x2" else 0)
        return [(e.t, e.kind, e.rank, json.dumps(e.detail, sort_keys=True, default=str))
                for e in result.history if e.kind not in ("file",)]

    first, second = history(1), history(2)
    differ = next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), None)
    assert differ is None and len(first) == len(second), (
        f"event {differ}: {first[differ] if differ is not None else len(first)} != "
        f"{second[differ] if differ is not None else len(second)}")


def test_a_grace_must_be_a_preset_or_seconds_and_needs_a_notice():
    from harness.faults.kinds import ValidationError, parse_fault

    assert parse_fault({"kind": "preempt", "notice": "sigterm"}).grace_s == 30.0
    assert parse_fault({"kind": "preempt", "notice": "sigterm",
                        "grace": "autocheckpoint"}).grace_s == 300.0
    assert parse_fault({"kind": "preempt"}).notice_grace() is None
    for bad, words in (({"grace": 0, "notice": "sigterm"}, "world seconds in (0, 3600]"),
                       ({"grace": 30}, "needs notice: sigterm"),
                       ({"grace": "spots", "notice": "sigterm"}, "'spot' or 'autocheckpoint'"),
                       ({"notice": "sms"}, "'none' or 'sigterm'")):
        with pytest.raises(ValidationError, match=None) as caught:
            parse_fault({"kind": "preempt", **bad})
        assert words in str(caught.value), str(caught.value)
