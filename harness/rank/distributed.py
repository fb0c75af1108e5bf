"""torch.distributed in a world: gloo's process groups and the stores, on the world's clock.

Real gloo moves bytes over TCP and waits on the machine's clock: a peer sleeping 20
world seconds cost a minute of wall time, and a world's verdict depended on the
machine. So in a rank of a simulated world, torch's own ``init_process_group`` and
``new_group`` run unchanged, but the gloo backend they construct is
``WorldGloo``: a process group whose collectives are calls to the world
(``world/groups.py``), and the stores ``env://`` and ``tcp://`` create are the world's
(``WorldStore``, ``world/stores.py``), as ``xla://``'s is (the shim asks the runtime
for it). Every wait is a world-clock wait with the group's or store's timeout.

What a member sees is what gloo does:

- a peer's process gone (exited, killed, pre-empted) closes every group it had joined:
  a member waiting in one of its collectives, and every later call on it, raises
  gloo's ``RuntimeError: [...pair.cc] Connection closed by peer``;
- a peer alive that never calls leaves the others waiting until the group's timeout
  (30 minutes by default, world time), then gloo's ``Timed out waiting ... for recv``;
- ``barrier()`` waits for every member (unlike the ``xla`` backend's);
- torch's object collectives (``all_gather_object``, ``broadcast_object_list``...) work,
  as torch builds them from these collectives on CPU tensors.

Departures: a ``send`` is buffered (gloo's returns a work the receive completes);
``recv``, ``send`` and ``all_to_all_single`` with uneven splits have no timeout;
``ReduceOp.AVG`` and ``BXOR`` are refused. A store the user constructs themselves
(``dist.TCPStore(...)``) is a real one. Only the process groups torch creates through
``init_process_group``/``new_group`` are the world's.
"""

from __future__ import annotations

import datetime
import os
import sys
from types import SimpleNamespace
from typing import Any

from harness.rank import runtime

_GLOO_SITE = {  # where the torch release's gloo raises (its build's path and line)
    "2.9": "/pytorch/third_party/gloo/gloo/transport/tcp/",
    "2.13": "/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/",
}
_STORE_TIMEOUT = datetime.timedelta(seconds=300)  # TCPStore's default


def _request(header: dict, payload: bytes = b"") -> tuple[dict, bytearray]:
    """A call to the world from this rank (a launcher using torch.distributed becomes its
    host's rank, as one using the XLA runtime does)."""
    ctx = runtime.current()
    if ctx.role == "host":
        runtime.promote_host_to_rank()
        ctx = runtime.current()
    assert ctx.channel is not None
    return ctx.channel.request(header, payload)


_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _site() -> str | None:
    """``file:line in function`` of the user's code that called torch.distributed."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_HARNESS_DIR) and "/torch/" not in name \
                and "/torch_xla/" not in name:
            return f"{os.path.basename(name)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return None


def _ms(timeout: Any) -> int:
    return int(timeout.total_seconds() * 1000) if isinstance(timeout, datetime.timedelta) \
        else int(float(timeout) * 1000)


def _new_torch() -> bool:
    import torch

    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return (major, minor) >= (2, 13)


def _gloo_error(where: str, text: str) -> RuntimeError:
    prefix = _GLOO_SITE["2.13" if _new_torch() else "2.9"]
    return RuntimeError(f"[{prefix}{where}] {text}")


def closed_by_peer(peer: int) -> RuntimeError:
    """What gloo raises in a member when ``peer``'s process has gone."""
    spec = runtime.current().spec
    host = spec.topology.hostname(spec.topology.host_of(peer))
    text = f"Connection closed by peer [{host}]:{29500 + peer}"
    if _new_torch():
        return _gloo_error("pair.cc:553", text + ". This is typically caused by a remote worker "
                           "crashing. Check the logs of the remote worker before reporting an "
                           "error. GLHF! \U0001f3d6\ufe0f")
    return _gloo_error("pair.cc:547", text)


# -- the store -------------------------------------------------------------------------

def _store_class() -> type:
    import torch.distributed as dist

    class WorldStore(dist.Store):
        """A store of the world, named by its address: every rank that opens it sees the
        same keys; ``get`` and ``wait`` wait on the world's clock."""

        def __init__(self, name: str, timeout: datetime.timedelta = _STORE_TIMEOUT) -> None:
            super().__init__()
            self.name = name
            self.set_timeout(timeout)

        def _op(self, op: str, keys: list[str], payload: bytes = b"", *, amount: int = 0,
                split: int = 0, timeout: Any = None) -> tuple[dict, bytearray]:
            blocking = op in ("get", "wait")
            limit = _ms(timeout if timeout is not None else self.timeout) if blocking else None
            reply, data = _request({"type": "store", "store": self.name, "op": op,
                                    "keys": keys, "amount": amount, "split": split,
                                    "timeout_ms": limit, "site": _site()}, payload)
            if "timed_out" in reply:
                raise dist.DistStoreError(
                    f"wait timeout after {reply['timed_out']}ms, keys: "
                    + ", ".join(f"/{k}" for k in keys))
            return reply, data

        def set(self, key: str, value: Any) -> None:
            self._op("set", [key], _bytes(value))

        def get(self, key: str) -> bytes:
            return bytes(self._op("get", [key])[1])

        def add(self, key: str, amount: int) -> int:
            return int(self._op("add", [key], amount=int(amount))[0]["value"])

        def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
            old, new = _bytes(expected), _bytes(desired)
            return bytes(self._op("compare_set", [key], old + new, split=len(old))[1])

        def wait(self, keys: list[str], timeout: Any = None) -> None:
            self._op("wait", list(keys), timeout=timeout)

        def check(self, keys: list[str]) -> bool:
            return bool(self._op("check", list(keys))[0]["value"])

        def delete_key(self, key: str) -> bool:
            return bool(self._op("delete", [key])[0]["value"])

        def num_keys(self) -> int:
            return int(self._op("num_keys", [])[0]["value"])

    return WorldStore


def _bytes(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


_WorldStore: type | None = None


def world_store(name: str, timeout: datetime.timedelta = _STORE_TIMEOUT) -> Any:
    """The world's store at ``name`` (``xla://``, ``tcp://HOST:PORT``)."""
    global _WorldStore
    if _WorldStore is None:
        _WorldStore = _store_class()
    return _WorldStore(name, timeout)


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", ""})


def _create_c10d_store(hostname: str, port: int, rank: int, world_size: int,
                       timeout: datetime.timedelta, use_libuv: bool = True) -> Any:
    """``env://`` and ``tcp://``'s store: the world's at that address (no socket: ranks of
    parallel worlds never collide on a port, and hosts need no shared network). A
    loopback address is the host's own: each host's ``127.0.0.1:29500`` is another store."""
    if not 0 <= port < 2**16:
        raise ValueError(f"port must have value from 0 to 65535 but was {port}.")
    if hostname in _LOOPBACK:
        spec = runtime.current().spec
        hostname = spec.topology.hostname(runtime.current().host)
    return world_store(f"tcp://{hostname}:{port}", timeout)


# -- the process group -------------------------------------------------------------------

def _tensor_bytes(t: Any) -> bytes:
    import torch

    flat = t.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def _from_bytes(data: Any, like: Any) -> Any:
    import torch

    if like.numel() == 0:
        return torch.empty_like(like, device="cpu")
    return torch.frombuffer(bytearray(data), dtype=like.dtype).reshape(like.shape)


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _meta(tensors: list[Any]) -> list[list[Any]]:
    return [[_dtype(t), list(t.shape), t.numel() * t.element_size()] for t in tensors]


def _group_class() -> type:
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import ProcessGroup

    reduce_names = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.PRODUCT: "mul",
                    dist.ReduceOp.MIN: "min", dist.ReduceOp.MAX: "max",
                    dist.ReduceOp.BAND: "and", dist.ReduceOp.BOR: "or"}

    def done(result: Any) -> Any:
        fut = torch.futures.Future()
        fut.set_result(result)
        return torch._C._distributed_c10d._create_work_from_future(fut)

    class WorldGloo(ProcessGroup):
        """The gloo backend of a world: torch's process group calls, as calls to the world."""

        def __init__(self, store: Any, rank: int, size: int,
                     timeout: datetime.timedelta = dist.default_pg_timeout) -> None:
            super().__init__(rank, size)
            self.store = store
            self.options = SimpleNamespace(timeout=timeout, global_ranks_in_group=None,
                                           group_name=None, _timeout=timeout)
            self._members: list[int] = []
            self._group_name = ""

        def getBackendName(self) -> str:  # noqa: N802 - torch's name
            return "gloo"

        def _set_group_name(self, name: str) -> None:
            self._group_name = name

        @property
        def group_name(self) -> str:
            return self._group_name

        def _set_sequence_number_for_group(self) -> None:
            """Where torch has gloo agree on a sequence number through the store, after its
            constructor connected every pair: the group's creation, every member's. The
            default group's members say through its store which process of the world each
            is (what gloo's full-mesh connect exchanges), so a group numbers its members as
            its launcher did: every process of the world, or a host's own (``torchrun
            --nnodes=1`` on each host)."""
            ctx = runtime.current()
            if ctx.role == "host":
                runtime.promote_host_to_rank()
                ctx = runtime.current()
            ranks = list(self.options.global_ranks_in_group or [])
            if ranks:  # a subgroup: its ranks are the default group's
                default = dist.distributed_c10d._get_default_group()
                world = getattr(default, "_members", None) or list(range(default.size()))
                self._members = [world[r] for r in ranks]
                op = "new_group"
            else:
                self.store.set(f"harness/world-rank/{self.rank()}", str(ctx.rank))
                self._members = [int(self.store.get(f"harness/world-rank/{r}"))
                                 for r in range(self.size())]
                op = "init_process_group"
            name = self.options.group_name or "default"
            self._name = f"{name}:{','.join(map(str, self._members))}"
            self._call(op, "gather_bytes", [], b"")

        def _timeout_ms(self) -> int:
            return _ms(self.options.timeout)

        def _call(self, op: str, kind: str, tensors: list[Any], payload: bytes,
                  **meta: Any) -> tuple[dict, bytearray]:
            reply, data = _request({"type": "collective", "op": op, "kind": kind,
                                    "group": self._name, "groups": [self._members],
                                    "tensors": _meta(tensors), "timeout_ms": self._timeout_ms(),
                                    "site": _site(), **meta}, payload)
            if "closed" in reply:
                raise closed_by_peer(int(reply["closed"]))
            if "timed_out" in reply:
                if op in ("init_process_group", "new_group"):
                    missing = reply.get("missing") or []
                    raise dist.DistStoreError(
                        f"wait timeout after {reply['timed_out']}ms, keys: "
                        + ", ".join(f"/{self._name}/cpu/rank_{self._members.index(m)}"
                                    for m in missing if m in self._members))
                raise _gloo_error("unbound_buffer.cc:78", f"Timed out waiting "
                                  f"{reply['timed_out']}ms for recv operation to complete")
            return reply, data

        def _global(self, group_rank: int) -> int:
            return self._members[group_rank]

        def _reduce_name(self, op: Any) -> str:
            for known, name in reduce_names.items():
                if op == known:
                    return name
            raise ValueError(f"Cannot use ReduceOp.{op} with the world's gloo (harness)")

        # -- reductions ----------------------------------------------------------
        def _reduced(self, op: str, tensors: list[Any], reduce_op: Any) -> bytearray:
            reduce = self._reduce_name(reduce_op)
            _, data = self._call(op, "reduce", tensors,
                                 b"".join(_tensor_bytes(t) for t in tensors), reduce=reduce)
            return data

        def _fill(self, tensors: list[Any], data: Any) -> None:
            offset = 0
            with torch.no_grad():
                for t in tensors:
                    n = t.numel() * t.element_size()
                    t.copy_(_from_bytes(memoryview(data)[offset:offset + n], t))
                    offset += n

        def allreduce(self, tensors: list[Any], opts: Any = None) -> Any:
            reduce_op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
            self._fill(tensors, self._reduced("all_reduce", tensors, reduce_op))
            return done(tensors)

        def allreduce_coalesced(self, tensors: list[Any], opts: Any = None) -> Any:
            return self.allreduce(tensors, opts)

        def reduce(self, tensors: list[Any], opts: Any) -> Any:
            data = self._reduced("reduce", tensors, opts.reduceOp)
            if self.rank() == opts.rootRank:
                self._fill(tensors, data)
            return done(tensors)

        def reduce_scatter(self, outputs: list[Any], inputs: list[list[Any]], opts: Any) -> Any:
            for output, pieces in zip(outputs, inputs):
                data = self._reduced("reduce_scatter", list(pieces), opts.reduceOp)
                n = output.numel() * output.element_size()
                with torch.no_grad():
                    output.copy_(_from_bytes(
                        memoryview(data)[self.rank() * n:(self.rank() + 1) * n], output))
            return done(outputs)

        def reduce_scatter_single(self, output: Any, input: Any, opts: Any) -> Any:  # noqa: A002
            data = self._reduced("reduce_scatter_tensor", [input], opts.reduceOp)
            n = output.numel() * output.element_size()
            with torch.no_grad():
                output.copy_(_from_bytes(
                    memoryview(data)[self.rank() * n:(self.rank() + 1) * n], output))
            return done(output)

        _reduce_scatter_base = reduce_scatter_single

        # -- gathers and broadcasts ----------------------------------------------
        def _gathered(self, op: str, tensors: list[Any]) -> list[memoryview]:
            """Every member's bytes, in group rank order."""
            reply, data = self._call(op, "gather", tensors,
                                     b"".join(_tensor_bytes(t) for t in tensors))
            pieces, offset = [], 0
            for size in reply["sizes"]:
                pieces.append(memoryview(data)[offset:offset + size])
                offset += size
            return pieces

        def allgather(self, outputs: list[list[Any]], inputs: list[Any], opts: Any = None) -> Any:
            for output_list, t in zip(outputs, inputs):
                for out, piece in zip(output_list, self._gathered("all_gather", [t])):
                    with torch.no_grad():
                        out.copy_(_from_bytes(piece, out))
            return done(outputs)

        def allgather_coalesced(self, outputs: list[list[Any]], inputs: list[Any],
                                opts: Any = None) -> Any:
            pieces = self._gathered("all_gather_coalesced", list(inputs))
            for member, piece in enumerate(pieces):
                self._fill([outs[member] for outs in outputs], piece)
            return done(outputs)

        def all_gather_single(self, output: Any, input: Any, opts: Any = None) -> Any:  # noqa: A002
            pieces = self._gathered("all_gather_into_tensor", [input])
            with torch.no_grad():
                output.copy_(_from_bytes(b"".join(pieces), output))
            return done([output])

        _allgather_base = all_gather_single

        def gather(self, outputs: list[list[Any]], inputs: list[Any], opts: Any) -> Any:
            pieces = self._gathered("gather", list(inputs))
            if self.rank() == opts.rootRank:
                for out, piece in zip(outputs[0], pieces):
                    with torch.no_grad():
                        out.copy_(_from_bytes(piece, out))
            return done(outputs)

        def broadcast(self, tensors: list[Any], opts: Any) -> Any:
            root = opts.rootRank
            payload = b"".join(_tensor_bytes(t) for t in tensors) if self.rank() == root else b""
            _, data = self._call("broadcast", "broadcast", tensors, payload,
                                 root=self._global(root))
            if self.rank() != root:
                self._fill(tensors, data)
            return done(tensors)

        def scatter(self, outputs: list[Any], inputs: list[list[Any]], opts: Any) -> Any:
            root = opts.rootRank
            payload = b"".join(_tensor_bytes(t) for t in inputs[0]) if self.rank() == root \
                else b""
            _, data = self._call("scatter", "broadcast", outputs, payload,
                                 root=self._global(root))
            out = outputs[0]
            n = out.numel() * out.element_size()
            with torch.no_grad():
                out.copy_(_from_bytes(memoryview(data)[self.rank() * n:(self.rank() + 1) * n],
                                      out))
            return done(outputs)

        def alltoall(self, outputs: list[Any], inputs: list[Any], opts: Any = None) -> Any:
            pieces = self._gathered("all_to_all", list(inputs))
            me = self.rank()
            for member, piece in enumerate(pieces):
                sizes = [t.numel() * t.element_size() for t in inputs]
                start = sum(sizes[:me])  # every member sends shapes in the same layout
                out = outputs[member]
                with torch.no_grad():
                    out.copy_(_from_bytes(piece[start:start + sizes[me]], out))
            return done(outputs)

        def all_to_all_single(self, output: Any, input: Any, output_splits: Any,  # noqa: A002
                              input_splits: Any, opts: Any = None) -> Any:
            if output_splits or input_splits:
                raise RuntimeError("harness: all_to_all_single with uneven splits is not "
                                   "modelled by the world's gloo")
            pieces = self._gathered("all_to_all_single", [input])
            n = input.numel() * input.element_size() // self.size()
            me = self.rank()
            with torch.no_grad():
                output.copy_(_from_bytes(b"".join(p[me * n:(me + 1) * n] for p in pieces),
                                         output))
            return done([output])

        alltoall_base = all_to_all_single

        # -- barriers and point to point -----------------------------------------
        def barrier(self, opts: Any = None) -> Any:
            """gloo's barrier waits for every member (the ``xla`` backend's does not)."""
            self._call("barrier", "gather_bytes", [], b"")
            return done([])

        def monitored_barrier(self, opts: Any = None, wait_all_ranks: bool = False) -> Any:
            return self.barrier(opts)

        def send(self, tensors: list[Any], dst: int, tag: int = 0) -> Any:
            for t in tensors:
                _request({"type": "send", "box": self._box(self.rank(), dst, tag),
                          "peer": self._global(dst), "site": _site()}, _tensor_bytes(t))
            return done(tensors)

        def recv(self, tensors: list[Any], src: int, tag: int = 0) -> Any:
            for t in tensors:
                _, data = _request({"type": "recv", "box": self._box(src, self.rank(), tag),
                                    "peer": self._global(src), "site": _site()})
                with torch.no_grad():
                    t.copy_(_from_bytes(data, t))
            return done(tensors)

        def _box(self, src: int, dst: int, tag: int) -> str:
            return f"gloo/{self._name}/{src}->{dst}/{tag}"

    return WorldGloo


def install(dist: Any) -> None:
    """Make ``torch.distributed``'s gloo and its ``env://``/``tcp://`` stores the world's
    in this rank (the module's docstring). Called when the rank imports torch.distributed."""
    import importlib

    c10d = importlib.import_module("torch.distributed.distributed_c10d")
    rendezvous = importlib.import_module("torch.distributed.rendezvous")  # the module, not
    c10d.ProcessGroupGloo = _group_class()  # torch.distributed.rendezvous, a function
    rendezvous._create_c10d_store = _create_c10d_store
