"""torch.distributed's gloo in a world, against real gloo.

The same target runs as a world (gloo is the world's: its waits the world clock's) and
as real processes on real gloo over 127.0.0.1, and must observe the same: every
collective's values, the object collectives torch builds on them, what a peer's exit
does (``Connection closed by peer``) and what a peer that never calls does (the
group's timeout, then gloo's ``Timed out waiting``).
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import socket
import time
from typing import Any

import pytest

from harness.reports.diagnosis import describe
from harness.world.world import run_world

from support import TARGETS_DIR

TARGETS = TARGETS_DIR / "gloo_targets.py"


def world(name: str, topology: str, *args: Any, timeout: float = 60.0) -> list[Any]:
    result = run_world(f"{TARGETS}:{name}", topology=topology, timeout=timeout, args=args)
    assert result.outcome == "PASS", describe(result)
    return [r.value for r in result.ranks]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _real_rank(rank: int, size: int, port: int, name: str, args: tuple, out: Any) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    spec = importlib.util.spec_from_file_location("gloo_targets", TARGETS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out.put((rank, getattr(module, name)(*args)))


def real(name: str, size: int, *args: Any) -> list[Any]:
    """The target on ``size`` real processes over real gloo (``env://`` on 127.0.0.1)."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_real_rank, args=(r, size, port, name, args, out))
             for r in range(size)]
    for p in procs:
        p.start()
    try:
        values = dict(out.get(timeout=120) for _ in range(size))
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    return [values[r] for r in range(size)]


@pytest.mark.parametrize("size", [2, 4])
def test_every_collective_observes_what_real_gloo_gives(size: int) -> None:
    ours = world("collectives", f"{size}x1", "env://")
    theirs = real("collectives", size, "env://")
    assert ours == theirs


def test_xla_init_method_gives_a_gloo_group_of_the_world() -> None:
    ours = world("collectives", "v4-64-spmd")
    assert [v["rank"] for v in ours] == list(range(8))
    assert {v["backend"] for v in ours} == {"gloo"}
    assert ours[0]["all_reduce"] == [36.0, 16.0]
    assert ours[3]["all_gather_object"][5] == {"rank": 5, "name": "r5"}


def test_a_peer_that_exited_closes_the_group_as_real_gloo() -> None:
    ours = world("one_rank_exits", "4x1", "env://")
    theirs = real("one_rank_exits", 4, "env://")
    for mine, real_ in zip(ours, theirs):
        assert mine.keys() == real_.keys()
        if "raised" in mine:
            assert mine["raised"] == real_["raised"] == "RuntimeError"
            assert "gloo/transport/tcp/pair.cc:" in mine["message"]
            assert "Connection closed by peer [" in mine["message"]
            # real gloo says which way its socket saw the close, as the race went
            assert "gloo/transport/tcp/pair.cc:" in real_["message"]
            assert any(words in real_["message"] for words in (
                "Connection closed by peer", "Connection reset by peer", "Broken pipe")), real_
    assert "t1v-n-harness-w-3" in ours[0]["message"]  # the host that left


def test_a_peer_that_never_calls_leaves_the_others_waiting_until_the_groups_timeout() -> None:
    # 60 world seconds cost no wall time to speak of; real gloo's 1 s wait gives the message.
    started = time.monotonic()
    ours = world("one_rank_never_calls", "4x1", 60.0, timeout=600.0)
    wall = time.monotonic() - started
    theirs = real("one_rank_never_calls", 2, 1.0)
    assert [v.get("raised") for v in ours] == ["RuntimeError"] * 3 + [None]
    assert {v["waited"] for v in ours[:3]} == {60.0}
    expected = theirs[0]["message"].replace("1000ms", "60000ms")
    assert {v["message"] for v in ours[:3]} == {expected}
    assert wall < 60


def test_the_store_is_the_worlds_and_its_get_waits_on_the_world_clock() -> None:
    ours = world("store_ops", "4x1")
    assert {v["value"] for v in ours} == {"42"}
    assert sorted(v["added"] for v in ours) == [1, 2, 3, 4]
    assert {v["total"] for v in ours} == {4}
