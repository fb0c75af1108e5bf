"""What the harness adds to starting Python, pytest and its own command line, in one run.

    python benchmarks/bench_startup.py [--rounds 15]

Each round times, in a fresh process each and in alternating order:

- ``python -c pass``: the interpreter alone, the floor;
- ``harness --help`` (``python -m harness --help``): what a user waits for before any command;
- ``pytest -p no:harness`` on a one-test file: pytest without the harness's plugin;
- ``pytest`` on the same file: with the plugin the harness installs in every environment
  it is installed in (its ``pytest11`` entry point), which a test that does not use it pays.

It prints each median and each figure minus its baseline (``harness --help`` against the
floor, the plugin against ``-p no:harness``) side by side. Targets: ``harness --help``
in at most 0.3 s, the plugin at most 50 ms. A script, not a test: it prints and exits 0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def timed(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-500:]!r}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "test_one.py"), "w") as f:
            f.write("def test_one():\n    assert 1 + 1 == 2\n")
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"]
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "harness --help": [sys.executable, "-m", "harness", "--help"],
            "pytest -p no:harness": pytest[:3] + ["-p", "no:harness"] + pytest[3:],
            "pytest (with the plugin)": pytest,
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for r in range(args.rounds):
            order = list(cases) if r % 2 == 0 else list(reversed(cases))
            for name in order:
                times[name].append(timed(cases[name], work))
    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"median of {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    for name, value in med.items():
        print(f"  {name:28s} {value * 1000:7.0f} ms")
    print(f"harness --help: {med['harness --help'] * 1000:.0f} ms, "
          f"{(med['harness --help'] - med['python -c pass']) * 1000:+.0f} ms over the interpreter "
          f"(target: at most 300 ms)")
    print(f"the pytest plugin adds "
          f"{(med['pytest (with the plugin)'] - med['pytest -p no:harness']) * 1000:+.0f} ms "
          f"(target: at most 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
