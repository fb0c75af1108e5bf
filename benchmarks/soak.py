"""Soak the harness with hostile targets and a hostile user; count its broken promises.

    python benchmarks/soak.py [--n 500] [--seed 0] [--jobs 2] [--isolation python|kernel]

Each round runs ``harness run`` (a subprocess, as a user types it) on one target of
``hostile_targets.py`` (signal blockers, daemons, a capped fork bomb, a FIFO, a 64 MB value,
values only the target can build or no checker can compare, a forged frame, writes through
/proc and /dev/shm, symlinks into /proc/self/root, a machine file reopened for writing by its
descriptor, a copy or a mapping, shared memory left behind, 1 GB printed, a killed fork
server or leader, a SIGSTOP to the harness, hangs) and one config-sync scenario, under
the isolation asked for, and, in a third of the rounds, sends the harness SIGINT, SIGTERM
or SIGKILL mid-run. Then it counts what the harness promises never happens:

- hang: ``harness run`` still running 60 s past its cells' deadlines;
- leak: a process of that run alive 15 s after it ended (found by the SOAK_ID in the
  environment every process it started inherits), or a ``harness-<pid>-*`` directory left
  (or one renamed ``ended-`` to be removed);
- escape: a file named after the round's token on the machine (/tmp, /dev/shm, the cwd), or
  the round's own target file changed;
- exit-3: an internal error;
- lost report: a run that ended by itself (exit 0/1), or by Ctrl-C (130) once it had made its
  report directory, without its JSON report.

It prints one line per problem and a table of counts; all of them must be 0. Not a test:
a script that prints and exits 0 (1 if any count is not 0).
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.rank.sweep import marked, running
from harness.world.reaper import ENDED, world_dirs

HERE = Path(__file__).resolve().parent
#: The hostile targets, read from their source (they import torch_xla: only a rank can).
KINDS = [node.name for node in ast.parse((HERE / "hostile_targets.py").read_text()).body
         if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]
#: What only kernel isolation contains (Python isolation's documented holes).
KERNEL_ONLY = {"subprocess_writes_tmp", "stops_the_harness"}

SCENARIOS = ["baseline", "partial-write", "writer-killed", "rank0-raises", "isolated-tmp",
             "transient-eio", "divergent-input", "stale-leftover"]
SIGNALS = [None, None, None, None, None, None, signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
TIMEOUT = 4


def _marked(soak_id: str) -> list[int]:
    """The live processes of one round: every one the harness started carries its SOAK_ID."""
    return [pid for pid in marked(("SOAK_ID", soak_id)) if running(pid)]


def one_round(i: int, rng: random.Random, work: Path, isolation: str) -> list[str]:
    kinds = [k for k in KINDS if isolation == "kernel" or k not in KERNEL_ONLY]
    kind, scenario, sig = rng.choice(kinds), rng.choice(SCENARIOS), rng.choice(SIGNALS)
    token, soak_id = f"soak{i}-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    cwd = work / f"round-{i}"
    cwd.mkdir()
    source = (HERE / "hostile_targets.py").read_text()
    (cwd / "target.py").write_text(source)
    env = {**os.environ, "SOAK_ID": soak_id, "SOAK_TOKEN": token,
           "HARNESS_CACHE_DIR": str(cwd / "cache"), "HARNESS_ISOLATION": isolation,
           "HARNESS_LIMITS": "output=16MiB", "HARNESS_DEBUG": "1"}  # an exit 3's traceback
    what = f"round {i}: {kind} x {scenario}" + (f", {signal.Signals(sig).name}" if sig else "")
    harness = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "-T", f"target.py:{kind}", "-s", scenario,
         "--timeout", str(TIMEOUT), "--report-dir", "reports", "--format", "json", "-j", "1"],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    problems = []
    if sig is not None:
        time.sleep(rng.uniform(0.5, 4.0))
        harness.send_signal(sig)
    try:
        _, err = harness.communicate(timeout=TIMEOUT * 2 + 120)
    except subprocess.TimeoutExpired:
        problems.append(f"hang: {what}")
        harness.kill()
        _, err = harness.communicate()
    code = harness.returncode
    if code == 3:  # the internal error's line, and its whole stderr kept to read
        said = [line for line in err.splitlines() if "internal error" in line][-1:]
        kept = Path(tempfile.gettempdir()) / f"soak-exit3-{soak_id[:8]}.txt"
        kept.write_text(f"{what}\n{err}")
        problems.append(f"exit-3: {what}: {said or err.strip().splitlines()[-1:]} ({kept})")
    report = cwd / "reports" / "latest" / "matrix.json"
    # A Ctrl-C before the run made its report directory (while it imports and plans) stops
    # it before any world: there is nothing to report. Once the directory is there, a
    # report must be, whatever ended the run.
    began = any(p.name != "latest" for p in (cwd / "reports").glob("*"))
    if code in (0, 1) or (code == 130 and began):
        if not report.exists():
            problems.append(f"lost report: {what} (exit {code})")
    elif report.exists():
        json.loads(report.read_text())  # a cut report raises here
    deadline = time.monotonic() + 15
    while _marked(soak_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _marked(soak_id)
    if left:
        problems.append(f"leak: {what}: {len(left)} processes")
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    dirs = [d for base in world_dirs() for prefix in ("", ENDED)
            for d in glob.glob(os.path.join(base, f"{prefix}harness-{harness.pid}-*"))]
    if dirs:
        problems.append(f"leak: {what}: {len(dirs)} world directories")
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    for where in ("/tmp", "/dev/shm", str(cwd)):
        escaped = [p for p in os.listdir(where) if p.startswith(token)] if os.path.isdir(where) else []
        if escaped:
            problems.append(f"escape: {what}: {where}/{escaped[0]}")
            for p in escaped:
                path = os.path.join(where, p)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    if (cwd / "target.py").read_text() != source:
        problems.append(f"escape: {what}: the round's target.py changed")
    shutil.rmtree(cwd, ignore_errors=True)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--isolation", choices=["python", "kernel"], default="python")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    seeds = random.Random(args.seed)
    rounds = [(i, random.Random(seeds.getrandbits(64))) for i in range(args.n)]
    counts = {"hang": 0, "leak": 0, "escape": 0, "exit-3": 0, "lost report": 0}
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for problems in pool.map(lambda r: one_round(r[0], r[1], work, args.isolation), rounds):
            for p in problems:
                print(p, flush=True)
                counts[p.split(":")[0]] += 1
    shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.n} rounds in {time.monotonic() - start:.0f} s (seed {args.seed}, "
          f"{len(KINDS)} target kinds x {len(SCENARIOS)} scenarios, a third signalled, "
          f"{args.isolation} isolation)")
    for name, n in counts.items():
        print(f"  {name:<12} {n}")
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
