"""Rank targets for ``bench_world.py``.

Run inside harness worlds as ``benchmarks/targets.py:NAME``. ``torch`` is
imported at module level on purpose: the harness reads this file's imports
and preloads them in the fork server, so every rank has torch already
imported, as every rank of the baseline (a fresh interpreter that imports
torch) has.
"""

from __future__ import annotations

import time

import torch


def ordinal() -> int:
    """The trivial target: return this rank's ordinal."""
    import torch_xla.runtime as xr

    return xr.global_ordinal()


def file_loop(iters: int) -> int:
    """``iters`` times: look this rank's own file up, open it, read it (about three file
    operations the view sees, each a turn on the world's clock since issue 45), after
    writing it once. Returns the bytes read."""
    import os

    import torch_xla.runtime as xr

    path = f"/tmp/bench-files/rank-{xr.global_ordinal()}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("x" * 100)
    read = 0
    for _ in range(iters):
        if os.path.exists(path):
            with open(path) as f:
                read += len(f.read())
    return read


def rendezvous_loop(iters: int, warmup: int) -> list[float]:
    """Seconds per empty ``xm.rendezvous``, measured on this rank, ``iters`` calls."""
    import torch_xla.core.xla_model as xm

    for i in range(warmup):
        xm.rendezvous(f"bench-warmup-{i}")
    clock = time.perf_counter
    times = []
    for _ in range(iters):
        t0 = clock()
        xm.rendezvous("bench")
        times.append(clock() - t0)
    return times


def all_reduce_loop(numel: int, iters: int, warmup: int) -> dict:
    """Seconds per ``xm.all_reduce('sum', t)`` of a float32 tensor of ``numel`` elements."""
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    rank, world = xr.global_ordinal(), xr.world_size()
    t = torch.full((numel,), float(rank + 1), dtype=torch.float32)
    expected = world * (world + 1) / 2
    for _ in range(warmup):
        xm.all_reduce("sum", t)
    xm.rendezvous("bench-start")
    clock = time.perf_counter
    times = []
    out = t
    for _ in range(iters):
        t0 = clock()
        out = xm.all_reduce("sum", t)
        times.append(clock() - t0)
    ok = bool(out.shape == t.shape and out[0].item() == expected and out[-1].item() == expected)
    return {"times": times, "correct": ok}


def _memory(pid: int | str) -> dict[str, int]:
    """kB figures of a process: Pss/Rss/Anonymous (smaps_rollup) and VmPTE (status)."""
    out = {}
    for name in ("smaps_rollup", "status"):
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[-1] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[1])
    return {k: out.get(k, 0) for k in ("Pss", "Rss", "Anonymous", "VmPTE")}


def memory_probe() -> dict:
    """Every rank's memory, read while every rank of the world is alive.

    Between two rendezvous no rank can have exited, so the PSS figures of all
    ranks are read against the same set of processes sharing the pages. Rank 0
    also reads its leader and the fork server above it.
    """
    import os

    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    xm.rendezvous("bench-all-up")
    out = {"self": _memory("self")}
    if xr.global_ordinal() == 0:
        leader = os.getppid()
        with open(f"/proc/{leader}/stat") as f:
            server = int(f.read().rpartition(")")[2].split()[1])
        out["leader"], out["fork_server"] = _memory(leader), _memory(server)
    xm.rendezvous("bench-measured")
    return out
