"""Worlds per second: what exploration can afford, against the physical floor, in one run.

    python benchmarks/bench_throughput.py [--worlds 20]

1. the floor: a warm parent (torch imported) forks 8 children that exit at
   once, and waits for all of them: no harness, no target, no I/O;
2. the harness: one catalog cell, ``partial-write[naive-sync]`` (an 8-rank
   config-sync world on single-host-8 with one file fault, a torn write of the
   handoff), run through the runner as ``harness run`` runs it, a new seed each
   time (the fault lands elsewhere), its target's roles learned once before.

Each is the median over ``--worlds`` repetitions after one warm-up; the ratio
is the harness's time per world over the floor's. Wall times move with the
machine's load (printed in the header). A script, not a test: it prints and
exits 0 (2 if a world fails to run at all).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def floor(worlds: int, ranks: int = 8) -> list[float]:
    """Forking ``ranks`` children from a warm parent and reaping them: a world's lower bound."""
    import torch  # noqa: F401 - the parent is as warm as the harness's fork server

    times = []
    for _ in range(worlds + 1):
        start = time.perf_counter()
        pids = []
        for _ in range(ranks):
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)
        times.append(time.perf_counter() - start)
    return times[1:]


def harness_cells(worlds: int) -> tuple[list[float], list[str]]:
    from harness.runner.discovery import discover
    from harness.runner.run import plan_cells, run_cell
    from harness.scenarios import select
    from harness.workloads.registry import BUILTIN_TARGETS, WORKLOADS

    scenario = select(("partial-write",))[0]
    target = BUILTIN_TARGETS["naive-sync"]
    learned = discover(target, WORKLOADS[scenario.workload], scenario.needs_another_run)
    times, outcomes = [], []
    for seed in range(worlds + 1):
        plan = plan_cells([scenario], [target], seed)[0]
        start = time.perf_counter()
        cell = run_cell(plan, discovery=learned)
        times.append(time.perf_counter() - start)
        outcomes.append(cell.outcome)
    return times[1:], outcomes[1:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=20)
    args = parser.parse_args()
    print(f"harness throughput, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"{args.worlds} worlds each (median)")
    base = statistics.median(floor(args.worlds))
    try:
        times, outcomes = harness_cells(args.worlds)
    except Exception as exc:  # noqa: BLE001 - a benchmark says what broke and stops
        print(f"the harness's world failed: {type(exc).__name__}: {exc}")
        return 2
    cell = statistics.median(times)
    print(f"{'':34}{'s/world':>10}{'worlds/s':>10}{'x floor':>9}")
    print(f"{'floor: fork 8 children, reap':34}{base:10.4f}{1 / base:10.1f}{1:9.1f}")
    print(f"{'harness: partial-write[naive-sync]':34}{cell:10.4f}{1 / cell:10.2f}"
          f"{cell / base:9.1f}")
    print(f"outcomes: {', '.join(f'{o} x{outcomes.count(o)}' for o in sorted(set(outcomes)))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
