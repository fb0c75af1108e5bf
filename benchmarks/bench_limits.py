"""What measuring a world against its limits costs (``harness.world.limits``), in one run.

    python benchmarks/bench_limits.py [--rounds 10] [--topology 8x1]

Each round runs the same world twice, in alternating order: with the default limits (the
meter looks at every process, the capture files and the sandbox while the world runs) and
with none (the meter measures nothing). The target computes for a while without any time
call, so the world's clock is held and the server loop looks at its meter as often as it
ever does. It prints the median wall time and the harness process's CPU time of each, and
their ratios. Target: the limits add at most a few per cent.

Then how far one call passes the output limit before the meter stops its world: a rank
printing a GiB as fast as it can under a 16 MiB limit, ``--rounds`` times; it prints what
the rank had printed at the stop (the meter's own words), smallest, median and largest, in
MiB and as times the limit. (The hostile probe found 4-6x; a meter that looked every half
second let 13-18x through.) A script, not a test: how far depends on the machine's load.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from harness import run_world  # noqa: E402
from harness.world.limits import Limits, MiB  # noqa: E402

NONE = Limits(memory=None, output=None, written=None, processes=None)


def one(limits: Limits, topology: str) -> tuple[float, float]:
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    result = run_world(f"{HERE}/bare_targets.py:busy", topology=topology, timeout=60,
                       limits=limits)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    if result.outcome != "PASS":
        raise SystemExit(f"the world ended {result.outcome}: {result.detail()}")
    return wall, (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--topology", default="8x1")
    args = parser.parse_args()
    one(NONE, args.topology)  # the fork server, warm
    runs: dict[str, list[tuple[float, float]]] = {"limits": [], "none": []}
    for i in range(args.rounds):
        order = [("limits", Limits()), ("none", NONE)]
        for name, limits in (order if i % 2 == 0 else order[::-1]):
            runs[name].append(one(limits, args.topology))
    med = {name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r))
           for name, r in runs.items()}
    print(f"{'':28}{'wall':>10}{'harness CPU':>14}")
    for name in ("none", "limits"):
        wall, cpu = med[name]
        print(f"{'no limits' if name == 'none' else 'default limits':28}{wall:9.3f}s{cpu:13.3f}s")
    print(f"{'ratio (limits / none)':28}{med['limits'][0] / med['none'][0]:9.2f}x"
          f"{med['limits'][1] / max(med['none'][1], 1e-9):13.2f}x")
    printed = sorted(overshoot(args.topology) for _ in range(args.rounds))
    low, mid, high = printed[0], statistics.median(printed), printed[-1]
    print(f"\noutput printed at the stop under a 16 MiB limit: {low} / {mid:.0f} / {high} MiB "
          f"(min / median / max: {low / 16:.1f}x / {mid / 16:.1f}x / {high / 16:.1f}x the limit)")


def overshoot(topology: str) -> int:
    """The MiB a rank printing a GiB had printed when its world was stopped (16 MiB limit)."""
    tests = os.path.join(os.path.dirname(HERE), "tests", "targets", "limit_targets.py")
    result = run_world(f"{tests}:print_1_gb", topology=topology, timeout=600,
                       limits=Limits(output=16 * MiB), isolation="python")
    detail = result.detail()
    if "printed " not in detail:
        raise SystemExit(f"the world was not stopped at its output limit: {detail}")
    return int(detail.split("printed ")[1].split(" MiB")[0])


if __name__ == "__main__":
    main()
