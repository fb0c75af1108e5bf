"""A replay command is built once, as a structure, and rendered for people and shells."""

from __future__ import annotations

import shlex

from harness.runner.replay import RUN, Replay


def test_a_cells_replay_names_only_what_the_run_changed():
    plain = Replay("isolated-tmp", "naive-sync", seed=0)
    assert str(plain) == "harness replay --scenario isolated-tmp --target naive-sync --seed 0"
    mine = Replay("my scenario.yaml", "src/sync.py:load", seed=7, workload="data-sharding",
                  checker="schema.json", topology="2x4", timeout=90.0)
    assert shlex.split(str(mine)) == [
        "harness", "replay", "--scenario", "my scenario.yaml", "--target", "src/sync.py:load",
        "--seed", "7", "--workload", "data-sharding", "--checker", "schema.json",
        "--topology", "2x4", "--timeout", "90"]
    # the default workload is the command's default: not repeated
    assert "--workload" not in str(Replay("baseline", "t.py:f", workload="config-sync"))


def test_a_cell_run_under_python_isolation_is_replayed_under_it():
    """The same cell under kernel isolation can end otherwise (a subprocess's write lands in
    the host's copy there, on the machine here): the replay says which it had."""
    cell = Replay("baseline", "t.py:f", seed=0, isolation="python")
    assert str(cell).endswith("--seed 0 --isolation python")


def test_on_a_pod_the_pod_says_how_to_reach_it_and_its_topology_is_its_own():
    cell = Replay("baseline", "naive-sync", seed=3, topology="2x4", timeout=30.0,
                  isolation="python")
    pod = cell.on_pod(("harness", "pod", "run", "--hosts", "my workers.txt"))
    assert shlex.split(str(pod)) == ["harness", "pod", "run", "--hosts", "my workers.txt",
                                     "--scenario", "baseline", "--target", "naive-sync",
                                     "--seed", "3", "--timeout", "30"]


def test_a_found_plan_is_replayed_with_harness_run():
    found = Replay("found/x-y.yaml", "robust-sync", seed=0, command=RUN)
    assert str(found).startswith("harness run --scenario found/x-y.yaml --target robust-sync")
