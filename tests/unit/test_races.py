"""The world's race finder: happens-before through collectives and messages only."""

from harness.world.races import NAMED, Races


def test_a_poller_and_the_writer_race_however_the_poll_waits():
    races = Races(2)
    races.access(1, "stat", "/tmp/cfg.json", "sync.py:20 in poll", 0.0)
    found = races.access(0, "open-write", "/tmp/cfg.json", "sync.py:9 in write", 0.0)
    assert [r.ranks for r in found] == [(1, 0)]
    text = found[0].describe()
    assert "race on /tmp/cfg.json" in text
    assert "rank 1's stat at sync.py:20 in poll" in text
    assert "rank 0's open-write at sync.py:9 in write" in text


def test_a_collective_between_the_write_and_the_read_orders_them():
    races = Races(3)
    assert races.access(0, "write", "/tmp/x", None, 0.0) == []
    races.joined([0, 1, 2])
    assert races.access(1, "open-read", "/tmp/x", None, 0.1) == []
    assert races.access(2, "read", "/tmp/x", None, 0.1) == []
    assert races.found == []


def test_a_write_after_the_collective_races_with_a_read_after_it_too():
    races = Races(2)
    races.joined([0, 1])
    races.access(1, "open-read", "/tmp/x", None, 0.0)
    assert [r.ranks for r in races.access(0, "remove", "/tmp/x", None, 0.0)] == [(1, 0)]


def test_reads_alone_never_race_and_a_rank_never_races_with_itself():
    races = Races(3)
    for rank in (0, 1, 2):
        assert races.access(rank, "open-read", "/tmp/x", None, 0.0) == []
    assert races.access(0, "write", "/tmp/y", None, 0.0) == []
    assert races.access(0, "read", "/tmp/y", None, 0.0) == []
    assert races.found == []


def test_a_message_orders_the_senders_past_before_the_receivers_future_only():
    races = Races(3)
    races.access(0, "close", "/tmp/x", None, 0.0)
    races.delivered(0, 1)
    assert races.access(1, "open-read", "/tmp/x", None, 0.0) == [], "rank 1 heard from rank 0"
    assert [r.ranks for r in races.access(2, "open-read", "/tmp/x", None, 0.0)] == [(0, 2)]


def test_each_file_is_named_once_by_time_then_rank_and_the_count_is_bounded():
    races = Races(8)
    races.access(0, "write", "/tmp/x", None, 0.0)
    for rank in (5, 3, 7):  # granted together: told in the machine's order
        races.access(rank, "stat", "/tmp/x", None, 0.1)
    races.access(1, "stat", "/tmp/x", None, 0.2)
    assert [r.ranks for r in races.found] == [(0, 3)], "the earliest, then the lowest rank"
    for i in range(NAMED + 5):
        races.access(0, "write", f"/tmp/f{i}", None, 1.0)
        races.access(1, "stat", f"/tmp/f{i}", None, 1.0)
    assert len(races.found) == NAMED and races.unnamed == 6


def test_a_worlds_races_go_in_its_history_at_their_time():
    from harness.history import Event
    from harness.world.races import with_races

    races = Races(2)
    races.access(0, "write", "/tmp/x", "a.py:1 in f", 0.5)
    races.access(1, "stat", "/tmp/x", "b.py:2 in g", 0.5)
    history = [Event(0.0, "call", rank=0), Event(0.5, "call", rank=1), Event(0.7, "exit", rank=0)]
    out = with_races(history, races)
    assert [(e.kind, e.t) for e in out] == [("call", 0.0), ("call", 0.5), ("race", 0.5),
                                            ("exit", 0.7)]
    assert out[2].detail["ranks"] == [0, 1] and "b.py:2 in g" in out[2].detail["message"]


def test_every_rank_making_one_directory_is_the_idiom_not_a_race():
    races = Races(2)
    for rank in (0, 1):
        races.access(rank, "stat", "/tmp/run", None, 0.0)
        races.access(rank, "mkdir", "/tmp/run", None, 0.0)
    races.access(1, "listdir", "/tmp/run", None, 0.0)
    assert races.found == []


def test_an_unknown_rank_is_ignored():
    races = Races(2)
    assert races.access(5, "write", "/tmp/x", None, 0.0) == []
    races.joined([7])
    races.delivered(0, 9)


def test_one_path_on_two_hosts_own_disks_is_two_files():
    races = Races(2)
    races.access(0, "write", "/tmp/state.json", None, 0.0, "host-0")
    assert races.access(1, "write", "/tmp/state.json", None, 0.0, "host-1") == []
    found = races.access(1, "stat", "/tmp/state.json", None, 0.0, "host-0")
    assert [r.ranks for r in found] == [(0, 1)]
    assert found[0].describe().startswith("race on /tmp/state.json (host 0's own) at t=0 s")
