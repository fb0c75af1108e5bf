"""Rank-side targets of tests/world/test_gloo.py: torch.distributed's gloo in a world.

Each function runs on every rank and reports what it observed (values, or the
exception a call raised) for the test to compare with what real gloo does.
"""

from __future__ import annotations

import datetime
import os
import time
from typing import Any

import torch
import torch.distributed as dist


def _init(method: str = "xla://", timeout_s: float | None = None) -> tuple[int, int]:
    kwargs: dict[str, Any] = {}
    if timeout_s is not None:
        kwargs["timeout"] = datetime.timedelta(seconds=timeout_s)
    if method == "xla://":
        import torch_xla.distributed.xla_backend  # noqa: F401 - registers xla://

        dist.init_process_group("gloo", init_method="xla://", **kwargs)
    else:
        if "RANK" not in os.environ:  # in a world: as a launcher on each host would set them
            import torch_xla.runtime as xr

            os.environ.update(RANK=str(xr.global_ordinal()), WORLD_SIZE=str(xr.world_size()),
                              MASTER_ADDR=os.environ["TPU_WORKER_HOSTNAMES"].split(",")[0],
                              MASTER_PORT="29500")
        dist.init_process_group("gloo", init_method=method, **kwargs)
    return dist.get_rank(), dist.get_world_size()


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the exception is the observation
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"returned": True}


def collectives(method: str = "xla://") -> dict[str, Any]:
    """Every collective once, and the object collectives torch builds from them."""
    rank, size = _init(method)
    out: dict[str, Any] = {"rank": rank, "size": size, "backend": dist.get_backend()}
    t = torch.tensor([float(rank + 1), 2.0])
    dist.all_reduce(t)
    out["all_reduce"] = t.tolist()
    m = torch.tensor([rank], dtype=torch.int64)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    out["max"] = m.item()
    b = torch.tensor([rank * 10.0])
    dist.broadcast(b, src=size - 1)
    out["broadcast"] = b.item()
    gathered = [torch.zeros(2, dtype=torch.int32) for _ in range(size)]
    dist.all_gather(gathered, torch.tensor([rank, rank * rank], dtype=torch.int32))
    out["all_gather"] = [g.tolist() for g in gathered]
    flat = torch.zeros(size * 2)
    dist.all_gather_into_tensor(flat, torch.tensor([float(rank), 1.0]))
    out["all_gather_into_tensor"] = flat.tolist()
    objs: list[Any] = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "name": f"r{rank}"})
    out["all_gather_object"] = objs
    lst = [{"from": rank}]
    dist.broadcast_object_list(lst, src=0)
    out["broadcast_object_list"] = lst[0]
    dist.barrier()
    rs = torch.zeros(1)
    dist.reduce_scatter_tensor(rs, torch.arange(size, dtype=torch.float32) * (rank + 1))
    out["reduce_scatter_tensor"] = rs.item()
    sc = torch.zeros(1)
    dist.scatter(sc, [torch.tensor([float(i * 7)]) for i in range(size)] if rank == 0 else None,
                 src=0)
    out["scatter"] = sc.item()
    gl = [torch.zeros(1) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.tensor([float(rank)]), gl, dst=0)
    out["gather"] = [g.item() for g in gl] if gl is not None else None
    if size > 1:
        sub = dist.new_group(ranks=[0, 1])
        if rank in (0, 1):
            s = torch.tensor([1.0])
            dist.all_reduce(s, group=sub)
            out["subgroup"] = s.item()
    dist.destroy_process_group()
    return out


def one_rank_exits(method: str = "xla://") -> dict[str, Any]:
    """The last rank returns after the first collective; the others call another."""
    rank, size = _init(method)
    t = torch.ones(1)
    dist.all_reduce(t)
    if rank == size - 1:
        return {"rank": rank, "left": True}
    time.sleep(1.0)  # world time: the peer is gone by then
    return {"rank": rank, **_outcome(dist.all_reduce, torch.ones(1))}


def one_rank_never_calls(timeout_s: float = 60.0, method: str = "env://") -> dict[str, Any]:
    """The last rank stays alive and never calls; the others' all_reduce times out."""
    rank, size = _init(method, timeout_s)
    if rank == size - 1:
        time.sleep(timeout_s * 2)
        return {"rank": rank, "slept": True}
    started = time.time()
    outcome = _outcome(dist.all_reduce, torch.ones(1))
    return {"rank": rank, **outcome, "waited": round(time.time() - started, 3)}


def store_ops() -> dict[str, Any]:
    """The world's store as TCPStore answers: one set of keys, blocking get."""
    rank, size = _init("xla://")
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        time.sleep(5)  # world time: the others' get waits for it
        store.set("answer", "42")
    value = store.get("answer")
    n = store.add("arrived", 1)
    dist.barrier()
    return {"rank": rank, "value": value.decode(), "added": n,
            "total": int(store.add("arrived", 0)), "pid_env": os.environ.get("RANK")}
