"""A unit's clock hears of a process it started (``rank/clock.py: _counted``) only once
the process is there: a start the kernel refused started nothing, so no report may say the
rank ran a subprocess."""

from __future__ import annotations

import errno

import pytest

from harness.rank import clock as rank_clock


class _Clock:
    def __init__(self) -> None:
        self.told = 0

    def started_process(self) -> None:
        self.told += 1


def _refused(*_: object) -> int:
    raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(rank_clock, "_clock", fake)
    return fake


def test_a_refused_fork_is_no_process_started(clock: _Clock) -> None:
    with pytest.raises(BlockingIOError):
        rank_clock._counted(_refused)()
    assert clock.told == 0


@pytest.mark.parametrize("returned", [4242, (4242, 7)])
def test_a_started_process_is_told_in_the_parent_only(clock: _Clock, returned: object) -> None:
    assert rank_clock._counted(lambda: returned)() == returned
    assert clock.told == 1
    child = (0, 7) if isinstance(returned, tuple) else 0
    rank_clock._counted(lambda: child)()  # the child's return of fork or forkpty
    assert clock.told == 1


def test_system_is_told_before_it_waits_for_its_process(clock: _Clock) -> None:
    seen = []

    def system(command: str) -> int:
        seen.append(clock.told)
        return 0

    assert rank_clock._counted(system)("true") == 0
    assert seen == [1] and clock.told == 1
