"""``torch_xla.distributed.xla_backend``: the ``xla`` backend of torch.distributed.

Importing this module does what the real one does: it registers the ``xla``
backend (``ProcessGroupXla``), the ``xla://`` init_method and replaces
``dist.new_group`` with a version that gives XLA groups their replica mesh.
Every operation is built from the ``xm`` collectives of this shim, exactly as
torch_xla 2.9 builds them, so the coordinator sees (and records) the same
collectives a real pod would run. All our collectives block, so every work
returned here is already complete.

Behaviour kept on purpose because real code depends on it:

- ``barrier()`` is a no-op: it returns a completed work at once and
  synchronizes nothing, so code that guards a shared file with
  ``dist.barrier()`` races on a real pod and races here.
- The object collectives (``broadcast_object_list``, ``all_gather_object``,
  ``gather_object``, ``scatter_object_list``, ``send_object_list``,
  ``recv_object_list``) fail on every rank with a RuntimeError, before any
  communication, as on a real pod (pytorch/xla#5492): torch puts the pickled
  objects in CPU tensors and the XLA collectives refuse CPU tensors. Our
  tensors are all CPU tensors, so we recognise these calls by torch's frame on
  the stack instead. The real C++ text has changed between releases
  ("Input tensor is not an XLA tensor: ..." in #5492; 2.9 words its
  ``GetXlaTensor`` errors differently and which check trips first depends on
  the op), so we raise the phrase users search for, with the tensor's type as
  torch names it, and add which torch function built the CPU tensor and the
  issue number: the same type, the same cause, and a message a person can
  act on.
- AVG and the other reduce ops raise ``ValueError('Invalid reduce op ...')``
  and BXOR ``NotImplementedError('reduce op ...')``, the real messages.
- ``reduce``, ``alltoall``, ``all_to_all_single``, ``gather``, ``scatter``,
  ``send`` and ``recv`` use global ordinals and the whole world exactly where
  the real methods do (they ignore a subgroup's mesh), so code that uses them
  on a subgroup misbehaves here as it would there.

The group answers to both torch's old and new method names: torch 2.9 (the
release torch_xla 2.9 pairs with) calls ``_allgather_base``,
``_reduce_scatter_base`` and ``alltoall_base``, later torch (2.13 here) calls
``all_gather_single``, ``reduce_scatter_single`` and ``all_to_all_single``;
without the new names ``all_gather_into_tensor`` and ``reduce_scatter_tensor``
would fail here where they work on a pod.

Under the ``2.7`` and ``2.8`` profiles the group is that release's (``_before`` marks each
difference; ``legacy`` keeps 2.9's group): ``reduce``, ``gather`` and ``all_to_all`` (and
``scatter`` in 2.7) raise a bare ``NotImplementedError``; ``send``/``recv`` raise it too
(their ``make_send_channel_id`` / ``make_recv_channel_id`` placeholders), without the
inefficiency warning; ``broadcast`` takes the group's root rank as a global ordinal (2.9
translates it: a subgroup's broadcast then reads from the wrong rank, or from none in the
group); and in 2.7 ``all_gather_into_tensor`` hands its tensors to ``allgather``, which fails
on them.

Departures (what a user could observe):

- ``send``/``recv`` travel through the harness mailboxes, keyed by the
  (source, destination) pair and not by ``tag``, since the real backend ignores
  the tag and pairs sends and receives in order through
  ``collective_permute``. A send here is buffered: it returns before the
  matching ``recv`` is posted, where the real ``collective_permute`` would wait
  for its peer. A receive blocks until its message arrives, in ``irecv`` too
  (every work is complete when returned), as the real ``recv``, which syncs
  the graph at once, does.
- The ``xla://`` init_method and its store: see ``torch_xla._internal.rendezvous``.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
from typing import Any

import torch
import torch.distributed as dist
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllToAllOptions,
    GatherOptions,
    ProcessGroup,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
)
from torch_xla._internal import link, rendezvous
from torch_xla._internal import tensors as _t

logger = logging.getLogger(__name__)


def _before(release: str) -> bool:
    """Is the profile's backend one from before ``release``? Only the profiles from 2.7 on
    model their release's backend: ``legacy`` keeps 2.9's whole op set, as it always has
    (2.0's backend, which lacked still more, is not modelled)."""
    return link.since("2.7") and not link.since(release)


def _since(release: str) -> None:
    """Raise as the profile's release does where it has no such operation (bare, as theirs)."""
    if _before(release):
        raise NotImplementedError

_SEND_RECV_WARNING = (
    "Individual send/recv ops are inefficient on an XLA device. Consider using "
    "xla_model.collective_permute() and specifying all source-target pairs.")

# torch.distributed functions that pickle objects into CPU tensors (pytorch/xla#5492).
_OBJECT_COLLECTIVES = frozenset({
    "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
    "send_object_list", "recv_object_list",
})
_C10D_FILE = os.path.join("torch", "distributed", "distributed_c10d.py")

# How ATen names a CPU tensor's type in its messages (``Tensor::toString()``).
_ATEN_TYPE_NAMES = {
    "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
    "float16": "Half", "float32": "Float", "float64": "Double", "bfloat16": "BFloat16",
    "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}


# -- the backend ---------------------------------------------------------------

def _create_xla_process_group(prefix_store: Any, rank: int, size: int,
                              timeout: datetime.timedelta) -> ProcessGroupXla:
    """The creator torch.distributed calls for backend ``'xla'``, before its store barrier."""
    assert not xr.is_spmd(), \
        "XLA backend is not supported with SPMD. Please use a CPU process group instead."
    return ProcessGroupXla(prefix_store, rank, size, timeout)


def _register_xla_backend() -> None:
    dist.Backend.register_backend("xla", _create_xla_process_group, devices="xla")


def _ret_work(ret: Any) -> Any:
    """A work that is already complete: our collectives return only when done."""
    fut = torch.futures.Future()
    fut.set_result(ret)
    return torch._C._distributed_c10d._create_work_from_future(fut)


def _object_collective() -> str | None:
    """The torch object collective on the stack, if this call comes from one."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _OBJECT_COLLECTIVES and code.co_filename.endswith(_C10D_FILE):
            return code.co_name
        frame = frame.f_back
    return None


def _aten_type_name(t: Any) -> str:
    dtype = _t.dtype_name(t)
    return f"{t.device.type.upper()}{_ATEN_TYPE_NAMES.get(dtype, dtype)}Type"


def _check_xla_tensors(tensors: list[Any]) -> None:
    """Refuse the CPU tensors of torch's object collectives, as a real pod does."""
    caller = _object_collective()
    if caller is None:
        return
    first = next((t for t in tensors if _t.is_tensor(t)), None)
    type_name = _aten_type_name(first) if first is not None else "CPUByteType"
    raise RuntimeError(
        f"Input tensor is not an XLA tensor: {type_name} (torch.distributed.{caller} puts the "
        "objects in CPU tensors, which the xla backend cannot communicate; see pytorch/xla#5492)")


def _flat(tensor_lists: Any) -> list[Any]:
    out: list[Any] = []
    for item in tensor_lists:
        if isinstance(item, (list, tuple)):
            out.extend(_flat(item))
        elif item is not None:
            out.append(item)
    return out


class ProcessGroupXla(ProcessGroup):
    """The ``xla`` process group: torch.distributed calls mapped onto ``xm`` collectives.

    ``_mesh`` holds the replica groups of a subgroup made by ``dist.new_group``
    (empty for the world), as on the real backend.
    """

    def __init__(self, prefix_store: Any, rank: int, size: int,
                 timeout: datetime.timedelta) -> None:
        super().__init__(rank, size)
        self.prefix_store = prefix_store
        self.timeout = timeout
        self._mesh: list[list[int]] = []

    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        return "xla"

    # torch cannot read a Python group's name from C++: keep it here, as the real one does.
    def _set_group_name(self, name: str) -> None:
        self._group_name = name

    @property
    def group_name(self) -> str:
        return self._group_name

    def _get_reduce_type(self, reduce_op: Any) -> str:
        ops = dist.ReduceOp
        for op, name in ((ops.SUM, xm.REDUCE_SUM), (ops.PRODUCT, xm.REDUCE_MUL),
                         (ops.BAND, xm.REDUCE_AND), (ops.BOR, xm.REDUCE_OR),
                         (ops.MIN, xm.REDUCE_MIN), (ops.MAX, xm.REDUCE_MAX)):
            if reduce_op == op:
                return name
        if reduce_op == ops.BXOR:
            raise NotImplementedError(f"reduce op {reduce_op}")
        raise ValueError(f"Invalid reduce op {reduce_op}")

    def _shard_count(self) -> int:
        return len(self._mesh[0]) if self._mesh else self.size()

    # -- all_reduce ----------------------------------------------------------
    def allreduce(self, tensors: list[Any], all_reduce_options: Any) -> Any:
        _check_xla_tensors(tensors)
        reduce_type = self._get_reduce_type(all_reduce_options.reduceOp)
        xm.all_reduce(reduce_type, tensors, groups=self._mesh, pin_layout=False)
        return _ret_work(tensors)

    def allreduce_coalesced(self, *args: Any) -> Any:
        raise NotImplementedError

    # -- all_gather ----------------------------------------------------------
    def all_gather_single(self, output_tensor: Any, input_tensor: Any,
                          opts: AllgatherOptions) -> Any:
        """``dist.all_gather_into_tensor``: the output is the inputs concatenated or stacked."""
        if _before("2.8"):  # 2.7's _allgather_base passed the tensors on as lists
            return self.allgather(output_tensor, input_tensor, opts)
        _check_xla_tensors([input_tensor])
        if input_tensor.dim() == 0:
            input_tensor = torch.reshape(input_tensor, (1,))
        result = xm.all_gather(input_tensor, dim=0, groups=self._mesh, pin_layout=False)
        if result.shape == output_tensor.shape:
            output_tensor.copy_(result, non_blocking=True)
            return _ret_work([output_tensor])
        stacked = torch.stack(torch.split(result, input_tensor.shape[0], dim=0), dim=0)
        if stacked.shape == output_tensor.shape:
            output_tensor.copy_(stacked, non_blocking=True)
            return _ret_work([output_tensor])
        raise ValueError(
            f"Input shape {input_tensor.shape} and output shape {output_tensor.shape} are not "
            "compatible for all_gather_into_tensor. Input must be stacked or concatenated to "
            "create output.")

    _allgather_base = all_gather_single

    def allgather(self, output_tensors_list: list[list[Any]], input_tensors: list[Any],
                  opts: Any = None) -> Any:
        _check_xla_tensors(input_tensors)
        for input_tensor, output_tensors in zip(input_tensors, output_tensors_list):
            is_scalar = input_tensor.dim() == 0
            if is_scalar:
                input_tensor = torch.reshape(input_tensor, (1,))
            result = xm.all_gather(input_tensor, dim=0, groups=self._mesh, pin_layout=False)
            for i, piece in enumerate(torch.split(result, input_tensor.shape[0])):
                with torch.no_grad():
                    output_tensors[i].copy_(piece if not is_scalar else torch.reshape(piece, ()))
        return _ret_work(_flat(output_tensors_list))

    def allgather_coalesced(self, output_tensors_list: list[list[Any]],
                            input_tensors: list[Any], opts: Any = None) -> Any:
        _check_xla_tensors(input_tensors)
        results = xm.all_gather(input_tensors, groups=self._mesh, pin_layout=False)
        for i, result in enumerate(results):
            for j, piece in enumerate(torch.split(result, input_tensors[i].shape[0])):
                output_tensors_list[i][j].copy_(piece)
        return _ret_work(_flat(output_tensors_list))

    # -- broadcast -----------------------------------------------------------
    def broadcast(self, tensors: list[Any], opts: Any) -> Any:
        _check_xla_tensors(tensors)
        root_tensor = tensors[opts.rootTensor]
        # Before 2.9 the group's root rank went to the collective as a global ordinal.
        global_src = opts.rootRank if _before("2.9") else dist.get_global_rank(self, opts.rootRank)
        xm.collective_broadcast([root_tensor], global_src, groups=self._mesh, pin_layout=False)
        return _ret_work([root_tensor])

    # -- reduce_scatter ------------------------------------------------------
    @staticmethod
    def _concat_same_shape(input_tensors: list[Any]) -> Any:
        first_shape = input_tensors[0].shape
        for i, t in enumerate(input_tensors[1:]):
            if first_shape != t.shape:
                raise ValueError(f"Input {i + 1}'s shape is different from input 0: "
                                 f"{t.shape} vs {first_shape}")
        return torch.cat(input_tensors)

    def reduce_scatter(self, output_tensors: list[Any], input_tensors_list: list[list[Any]],
                       opts: Any) -> Any:
        _check_xla_tensors(_flat(input_tensors_list))
        for input_tensors, output_tensor in zip(input_tensors_list, output_tensors):
            input_tensor = self._concat_same_shape(input_tensors)
            reduce_type = self._get_reduce_type(opts.reduceOp)
            xm.reduce_scatter(reduce_type, input_tensor, scatter_dim=0,
                              shard_count=self._shard_count(), scale=1, groups=self._mesh,
                              output=output_tensor, pin_layout=False)
        return _ret_work(output_tensors)

    def reduce_scatter_coalesced(self, output_tensors: list[Any],
                                 input_tensors_list: list[list[Any]], opts: Any) -> Any:
        _check_xla_tensors(_flat(input_tensors_list))
        inputs = [self._concat_same_shape(ts) for ts in input_tensors_list]
        reduce_type = self._get_reduce_type(opts.reduceOp)
        xm.reduce_scatter(reduce_type, inputs, scatter_dim=0, shard_count=self._shard_count(),
                          scale=1, groups=self._mesh, output=output_tensors, pin_layout=False)
        return _ret_work(output_tensors)

    def reduce_scatter_single(self, output_tensor: Any, input_tensor: Any, opts: Any) -> Any:
        """``dist.reduce_scatter_tensor``: reduce a flat tensor, keep this rank's shard."""
        _check_xla_tensors([input_tensor])
        reduce_type = self._get_reduce_type(opts.reduceOp)
        xm.reduce_scatter(reduce_type, input_tensor, scatter_dim=0,
                          shard_count=self._shard_count(), scale=1.0, groups=self._mesh,
                          output=output_tensor, pin_layout=False)
        return _ret_work(output_tensor)

    _reduce_scatter_base = reduce_scatter_single

    # -- barrier -------------------------------------------------------------
    def barrier(self, opts: Any = None) -> Any:
        """A no-op, as on the real backend: nothing waits for the other ranks."""
        return _ret_work([])

    def monitored_barrier(self, *args: Any) -> Any:
        raise NotImplementedError

    # -- reduce, all_to_all, gather, scatter ---------------------------------
    def reduce(self, tensors: list[Any], opts: ReduceOptions) -> Any:
        """Every rank reduces (the real one avoids mismatched graphs); only dst keeps it."""
        _since("2.9")
        _check_xla_tensors(tensors)
        rank = xr.global_ordinal()
        dst = opts.rootRank
        reduce_type = self._get_reduce_type(opts.reduceOp)
        for tensor in tensors:
            result = xm.all_reduce(reduce_type, inputs=tensor)
            torch_xla.torch_xla._marker(step=False)
            if rank == dst:
                tensor.copy_(result)
        return _ret_work(tensors)

    def alltoall(self, output_tensor_list: list[Any], input_tensor_list: list[Any],
                 opts: AllToAllOptions) -> Any:
        _since("2.9")
        _check_xla_tensors(input_tensor_list)
        stacked_inputs = torch.stack(input_tensor_list, dim=0)
        split_count = len(input_tensor_list)
        stacked_results = xm.all_to_all(stacked_inputs, split_dimension=0, concat_dimension=0,
                                        split_count=split_count)
        results = torch.chunk(stacked_results, split_count, dim=0)
        for result, output_tensor in zip(results, output_tensor_list):
            output_tensor.copy_(result.squeeze(dim=0))
        return _ret_work(output_tensor_list)

    def all_to_all_single(self, output: Any, input: Any, output_split_sizes: list[int] | None,
                          input_split_sizes: list[int] | None, opts: AllToAllOptions) -> Any:
        """``dist.all_to_all_single``: equal splits along dim 0 only."""
        _check_xla_tensors([input])
        if output_split_sizes or input_split_sizes:
            raise AssertionError("XLA doesn't support specifying non-empty output_split_sizes "
                                 "and input_split_sizes")
        result = xm.all_to_all(input, 0, 0, xr.world_size(), pin_layout=False)
        output.copy_(result)
        return _ret_work(output)

    alltoall_base = all_to_all_single

    def gather(self, output_tensors_list: list[list[Any]], input_tensor_list: list[Any],
               opts: GatherOptions) -> Any:
        """Every rank gathers (as the real one does); only dst fills its output list."""
        _since("2.9")
        _check_xla_tensors(input_tensor_list)
        rank = xr.global_ordinal()
        for i, input_tensor in enumerate(input_tensor_list):
            is_scalar = input_tensor.dim() == 0
            gathered = xm.all_gather(input_tensor.clone().reshape(1) if is_scalar else input_tensor,
                                     dim=0, groups=self._mesh, pin_layout=False)
            torch_xla.torch_xla._marker(step=False)
            if rank == opts.rootRank:
                output_tensors = output_tensors_list[i]
                if is_scalar:
                    for j in range(xr.world_size()):
                        output_tensors[j].copy_(gathered[j])
                else:
                    for j, chunk in enumerate(torch.split(gathered, input_tensor.shape[0], dim=0)):
                        if chunk.shape != output_tensors[j].shape:
                            chunk = chunk.reshape(output_tensors[j].shape)
                        output_tensors[j].copy_(chunk)
        if rank == opts.rootRank:
            return _ret_work(output_tensors_list)
        return _ret_work([[]])

    def scatter(self, output_tensor_list: list[Any], input_tensors_list: list[list[Any]],
                opts: ScatterOptions) -> Any:
        """A reduce_scatter (SUM) where every rank but the source contributes zeros."""
        _since("2.8")
        _check_xla_tensors(output_tensor_list)
        if xr.global_ordinal() == opts.rootRank:
            inputs = input_tensors_list
        else:
            inputs = [[torch.zeros_like(t)] * xr.world_size() for t in output_tensor_list]
        rs_opts = ReduceScatterOptions()
        rs_opts.reduceOp = dist.ReduceOp.SUM
        return self.reduce_scatter(output_tensor_list, inputs, rs_opts)

    # -- point to point ------------------------------------------------------
    def send(self, tensors: list[Any], dst_rank: int, tag: int = 0) -> Any:
        """Buffered in the harness mailbox of (this rank, dst_rank); see the module docstring."""
        if tensors:
            _since("2.9")  # make_send_channel_id, a placeholder a backend was to replace
        _check_xla_tensors(tensors)
        logger.warning(_SEND_RECV_WARNING)
        me = xr.global_ordinal()
        for t in tensors:
            link.send(("dist", me, dst_rank), dst_rank, _t.to_bytes(t))
            torch_xla.torch_xla._marker(step=False)
        return _ret_work(list(tensors))

    def recv(self, out_tensors: list[Any], src_rank: int, tag: int = 0) -> Any:
        if out_tensors:
            _since("2.9")  # make_recv_channel_id, as send's
        _check_xla_tensors(out_tensors)
        logger.warning(_SEND_RECV_WARNING)
        me = xr.global_ordinal()
        for ot in out_tensors:
            data = link.recv(("dist", src_rank, me), src_rank)
            expected = ot.numel() * ot.element_size()
            if len(data) != expected:
                raise RuntimeError(
                    f"recv from rank {src_rank}: got {len(data)} bytes for a "
                    f"{_t.dtype_name(ot)}{list(ot.shape)} tensor of {expected} bytes (the "
                    "sender's tensor has another shape or dtype)")
            torch_xla.torch_xla._marker(step=False)
            with torch.no_grad():
                ot.copy_(_t.from_bytes(data, _t.dtype_name(ot), tuple(ot.shape)))
        return _ret_work(list(out_tensors))

    def recv_anysource(self, *args: Any) -> Any:
        raise NotImplementedError

    def Options(self, *args: Any) -> Any:  # noqa: N802 - torch's name
        raise NotImplementedError


# -- dist.new_group with a mesh ------------------------------------------------

_orig_new_group_fn = dist.new_group


def _infer_mesh(slice_ranks: list[int], world_size: int) -> list[list[int]]:
    """The rectangular mesh of which ``slice_ranks`` is a row or a column.

    For world size 12 and the slice [1, 5, 9]: [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]].
    """
    slice_len = len(slice_ranks)
    if world_size % slice_len != 0:
        raise ValueError("Given slice length doesn't equal to a side of a rectangle. "
                         f"World size: {world_size}, slice length: {slice_len}")
    start = slice_ranks[0]
    step = slice_ranks[1] - slice_ranks[0]
    if slice_ranks != list(range(start, start + step * slice_len, step)):
        raise ValueError(f"Given slice isn't a range with evenly distributed steps: {slice_ranks}")
    num_slices = world_size // slice_len
    world = list(range(world_size))
    if step == 1:
        if start % slice_len != 0 or start >= world_size:
            raise ValueError("Given horizontal slice doesn't have a correct start: "
                             f"World size: {world_size}, slice length: {slice_len}, "
                             f"slice: {slice_ranks}")
        mesh = [world[i * slice_len:(i + 1) * slice_len] for i in range(num_slices)]
    else:
        if start >= num_slices:
            raise ValueError("Given vertical slice doesn't have a correct start: "
                             f"World size: {world_size}, slice length: {slice_len}, "
                             f"slice: {slice_ranks}")
        if step != num_slices:
            raise ValueError("Given vertical slice doesn't have a correct step: "
                             f"World size: {world_size}, slice length: {slice_len}, "
                             f"slice: {slice_ranks}")
        mesh = [world[i:i + slice_len * step:step] for i in range(num_slices)]
    assert slice_ranks in mesh
    return mesh


def new_xla_process_group(ranks: Any = None, timeout: datetime.timedelta = dist.default_pg_timeout,
                          backend: Any = None, pg_options: Any = None) -> Any:
    """``dist.new_group`` as torch_xla replaces it: an XLA subgroup gets its replica mesh."""
    use_spmd = False
    mesh_spmd = None
    if isinstance(pg_options, dict) and "xla_pg_options" in pg_options:
        mesh_spmd = pg_options["xla_pg_options"].get("mesh", None)
        if mesh_spmd is None:
            use_spmd = pg_options["xla_pg_options"].get("spmd", False)

    pg = _orig_new_group_fn(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options)
    if isinstance(pg, ProcessGroupXla) and ranks is not None:
        world_pg = dist.group.WORLD
        if not isinstance(world_pg, ProcessGroupXla):
            raise RuntimeError("xla backend requires the default ProcessGroup to be "
                               "a ProcessGroupXla")
        ranks = list(ranks)
        if ranks == list(range(world_pg.size())):
            pg._mesh = [ranks]
        elif len(ranks) == 1:
            if ranks[0] not in range(world_pg.size()):
                raise ValueError("Given ranks is out of range: "
                                 f"World size: {world_pg.size()}, ranks: {ranks}")
            pg._mesh = [[r] for r in range(world_pg.size())]
        elif 1 < len(ranks) < world_pg.size():
            if mesh_spmd:
                pg._mesh = mesh_spmd
            elif use_spmd:
                pg._mesh = _infer_mesh(ranks, world_pg.size())
            else:
                pg._mesh = [ranks]
        else:
            logger.warning(f"Can't infer process group mesh from given ranks \"{ranks}\". "
                           "The process group will use the entire world as its collective "
                           "comm group.")
    return pg


def _on_import() -> None:
    """What importing the module does to torch: the ``xla`` backend, the ``xla://``
    init_method and the mesh-giving ``dist.new_group``. A harness fork server that executed
    this module ahead of its ranks (``HARNESS_PREPARING_SHIM`` set) has each rank call it
    when the rank imports ``torch_xla``."""
    _register_xla_backend()
    dist.register_rendezvous_handler("xla", rendezvous.pjrt_rendezvous_handler)
    dist.new_group = new_xla_process_group


if not os.environ.get("HARNESS_PREPARING_SHIM"):
    _on_import()
