"""Pre-emption notices as pure state: one per host, the hard stop's time, the host back
once every process of it is gone."""

from harness.world.notices import Notices

S = 1_000_000_000


def test_a_host_gets_one_notice_and_its_hard_stop_is_due_at_the_grace_end():
    notices = Notices()
    first = notices.give(0, {0: 0, 1: 0}, at=10 * S, grace_s=30)
    assert first is not None and first.end == 40 * S
    assert notices.give(0, {0: 0, 1: 0}, at=11 * S, grace_s=300) is None  # shutting down already
    assert notices.next_end() == 40 * S
    assert notices.ending(39 * S) == []
    assert notices.ending(40 * S) == [first] and first.stopped
    assert notices.ending(41 * S) == []  # stopped once
    assert notices.next_end() is None


def test_the_host_comes_back_once_its_last_rank_is_gone_and_never_for_another_life():
    notices = Notices()
    notices.give(1, {2: 0, 3: 1}, at=0, grace_s=30)
    assert notices.left(2, 1) is None  # a life the notice did not cover
    assert notices.left(3, 1) == []  # rank 2 still runs: the host is up
    assert notices.next_end() == 30 * S
    assert notices.left(2, 0) == [2, 3]  # the last one: both start again
    assert notices.hosts == {} and notices.next_end() is None
    assert notices.give(1, {2: 1, 3: 2}, at=S, grace_s=30) is not None  # a new notice, later


def test_a_host_down_before_its_grace_ends_needs_no_hard_stop():
    notices = Notices()
    notice = notices.give(0, {0: 0}, at=0, grace_s=30)
    assert notice is not None
    notice.gone.add(0)
    assert notices.ending(60 * S) == [] and notices.next_end() is None


def test_hard_stops_at_one_instant_come_in_host_order_whatever_order_the_notices_came_in():
    for order in ((1, 0, 2), (2, 1, 0)):
        notices = Notices()
        for host in order:
            notices.give(host, {host: 0}, at=0, grace_s=30)
        assert [n.host for n in notices.ending(30 * S)] == [0, 1, 2]
    notices = Notices()
    notices.give(0, {0: 0}, at=S, grace_s=30)  # its grace ends later
    notices.give(1, {1: 0}, at=0, grace_s=30)
    assert [n.host for n in notices.ending(60 * S)] == [1, 0]
