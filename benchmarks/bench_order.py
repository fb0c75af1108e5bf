"""Is a racy cell's verdict the machine's? The same seeds, many runs, quiet and loaded.

    python benchmarks/bench_order.py [--runs 20] [--seeds 0-3] [--load 6]
                                     [--target tests/user_targets/async_inplace.py:sync]
                                     [--scenario divergent-slugs]

Runs ``harness run -s SCENARIO -T TARGET --seeds SEEDS`` (a subprocess, as a user types it)
``--runs`` times on a quiet machine, then ``--runs`` times beside ``--load`` busy processes
(a spin loop each: 6 on 2 cores is 3x overload), and prints, for each seed, how many runs
gave each (outcome, detail) and whether every run of that seed, quiet and loaded, agreed.
The default target writes its config in place while the others poll for it
(``tests/user_targets/async_inplace.py``): before issue 45 its cells followed the machine's
scheduler (PASS quiet, ERROR loaded).

A script, not a test: it prints and exits 0 (1 if some seed's runs disagree, 2 if a run
fails to produce its report).
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _spin() -> None:
    while True:
        pass


def one_run(args: argparse.Namespace, out: str) -> dict[int, tuple[str, str]]:
    done = subprocess.run([sys.executable, "-m", "harness", "run", "-s", args.scenario,
                           "-T", args.target, "--seeds", args.seeds, "--format", "json",
                           "--report-dir", out], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    path = os.path.join(out, "latest", "matrix.json")
    if done.returncode not in (0, 1) or not os.path.exists(path):
        sys.stderr.write(done.stderr[-3000:])
        raise SystemExit(2)
    with open(path) as f:
        cells = json.load(f)["cells"]
    return {c["seed"]: (c["outcome"], c["detail"]) for c in cells}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seeds", default="0-3")
    parser.add_argument("--load", type=int, default=6)
    parser.add_argument("--target", default="tests/user_targets/async_inplace.py:sync")
    parser.add_argument("--scenario", default="divergent-slugs")
    args = parser.parse_args()
    seen: dict[str, dict[int, collections.Counter]] = {}
    with tempfile.TemporaryDirectory(prefix="harness-order-") as tmp:
        for setting in ("quiet", "loaded"):
            spinners = [multiprocessing.Process(target=_spin, daemon=True)
                        for _ in range(args.load if setting == "loaded" else 0)]
            for p in spinners:
                p.start()
            try:
                runs = seen.setdefault(setting, collections.defaultdict(collections.Counter))
                for i in range(args.runs):
                    for seed, cell in one_run(args, os.path.join(tmp, f"{setting}-{i}")).items():
                        runs[seed][cell] += 1
            finally:
                for p in spinners:
                    p.terminate()
    print(f"{args.scenario}[{args.target}]: {args.runs} runs quiet, {args.runs} beside "
          f"{args.load} busy processes ({os.cpu_count()} cores)")
    agree = True
    for seed in sorted(seen["quiet"]):
        cells = seen["quiet"][seed] + seen["loaded"][seed]
        same = len(cells) == 1
        agree &= same
        for outcome, detail in cells:
            q, lo = seen["quiet"][seed][(outcome, detail)], seen["loaded"][seed][(outcome, detail)]
            print(f"  seed {seed}: {outcome:<5} quiet {q:>3}/{args.runs}, loaded "
                  f"{lo:>3}/{args.runs}  {detail[:70]}")
        print(f"  seed {seed}: {'the same in every run' if same else 'RUNS DISAGREE'}")
    sys.exit(0 if agree else 1)


if __name__ == "__main__":
    main()
