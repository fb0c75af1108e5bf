"""Is this checkout slower than another? The same worlds, both checkouts, one run.

    python benchmarks/bench_compare.py [--baseline REF] [--rounds N] [--worlds K]

Checks ``REF`` (default ``HEAD``) out into a temporary git worktree and
measures, for it and for the working tree, alternating in every round so that
both see the same machine load:

1. a warm 8-rank trivial world (every rank returns its ordinal; torch
   preloaded), start to result, median over ``K`` worlds after one cold world;
2. the round trip of an empty ``xm.rendezvous`` in an 8-rank world, median per
   call over 200 calls on every rank;
3. one iteration of a file loop (look a file up, open it, read it: three file
   operations the view sees) in an 8-rank world: a world of 100 iterations per rank
   less a world of none, over 100, medians of 3 worlds each;
4. a 256-rank world (v6e-256) whose every rank writes its own file and reads it back
   5 times, start to result.

Each side runs in its own interpreter with its checkout first on ``sys.path``.
It prints each figure side by side with the ratio (current / baseline: below 1
is faster) and exits 0 whatever the figures are (2 if a world fails).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Runs in a fresh interpreter with one checkout first on sys.path; prints JSON.
MEASURE = r"""
import json, statistics, sys, time
import harness

targets = sys.argv[1]
worlds = int(sys.argv[2])

def world(name, args=(), topology="8x1"):
    t0 = time.perf_counter()
    result = harness.run_world(f"{targets}:{name}", topology=topology, timeout=60, args=args)
    elapsed = time.perf_counter() - t0
    if result.outcome != "PASS":
        print(result.describe() if hasattr(result, "describe") else result.outcome, file=sys.stderr)
        sys.exit(2)
    return elapsed, [r.value for r in result.ranks]

world("ordinal")  # cold: starts the fork server
warm = [world("ordinal")[0] for _ in range(worlds)]
_, per_rank = world("rendezvous_loop", (200, 20))
calls = sorted(t for times in per_rank for t in times)
none = statistics.median(world("file_loop", (0,))[0] for _ in range(3))
loop = statistics.median(world("file_loop", (100,))[0] for _ in range(3))
big = world("file_loop", (5,), "v6e-256")[0]
print(json.dumps({"warm_world_s": statistics.median(warm),
                  "rendezvous_s": statistics.median(calls),
                  "file_iter_s": max(0.0, loop - none) / 100, "world_256_s": big}))
"""

MEASURES = (("warm 8-rank world, median", "warm_world_s"),
            ("empty 8-rank rendezvous, median", "rendezvous_s"),
            ("file loop iteration, 8 ranks", "file_iter_s"),
            ("256-rank world with files", "world_256_s"))


def measure(checkout: str, worlds: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=checkout)
    done = subprocess.run([sys.executable, "-c", MEASURE, os.path.join(HERE, "targets.py"),
                           str(worlds)], env=env, cwd=checkout, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"a world failed in {checkout}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="HEAD", help="git ref to compare with (default HEAD)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--worlds", type=int, default=15, help="warm worlds per round (default 15)")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="harness-bench-")
    base = os.path.join(tmp, "baseline")
    subprocess.run(["git", "-C", REPO, "worktree", "add", "-q", "--detach", base, args.baseline],
                   check=True)
    try:
        sides: dict[str, list[dict[str, float]]] = {"baseline": [], "current": []}
        for round_ in range(args.rounds):
            order = [("baseline", base), ("current", REPO)]
            for name, checkout in (order if round_ % 2 == 0 else order[::-1]):
                sides[name].append(measure(checkout, args.worlds))
        load = os.getloadavg()[0]
        print(f"baseline {args.baseline} vs the working tree; {args.rounds} rounds; "
              f"load average {load:.1f}")
        print(f"{'measure':<34}{'baseline':>12}{'current':>12}{'ratio':>8}")
        for label, key in MEASURES:
            b = statistics.median(r[key] for r in sides["baseline"])
            c = statistics.median(r[key] for r in sides["current"])
            print(f"{label:<34}{fmt(b):>12}{fmt(c):>12}{c / b:>8.2f}")
    finally:
        subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", base], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
