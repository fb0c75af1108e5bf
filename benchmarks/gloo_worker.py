"""One rank of the torch.distributed gloo baseline for ``bench_world.py``.

``python gloo_worker.py RANK WORLD PORT NUMEL ITERS WARMUP BARRIER_ITERS``: joins a
gloo process group on 127.0.0.1:PORT, times ``dist.all_reduce`` of a float32
tensor of NUMEL elements (ITERS calls after WARMUP) and ``dist.barrier()``
(BARRIER_ITERS calls), and prints one JSON line with the per-call seconds.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main(argv: list[str]) -> None:
    rank, world, port, numel, iters, warmup, barrier_iters = (int(a) for a in argv)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=120))
    t = torch.full((numel,), float(rank + 1), dtype=torch.float32)
    expected = world * (world + 1) / 2
    for _ in range(warmup):
        dist.all_reduce(t.clone())
    dist.barrier()
    clock = time.perf_counter
    times = []
    out = t
    for _ in range(iters):
        out = t.clone()  # dist.all_reduce is in place; xm.all_reduce of a tensor is out of place
        t0 = clock()
        dist.all_reduce(out)
        times.append(clock() - t0)
    correct = bool(out[0].item() == expected and out[-1].item() == expected)
    for _ in range(min(warmup, barrier_iters)):
        dist.barrier()
    barrier = []
    for _ in range(barrier_iters):
        t0 = clock()
        dist.barrier()
        barrier.append(clock() - t0)
    dist.destroy_process_group()
    print(json.dumps({"rank": rank, "all_reduce": times, "barrier": barrier, "correct": correct}))


if __name__ == "__main__":
    main(sys.argv[1:])
