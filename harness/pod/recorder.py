"""The history of a rank on a real pod: every collective of torch_xla, seen from the rank.

In the simulator the shim's collectives reach the coordinator, which records each call and
calls the fault engine's hook. On a pod there is no coordinator, so each rank wraps
torch_xla's collective functions itself: ``install(on_call, on_return)`` makes every public
collective call ``on_call(op, tag, site, detail)`` on entry (where the fault engine may raise,
kill or hold the rank: the collective then does not run) and ``on_return(op, tag)`` once it
has returned. The same wrappers apply to the real torch_xla and to the shim, so a pod run with
the shim (``harness pod run --local``) records what a real pod records.

What is recorded, and under which name, is the simulator's: ``op`` is the name the shim's
``link`` gives the same public call (``xm.mesh_reduce``, ``xm.rendezvous`` and
``xm.xla_rendezvous`` are each one ``rendezvous``; ``dist.send``/``dist.recv`` on the xla
backend are ``send``/``recv`` although 2.9 runs them as a ``collective_permute``), ``site``
is the shim's ``call_site()`` of the user's line (the shim's own ``sites`` module does it for
both), and ``detail`` has the coordinator's fields: ``tensors`` as ``"float32[2, 3]"``,
``payload_bytes`` of a rendezvous, ``groups``. A public call that reaches another wrapped one
(mesh_reduce -> rendezvous -> xla_rendezvous -> all_gather -> all_reduce in 2.9) is recorded
once, as the outermost; a user callback it runs (mesh_reduce's ``reduce_fn``) records its own.

Departures from the coordinator's history, all at the edges: a collective the shim finishes
without the world (any of them in a world of one, a group of one, ``all_reduce`` at world size
1) is recorded here, since the user did call it; a list given to ``all_gather`` or
``reduce_scatter`` is one call here (2.9 coalesces it) where the shim makes one per tensor;
``mesh_reduce`` carries no ``payload_bytes`` (its bytes exist only inside the call).
``dist.barrier()`` on the xla backend records nothing: it is a no-op in 2.9 (it returns a
completed work and synchronises nothing), and the shim's coordinator sees nothing either.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import io
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from harness.imports import when_imported

log = logging.getLogger(__name__)

#: This module's frames are not the user's: the shim's ``sites.user_site`` looks past them.
__call_site_transparent__ = True

OnCall = Callable[[str, "str | None", "str | None", "dict[str, Any]"], None]
OnReturn = Callable[[str, "str | None"], None]

#: Recorded in the history, as the coordinator records them, but not collectives: the
#: simulator's fault hook (``before_collective``) never sees them, so a pod's must not either.
POINT_TO_POINT = frozenset({"send", "recv"})

#: The marker on every wrapper: a function that carries it is never wrapped again.
_MARK = "__harness_recorded__"


@dataclass(frozen=True)
class _Call:
    """How to record one public function: its op, and which arguments say what."""

    op: str
    tensors: str | None = None  # the argument holding the tensor or tensors
    groups: bool = False
    tag: str | None = None  # the argument holding the tag
    payload: str | None = None  # the argument whose len() is payload_bytes
    peer: str | None = None  # "to"/"from": the argument naming the other rank
    channel: bool = False  # xm.send/recv: the channel id
    callback: str | None = None  # a user function the call runs after its collective


_XM = {
    "all_reduce": _Call("all_reduce", tensors="inputs", groups=True),
    "all_gather": _Call("all_gather", tensors="value", groups=True),
    "reduce_scatter": _Call("reduce_scatter", tensors="input", groups=True),
    "all_to_all": _Call("all_to_all", tensors="value", groups=True),
    "collective_permute": _Call("collective_permute", tensors="value"),
    "collective_broadcast": _Call("collective_broadcast", tensors="tensors", groups=True),
    "rendezvous": _Call("rendezvous", tag="tag", payload="payload"),
    "xla_rendezvous": _Call("rendezvous", tag="tag", payload="payload"),
    "mesh_reduce": _Call("rendezvous", tag="tag", callback="reduce_fn"),
    "send": _Call("send", channel=True),
    "recv": _Call("recv", channel=True),
}

#: module -> {attribute (``Class.method`` for a method): how to record it}. Only leaves and
#: the public functions the shim implements without them; everything else (reduce_gradients,
#: do_on_ordinals, broadcast_master_param, the bucketized ones, xf.*, the process group's
#: other methods) reaches these through the module's namespace and is recorded there.
_TARGETS: dict[str, dict[str, _Call]] = {
    "torch_xla.core.xla_model": _XM,
    "torch_xla.distributed.xla_backend": {
        "ProcessGroupXla.send": _Call("send", peer="dst_rank"),
        "ProcessGroupXla.recv": _Call("recv", peer="src_rank"),
    },
}
_RENDEZVOUS_MODULE = "torch_xla._internal.rendezvous"
_HANDLER = "pjrt_rendezvous_handler"

_hooks: tuple[OnCall, OnReturn] | None = None
_inside = threading.local()  # .depth is 1 while this thread is inside a recorded call
_install_lock = threading.Lock()
_installed = False
_user_site: Callable[..., str | None] | None = None


def install(on_call: OnCall, on_return: OnReturn) -> None:
    """Record every torch_xla collective of this process through ``on_call``/``on_return``.

    Works whether torch_xla is imported before or after; a second call only replaces the
    callbacks (a forked rank installs its own), never wraps twice.
    """
    global _hooks, _installed
    _hooks = (on_call, on_return)
    with _install_lock:
        if _installed:
            return
        _installed = True
    for name in _TARGETS:
        when_imported(name, _wrap_module)
    when_imported(_RENDEZVOUS_MODULE, _wrap_handler)


# -- what a call says ----------------------------------------------------------------

def _tensor_names(value: Any) -> list[str] | None:
    """``["float32[2, 3]"]``: the coordinator's names of a tensor or a list of them."""
    items = value if isinstance(value, (list, tuple)) else [value]
    names = []
    for t in items:
        dtype, shape = getattr(t, "dtype", None), getattr(t, "shape", None)
        if dtype is None or shape is None:
            return None
        names.append(f"{str(dtype).removeprefix('torch.')}{list(shape)}")
    return names


def _describe(call: _Call, args: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The tag and detail the coordinator would record for these arguments."""
    detail: dict[str, Any] = {}
    if call.tensors is not None and (names := _tensor_names(args.get(call.tensors))):
        detail["tensors"] = names
    if call.payload is not None and isinstance(args.get(call.payload), (bytes, bytearray)):
        detail["payload_bytes"] = len(args[call.payload])
    if call.op == "rendezvous" and call.callback is not None:
        size = _saved_size(args.get("data"))
        if size is not None:
            detail["payload_bytes"] = size
    if call.groups and args.get("groups"):
        detail["groups"] = [list(g) for g in args["groups"]]
    if call.peer is not None:
        detail["to" if call.op == "send" else "from"] = args.get(call.peer)
    if call.channel:
        detail["channel"] = args.get("channel_id")
    tag = args.get(call.tag) if call.tag is not None else None
    return (tag if isinstance(tag, str) else None), detail


class _Counter(io.RawIOBase):
    """A file that keeps only how many bytes were written to it."""

    def __init__(self) -> None:
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        self.size += n
        return n


def _saved_size(data: Any) -> int | None:
    """The bytes mesh_reduce will exchange: ``torch.save(data)``'s size, when that can be
    known without moving anything from the device (every tensor in it is on the CPU)."""
    torch = sys.modules.get("torch")
    if torch is None or not _on_cpu(data, torch.Tensor):
        return None
    counter = _Counter()
    try:
        torch.save(data, io.BufferedWriter(counter))
    except Exception:  # noqa: BLE001 - mesh_reduce will raise it itself, where the user sees it
        return None
    return counter.size


def _on_cpu(data: Any, tensor: type) -> bool:
    if isinstance(data, tensor):
        return data.device.type == "cpu" and type(data) is tensor
    if isinstance(data, (list, tuple, set, frozenset)):
        return all(_on_cpu(v, tensor) for v in data)
    if isinstance(data, dict):
        return all(_on_cpu(v, tensor) for v in data.values())
    return True


def _site(frame: Any, package: str) -> str | None:
    """The user's line, found as the shim's ``call_site()`` finds it (its own code)."""
    global _user_site
    if _user_site is None:
        _user_site = _load_sites().user_site
    return _user_site(frame, (package,))


def _load_sites() -> ModuleType:
    """The shim's ``_internal/sites.py``, loaded from its file: on a pod the shim is not
    ``torch_xla`` (the real one is), but its code for naming a call site is the same."""
    from harness.rank.environment import shim_root

    path = os.path.join(shim_root(), "torch_xla", "_internal", "sites.py")
    spec = importlib.util.spec_from_file_location("harness._call_sites", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package_dir(module: ModuleType) -> str:
    """The torch_xla package (real or shim) a module belongs to: its frames are not the user's."""
    top = sys.modules.get(module.__name__.split(".")[0])
    path = getattr(top, "__file__", None) or module.__file__ or ""
    return os.path.dirname(os.path.abspath(path))


def _compiling() -> bool:
    """Under dynamo a collective is traced into a graph, not called: nothing to record."""
    torch = sys.modules.get("torch")
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and compiler.is_compiling())


# -- the wrappers --------------------------------------------------------------------

def _wrap_module(module: ModuleType) -> None:
    package = _package_dir(module)
    for attribute, call in _TARGETS[module.__name__].items():
        owner: Any = module
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        fn = getattr(owner, name, None) if owner is not None else None
        if fn is None:
            log.debug("torch_xla has no %s.%s to record", module.__name__, attribute)
            continue
        if not getattr(fn, _MARK, False):
            setattr(owner, name, _recorded(fn, call, package))


def _recorded(fn: Callable[..., Any], call: _Call, package: str) -> Callable[..., Any]:
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        hooks = _hooks
        if _compiling() or hooks is None or getattr(_inside, "depth", 0):
            return fn(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)  # it raises the real TypeError; nothing was called
        bound.apply_defaults()
        tag, detail = _describe(call, bound.arguments)
        on_call, on_return = hooks
        on_call(call.op, tag, _site(sys._getframe(1), package), detail)
        returned = False

        def done() -> None:
            nonlocal returned
            if not returned:
                returned = True
                on_return(call.op, tag)

        if call.callback is not None and callable(bound.arguments.get(call.callback)):
            bound.arguments[call.callback] = _after_collective(bound.arguments[call.callback], done)
            args, kwargs = bound.args, bound.kwargs
        _inside.depth = 1
        try:
            result = fn(*args, **kwargs)
        finally:
            _inside.depth = 0
        done()
        return result

    setattr(recorded, _MARK, True)
    return recorded


def _after_collective(callback: Callable[..., Any], done: Callable[[], None]) -> Callable[..., Any]:
    """The user's callback, run after the collective (which has then returned) and outside
    it: the collectives it makes are the user's, and recorded."""

    @functools.wraps(callback)
    def user(*args: Any, **kwargs: Any) -> Any:
        done()
        depth, _inside.depth = getattr(_inside, "depth", 0), 0
        try:
            return callback(*args, **kwargs)
        finally:
            _inside.depth = depth

    return user


def _wrap_handler(module: ModuleType) -> None:
    """``init_method='xla://'``: its store handshake is the shim's ``init_process_group``.

    The shim sends the store's port in one collective, tagged ``xla://``, when the process
    creates its store (once) in a world of more than one process, unless the dummy store is
    asked for; a real rank 0's TCPStore waits there for every worker. Recorded under the
    same conditions, and the handler is registered anew with torch.distributed if it was
    already registered.
    """
    original = getattr(module, _HANDLER, None)
    if original is None or getattr(original, _MARK, False):
        _rebind_handler(module)
        return
    package = _package_dir(module)

    @functools.wraps(original)
    def handler(url: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        hooks = _hooks
        recording = hooks is not None and _handshakes(module)
        gen = original(url, *args, **kwargs)
        if recording:
            assert hooks is not None
            hooks[0]("init_process_group", "xla://", _site(sys._getframe(1), package), {})
        first = next(gen)
        if recording:
            assert hooks is not None
            hooks[1]("init_process_group", "xla://")
        yield first
        yield from gen

    setattr(handler, _MARK, True)
    setattr(module, _HANDLER, handler)
    _rebind_handler(module)
    # xla_backend registers the handler when it is imported, which may be after this.
    when_imported("torch_xla.distributed.xla_backend", lambda _: _rebind_handler(module))


def _handshakes(module: ModuleType) -> bool:
    """Will this call create the store, with a handshake among the processes?"""
    if getattr(module, "_store", None):
        return False
    if os.environ.get("TORCH_DIST_INIT_BARRIER", "1") == "0" \
            and os.environ.get("XLA_USE_DUMMY_STORE", "0") == "1":
        return False
    runtime = sys.modules.get("torch_xla.runtime")
    try:
        return runtime is not None and runtime.process_count() > 1
    except Exception:  # noqa: BLE001 - the handler itself reports a runtime that cannot start
        return False


def _rebind_handler(module: ModuleType) -> None:
    """Point torch.distributed's ``xla://`` (and ``pjrt://``) at the wrapped handler."""
    handler = getattr(module, _HANDLER, None)
    registry = getattr(sys.modules.get("torch.distributed.rendezvous"), "_rendezvous_handlers", None)
    if handler is None or registry is None:
        return
    original = getattr(handler, "__wrapped__", None)
    for scheme, registered in list(registry.items()):
        if original is not None and registered is original:
            registry[scheme] = handler
