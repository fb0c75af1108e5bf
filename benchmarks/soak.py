"""Soak the harness with hostile targets and a hostile user; count its broken promises.

    python benchmarks/soak.py [--n 500] [--seed 0] [--jobs 2] [--isolation python|kernel]
                              [--kinds holds_a_memfd,uses_roots_powers]

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
  report directory, without its JSON report;
- missed limit: a round whose target passes one of the round's limits in one call (1.5 GiB
  in a memfd, one 3 GiB ``fallocate``, 1 GB printed) and whose cell does not name it;
- believed: a round of the target that always raises whose cell passed (in a third of the
  rounds a stranger, a process of the machine's, says hello on the run's world sockets as
  every rank and as the leader, with results and clean exits).

Escapes also count a mount, a device node in /dev, the machine's domain name set, or a SysV
segment of the round's left on the machine.

It prints one line per problem and a table of counts; all of them must be 0. Not a test:
a script that prints and exits 0 (1 if any count is not 0).
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import glob
import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.rank import wire
from harness.rank.sweep import marked, running
from harness.world.reaper import ENDED, world_dirs

HERE = Path(__file__).resolve().parent
#: The hostile targets, read from their source (they import torch_xla: only a rank can).
KINDS = [node.name for node in ast.parse((HERE / "hostile_targets.py").read_text()).body
         if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]
#: What only kernel isolation contains (Python isolation's documented holes).
KERNEL_ONLY = {"subprocess_writes_tmp", "stops_the_harness"}

#: Every round's limits: low enough that the hostile kinds pass them in one call.
LIMITS = "output=16MiB,memory=1GiB,written=2GiB"
#: The kinds that pass a limit, and the words their cell must say (when no signal cut it).
STOPPED_BY = {"holds_a_memfd": "memory limit of 1 GiB", "allocates_the_disk": "2 GiB written",
              "prints_without_end": "output limit"}
_libc = ctypes.CDLL(None, use_errno=True)

SCENARIOS = ["baseline", "partial-write", "writer-killed", "rank0-raises", "isolated-tmp",
             "transient-eio", "divergent-input", "stale-leftover"]
SIGNALS = [None, None, None, None, None, None, signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
TIMEOUT = 4


def _sysv_segments(keys: range) -> list[int]:
    """The ids of the machine's SysV segments whose key is one of ``keys``."""
    ids = []
    with open("/proc/sysvipc/shm") as f:
        next(f)
        for line in f:
            key, ident = (int(x) for x in line.split()[:2])
            if key in keys:
                ids.append(ident)
    return ids


def _stranger(harness: int, for_s: float = 8.0) -> None:
    """A process of the machine's that is not of the world: for ``for_s`` seconds, on
    every world socket of the run ``harness`` it finds, says hello as ranks 0-7 (a result
    saying the target returned) and as the leader (every rank's exit, clean, and the world
    done), with a secret of its own."""
    said: set[str] = set()
    end = time.monotonic() + for_s
    while time.monotonic() < end:
        for address in {a for base in world_dirs()
                        for a in glob.glob(os.path.join(base, f"harness-{harness}-*", "channel",
                                                        "world.sock"))} - said:
            said.add(address)
            try:
                for rank in range(8):
                    sock = wire.connect(address)
                    wire.send_frame(sock, {"type": "hello", "role": "rank", "id": rank,
                                           "channel": "call", "pid": os.getpid(),
                                           "secret": "0" * 64})
                    wire.send_frame(sock, {"type": "result", "ok": True, "value_repr": "0",
                                           "exit_code": 0}, pickle.dumps(0))
                sock = wire.connect(address)
                wire.send_frame(sock, {"type": "hello", "role": "leader", "id": 0,
                                       "channel": "leader", "pid": os.getpid(),
                                       "secret": "0" * 64})
                for rank in range(8):
                    wire.send_frame(sock, {"type": "exited", "pid": 10_000 + rank, "status": 0,
                                           "unit": ["rank", rank]})
                wire.send_frame(sock, {"type": "done", "leftovers": 0, "clean": True})
            except OSError:
                pass  # refused, or the world ended meanwhile
        time.sleep(0.1)


def _marked(soak_id: str) -> list[int]:
    """The live processes of one round: every one the harness started carries its SOAK_ID."""
    return [pid for pid in marked(("SOAK_ID", soak_id)) if running(pid)]


def one_round(i: int, rng: random.Random, work: Path, isolation: str,
              only: list[str] | None = None) -> list[str]:
    kinds = [k for k in only or KINDS if isolation == "kernel" or k not in KERNEL_ONLY]
    kind, scenario, sig = rng.choice(kinds), rng.choice(SCENARIOS), rng.choice(SIGNALS)
    token, soak_id = f"soak{i}-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    cwd = work / f"round-{i}"
    cwd.mkdir()
    source = (HERE / "hostile_targets.py").read_text()
    (cwd / "target.py").write_text(source)
    sysv = (zlib.crc32(token.encode()) & 0x3FFFFFF) << 4  # the round's SysV keys: this + rank
    env = {**os.environ, "SOAK_ID": soak_id, "SOAK_TOKEN": token, "SOAK_SYSV_KEY": str(sysv),
           "HARNESS_CACHE_DIR": str(cwd / "cache"), "HARNESS_ISOLATION": isolation,
           "HARNESS_LIMITS": LIMITS, "HARNESS_DEBUG": "1"}  # an exit 3's traceback
    domainname = Path("/proc/sys/kernel/domainname").read_text()
    what = f"round {i}: {kind} x {scenario}" + (f", {signal.Signals(sig).name}" if sig else "")
    harness = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "-T", f"target.py:{kind}", "-s", scenario,
         "--timeout", str(TIMEOUT), "--report-dir", "reports", "--format", "json", "-j", "1"],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    problems = []
    if rng.random() < 1 / 3:  # a stranger on the machine speaks as every rank meanwhile
        threading.Thread(target=_stranger, args=(harness.pid,), daemon=True).start()
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
    if kind == "raises" and code in (0, 1) and report.exists():
        cells = json.loads(report.read_text()).get("cells", [])
        if any(c.get("outcome") == "PASS" for c in cells):
            problems.append(f"believed: {what}: a target that always raises passed")
    if kind in STOPPED_BY and sig is None and report.exists():
        cells = json.loads(report.read_text()).get("cells", [])
        if not any(STOPPED_BY[kind] in c.get("detail", "") for c in cells):
            said = cells[0].get("detail", "")[:200] if cells else "no cell"
            problems.append(f"missed limit: {what}: {said}")
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
    for where in ("/tmp", "/dev/shm", "/dev", str(cwd)):
        escaped = [p for p in os.listdir(where) if p.startswith(token)] if os.path.isdir(where) else []
        if escaped:
            problems.append(f"escape: {what}: {where}/{escaped[0]}")
            for p in escaped:
                path = os.path.join(where, p)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    if (cwd / "target.py").read_text() != source:
        problems.append(f"escape: {what}: the round's target.py changed")
    if token in Path("/proc/self/mountinfo").read_text():
        problems.append(f"escape: {what}: a mount of the round's is on the machine")
        subprocess.run(["sh", "-c", f"grep -o '[^ ]*{token}[^ ]*' /proc/self/mountinfo | "
                                    "xargs -r -n1 umount -l"], check=False)
    if token in Path("/proc/sys/kernel/domainname").read_text():
        problems.append(f"escape: {what}: the machine's domain name was set")
        Path("/proc/sys/kernel/domainname").write_text(domainname)
    left = _sysv_segments(range(sysv, sysv + 16))
    if left:
        problems.append(f"escape: {what}: {len(left)} SysV segments outlived the world")
        for ident in left:
            _libc.shmctl(ident, 0, None)  # IPC_RMID
    shutil.rmtree(cwd, ignore_errors=True)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--isolation", choices=["python", "kernel"], default="python")
    parser.add_argument("--kinds", default="", help="only these targets (comma-separated)")
    args = parser.parse_args()
    only = [k for k in args.kinds.split(",") if k]
    if set(only) - set(KINDS):
        parser.error(f"--kinds: no such target: {', '.join(sorted(set(only) - set(KINDS)))}")
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    seeds = random.Random(args.seed)
    rounds = [(i, random.Random(seeds.getrandbits(64))) for i in range(args.n)]
    counts = {"hang": 0, "leak": 0, "escape": 0, "exit-3": 0, "lost report": 0,
              "missed limit": 0, "believed": 0}
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for problems in pool.map(lambda r: one_round(r[0], r[1], work, args.isolation, only),
                                  rounds):
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
