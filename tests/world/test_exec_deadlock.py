"""Exec mode, as the API mode: a world where nothing can happen any more (every rank
the script's xmp.spawn started waits in a collective, every launcher only waits for its
ranks or is its host's only rank) reaches its deadline at once on the world's clock."""

from __future__ import annotations

import pytest

from harness import HANG, run_world
from harness.reports.diagnosis import describe
from harness.world.lifecycle import Progress

SCRIPT = """
import os, sys, threading, time
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index, mode):
    if xm.get_ordinal() != 0:  # rank 0 skips the collective the others make
        xm.rendezvous("config_save")

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "watchdog":  # the launcher guards its wait: a thread of its own ends the job
        def give_up():
            time.sleep(1.0)
            print("launcher gives up", file=sys.stderr, flush=True)
            os._exit(3)
        threading.Thread(target=give_up, daemon=True).start()
    if mode == "no-spawn":  # one rank per host: the launcher becomes the rank
        _mp_fn(0, mode)
    else:
        xmp.spawn(_mp_fn, args=(mode,))
"""

DECLARED = ("(nothing could happen any more after t=0.0 s: the world's clock went straight "
            "to the deadline)")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.parametrize("mode, topology", [("spawn", "2x2"), ("no-spawn", "2x1")])
def test_exec_a_world_where_nothing_can_happen_goes_straight_to_its_deadline(script, mode,
                                                                             topology):
    seen: list[Progress] = []
    result = run_world(argv=(str(script), mode), topology=topology, timeout=60,
                       progress=seen.append)
    assert result.outcome == HANG
    assert result.ranks[0].outcome != HANG  # it returned (and, with spawn, its launcher waits)
    report = result.hang_report or ""
    assert "in rendezvous 'config_save'" in report, report
    assert report.endswith(f"; deadline 60 s {DECLARED}"), report
    assert result.world_time_s == 60.0
    assert DECLARED in describe(result)
    [hang] = [e for e in result.history if e.kind == "hang"]
    assert DECLARED in hang.detail["message"]
    # What `harness exec` shows while it waits: the last word is the state proven stuck.
    size = result.ranks[-1].rank + 1
    assert seen and seen[-1].started == size and seen[-1].blocked == size - 1
    assert seen[-1].returned == 1 and "1 returned" in seen[-1].describe()


def test_exec_a_launcher_that_guards_its_wait_is_never_cut_short(script):
    result = run_world(argv=(str(script), "watchdog"), topology="1x2", timeout=60)
    assert "launcher gives up" in result.hosts[0].stderr, describe(result)
    assert result.hosts[0].exit_code == 3
    assert DECLARED not in (result.hang_report or "")
