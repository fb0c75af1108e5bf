"""The order of a notice's delivery in a rank (``harness.rank.signals.deliver``): what the
world clock hears against when the signal is sent."""

from __future__ import annotations

import signal

import pytest

from harness.rank import signals


class _Clock:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def signal_coming(self, signum: int, way: str, told: int | None) -> None:
        self.log.append(f"clock hears {way}")

    def poke(self, ident: int) -> None:
        self.log.append("poke")

    def notify(self, waiter: object) -> None:
        self.log.append("notify")


@pytest.fixture
def delivered(monkeypatch):
    """Deliver SIGTERM with the given disposition; returns what happened, in order."""
    def run(way: str) -> list[str]:
        log: list[str] = []
        monkeypatch.setattr(signals.rank_clock, "current", lambda: _Clock(log))
        monkeypatch.setattr(signals, "disposition", lambda signum: way)
        monkeypatch.setattr(signals.sweep, "descendants", lambda pid: log.append("children") or [])
        monkeypatch.setattr(signals.signal, "pthread_kill",
                            lambda ident, signum: log.append(f"sent {signal.Signals(signum).name}"))
        signals.deliver(signal.SIGTERM, told=10_500_000_000)
        return log

    return run


def test_a_signal_that_does_nothing_now_is_sent_before_the_world_may_move_on(delivered):
    # Blocked in the main thread (a collective's deferral): its handler runs when the
    # collective returns. The clock's word lets the world move on; the signal must be
    # pending by then, or the collective could return (and the target its result) first.
    assert delivered(signals.NOTHING) == ["children", "sent SIGTERM", "clock hears nothing"]


def test_a_handler_that_runs_is_counted_before_the_signal_is_sent(delivered):
    assert delivered(signals.RUNS) == ["clock hears runs", "children", "sent SIGTERM", "poke"]


def test_a_death_is_told_before_the_signal_is_sent(delivered):
    assert delivered(signals.DIES) == ["clock hears dies", "children", "sent SIGTERM"]
