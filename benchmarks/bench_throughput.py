"""Worlds per second: what exploration can afford, against the physical floor, in one run.

    python benchmarks/bench_throughput.py [--worlds 10] [--rounds 3] [--baseline REF | --no-baseline]

1. the floor: a warm parent (torch imported) forks 8 children that exit at
   once, and waits for all of them: no harness, no target, no I/O;
2. the harness: one catalog cell, ``partial-write[naive-sync]`` (an 8-rank
   config-sync world on single-host-8 with one file fault, a torn write of the
   handoff), run through the runner as ``harness run`` runs it, a new seed each
   time (the fault lands elsewhere), its target's roles learned once before;
3. the same cells run by the harness of ``REF`` (default: the commit before
   the throughput work), from ``git archive REF`` in a temporary directory.

The harness of each checkout runs in its own interpreter (its checkout first
on ``sys.path``, its own fork server), warmed up by one cell; every round
measures the floor and ``--worlds`` cells of each side, the sides' order
alternating, so that all of them see the same machine load. Each figure is the
median over every round; the ratio is the time per world over the floor's. Wall
times move with the machine's load (printed); the CPU per world (the harness
process's own, plus every leader's and rank's, as the fork server reaps them)
moves much less. Both sides run the same seeds: a cell whose outcome differs
between them is printed. Without git (or ``--no-baseline``) the figure measured
before the work is printed as a constant, with its date and commit.

A script, not a test: it prints and exits 0 (2 if a world fails to run at all).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

#: The commit before the throughput work (issue 13), and what it gave there on a quiet machine.
BEFORE_REF = "5c1d321"
BEFORE = {"date": "2026-11-23", "ref": BEFORE_REF, "load": 0.3, "s_per_world": 0.235,
          "floor_s": 0.049}
RANKS = 8


# -- the floor ---------------------------------------------------------------------

def floor(worlds: int, ranks: int = RANKS) -> tuple[list[float], float]:
    """Forking ``ranks`` children from a warm parent and reaping them: a world's lower bound.

    Returns the time of each and the CPU per world (the parent's and its children's)."""
    import torch  # noqa: F401 - the parent is as warm as the harness's fork server

    times = []
    cpu0 = time.process_time() + _children_cpu()
    for _ in range(worlds):
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
    return times, (time.process_time() + _children_cpu() - cpu0) / worlds


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# -- one side: a checkout's harness, in its own interpreter ----------------------------

def worker() -> None:
    """``--worker``: warm up, then run ``N`` cells per line read from stdin, a JSON line each."""
    from harness.runner.discovery import discover
    from harness.runner.run import plan_cells, run_cell
    from harness.scenarios import select
    from harness.workloads.registry import BUILTIN_TARGETS, WORKLOADS
    from harness.world import pool

    scenario = select(("partial-write",))[0]
    target = BUILTIN_TARGETS["naive-sync"]
    learned = discover(target, WORKLOADS[scenario.workload], scenario.needs_another_run)
    seed = 0

    def cell() -> tuple[float, str]:
        nonlocal seed
        plan = plan_cells([scenario], [target], seed)[0]
        seed += 1
        start = time.perf_counter()
        outcome = run_cell(plan, discovery=learned).outcome
        return time.perf_counter() - start, outcome

    cell()  # the fork server's cold start, and the first fork of everything
    held = pool._servers  # a dict of servers before one server per process, a list since
    servers = [s.process.pid for s in (held.values() if isinstance(held, dict) else held)]
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        worlds = int(line)
        first = seed
        h0, w0 = time.process_time(), sum(_cpu_of(p) for p in servers)
        done = [cell() for _ in range(worlds)]
        h1 = time.process_time()
        time.sleep(0.7)  # a fork server reaps the last leader within 0.5 s
        world_cpu = sum(_cpu_of(p) for p in servers) - w0
        print(json.dumps({"times": [t for t, _ in done], "outcomes": [o for _, o in done],
                          "seeds": list(range(first, seed)), "harness_cpu": (h1 - h0) / worlds,
                          "world_cpu": world_cpu / worlds}), flush=True)


def _cpu_of(pid: int) -> float:
    """CPU seconds of ``pid`` and of every descendant it has reaped (utime+stime+cutime+cstime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class Side:
    """A checkout's harness running cells in a ``--worker`` interpreter."""

    def __init__(self, name: str, checkout: str) -> None:
        self.name, self.checkout = name, checkout
        env = dict(os.environ, PYTHONPATH=checkout)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", checkout], env=env,
            cwd=checkout, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.batches: list[dict[str, Any]] = []
        self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} harness's worker stopped "
                               f"(exit code {self.proc.wait()})")
        return json.loads(line)

    def run(self, worlds: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{worlds}\n")
        self.proc.stdin.flush()
        self.batches.append(self._read())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def figures(self) -> tuple[float, float, float]:
        """Median seconds per world, harness CPU per world, world CPU per world."""
        return (statistics.median(t for b in self.batches for t in b["times"]),
                statistics.median(b["harness_cpu"] for b in self.batches),
                statistics.median(b["world_cpu"] for b in self.batches))

    def outcomes(self) -> dict[int, str]:
        return {s: o for b in self.batches for s, o in zip(b["seeds"], b["outcomes"])}


def checkout_of(ref: str, into: str) -> str | None:
    """``git archive REF`` unpacked under ``into``; None (and why, on stderr) if it cannot be."""
    try:
        data = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", ref],
                              capture_output=True, check=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"no baseline: cannot check out {ref}: {exc} {detail.decode(errors='replace')}",
              file=sys.stderr)
        return None
    path = os.path.join(into, "baseline")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(path, filter="data")
    return path


# -- the run ------------------------------------------------------------------------

def row(label: str, seconds: float, floor_s: float, cpu: str = "") -> str:
    return f"{label:44}{seconds:10.4f}{1 / seconds:10.2f}{seconds / floor_s:9.2f}{cpu:>28}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=10, help="cells per side per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=BEFORE_REF,
                        help=f"git ref whose harness runs beside this one (default {BEFORE_REF}, "
                             "before the throughput work)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="only this checkout; print the figure before the work as a constant")
    args = parser.parse_args()
    if args.worlds < 1 or args.rounds < 1:
        parser.error("--worlds and --rounds must be at least 1")
    tmp = tempfile.mkdtemp(prefix="harness-throughput-")
    sides: list[Side] = []
    try:
        base = None if args.no_baseline else checkout_of(args.baseline, tmp)
        try:
            if base is not None:
                sides.append(Side(f"harness at {args.baseline}", base))
            sides.append(Side("harness (this checkout)", REPO))
            floor_times, floor_cpu = [], []
            for round_ in range(args.rounds):
                times, cpu = floor(args.worlds)
                floor_times += times
                floor_cpu.append(cpu)
                for side in (sides if round_ % 2 == 0 else sides[::-1]):
                    side.run(args.worlds)
        except (RuntimeError, ValueError, OSError) as exc:
            print(f"the harness's world failed: {type(exc).__name__}: {exc}")
            return 2
        load = os.getloadavg()
        print(f"harness throughput, partial-write[naive-sync] (8 ranks, one torn write), "
              f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
              f"{args.rounds} rounds of {args.worlds} worlds each (median)")
        base_s = statistics.median(floor_times)
        print(f"{'':44}{'s/world':>10}{'worlds/s':>10}{'x floor':>9}"
              f"{'CPU/world: harness+world':>28}")
        print(row("floor: fork 8 children, reap", base_s, base_s,
                  f"{statistics.median(floor_cpu) * 1e3:.0f} ms"))
        for side in sides:
            s, h, w = side.figures()
            print(row(side.name, s, base_s, f"{h * 1e3:.0f}+{w * 1e3:.0f} ms"))
        if base is None:
            b = BEFORE
            print(f"before the throughput work ({b['ref']}, {b['date']}, load {b['load']}): "
                  f"{b['s_per_world']:.3f} s/world, {1 / b['s_per_world']:.2f} worlds/s, "
                  f"{b['s_per_world'] / b['floor_s']:.1f}x its floor of {b['floor_s']:.3f} s")
        elif len(sides) == 2:
            print(f"this checkout against {args.baseline}: "
                  f"{sides[1].figures()[0] / sides[0].figures()[0]:.2f}x the time per world")
            before, after = sides[0].outcomes(), sides[1].outcomes()
            differ = [s for s in after if before.get(s) != after[s]]
            if differ:
                print("outcomes differ at seeds " + ", ".join(
                    f"{s} ({before.get(s)} -> {after[s]})" for s in differ))
        outcomes = [o for o in sides[-1].outcomes().values()]
        print(f"outcomes: {', '.join(f'{o} x{outcomes.count(o)}' for o in sorted(set(outcomes)))}")
        return 0
    finally:
        for side in sides:
            side.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.path.insert(0, sys.argv[2])  # this side's checkout, before any installed harness
        worker()
    else:
        sys.exit(main())
