"""Rank-side targets of tests/world/test_shim_profiles.py: what a script sees of the ``xla``
backend and the device helpers under each API profile. A target reports; it does not
assert, so one world per profile checks every difference."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """What a call did: returned (what), or raised (type and message)."""
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the exception is the observation
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"returned": value}


def backend_ops() -> dict[str, Any]:
    """Each operation whose presence differs between 2.7, 2.8 and 2.9, on every rank."""
    import torch_xla
    import torch_xla.distributed.xla_backend  # noqa: F401 - registers the backend

    dist.init_process_group("xla", init_method="xla://")
    rank, n = dist.get_rank(), dist.get_world_size()
    mine = torch.tensor([float(rank + 1)])

    def gather() -> Any:
        out = [torch.zeros(1) for _ in range(n)] if rank == 0 else None
        dist.gather(mine, out, dst=0)
        return [t.item() for t in out] if out is not None else None

    def reduce() -> float:
        t = mine.clone()
        dist.reduce(t, dst=0)
        return t.item()

    def scatter() -> float:
        out = torch.zeros(1)
        dist.scatter(out, [torch.tensor([10.0 * i]) for i in range(n)] if rank == 0 else None, src=0)
        return out.item()

    def all_to_all() -> list[float]:
        outs = [torch.zeros(1) for _ in range(n)]
        dist.all_to_all(outs, [torch.tensor([float(rank * n + i)]) for i in range(n)])
        return [t.item() for t in outs]

    def all_gather_into_tensor() -> list[float]:
        out = torch.zeros(n)
        dist.all_gather_into_tensor(out, mine)
        return out.tolist()

    def send_recv() -> Any:
        if rank == 0:
            dist.send(mine, 1)
            return None
        got = torch.zeros(1)
        dist.recv(got, 0)
        return got.item()

    ops = {"gather": gather, "reduce": reduce, "scatter": scatter, "all_to_all": all_to_all,
           "all_gather_into_tensor": all_gather_into_tensor, "send_recv": send_recv}
    observed = {name: _outcome(op) for name, op in ops.items()}
    observed["version"] = torch_xla.__version__
    return observed


def subgroup_broadcast() -> dict[str, Any]:
    """``dist.broadcast`` from each group's rank 1 in the subgroups [0, 1] and [2, 3] of four
    ranks (an SPMD mesh, as upstream's tests make one): ``src`` 1 and 3, group rank 1 in
    both, which 2.7 and 2.8 passed to the collective as the global ordinal."""
    import torch_xla.distributed.xla_backend  # noqa: F401 - registers the backend

    dist.init_process_group("xla", init_method="xla://")
    rank = dist.get_rank()
    options = {"xla_pg_options": {"spmd": True}}
    groups = [dist.new_group([0, 1], pg_options=options), dist.new_group([2, 3], pg_options=options)]
    t = torch.tensor([float(rank + 1)])
    dist.broadcast(t, src=1 if rank < 2 else 3, group=groups[rank // 2])
    return {"rank": rank, "value": t.item(), "mesh": groups[rank // 2]._mesh}
