"""Rank-side targets of tests/world/test_xla_backend.py and tests/world/test_parallel_loader.py.

Every function runs on every rank of a harness world against the fake
torch_xla and returns plain observations (lists, numbers, strings) for the
test to compare with what torch_xla 2.9 does (the upstream expectations of
test/pjrt/test_collective_ops_tpu.py, and xla_backend.py / parallel_loader.py
themselves). A target reports; it does not assert, so one world checks many
things and a failure names exactly what differs.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
import torch.distributed as dist


def _init() -> tuple[int, int]:
    """``dist.init_process_group('xla', init_method='xla://')`` as user code does it."""
    import torch_xla.distributed.xla_backend  # noqa: F401 - registers the backend

    dist.init_process_group("xla", init_method="xla://")
    return dist.get_rank(), dist.get_world_size()


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """What a call did: returned, or raised (type and message)."""
    try:
        fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the exception is the observation
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"returned": True}


# -- torch.distributed collectives ---------------------------------------------

def identity() -> dict[str, Any]:
    """Who torch.distributed thinks this rank is, next to what the runtime says."""
    import torch_xla.runtime as xr

    rank, size = _init()
    return {
        "rank": rank, "world_size": size, "backend": dist.get_backend(),
        "ordinal": xr.global_ordinal(), "runtime_world_size": xr.world_size(),
        "initialized": dist.is_initialized(), "group_class": type(dist.group.WORLD).__name__,
        "backend_name": dist.group.WORLD.getBackendName(),
    }


def store_after_rank0_returned(regroup: bool = False) -> dict[str, Any]:
    """Rank 0 returns right after init (or a new group's barrier); the others use the store
    once it has gone: the world's store outlives the rank that "serves" it, as the real one
    does where torch_xla's runtime holds every process until all are done."""
    rank, n = _init()
    if regroup:
        dist.all_reduce(torch.zeros(1))
        dist.new_group(ranks=list(range(n)))
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        store.set("rank0-returning", "1")
        return {"rank": rank}
    store.add("workers", 1)
    store.wait(["rank0-returning"])
    time.sleep(1.0)  # world time: rank 0 has exited by then
    return {"rank": rank, "joined": int(store.add("workers", 0))}


def rank0_raises_after_init() -> dict[str, Any]:
    """Rank 0 raises after init while the others wait for it in a collective (a config that
    fails validation): rank 0's error must be reported, not hidden behind its store."""
    rank, _ = _init()
    if rank == 0:
        raise ValueError("rank 0's config fails validation")
    dist.all_reduce(torch.zeros(1))
    return {"rank": rank}


def worker_dies_after_init() -> dict[str, Any]:
    """Rank 1 is killed right after init: rank 0, which returns, must not wait for it."""
    import os
    import signal

    rank, _ = _init()
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"rank": rank}


def collectives() -> dict[str, Any]:
    """The upstream expectations of test_collective_ops_tpu.py, plus the rest of the API."""
    rank, n = _init()
    out: dict[str, Any] = {"rank": rank, "world_size": n}

    # all_reduce: the ordinals sum (upstream), and the other supported ops.
    t = torch.tensor([rank], dtype=torch.float)
    dist.all_reduce(t, dist.ReduceOp.SUM)
    out["all_reduce_sum"] = t.tolist()
    for name, op in [("product", dist.ReduceOp.PRODUCT), ("min", dist.ReduceOp.MIN),
                     ("max", dist.ReduceOp.MAX)]:
        t = torch.tensor([rank + 1.0, 10.0 - rank])
        dist.all_reduce(t, op)
        out[f"all_reduce_{name}"] = t.tolist()
    for name, op in [("band", dist.ReduceOp.BAND), ("bor", dist.ReduceOp.BOR)]:
        t = torch.tensor([1 << rank, 0xFF ^ (1 << rank)], dtype=torch.int64)
        dist.all_reduce(t, op)
        out[f"all_reduce_{name}"] = t.tolist()

    # all_gather_into_tensor: concatenated or stacked, as the output's shape says.
    concat = torch.empty(n)
    dist.all_gather_into_tensor(concat, torch.tensor([float(rank)]))
    stack = torch.empty(n, 1)
    dist.all_gather_into_tensor(stack, torch.tensor([float(rank)]))
    out["all_gather_into_tensor_concat"] = concat.tolist()
    out["all_gather_into_tensor_stack"] = stack.tolist()
    out["all_gather_into_tensor_bad_shape"] = _outcome(
        dist.all_gather_into_tensor, torch.empty(n + 1), torch.tensor([float(rank)]))

    # all_gather into a list, of a vector and of a scalar.
    gathered = [torch.zeros(1) for _ in range(n)]
    dist.all_gather(gathered, torch.tensor([float(rank)]))
    out["all_gather"] = [g.tolist() for g in gathered]
    scalars = [torch.tensor(0) for _ in range(n)]
    dist.all_gather(scalars, torch.tensor(rank * 10))
    out["all_gather_scalar"] = [s.tolist() for s in scalars]

    # reduce_scatter_tensor of arange(2n): rank i gets [2i*n, (2i+1)*n] (upstream).
    rs = torch.zeros(2)
    dist.reduce_scatter_tensor(rs, torch.arange(n * 2, dtype=torch.float))
    out["reduce_scatter_tensor"] = rs.tolist()
    # reduce_scatter of a list: piece j of every rank, summed, lands on rank j.
    rsl = torch.zeros(1)
    dist.reduce_scatter(rsl, [torch.tensor([float(100 * j + rank)]) for j in range(n)])
    out["reduce_scatter_list"] = rsl.tolist()

    # all_to_all_single of [ordinal] * 2n: the ordinals, each twice (upstream).
    a2a = torch.zeros(n * 2)
    dist.all_to_all_single(a2a, torch.tensor([float(rank)] * (n * 2)))
    out["all_to_all_single"] = a2a.tolist()
    out["all_to_all_single_splits"] = _outcome(
        dist.all_to_all_single, torch.zeros(n), torch.zeros(n), [1] * n, [1] * n)
    # all_to_all of lists: element j of rank i becomes element i of rank j.
    outs = [torch.zeros(1) for _ in range(n)]
    dist.all_to_all(outs, [torch.tensor([float(10 * rank + j)]) for j in range(n)])
    out["all_to_all"] = [o.tolist() for o in outs]

    # broadcast from the last rank.
    b = torch.tensor([float(rank), -1.0])
    dist.broadcast(b, src=n - 1)
    out["broadcast"] = b.tolist()

    # reduce: only dst gets the sum; the others keep their input.
    dst = n - 1
    r = torch.tensor([float(rank + 1)])
    dist.reduce(r, dst=dst)
    out["reduce"] = r.tolist()

    # gather: only dst gets the list; the others' gather_list stays None.
    g_in = torch.tensor([float(rank), float(rank * rank)])
    g_list = [torch.full((2,), -1.0) for _ in range(n)] if rank == 0 else None
    dist.gather(g_in, g_list, dst=0)
    out["gather"] = [x.tolist() for x in g_list] if g_list is not None else None
    out["gather_input"] = g_in.tolist()

    # scatter [[0], [1], ...] from rank 0: rank i receives [i] (upstream).
    s_out = torch.tensor([-1.0])
    s_in = [torch.tensor([float(i)]) for i in range(n)] if rank == 0 else None
    dist.scatter(s_out, s_in, src=0)
    out["scatter"] = s_out.tolist()

    # an async work is already complete and its wait() returns.
    t = torch.tensor([1.0])
    work = dist.all_reduce(t, async_op=True)
    out["async_completed_before_wait"] = work.is_completed()
    out["async_wait"] = work.wait()
    out["async_result"] = t.tolist()
    return out


def send_recv_ring() -> dict[str, Any]:
    """Each rank sends its ordinal to the next and receives the previous one's."""
    rank, n = _init()
    mine = torch.tensor([float(rank), float(rank) * 2])
    got = torch.full((2,), -1.0)
    nxt, prev = (rank + 1) % n, (rank - 1) % n
    # Even ranks send first, odd ranks receive first: no rank waits on a send.
    if rank % 2 == 0:
        dist.send(mine, nxt)
        src = dist.recv(got, prev)
    else:
        src = dist.recv(got, prev)
        dist.send(mine, nxt)
    return {"rank": rank, "got": got.tolist(), "src": src, "sent": mine.tolist()}


def send_recv_order() -> dict[str, Any]:
    """Rank 0 sends three tensors to rank 1 with tags; rank 1 receives them in order."""
    rank, n = _init()
    if rank == 0:
        for i in range(3):
            dist.send(torch.tensor([float(i)]), 1, tag=10 - i)
        return {"rank": rank}
    if rank == 1:
        got = []
        for tag in (8, 9, 10):  # tags in the other order: the real backend ignores them
            t = torch.zeros(1)
            dist.recv(t, 0, tag=tag)
            got.append(t.item())
        return {"rank": rank, "got": got}
    return {"rank": rank}


def recv_wrong_shape() -> dict[str, Any]:
    """Rank 1 receives a 2-element tensor into a 3-element one."""
    rank, _ = _init()
    if rank == 0:
        dist.send(torch.zeros(2), 1)
        return {"rank": rank}
    if rank == 1:
        return {"rank": rank, **_outcome(dist.recv, torch.zeros(3), 0)}
    return {"rank": rank}


def invalid_reduce_ops() -> dict[str, Any]:
    """BXOR is not implemented; AVG (and the rest) are invalid, through every reducing call."""
    rank, n = _init()
    return {
        "bxor": _outcome(dist.all_reduce, torch.tensor([1], dtype=torch.int64),
                         dist.ReduceOp.BXOR),
        "avg": _outcome(dist.all_reduce, torch.tensor([1.0]), dist.ReduceOp.AVG),
        "reduce_bxor": _outcome(dist.reduce, torch.tensor([1]), 0, dist.ReduceOp.BXOR),
        "reduce_scatter_avg": _outcome(dist.reduce_scatter_tensor, torch.zeros(1),
                                       torch.zeros(n), dist.ReduceOp.AVG),
        # still usable afterwards: nothing was sent
        "sum_after": _sum_of_ordinals(rank),
    }


def _sum_of_ordinals(rank: int) -> float:
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    return t.item()


def barrier_timing(sleep_s: float) -> dict[str, Any]:
    """Rank 0 sleeps before its barrier; every other rank times its own barrier."""
    rank, _ = _init()
    if rank == 0:
        time.sleep(sleep_s)
    entered = time.monotonic()  # CLOCK_MONOTONIC is shared by every process of the machine
    work = dist.barrier(async_op=True)
    completed = work.is_completed()
    dist.barrier()
    left = time.monotonic()
    return {"rank": rank, "entered": entered, "left": left, "async_completed": completed}


def object_collectives() -> dict[str, Any]:
    """torch's object collectives fail on the xla backend (pytorch/xla#5492)."""
    rank, n = _init()
    out: dict[str, Any] = {"rank": rank}
    objs: list[Any] = [{"lr": 0.1, "run": "abc"}] if rank == 0 else [None]
    out["broadcast_object_list"] = _outcome(dist.broadcast_object_list, objs, src=0)
    out["object_list_after"] = repr(objs)
    gathered: list[Any] = [None] * n
    out["all_gather_object"] = _outcome(dist.all_gather_object, gathered, {"rank": rank})
    out["gather_object"] = _outcome(dist.gather_object, rank,
                                    [None] * n if rank == 0 else None, dst=0)
    # a plain tensor collective still works after them: no rank is left half-way.
    out["sum_after"] = _sum_of_ordinals(rank)
    return out


def reinit() -> dict[str, Any]:
    """init, destroy, init again: the store is made once per process, as on the real one."""
    from torch_xla._internal import rendezvous as xb

    rank, _ = _init()
    first_store = xb._store
    dist.destroy_process_group()
    destroyed = not dist.is_initialized()
    rank2, n2 = _init()
    return {"rank": rank, "rank2": rank2, "destroyed": destroyed,
            "same_store": xb._store is first_store, "sum": _sum_of_ordinals(rank2)}


def store_shared() -> dict[str, Any]:
    """The default store is one store for the world: what rank 0 sets, every rank reads."""
    rank, _ = _init()
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        store.set("run-name", "from-rank-0")
    value = store.get("run-name").decode()
    dist.all_reduce(torch.zeros(1))  # rank 0 serves the store: keep it until all have read
    return {"rank": rank, "value": value}


def new_group_world() -> dict[str, Any]:
    """dist.new_group over every rank: an XLA group whose mesh is the whole world."""
    rank, n = _init()
    group = dist.new_group(ranks=list(range(n)))
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=group)
    return {"rank": rank, "mesh": group._mesh, "sum": t.item(),
            "class": type(group).__name__}


def infer_mesh(cases: list[tuple[list[int], int]]) -> list[dict[str, Any]]:
    """The real backend's mesh inference for SPMD subgroups (a pure function), per case."""
    from torch_xla.distributed import xla_backend

    out = []
    for slice_ranks, world_size in cases:
        try:
            out.append({"mesh": xla_backend._infer_mesh(slice_ranks, world_size)})
        except ValueError as exc:
            out.append({"raised": "ValueError", "message": str(exc)})
    return out


def send_recv_warning() -> dict[str, Any]:
    """send/recv log the real backend's warning about point-to-point on XLA."""
    records: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logging.getLogger("torch_xla").addHandler(_Keep())
    rank, n = _init()
    if n > 1:
        if rank == 0:
            dist.send(torch.zeros(1), 1)
        elif rank == 1:
            dist.recv(torch.zeros(1), 0)
    return {"rank": rank, "records": records}


def dummy_store() -> dict[str, Any]:
    """TORCH_DIST_INIT_BARRIER=0 XLA_USE_DUMMY_STORE=1: a dummy store and no handshake."""
    from torch_xla._internal import rendezvous as xb

    rank, _ = _init()
    return {"rank": rank, "store": type(xb._store).__name__, "sum": _sum_of_ordinals(rank)}


# -- parallel_loader -------------------------------------------------------------

class _Counting:
    """Counts torch_xla.sync() calls and the batches yielded before each one."""

    def __init__(self) -> None:
        import torch_xla

        self.calls: list[int] = []
        self.yielded = 0
        self._orig = torch_xla.sync
        torch_xla.sync = self  # type: ignore[assignment]

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(self.yielded)

    def restore(self) -> None:
        import torch_xla

        torch_xla.sync = self._orig  # type: ignore[assignment]


def _dataset(rank: int, n_items: int) -> Any:
    from torch.utils.data import TensorDataset

    x = torch.arange(n_items, dtype=torch.float).unsqueeze(1) + 1000 * rank
    y = torch.arange(n_items)
    return TensorDataset(x, y)


def mp_device_loader(n_items: int, batch_size: int, batches_per_execution: int = 1) -> dict[str, Any]:
    """MpDeviceLoader over a DataLoader: the batches, their device, and when sync() ran."""
    import torch_xla
    import torch_xla.runtime as xr
    from torch.utils.data import DataLoader
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    rank = xr.global_ordinal()
    cpu_loader = DataLoader(_dataset(rank, n_items), batch_size=batch_size)
    loader = MpDeviceLoader(cpu_loader, torch_xla.device(),
                            batches_per_execution=batches_per_execution)
    counting = _Counting()
    batches, kinds, devices = [], [], []
    try:
        for batch in loader:
            counting.yielded += 1
            x, y = batch
            batches.append((x.squeeze(1).tolist(), y.tolist()))
            devices.append(str(x.device))
            kinds.append(type(batch).__name__)
            x.add_(1)  # a moved batch is a copy: the dataset must not change
    finally:
        counting.restore()
    second = [x.squeeze(1).tolist() for x, _ in loader]
    return {"rank": rank, "len": len(loader), "batches": batches, "devices": devices,
            "batch_types": kinds, "sync_calls": counting.calls, "second_epoch": second,
            "dataset_after": cpu_loader.dataset.tensors[0].squeeze(1).tolist()}


def parallel_loader_devices(n_items: int) -> dict[str, Any]:
    """ParallelLoader over two devices: sample i goes to devices[i % 2], tails are dropped."""
    import torch_xla
    from torch.utils.data import DataLoader
    from torch_xla.distributed.parallel_loader import ParallelLoader

    cpu_loader = DataLoader(list(range(n_items)), batch_size=1)
    pl = ParallelLoader(cpu_loader, ["xla:0", "xla:1"])
    first = pl.per_device_loader(torch_xla.device())  # 'xla:0' is this rank's device
    second = pl.per_device_loader("xla:1")
    # all of the first device, then all of the second: each queue keeps its own share
    got_first = [b.tolist() for b in first]
    got_second = [b.tolist() for b in second]
    unknown = _outcome(lambda: next(iter(pl.per_device_loader("xla:2"))))
    return {"first": got_first, "second": got_second,
            "per_device_samples": pl.per_device_samples(), "len_first": len(first),
            "unknown_device": unknown}


def parallel_loader_structures() -> dict[str, Any]:
    """What send_cpu_data_to_device does to a batch: tuples become lists, tensors copies."""
    import torch_xla
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    shared = torch.tensor([7.0])
    param = torch.nn.Parameter(torch.tensor([1.0]))
    batch = {"pair": (shared, shared), "param": param, "n": 3, "name": "b0",
             "nested": [{"t": torch.tensor([2.0])}]}
    loader = MpDeviceLoader([batch], torch_xla.device())
    (got,) = list(loader)
    return {
        "pair_type": type(got["pair"]).__name__,
        "pair_same_object": got["pair"][0] is got["pair"][1],
        "pair_is_copy": got["pair"][0] is not shared,
        "param_same_object": got["param"] is param,
        "scalars": [got["n"], got["name"]],
        "nested": got["nested"][0]["t"].tolist(),
        "len": len(loader),
    }


class _Failing(torch.utils.data.Dataset):
    """A dataset whose item ``bad`` raises OSError(EIO), as a flaky disk does."""

    def __init__(self, n: int, bad: int) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        if i == self.bad:
            import errno

            raise OSError(errno.EIO, "Input/output error")
        return torch.tensor([float(i)])


def loader_error(n: int, bad: int) -> dict[str, Any]:
    """A DataLoader that raises part-way: the real loader thread dies and the epoch ends early."""
    import torch_xla
    from torch.utils.data import DataLoader
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    records: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage() + ("|exc" if record.exc_info else ""))

    logging.getLogger("torch_xla").addHandler(_Keep())
    loader = MpDeviceLoader(DataLoader(_Failing(n, bad), batch_size=1), torch_xla.device())
    got = [b.item() for b in loader]
    return {"got": got, "records": records}


def loader_close() -> dict[str, Any]:
    """ParallelLoader.close() ends every per-device iterator."""
    import torch_xla
    from torch_xla.distributed.parallel_loader import ParallelLoader

    pl = ParallelLoader(list(range(5)), [torch_xla.device()])
    it = pl.per_device_loader(torch_xla.device())
    first = next(it)
    pl.close()
    rest = list(it)
    return {"first": first, "rest": rest}
