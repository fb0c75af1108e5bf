"""The whole catalog, this checkout's harness against a baseline's, in one run.

    python benchmarks/bench_catalog.py [--rounds 3] [--baseline REF | --no-baseline]
                                       [--cache fresh|warm] [--load N] [--all-cells]

Each round runs ``harness run`` as a user runs it (the catalog's cells against the
built-in targets, every report written, here to a temporary directory) once with this
checkout and once with REF's (``git archive REF`` in a temporary directory; default:
the commit before the world clock), the order alternating between rounds, so that both
sides see the same machine. ``--cache fresh`` (the default) gives every run an empty
``HARNESS_CACHE_DIR``, as a new user or a CI runner has; ``warm`` keeps one per side,
learned in a first run that is not counted. ``--load N`` keeps N busy processes (a spin
loop each) beside the runs: ``--load 6`` on 2 cores is 3x overload. Both sides run the
scenarios both catalogs hold (``-s`` each), so that they run the same cells (REF's 81:
scenarios added since are left out, and named); ``--all-cells`` runs each side's own
whole catalog.

It prints each side's median wall time and the ratio, and every cell whose outcome or
verdict differs between two runs of the same side (a verdict that moves with the
machine's load) or between the two sides (a change of the product, on purpose or not).

A script, not a test: it prints and exits 0 (2 if a run fails to produce its report).
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_throughput import checkout_of  # noqa: E402 - beside this script

#: The commit before the world clock (issue 22): the catalog's deadlines on the wall clock.
BEFORE_REF = "59fbc99"

Cells = dict[str, tuple[str, str]]  # "scenario[target]" -> (outcome, verdict)


def scenarios_of(checkout: str) -> set[str]:
    """The names of the scenarios in ``checkout``'s catalog."""
    return {os.path.basename(p)[:-len(".yaml")]
            for p in glob.glob(os.path.join(checkout, "scenarios", "*.yaml"))}


def run_catalog(checkout: str, cache: str, out: str,
                scenarios: list[str] | None = None) -> tuple[float, Cells]:
    """One ``harness run`` with ``checkout``'s harness: of ``scenarios``, else the catalog."""
    env = dict(os.environ, PYTHONPATH=checkout, HARNESS_CACHE_DIR=cache)
    chosen = [arg for name in scenarios or () for arg in ("-s", name)]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "harness", "run", *chosen, "--report-dir", out],
                          cwd=checkout, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    reports = sorted(glob.glob(os.path.join(out, "*", "matrix.json")))
    if not reports:
        raise RuntimeError(f"no report from {checkout} (exit {done.returncode}): "
                           f"{done.stderr[-2000:]}")
    with open(reports[-1]) as f:
        cells = json.load(f)["cells"]
    return elapsed, {f"{c['scenario']}[{c['target']}]": (c["outcome"], c["verdict"])
                     for c in cells}


def _spin() -> None:
    while True:
        pass


def differences(a: Cells, b: Cells) -> list[str]:
    return [f"{key}: {' '.join(a.get(key, ('-', '-')))} -> {' '.join(b.get(key, ('-', '-')))}"
            for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=BEFORE_REF, help="the ref to compare with")
    parser.add_argument("--no-baseline", action="store_true", help="this checkout only")
    parser.add_argument("--cache", choices=("fresh", "warm"), default="fresh")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the runs")
    parser.add_argument("--all-cells", action="store_true",
                        help="each side's whole catalog, not the scenarios both hold")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench-catalog-")
    sides: dict[str, str] = {"this checkout": REPO}
    if not args.no_baseline:
        base = checkout_of(args.baseline, work)
        if base is not None:
            sides[f"harness at {args.baseline}"] = base
    scenarios: list[str] | None = None
    if len(sides) == 2 and not args.all_cells:
        held = [scenarios_of(checkout) for checkout in sides.values()]
        scenarios = sorted(held[0] & held[1])
        for name, only in zip(sides, (held[0] - held[1], held[1] - held[0])):
            if only:
                print(f"left out, only {name} has them: {', '.join(sorted(only))}",
                      file=sys.stderr)
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
    for p in spinners:
        p.start()
    times: dict[str, list[float]] = {name: [] for name in sides}
    seen: dict[str, list[Cells]] = {name: [] for name in sides}
    runs = 0
    try:
        if args.cache == "warm":  # each side learns its targets once, uncounted
            for i, checkout in enumerate(sides.values()):
                run_catalog(checkout, os.path.join(work, f"cache-side-{i}"),
                            os.path.join(work, "warm-up"), scenarios)
        for round_ in range(args.rounds):
            order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
            for name, checkout in order:
                runs += 1
                cache = os.path.join(work, f"cache-side-{list(sides).index(name)}"
                                     if args.cache == "warm" else f"cache-{runs}")
                elapsed, cells = run_catalog(checkout, cache, os.path.join(work, f"run-{runs}"),
                                             scenarios)
                times[name].append(elapsed)
                seen[name].append(cells)
                print(f"round {round_ + 1}: {name}: {elapsed:.2f} s, {len(cells)} cells",
                      file=sys.stderr)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 2
    finally:
        for p in spinners:
            p.terminate()

    cores = os.cpu_count() or 1
    what = "the whole catalog" if scenarios is None else \
        f"the {len(scenarios)} scenarios both catalogs hold"
    print(f"{what} (`harness run`), {cores} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {args.load} busy processes beside "
          f"it, {args.cache} cache; median of {args.rounds} runs each")
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, median in medians.items():
        spread = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"  {name:34} {median:8.2f} s   ({spread})")
    names = list(sides)
    if len(names) == 2:
        print(f"  {names[1]} takes {medians[names[1]] / medians[names[0]]:.2f}x the time of "
              f"{names[0]}")
    for name, runs_ in seen.items():
        moved = sorted({d for other in runs_[1:] for d in differences(runs_[0], other)})
        print(f"  {name}: {'no cell moved between its runs' if not moved else 'cells that moved:'}")
        for line in moved:
            print(f"    {line}")
    if len(names) == 2:
        changed = differences(seen[names[1]][0], seen[names[0]][0])
        print(f"  {names[1]} -> {names[0]}: "
              f"{'no cell changed' if not changed else f'{len(changed)} cells changed:'}")
        for line in changed:
            print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
