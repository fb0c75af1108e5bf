"""The world clock: time in a world is the world's, not the machine's.

The pure parts first (``WorldClock``, the harness's state machine; ``RankClock``, a
unit's count of its running threads), then worlds: what a rank's code reads and waits
on, what holds the clock, what the wall-clock guard ends. Wall time is never asserted:
where a clock that did not jump would take hours, the world's ``wall_limit`` makes it a
HANG, which the test would see.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from harness import ERROR, HANG, PASS, run_world
from harness.rank.clock import BLOCKED, NOTIFIED, TIMED_OUT, RankClock, Waiter
from harness.reports.diagnosis import describe
from harness.world.clock import NS, WorldClock

from support import TARGETS_DIR, USER_TARGETS_DIR, line_in

TARGETS = TARGETS_DIR / "clock_targets.py"
USER = USER_TARGETS_DIR


def target(name: str) -> str:
    return f"{TARGETS}:{name}"


# -- WorldClock: pure --------------------------------------------------------------------

def test_the_clock_jumps_to_the_earliest_wake_up_only_when_every_unit_is_idle():
    clock = WorldClock(deadline=100 * NS)
    for r in range(3):
        clock.join(("rank", r))
    clock.idle(("rank", 0), 0, 5 * NS)
    clock.idle(("rank", 1), 0, 2 * NS)
    assert clock.busy() == [("rank", 2)], "rank 2 never said it was idle: it holds the clock"
    clock.idle(("rank", 2), 0, None)  # waits for the others, or forever
    assert clock.busy() == [] and clock.next_wake() == 2 * NS
    assert clock.advance(clock.next_wake()) == [("rank", 1)]
    assert clock.now == 2 * NS and ("rank", 1) in clock.busy(), "woken: it runs now"


WRITE_X = {"op": "write", "path": "/tmp/x", "where": "shared"}


def _granted(*doing: dict, seed: int = 0) -> int:
    """How many of the turns ``doing``, due at one instant, the clock grants together."""
    clock = WorldClock(deadline=100 * NS, seed=seed)
    for r, op in enumerate(doing):
        clock.join(("rank", r))
        clock.idle(("rank", r), 0, NS, turn=op)
    return len(clock.advance(clock.next_wake()))


def test_turns_that_commute_are_granted_together_and_the_rest_one_at_a_time():
    read = {"op": "open-read", "path": "/tmp/x", "where": "shared"}
    assert _granted(read, dict(read, op="stat"), dict(read, op="read")) == 3, "looks commute"
    assert _granted(WRITE_X, dict(WRITE_X, path="/tmp/y"), dict(WRITE_X, path="/tmp/xy")) == 3
    assert _granted(WRITE_X, dict(WRITE_X, where="host-1")) == 2, "two hosts' own disks"
    for seed in range(4):
        assert _granted(WRITE_X, read, seed=seed) == 1, "a write and a read of one file"
        assert _granted(dict(read, op="listdir", path="/tmp"), WRITE_X, seed=seed) == 1, \
            "a listing and a create in it"
        assert _granted(dict(WRITE_X, op="rename", path="/tmp/a", dst="/tmp/x"), read,
                        seed=seed) == 1, "a rename onto the file read"


def _tie_order(seed: int, units: int = 5) -> list[int]:
    """Who the clock wakes, in turn, of ``units`` ranks whose turns are due at one instant."""
    clock = WorldClock(deadline=100 * NS, seed=seed)
    for r in range(units):
        clock.join(("rank", r))
        clock.idle(("rank", r), 0, NS, turn=WRITE_X)
    order = []
    while len(order) < units:
        woken = clock.advance(clock.next_wake())
        assert len(woken) == 1, "one at a time"
        order.append(woken[0][1])
        assert clock.busy() == [woken[0]], "it runs; the others stay idle, due"
        clock.idle(woken[0], 1, None)  # it waits again
    return order


def test_units_due_at_one_instant_are_woken_one_at_a_time_in_the_seeds_order():
    assert _tie_order(7) == _tie_order(7), "the same seed, the same order"
    assert sorted(_tie_order(7)) == list(range(5))
    assert len({tuple(_tie_order(seed)) for seed in range(10)}) > 1, "the seed decides it"


def test_sleepers_due_together_wake_together_beside_one_turn():
    clock = WorldClock(deadline=100 * NS, seed=1)
    for r in range(4):
        clock.join(("rank", r))
        clock.idle(("rank", r), 0, NS, turn=WRITE_X if r >= 2 else None)  # 0-1 sleep, 2-3 turn
    woken = clock.advance(clock.next_wake())
    assert woken[:2] == [("rank", 0), ("rank", 1)] and len(woken) == 3
    assert woken[2] in (("rank", 2), ("rank", 3))


def test_an_earlier_wake_up_goes_first_whatever_the_seed():
    for seed in range(5):
        clock = WorldClock(deadline=100 * NS, seed=seed)
        for r, wake in ((0, 3 * NS), (1, 2 * NS)):
            clock.join(("rank", r))
            clock.idle(("rank", r), 0, wake)
        assert clock.advance(clock.next_wake()) == [("rank", 1)]


SLOW = {"op": "open-write", "path": "/tmp/cfg.json", "where": "host-0", "until": "others-wait"}


def test_a_slow_writer_goes_on_only_once_every_other_unit_waits_on_another():
    """``slow-write``: a poller (waking on the clock) keeps the writer back however long it
    polls; a unit in a collective (no wake-up) or waiting outside the world does not."""
    clock = WorldClock(deadline=1000 * NS)
    for r in range(3):
        clock.join(("rank", r))
    clock.idle(("rank", 0), 0, 60 * NS, turn=SLOW)  # at least a minute
    clock.idle(("rank", 1), 0, None)  # in a rendezvous
    clock.idle(("rank", 2), 0, NS)  # polls every second
    assert clock.held_back(("rank", 0))
    for t in range(1, 120):  # the poller's minute and a minute more: the writer waits on
        assert clock.next_wake() == t * NS
        assert clock.advance(t * NS) == [("rank", 2)]
        clock.idle(("rank", 2), clock.members[("rank", 2)].sent, (t + 1) * NS)
    clock.leave(("rank", 2))  # the poller gave up and ended: the writer is due at once
    assert not clock.held_back(("rank", 0)) and clock.next_wake() == clock.now == 119 * NS
    assert clock.advance(119 * NS) == [("rank", 0)] and clock.went_on == [("rank", 0)]


def test_a_slow_writer_waits_its_least_even_when_every_other_unit_already_waits():
    clock = WorldClock(deadline=1000 * NS)
    for r in range(2):
        clock.join(("rank", r))
    clock.idle(("rank", 0), 0, 60 * NS, turn=SLOW)
    clock.idle(("rank", 1), 0, None)
    assert clock.next_wake() == 60 * NS  # the jump to its least, no sooner
    assert clock.advance(59 * NS) == [] and clock.advance(60 * NS) == [("rank", 0)]


def test_a_unit_waiting_outside_the_world_lets_a_slow_writer_go_on():
    clock = WorldClock(deadline=1000 * NS)
    for r in range(2):
        clock.join(("rank", r))
    clock.idle(("rank", 0), 0, 60 * NS, turn=SLOW)  # rank 1 is busy: in the kernel, say
    assert clock.held_back(("rank", 0))
    outside = frozenset({("rank", 1)})
    assert not clock.held_back(("rank", 0), outside)
    assert clock.advance(60 * NS, outside) == [("rank", 0)]


def test_an_idle_word_that_a_reply_overtook_is_stale():
    clock = WorldClock(deadline=100 * NS)
    clock.join(("rank", 0))
    clock.woke(("rank", 0))  # a collective's reply is on its way to it
    clock.idle(("rank", 0), seen=0, wake=None)  # said before it took that reply
    assert clock.busy() == [("rank", 0)]
    clock.idle(("rank", 0), seen=1, wake=None)
    assert clock.busy() == []


def test_at_the_deadline_nothing_due_then_runs():
    clock = WorldClock(deadline=10 * NS)
    clock.join(("rank", 0))
    clock.idle(("rank", 0), 0, 10 * NS)
    assert clock.advance(clock.next_wake()) == [] and clock.passed


def test_a_unit_that_leaves_no_longer_holds_the_clock_and_a_new_life_counts_afresh():
    clock = WorldClock(deadline=10 * NS)
    clock.join(("rank", 0))
    clock.join(("rank", 1))
    clock.woke(("rank", 1))
    clock.leave(("rank", 0))
    clock.join(("rank", 1))  # restarted: its new process has taken no wake yet
    clock.idle(("rank", 1), 0, None)
    assert clock.busy() == []


# -- RankClock: a unit's threads ----------------------------------------------------------

class Said(list):
    """What a ``RankClock`` told the harness."""

    def __call__(self, message: dict) -> None:
        self.append(dict(message))


def test_the_unit_is_idle_only_when_its_last_running_thread_waits():
    said = Said()
    clock = RankClock(said)  # this thread is the unit's main thread
    clock.thread_started()  # a second thread: counted before it exists
    waiter = Waiter(clock.deadline_after(5))
    woke = {}

    def sleeper() -> None:
        clock.thread_began()
        woke["notified"] = clock.block(waiter)
        clock.thread_ended()

    thread = threading.Thread(target=sleeper)
    thread.start()
    _until(lambda: waiter.state == BLOCKED)
    assert said == [], "the main thread still runs: the unit is not idle"
    clock.on_time(waiter.deadline)  # the harness's word: the world is there
    thread.join(5)
    assert woke == {"notified": False} and waiter.state == TIMED_OUT
    assert clock.running == 1 and said == []


def test_a_notice_given_before_the_wait_blocks_is_not_lost_and_not_counted_twice():
    said = Said()
    clock = RankClock(said)
    waiter = Waiter(None)
    assert clock.notify(waiter)  # between its registration and its block
    assert clock.block(waiter) is True and clock.running == 1 and said == []
    assert clock.notify(waiter) is False, "a wait that ended takes no notice"


def _unit(said: Said, box: dict, work) -> threading.Thread:
    """A unit whose main thread is a new thread running ``work(clock)``."""
    def main() -> None:
        box["clock"] = clock = RankClock(said)
        box["out"] = work(clock)

    thread = threading.Thread(target=main)
    thread.start()
    return thread


def test_the_last_thread_to_wait_says_so_with_its_earliest_wake_up():
    said, box = Said(), {}

    def work(clock: RankClock) -> bool:
        box["waiter"] = Waiter(clock.deadline_after(2))
        return clock.block(box["waiter"])

    thread = _unit(said, box, work)
    _until(lambda: said)
    assert said == [{"type": "idle", "seen": 0, "wake": 2 * NS}]
    assert box["clock"].notify(box["waiter"])  # another thread of the unit notifies it
    thread.join(5)
    assert box["out"] is True and box["waiter"].state == NOTIFIED and box["clock"].running == 1


def test_a_busy_wait_on_the_clock_waits_for_the_world_every_quantum():
    said, box = Said(), {}
    thread = _unit(said, box, lambda clock: [clock.read() for _ in range(150)])
    _until(lambda: said)  # a quantum (10 ms) ahead of the world: it waits for it there
    assert said == [{"type": "idle", "seen": 0, "wake": 10_000_000}]
    box["clock"].on_time(10_000_000)
    thread.join(5)
    assert box["out"] == [i * 100_000 for i in range(150)], "a fixed tick per reading"


def _until(condition, limit: float = 5.0) -> None:
    import time

    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, "the condition never came"
        time.sleep(0.001)


# -- worlds ---------------------------------------------------------------------------------

_INSTALLED_WITHOUT_A_CLOCK = """
import builtins, json, os, sys, threading, time, types
from harness.filesystem import patch
from harness.rank import clock

def machines():  # (a module's own reference to one would be rebound: looked up each time)
    return [isinstance(f, types.BuiltinFunctionType) for f in (time.time, builtins.open, os.stat)]

before, now = machines(), time.time()
clock.install_functions()
patch.install_functions()  # as a world's leader does for its units, before any has a clock
said = {"world functions": before == [True] * 3 and machines() == [False] * 3}
said["machine time"] = abs(time.time() - now) < 60
start = time.monotonic()
time.sleep(0.01)
said["slept"] = time.monotonic() - start >= 0.01
lock = threading.Lock()
said["lock"] = type(lock).__name__
said["lock works"] = lock.acquire(timeout=1) and (lock.release() or True)
event = threading.Event()
threading.Thread(target=event.set).start()
said["event"] = event.wait(5)  # the machine's time, a bound: the thread sets it at once
with open(sys.argv[1]) as f:
    said["file"] = f.read() == "machine" and "file.txt" in os.listdir(os.path.dirname(sys.argv[1]))
clock.uninstall()
patch.uninstall()
said["uninstalled"] = machines() == [True] * 3
print(json.dumps(said))
"""


def test_the_world_functions_a_leader_installs_are_the_machines_until_a_unit_has_its_clock(
        tmp_path):
    """A world's leader installs the world's time, lock and file functions once, for its
    units to inherit (``prepare_units``); without a clock and a view, in the leader and in a
    unit before its own, each is the machine's."""
    (tmp_path / "file.txt").write_text("machine")
    done = subprocess.run([sys.executable, "-c", _INSTALLED_WITHOUT_A_CLOCK,
                           str(tmp_path / "file.txt")], capture_output=True, text=True,
                          timeout=120)  # a guard: a start and a few calls, never this
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {
        "world functions": True, "machine time": True, "slept": True, "lock": "WorldLock",
        "lock works": True, "event": True, "file": True, "uninstalled": True}


def test_a_rank_that_sleeps_an_hour_sees_an_hour_pass_and_returns_at_once():
    result = run_world(target("sleeps"), topology="2x1", timeout=7200, args=(3600,),
                       wall_limit=60)  # an hour of the machine's time would be a HANG
    assert result.outcome == PASS, describe(result)
    assert [round(r.value, 3) for r in result.ranks] == [3600.0, 3600.0]
    assert 3600 <= result.world_time_s < 3601


def test_an_events_timeout_in_a_thread_is_on_the_world_clock():
    result = run_world(target("event_wait_in_a_thread"), topology="2x1", timeout=7200,
                       args=(3600,), wall_limit=60)
    assert result.outcome == PASS, describe(result)
    assert [r.value for r in result.ranks] == [{"woke": False, "waited": 3600.0001}] * 2


def test_every_timed_wait_of_threading_and_queue_is_on_the_world_clock():
    result = run_world(target("every_wait"), topology="1x1", timeout=86_400, args=(600,),
                       wall_limit=60)
    assert result.outcome == PASS, describe(result)
    waits = result.ranks[0].value
    assert waits == {"condition": (600.0, False), "wait_for": (600.0, False),
                     "semaphore": (600.0, False), "lock": (600.0, False),
                     "rlock": (600.0, False), "barrier": (600.0, "broken"),
                     "queue": (600.0, "empty"), "simple_queue": (600.0, "empty"),
                     "queue_put": (600.0, "full"), "join": (600.0, True),
                     "timer": (600.0, True)}, waits


def test_a_world_starts_at_a_fixed_epoch_in_every_clock_a_rank_reads():
    result = run_world(target("wall_clocks"), topology="1x1", timeout=60)
    assert result.outcome == PASS, describe(result)
    seen = result.ranks[0].value
    assert seen["time"] == 1_893_456_000.0, "2030-01-01T00:00:00Z: the same on every machine"
    assert seen["now"].startswith("2030-01-01T00:00:00.0") and seen["today"] == "2030-01-01"
    assert seen["utcnow"].startswith("2030-01-01T00:00:00.0")
    assert seen["aware"].startswith("2030-01-01T00:00:00.0") and seen["aware"].endswith("+00:00")
    assert seen["gmtime"] == [2030, 1, 1, 0, 0, 0] and seen["strftime"] == "2030-01-01"
    assert seen["ctime"].endswith("2030")
    assert 3600 <= seen["monotonic"] < 3601 and 3600 <= seen["perf_counter"] < 3601
    assert 1_893_456_000 <= seen["clock_gettime"] < 1_893_456_001


def test_a_worlds_time_does_not_depend_on_what_its_fork_server_imported_before():
    """A fresh process (the test process's one server holds what earlier tests preloaded):
    the same world before and after its fork server imports torch._dynamo, whose presence
    has the shim register its ops in each rank and torch.library look at every module."""
    script = (
        "import json, sys\n"
        "from harness import run_world\n"
        "from harness.world import pool\n"
        f"t = {target('wall_clocks')!r}\n"
        "first = run_world(t, topology='1x1', timeout=60).ranks[0].value\n"
        "pool.fork_server(('torch', 'torch._dynamo'))\n"
        "again = run_world(t, topology='1x1', timeout=60).ranks[0].value\n"
        "print(json.dumps([first['monotonic'], again['monotonic']]))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    first, again = json.loads(out.stdout.strip().splitlines()[-1])
    assert first == again, f"the rank started {again - first:.4f} s later with dynamo"


def test_the_same_world_reads_the_same_times_every_run():
    first = run_world(target("wall_clocks"), topology="1x1", timeout=60).ranks[0].value
    again = run_world(target("wall_clocks"), topology="1x1", timeout=60).ranks[0].value
    assert first == again


def test_a_busy_wait_on_the_clock_ends():
    result = run_world(target("busy_waits"), topology="2x1", timeout=60, args=(10,),
                       wall_limit=60)
    assert result.outcome == PASS, describe(result)
    assert [r.value for r in result.ranks] == [99_999, 99_999], "100 us a reading: 10 s"


def test_a_rank_that_computes_spends_no_world_time():
    """Rank 0 computes for 2 s of CPU before it writes; the others poll for 5 s of their
    time. A deadline of 1 s on the world's clock is not reached: computing costs none."""
    result = run_world(target("computes_then_writes"), topology="1x4", timeout=1,
                       args=(2, "/tmp/clock-test/ready"), wall_limit=120)
    assert result.outcome == PASS, describe(result)
    assert [r.value for r in result.ranks] == ["wrote", "read", "read", "read"]
    assert result.world_time_s < 1


def test_a_rank_that_holds_the_clock_forever_is_ended_by_the_wall_clock_guard():
    result = run_world(target("spins_forever"), topology="2x1", timeout=60, wall_limit=3)
    assert result.outcome == HANG, describe(result)
    assert result.hang_report.startswith(
        "the world's clock was held for 3 s of wall time and the world ended at the "
        "wall-clock guard of 3 s (wall_limit)"), result.hang_report
    assert "ranks 0-1 held the world's clock, still running at clock_targets.py:" \
        in result.hang_report
    assert result.world_time_s == 0.0


def test_a_real_subprocess_takes_the_time_it_takes():
    """Rank 0 waits for a real ``sleep 0.3`` (with a timeout: ``Popen.wait`` polls, its
    sleeps on the world's clock): while its child lives, the clock follows the machine's,
    so neither its own timeout (30 s) nor the readers' (10 s) is reached early, as they
    would be if its polling sleeps jumped the clock."""
    result = run_world(target("subprocess_then_write"), topology="1x4", timeout=60,
                       args=(0.3, "/tmp/clock-test/ready"), wall_limit=60)
    assert result.outcome == PASS, describe(result)
    assert [r.value for r in result.ranks] == ["wrote", "read", "read", "read"]
    said = [e.detail["message"] for e in result.history if e.kind == "clock"]
    assert said == ["the world's clock follows the machine's: rank 0 has a process of its own "
                    "running"], said


def test_a_wait_the_clock_cannot_see_lets_it_follow_the_machine():
    """Rank 0 waits on a socket nobody writes to: the clock cannot jump (anything may
    come), but every thread of rank 0 sleeps in the kernel, so it follows the machine's
    time; rank 1's one-second sleep ends, and the deadline comes, as on a pod."""
    result = run_world(target("waits_on_a_socket_while_the_other_sleeps"), topology="2x1",
                       timeout=3, args=(1,), wall_limit=60)
    assert result.outcome == HANG
    assert result.ranks[1].outcome == PASS and result.ranks[1].value == "slept"
    assert "rank 0 waits in its own code at clock_targets.py:" in result.hang_report
    assert "`ours.recv(1)`" in result.hang_report and result.world_time_s == 3.0
    assert [e.detail["message"] for e in result.history if e.kind == "clock"] == [
        "the world's clock follows the machine's: rank 0 waits outside the world (a socket, "
        "a subprocess, a lock it cannot see)"]


def test_a_process_a_rank_forks_waits_on_the_machines_time():
    result = run_world(target("forks_a_child_that_sleeps"), topology="1x1", timeout=60,
                       args=(0.3,), wall_limit=60)
    assert result.outcome == PASS, describe(result)
    assert result.ranks[0].value >= 0.3


def test_an_asyncio_loops_waits_are_on_the_world_clock():
    """A loop whose selector watches only its own self-pipe (a socketpair of the rank's):
    its timers, timeouts and the threads it waits for are on the world's clock: each takes
    exactly its world time, and nothing made the clock follow the machine's (which it did,
    for as long as the waits took in real time, before selectors were on the clock)."""
    result = run_world(target("asyncio_waits"), topology="1x2", timeout=600, wall_limit=60)
    assert result.outcome == PASS, describe(result)
    for rank in result.ranks:
        assert rank.value == {"sleep": 20.0, "timed out": 9.0, "pool": None,
                              "pooled": 5.0, "future": "set", "awaited": 2.0}, rank.value
    assert result.world_time_s == pytest.approx(20 + 9 + 5 + 2, abs=0.1)
    assert not [e for e in result.history if e.kind == "clock"], "nothing held the clock"


def test_an_asyncio_loop_on_a_real_socket_holds_the_clock_and_still_gets_its_reply():
    result = run_world(target("asyncio_on_a_real_socket"), topology="1x1", timeout=60,
                       wall_limit=60)
    assert result.outcome == PASS, describe(result)
    assert result.ranks[0].value == "ping"


def test_a_hang_in_an_asyncio_loop_names_the_await_it_waits_on():
    result = run_world(target("asyncio_waits_forever"), topology="1x1", timeout=600,
                       wall_limit=60)
    assert result.outcome == HANG
    line = line_in(TARGETS, "asyncio_waits_forever", "await asyncio.Event().wait()")
    assert (f"rank 0 waits in its own code at clock_targets.py:{line} in main: "
            "`await asyncio.Event().wait()`; deadline 600 s") in result.hang_report, \
        result.hang_report
    assert "a longer --timeout" not in result.hang_report, "nothing is due: none would end it"
    assert result.world_time_s == 600.0


def test_a_socketpair_shared_with_a_child_process_is_waited_on_in_the_machines_time():
    result = run_world(target("pipe_shared_with_a_child"), topology="1x1", timeout=60,
                       wall_limit=60)
    assert result.outcome == PASS, describe(result)
    assert result.ranks[0].value == "from the child"


def test_only_a_socket_whose_peer_is_the_rank_itself_lets_a_selector_wait_on_the_clock():
    """Pure: the self-pipe an asyncio loop makes (a socketpair) can be made ready only by
    the rank's own threads; a pipe or a TCP socket may be by another process."""
    import os
    import socket

    from harness.rank.clock import _own

    ours, theirs = socket.socketpair()
    read, write = os.pipe()
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    try:
        assert _own(ours.fileno()) and _own(theirs.fileno())
        assert not _own(read) and not _own(client.fileno()) and not _own(server.fileno())
        assert not _own(12345), "a closed descriptor"
    finally:
        for thing in (ours, theirs, server, client):
            thing.close()
        os.close(read)
        os.close(write)


# -- a stranger's code ----------------------------------------------------------------------

def test_a_strangers_poll_loop_times_out_as_on_a_pod_in_world_time(cli, tmp_path):
    """poll_json polls for its file for 30 s, 0.2 s apart, then raises TimeoutError: on
    isolated-tmp each host has its own /tmp, so ranks 1-7 give up, loudly, at 30 s of
    world time (not a HANG at a deadline of the machine's)."""
    done = cli("run", "-T", f"{USER}/poll_json.py:sync", "-s", "isolated-tmp", "-s", "baseline",
               "--report-dir", str(tmp_path), "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    import json

    cells = {c["scenario"]: c for c in
             json.loads((tmp_path / "latest" / "matrix.json").read_text())["cells"]}
    assert cells["baseline"]["outcome"] == PASS
    tmp = cells["isolated-tmp"]
    assert tmp["outcome"] == ERROR and tmp["world_time_s"] == pytest.approx(30, abs=0.5)
    assert [r["error"].split(":")[0] for r in tmp["ranks"][1:]] == ["TimeoutError"] * 7
    assert tmp["ranks"][0]["outcome"] == PASS


@pytest.mark.slow
def test_a_target_whose_imports_take_seconds_has_no_cell_decided_by_them():
    """heavy_sync imports a model package that computes at import (the user's own code:
    never preloaded, every rank imports it): its verdicts are light_sync's, the same code
    without the import, in the scenarios where time decides most."""
    from harness.runner.run import plan_cells, run_matrix
    from harness.scenarios import select
    from harness.workloads.registry import target as make_target

    here = TARGETS_DIR
    scenarios = select(("baseline", "slow-writer", "visibility-delay", "writer-killed",
                        "isolated-tmp", "partial-write"))
    heavy, light = (make_target(f"{here}/{name}.py:sync") for name in ("heavy_sync", "light_sync"))
    matrix = run_matrix(plan_cells(scenarios, [heavy, light], 0), jobs=2)
    verdicts = {(c.scenario, c.target): (c.outcome, c.world_time_s) for c in matrix.cells}
    for s in scenarios:
        assert verdicts[(s.name, heavy.name)] == verdicts[(s.name, light.name)], s.name
    fired = {c.scenario for c in matrix.cells if c.target == heavy.name and c.faults_fired}
    assert fired >= {"slow-writer", "writer-killed", "partial-write"}, "the faults happened"


def test_a_file_written_in_a_world_shows_the_worlds_time_of_the_write():
    """A staleness check (``time.time() - getmtime(f)``) sees the age the world gave the
    file, whichever way it was written or touched; the machine's own files are older than
    the world's epoch; the view's record of it is not among the file's attributes."""
    result = run_world(target("file_ages"), topology="1x1", timeout=600)
    assert result.outcome == PASS, describe(result)
    seen = result.ranks[0].value
    assert seen["ages"] == {"opened": 50.0, "raw": 50.0, "touched": 0.0,
                            "set": 1_893_456_145.0}, seen
    assert seen["path_age"] == 50.0 and seen["xattrs"] == []
    assert seen["machine_file_years"] > 0


def test_a_log_records_times_are_the_worlds():
    result = run_world(target("logs"), topology="1x1", timeout=60)
    assert result.outcome == PASS, describe(result)
    first, second = result.ranks[0].value
    assert first.startswith("2030-01-01 00:00:00,") and second.startswith("2030-01-01 00:00:02,")
    assert int(second.split()[2]) - int(first.split()[2]) == 2000, "relativeCreated, in ms"
    assert 0 <= int(first.split()[2]) < 1000, "counted from the world's start"


# -- signals the harness delivers (a pre-emption's notice) ---------------------------------

def test_a_handler_of_the_target_holds_the_world_from_its_delivery_to_its_return():
    said = Said()
    clock = RankClock(said)
    clock.signal_coming(15, "runs", told=5 * NS)  # the control thread, before the kill
    clock.signal_coming(15, "runs", told=5 * NS)  # sent again before it ran: one pending
    assert clock.running == 2 and clock.seen == 2 and clock.now == 5 * NS
    token = clock.handler_began(15)  # in the main thread, which was running
    assert token == (False, True)
    clock.handler_ended(token)
    assert clock.running == 1 and said == [], "it ran in a running thread: never idle"


def test_a_signal_that_nothing_handles_leaves_the_idle_unit_idle_and_one_that_kills_does_not():
    for disposition, idle in (("nothing", True), ("dies", False)):
        said, box = Said(), {}

        def work(clock: RankClock, box: dict = box) -> bool:
            box["waiter"] = Waiter(None)
            return clock.block(box["waiter"])

        thread = _unit(said, box, work)
        _until(lambda said=said: said)
        box["clock"].signal_coming(15, disposition, told=3 * NS)
        told_again = [m for m in said[1:] if m["type"] == "idle"]
        assert told_again == ([{"type": "idle", "seen": 1, "wake": None}] if idle else []), \
            disposition  # the wake taken; a dying unit is busy until its exit is told
        box["clock"].notify(box["waiter"])
        thread.join(5)


@pytest.mark.parametrize("isolation", ["kernel", "python"])
def test_a_nan_timeout_does_in_a_world_what_it_does_on_the_machine(isolation):
    """Event/Condition.wait(nan) return False at once; a lock's acquire, sleep and join
    refuse it with CPython's own ValueError (the world's waits once raised another, or
    took the lock): what CPython 3.10 and 3.11 answer outside a world."""
    refused = "ValueError: Invalid value NaN (not a number)"
    machine = {"event": "returned False", "condition": "returned False", "lock": refused,
               "rlock": refused, "sleep": refused, "join": refused}
    result = run_world(target("nan_timeouts"), topology="1x1", timeout=60, isolation=isolation)
    assert result.outcome == PASS, describe(result)
    assert result.ranks[0].value == machine
