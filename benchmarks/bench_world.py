"""How fast is a harness world? Each figure next to its baseline, measured in the same run.

    python benchmarks/bench_world.py [--quick] [--json PATH]

1. An 8-rank trivial world (every rank returns its ordinal), start to result,
   median over warm worlds, against starting 8 fresh interpreters that each
   ``import torch`` (8 subprocesses in parallel, wait for all) -- the usual way
   multi-process tests start ranks. The cold first world (which starts the
   fork server) is reported on its own.
2. The round trip of an empty ``xm.rendezvous`` in an 8-rank world (median
   per call over 200 calls on every rank, 100 with --quick), next to gloo's
   ``dist.barrier()``.
3. ``xm.all_reduce('sum', t)`` of a 4 MB float32 tensor in an 8-rank world
   against torch.distributed gloo (8 processes, 127.0.0.1), median per call.
4. A 256-rank world (v6e-256, trivial target): start to result, and the
   memory of the world's process tree with all 256 ranks alive (PSS summed
   over fork server + leader + ranks, each read from /proc/PID/smaps_rollup
   between two rendezvous, so no rank has exited yet). Its baselines are
   extrapolated from the 8-interpreter baseline measured in step 1 (256
   interpreters of torch do not fit this machine) and are marked "est.".

Wall times move with the machine's load (printed in the header); the CPU
rows (CPU of the harness and of every process of the world) do not.

This is a script, not a test: it prints a table and exits 0 whether or not a
target is met (exit 2 if a world or the baseline fails outright).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import harness  # noqa: E402

TARGETS = os.path.join(HERE, "targets.py")
BARE_TARGETS = os.path.join(HERE, "bare_targets.py")
GLOO_WORKER = os.path.join(HERE, "gloo_worker.py")
NUMEL = 1 << 20  # 4 MB of float32
SMALL_WORLD = "8x1"
BIG_WORLD = "v6e-256"
# What a fresh rank of the baseline does: start an interpreter and import torch.
# It then prints its own memory figures, so the 256-rank memory baseline can be
# estimated from measured numbers.
FRESH_CODE = "import torch\nprint(open('/proc/self/smaps_rollup').read())"


class BenchError(RuntimeError):
    pass


def target(name: str) -> str:
    return name if ":" in name else f"{TARGETS}:{name}"


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def fmt_cpu(split: dict[str, float]) -> str:
    return f"{fmt_time(split['harness'] + split['world'])} CPU"


def fmt_mib(kib: float | None) -> str:
    return "-" if kib is None else f"{kib / 1024:,.0f} MiB"


# -- ours ---------------------------------------------------------------------------

def run_world(name: str, topology: str, args: tuple = (), timeout: float = 60.0) -> tuple[float, Any]:
    """Wall time from the call to every rank's value in hand, and the values."""
    t0 = time.perf_counter()
    result = harness.run_world(target(name), topology=topology, timeout=timeout, args=args)
    values = [r.value for r in result.ranks] if result.outcome == harness.PASS else None
    elapsed = time.perf_counter() - t0
    if values is None:
        bad = next((r for r in result.ranks if r.outcome != harness.PASS), result.ranks[0])
        raise BenchError(f"world {name} on {topology}: {result.outcome}: rank {bad.rank} "
                         f"{bad.summary()}\n{bad.stderr[-2000:]}\n{result.hang_report or ''}")
    return elapsed, values


def trivial_world(topology: str, name: str = "ordinal") -> float:
    elapsed, values = run_world(name, topology)
    if values != list(range(len(values))):
        raise BenchError(f"trivial world on {topology} returned {values[:10]}...")
    return elapsed


def _cpu_of(pid: int) -> float:
    """CPU seconds of ``pid`` and of every descendant it has reaped (utime+stime+cutime+cstime).

    A world's leader reaps its ranks and the fork server reaps the leader, so
    the fork server's figure grows by all the CPU of every world it ran.
    """
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def world_cpu(server: int, worlds: int, fn) -> tuple[float, float]:
    """Run ``fn`` (``worlds`` worlds of fork server ``server``); CPU per world: (harness, world)."""
    h0, w0 = time.process_time(), _cpu_of(server)
    fn()
    h1 = time.process_time()
    time.sleep(0.7)  # the fork server reaps the last leader within 0.5 s
    return (h1 - h0) / worlds, (_cpu_of(server) - w0) / worlds


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# -- baselines ----------------------------------------------------------------------

def _rollup(text: str) -> dict[str, int]:
    """``smaps_rollup`` text -> {field: kB}."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[-1] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1])
    return out


def fresh_interpreters(n: int) -> tuple[float, list[dict[str, int]]]:
    """Start ``n`` interpreters that import torch, all at once; wall time until all exited."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", FRESH_CODE], stdout=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for _ in range(n)]
    outs = [p.communicate()[0] for p in procs]
    elapsed = time.perf_counter() - t0
    if any(p.returncode for p in procs):
        raise BenchError("a fresh interpreter importing torch failed")
    return elapsed, [_rollup(o) for o in outs]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gloo(world: int, numel: int, iters: int, warmup: int, barrier_iters: int) -> list[dict]:
    """Run the gloo baseline on ``world`` processes; every rank's per-call timings."""
    for attempt in range(3):
        port = free_port()
        procs = [subprocess.Popen(
            [sys.executable, GLOO_WORKER, *(str(a) for a in (r, world, port, numel, iters, warmup,
                                                            barrier_iters))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
            for r in range(world)]
        outs = []
        try:
            for p in procs:
                outs.append(p.communicate(timeout=180))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise BenchError("gloo baseline timed out") from None
        if all(p.returncode == 0 for p in procs):
            return [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
        errors = [e for p, (_, e) in zip(procs, outs) if p.returncode]
        if attempt == 2 or "address already in use" not in " ".join(errors).lower():
            raise BenchError("gloo baseline failed:\n" + errors[0][-2000:])
    raise AssertionError("unreachable")


# -- memory -------------------------------------------------------------------------

def _children(pid: int) -> list[int]:
    pids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids.extend(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids


def fork_servers() -> set[int]:
    """The harness's fork servers (its children running harness.rank.forkserver)."""
    out = set()
    for pid in _children(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"harness.rank.forkserver" in f.read():
                    out.add(pid)
        except OSError:
            pass
    return out


def world_memory(topology: str) -> dict[str, Any]:
    """Memory of a world's fork server, leader and ranks, read while every rank is alive."""
    _, values = run_world("memory_probe", topology, timeout=120)
    procs = [v["self"] for v in values] + [values[0]["leader"], values[0]["fork_server"]]
    figures: dict[str, Any] = {f"{k.lower()}_kib": sum(p[k] for p in procs)
                               for k in ("Pss", "Rss", "VmPTE")}
    figures["pte_kib"] = figures.pop("vmpte_kib")
    figures["processes"] = len(procs)
    figures["rank_pss_median_kib"] = median([v["self"]["Pss"] for v in values])
    figures["fork_server_pss_kib"] = values[0]["fork_server"]["Pss"]
    with open("/proc/self/status") as f:
        status = {line.split(":")[0]: line.split()[1] for line in f if line.startswith("Vm")}
    figures["harness_peak_rss_kib"] = int(status.get("VmHWM", 0))
    return figures


# -- the run ------------------------------------------------------------------------

def rank_medians(per_rank: list[list[float]]) -> tuple[float, float]:
    """(rank 0's median, the median over ranks of each rank's median)."""
    meds = [median(ts) for ts in per_rank]
    return meds[0], median(meds)


def measure(quick: bool, log) -> dict[str, Any]:
    reps = dict(warm=7, fresh=2, rdv=100, ar=10, big=1) if quick else \
        dict(warm=20, fresh=4, rdv=200, ar=30, big=3)
    fig: dict[str, Any] = {"quick": quick, "repetitions": reps}

    log("1. 8-rank trivial world vs 8 fresh interpreters importing torch")
    before = fork_servers()
    cold = trivial_world(SMALL_WORLD)
    servers = fork_servers() - before
    if len(servers) != 1:
        raise BenchError(f"expected one new fork server after the first world, found {servers}")
    (server,) = servers  # the one that preloaded torch
    warm: list[float] = []
    cpu_h, cpu_w = world_cpu(server, reps["warm"], lambda: warm.extend(
        trivial_world(SMALL_WORLD) for _ in range(reps["warm"])))
    bare_name = f"{BARE_TARGETS}:ordinal"
    bare_cold = trivial_world(SMALL_WORLD, bare_name)
    bare = [trivial_world(SMALL_WORLD, bare_name) for _ in range(reps["warm"])]
    fresh_times, fresh_mem = [], []
    c0 = _children_cpu()
    for _ in range(reps["fresh"]):
        t, mem = fresh_interpreters(8)
        fresh_times.append(t)
        fresh_mem.extend(mem)
    fresh_cpu = (_children_cpu() - c0) / reps["fresh"]
    fig["trivial_8"] = {"cold_first_world_s": cold, "warm_s": warm, "warm_median_s": median(warm),
                        "no_torch_cold_first_world_s": bare_cold, "no_torch_warm_s": bare,
                        "no_torch_warm_median_s": median(bare),
                        "fresh_8_torch_s": fresh_times, "fresh_8_torch_median_s": median(fresh_times),
                        "cpu_per_warm_world_s": {"harness": cpu_h, "world": cpu_w},
                        "cpu_per_fresh_8_torch_s": fresh_cpu}
    log(f"   cold {fmt_time(cold)}, warm median {fmt_time(median(warm))}, without torch "
        f"{fmt_time(median(bare))}, fresh median {fmt_time(median(fresh_times))}")

    log("2. 8-rank empty xm.rendezvous")
    _, per_rank = run_world("rendezvous_loop", SMALL_WORLD, args=(reps["rdv"], 20))
    r0, across = rank_medians(per_rank)
    fig["rendezvous_8"] = {"iters": reps["rdv"], "rank0_median_s": r0, "median_of_rank_medians_s": across,
                           "p90_rank0_s": statistics.quantiles(per_rank[0], n=10)[-1]}
    log(f"   rank 0 median {fmt_time(r0)}, across ranks {fmt_time(across)}")

    log("3. 8-rank all_reduce of 4 MB float32: ours")
    _, values = run_world("all_reduce_loop", SMALL_WORLD, args=(NUMEL, reps["ar"], 3))
    if not all(v["correct"] for v in values):
        raise BenchError("xm.all_reduce returned a wrong sum")
    ar0, ar = rank_medians([v["times"] for v in values])
    log(f"   ours: rank 0 median {fmt_time(ar0)}, across ranks {fmt_time(ar)}")
    log("   gloo (8 processes, 127.0.0.1)")
    gl = gloo(8, NUMEL, reps["ar"], 3, reps["rdv"])
    if not all(v["correct"] for v in gl):
        raise BenchError("gloo all_reduce returned a wrong sum")
    gl0, gla = rank_medians([v["all_reduce"] for v in gl])
    gb0, gba = rank_medians([v["barrier"] for v in gl])
    fig["all_reduce_8_4mb"] = {"iters": reps["ar"], "ours_rank0_median_s": ar0, "ours_median_s": ar,
                               "gloo_rank0_median_s": gl0, "gloo_median_s": gla}
    fig["rendezvous_8"].update(gloo_barrier_rank0_median_s=gb0, gloo_barrier_median_s=gba)
    log(f"   gloo: all_reduce {fmt_time(gla)}, barrier {fmt_time(gba)}")

    log("4. 256-rank world (v6e-256)")
    big: list[float] = []
    big_h, big_w = world_cpu(server, reps["big"], lambda: big.extend(
        trivial_world(BIG_WORLD) for _ in range(reps["big"])))
    mem = world_memory(BIG_WORLD)
    one = {k: median([m.get(k, 0) for m in fresh_mem]) for k in ("Rss", "Pss", "Anonymous")}
    # 256 independent interpreters: each its own anonymous memory; file-backed pages
    # (libtorch's text etc.) counted once, as if all shared.
    mem_est = 256 * one["Anonymous"] + (one["Rss"] - one["Anonymous"])
    time_est = median(fresh_times) * 256 / 8  # CPU bound: 8 already saturate the 2 cores
    fig["world_256"] = {"runs_s": big, "median_s": median(big), "memory": mem,
                        "cpu_per_world_s": {"harness": big_h, "world": big_w},
                        "baseline_cpu_est_s": fresh_cpu * 256 / 8,
                        "fresh_interpreter_kib": one, "baseline_time_est_s": time_est,
                        "baseline_memory_est_kib": mem_est}
    log(f"   {fmt_time(median(big))}, PSS {fmt_mib(mem['pss_kib'])} over {mem['processes']} processes")
    return fig


def table(fig: dict[str, Any]) -> list[list[str]]:
    t8, rv, ar, w = fig["trivial_8"], fig["rendezvous_8"], fig["all_reduce_8_4mb"], fig["world_256"]
    ours, base = t8["warm_median_s"], t8["fresh_8_torch_median_s"]
    rows = [
        ["8-rank trivial world, warm (median)", fmt_time(ours), fmt_time(base),
         f"{base / ours:.0f}x faster", ">=50x and <100 ms",
         _met(base / ours >= 50 and ours < 0.1)],
        ["8-rank trivial world, cold first (fork server start)", fmt_time(t8["cold_first_world_s"]),
         fmt_time(base), f"{base / t8['cold_first_world_s']:.1f}x faster", "(info)", "-"],
        ["  same, CPU per world: harness + fork server's tree", fmt_cpu(t8["cpu_per_warm_world_s"]),
         fmt_time(t8["cpu_per_fresh_8_torch_s"]) + " CPU",
         f"{t8['cpu_per_fresh_8_torch_s'] / sum(t8['cpu_per_warm_world_s'].values()):.0f}x less",
         "(info)", "-"],
        ["  same, fork server without torch (info)", fmt_time(t8["no_torch_warm_median_s"]),
         fmt_time(base), f"{base / t8['no_torch_warm_median_s']:.0f}x faster", "(info)", "-"],
        ["8-rank empty xm.rendezvous (median/call, rank 0)", fmt_time(rv["rank0_median_s"]),
         fmt_time(rv["gloo_barrier_rank0_median_s"]) + " (gloo barrier)",
         f"{rv['gloo_barrier_rank0_median_s'] / rv['rank0_median_s']:.1f}x faster", "<1 ms",
         _met(rv["rank0_median_s"] < 1e-3)],
        ["  same, median over ranks of per-rank medians", fmt_time(rv["median_of_rank_medians_s"]),
         fmt_time(rv["gloo_barrier_median_s"]) + " (gloo barrier)",
         f"{rv['gloo_barrier_median_s'] / rv['median_of_rank_medians_s']:.1f}x faster", "<1 ms",
         _met(rv["median_of_rank_medians_s"] < 1e-3)],
        ["8-rank all_reduce sum 4 MB f32 (median/call)", fmt_time(ar["ours_median_s"]),
         fmt_time(ar["gloo_median_s"]) + " (gloo)", f"{ar['gloo_median_s'] / ar['ours_median_s']:.2f}x",
         "<= gloo", _met(ar["ours_median_s"] <= ar["gloo_median_s"])],
        ["256-rank trivial world (median)", fmt_time(w["median_s"]),
         fmt_time(w["baseline_time_est_s"]) + " est.",
         f"{w['baseline_time_est_s'] / w['median_s']:.0f}x faster",
         "<10 s", _met(w["median_s"] < 10)],
        ["  same, CPU per world: harness + fork server's tree", fmt_cpu(w["cpu_per_world_s"]),
         fmt_time(w["baseline_cpu_est_s"]) + " CPU est.",
         f"{w['baseline_cpu_est_s'] / sum(w['cpu_per_world_s'].values()):.0f}x less", "(info)", "-"],
        [f"256-rank world peak PSS ({w['memory']['processes']} procs)", fmt_mib(w["memory"]["pss_kib"]),
         fmt_mib(w["baseline_memory_est_kib"]) + " est.",
         f"{w['baseline_memory_est_kib'] / max(w['memory']['pss_kib'], 1):.1f}x less", "(info)", "-"],
    ]
    return rows


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"


def print_table(rows: list[list[str]]) -> None:
    head = ["measurement", "ours", "baseline", "ratio", "target", "met?"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    line = "  ".join("-" * w for w in widths)
    print(line)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    print(line)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print(line)


def notes(fig: dict[str, Any]) -> list[str]:
    w, one = fig["world_256"], fig["world_256"]["fresh_interpreter_kib"]
    mem = w["memory"]
    return [
        "ours: harness.run_world wall time from the call until every rank's value is unpickled; "
        "the fork server preloads torch (the target file imports it), so every rank has torch imported.",
        "baseline 1: 8 x `python -c 'import torch'` started together, until all exited.",
        "CPU rows: user+sys CPU of the harness process plus the fork server's own and reaped "
        "children's (every leader and rank), per world; baseline: the fresh interpreters' (RUSAGE_CHILDREN). "
        "Unlike wall times they do not move with the machine's load.",
        "cold first world: includes starting the fork server (python + import torch). 'without "
        "torch': the same world from a target file that imports nothing installed, so its own fork "
        "server preloads no torch (the difference is the cost of forking a torch-sized interpreter).",
        "rendezvous/all_reduce: per-call perf_counter on every rank, median per rank; gloo runs the "
        "same tensor and iteration count (out-of-place clone outside the timed region).",
        "256-rank memory: sum of Pss from /proc/PID/smaps_rollup over the fork server, the leader "
        "and the 256 ranks, every figure read between two rendezvous (all ranks alive; target "
        f"`memory_probe`): median rank {fmt_mib(mem['rank_pss_median_kib'])}, fork server "
        f"{fmt_mib(mem['fork_server_pss_kib'])}. sum(Rss) {fmt_mib(mem['rss_kib'])} counts shared "
        f"pages {mem['processes']} times; page tables (VmPTE, kernel memory outside PSS) add "
        f"{fmt_mib(mem['pte_kib'])}. Harness process peak RSS (VmHWM) "
        f"{fmt_mib(mem['harness_peak_rss_kib'])}, not included.",
        "256-rank baselines (est.): time = 32 x the 8-interpreter median; memory = 256 x Anonymous "
        f"({fmt_mib(one['Anonymous'])}) + file-backed (Rss-Anonymous, "
        f"{fmt_mib(one['Rss'] - one['Anonymous'])}) once, from the fresh interpreters' own "
        f"smaps_rollup (Rss {fmt_mib(one['Rss'])}).",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to PATH")
    opts = parser.parse_args(argv)
    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    try:
        fig = measure(opts.quick, log)
    except BenchError as exc:
        print(f"bench_world: {exc}", file=sys.stderr)
        return 2
    fig["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                      "platform": platform.platform(), "loadavg_1min_start": load0,
                      "loadavg_1min_end": os.getloadavg()[0]}
    fig["total_s"] = time.perf_counter() - t0
    rows = table(fig)
    fig["table"] = [dict(zip(["measurement", "ours", "baseline", "ratio", "target", "met"], r))
                    for r in rows]
    print(f"\nbench_world ({'quick' if opts.quick else 'full'}; {os.cpu_count()} CPUs; "
          f"total {fig['total_s']:.0f} s; 1-min load average {load0:.1f} at start, "
          f"{fig['machine']['loadavg_1min_end']:.1f} at end)")
    print_table(rows)
    for n in notes(fig):
        print(f"* {n}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(fig, f, indent=2)
        print(f"figures written to {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
