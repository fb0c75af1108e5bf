"""The XLA device: tensors whose ``device`` is ``xla:0`` and whose bytes are the CPU's.

torch_xla 2.9's ``torch_xla.device()`` is ``device(type='xla', index=0)`` in every process,
and code branches on it: upstream's ``test_mp_sync_batch_norm`` takes another path when
``batch.device.type != 'xla'``. Here a device tensor is an ``XlaTensor``: a subclass of
``torch.Tensor`` that computes on the CPU (its storage is the CPU's, every kernel the CPU's)
and says ``xla:0`` where Python asks for its device. What an op makes of device tensors is
a device tensor (the subclass's ``__torch_function__``); a factory given the device
(``torch.zeros(3, device=dev)``, ``torch.tensor(..., device=dev)``) allocates through the
two allocation kernels the shim registers for the ``XLA`` dispatch key.

A move onto the device copies, as a host-to-device transfer makes another buffer (code that
changes the device tensor in place leaves the CPU source alone: upstream's tests compare
the two), and is counted as a transfer; a move of a device tensor back (``.cpu()``,
``.to('cpu')``) copies too and gives a plain CPU tensor. A device tensor pickles (and
``torch.save``\\ s) as a plain CPU tensor: a checkpoint reads back without the shim.

What stays a departure (docs/reference/shim.md): ``Module.to(device)`` moves a module's
parameters onto the device, but a ``Parameter`` keeps its class, so
``next(model.parameters()).device`` reads ``cpu``; and a device tensor converts to numpy
where the real one asks for ``.cpu()`` first.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

from torch_xla._internal.imports import when_imported

_device: Any = None  # torch.device("xla", 0), once installed
_tensor_type: Any = None  # the XlaTensor class
_library: Any = None  # the XLA kernels' registration: kept alive while the process runs
_real_to: Any = None
_used = False  # the device was asked for, or a tensor put on it


def used() -> bool:
    """Was the device used (what locks the real runtime's SPMD choice)?"""
    return _used


def xla_device() -> Any:
    """The shim's device, ``xla:0``, with device tensors made possible (once per process)."""
    global _used
    _used = True
    if _device is None:
        install()
    return _device


def tensor_type() -> Any:
    """The class of the shim's device tensors."""
    if _tensor_type is None:
        install()
    return _tensor_type


def on_device(t: Any) -> Any:
    """``t`` (a CPU tensor, not copied) as a device tensor."""
    global _used
    _used = True
    return t.as_subclass(tensor_type())


def like(source: Any, result: Any) -> Any:
    """``result`` (a new CPU tensor a collective made) on the device when ``source`` is: a
    collective of device tensors gives device tensors, as the real one does."""
    kind = _tensor_type
    if kind is not None and isinstance(source, kind) and not isinstance(result, kind):
        return result.as_subclass(kind)
    return result


def _names_xla(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return value == "xla" or value.startswith("xla:")
    return getattr(value, "type", None) == "xla"  # a torch.device("xla", n)


def _names_cpu(value: Any) -> bool:
    if isinstance(value, str):
        return value == "cpu" or value.startswith("cpu:")
    return getattr(value, "type", None) == "cpu"


def _target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The device a ``Tensor.to`` call names, if any (first positional, or ``device=``)."""
    if "device" in kwargs:
        return kwargs["device"]
    if args and (isinstance(args[0], str) or type(args[0]).__name__ == "device"):
        return args[0]
    if args and hasattr(args[0], "device") and hasattr(args[0], "dtype"):  # to(other_tensor)
        return args[0].device
    return None


def _cpu_args(args: tuple[Any, ...], kwargs: dict[str, Any], cpu: Any) -> tuple[tuple, dict]:
    """The same call with its device replaced by the CPU (a tensor argument by its dtype)."""
    kwargs = dict(kwargs)
    if "device" in kwargs:
        kwargs["device"] = cpu
    elif args and hasattr(args[0], "device") and hasattr(args[0], "dtype"):
        args = (args[0].dtype, *args[1:])
    elif args:
        args = (cpu, *args[1:])
    return args, kwargs


def install() -> None:
    """Make the device possible: the tensor class, the XLA allocation kernels and the
    copying ``Tensor.to`` (idempotent; ``uninstall`` undoes the last)."""
    global _device, _real_to
    import torch

    if _device is not None:
        return
    XlaTensor = _tensor_class()
    cpu, xla = torch.device("cpu"), torch.device("xla", 0)
    _real_to = real = torch.Tensor.to

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = _target(args, kwargs)
        on = isinstance(self, XlaTensor)
        if _names_xla(where) and torch.compiler.is_compiling():
            # dynamo's fake tensors cannot become device tensors: the traced graph moves
            # to the CPU the device computes on (the compiled graph runs eagerly, see
            # core/dynamo_bridge.py)
            args, kwargs = _cpu_args(args, kwargs, cpu)
            return real(self, *args, **kwargs)
        if _names_xla(where):
            args, kwargs = _cpu_args(args, kwargs, cpu)
            if on and not kwargs.get("copy"):  # already there: the real one returns it
                with torch._C.DisableTorchFunctionSubclass():  # not this function again
                    kept = real(self, *args, **kwargs)
                return kept if isinstance(kept, XlaTensor) else kept.as_subclass(XlaTensor)
            from torch_xla.debug import metrics

            start = time.perf_counter_ns()
            moved = real(self.as_subclass(torch.Tensor) if on else self, *args,
                         **{**kwargs, "copy": True}).as_subclass(XlaTensor)
            metrics._transfer("to", [moved], time.perf_counter_ns() - start)  # one, as a real one
            return moved
        if on and _names_cpu(where):  # back to the host: a plain tensor, another buffer
            return real(self.as_subclass(torch.Tensor), *args, **{**kwargs, "copy": True})
        return real(self, *args, **kwargs)

    to.__doc__ = real.__doc__
    torch.Tensor.to = to  # type: ignore[method-assign]
    _device = xla


def _tensor_class() -> Any:
    """The device tensors' class and the XLA kernels that allocate them: made once per
    process (the dispatcher takes one registration per kernel and key)."""
    global _tensor_type
    import torch

    if _tensor_type is not None:
        return _tensor_type
    cpu, xla = torch.device("cpu"), torch.device("xla", 0)

    class XlaTensor(torch.Tensor):
        """A tensor on the shim's XLA device: the CPU's bytes, ``xla:0`` to Python."""

        @property
        def device(self) -> Any:  # type: ignore[override]
            # dynamo's fake copy of a device tensor must be one torch can compute on: under
            # torch.compile the device is the CPU it is (the graph runs eagerly there)
            return cpu if torch.compiler.is_compiling() else xla

        def cpu(self, memory_format: Any = torch.preserve_format) -> Any:  # type: ignore[override]
            return self.to(cpu, memory_format=memory_format)

        def __repr__(self, *, tensor_contents: Any = None) -> str:
            """As the real one's: ``tensor([...], device='xla:0')``."""
            text = torch._tensor_str._str(self, tensor_contents=tensor_contents)
            cut = len(type(self).__name__) - len("tensor")  # the prefix indents each line
            return "tensor" + text[len(type(self).__name__):].replace("\n" + " " * cut, "\n")

        def __reduce_ex__(self, protocol: Any) -> Any:
            return self.as_subclass(torch.Tensor).__reduce_ex__(protocol)

    XlaTensor.__module__ = "torch_xla"

    _tensor_type = XlaTensor
    _register_kernels(torch)
    when_imported("torch._functorch._aot_autograd.runtime_wrappers", _plain_to_aot_autograd)
    return XlaTensor


def _current_class() -> Any:
    """The device tensors' class of the shim loaded now (a test may import it again: a kernel
    registered by an earlier copy of this module makes the current copy's tensors)."""
    module = sys.modules.get(__name__)
    return getattr(module, "_tensor_type", None) or _tensor_type


def _empty(size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
           pin_memory: Any = None, memory_format: Any = None) -> Any:
    import torch

    return torch.empty(size, dtype=dtype, layout=layout, device="cpu",
                       memory_format=memory_format).as_subclass(_current_class())


def _empty_strided(size: Any, stride: Any, *, dtype: Any = None, layout: Any = None,
                   device: Any = None, pin_memory: Any = None) -> Any:
    import torch

    return torch.empty_strided(size, stride, dtype=dtype, layout=layout,
                               device="cpu").as_subclass(_current_class())


def _register_kernels(torch: Any) -> None:
    """The two XLA kernels that allocate device tensors, once per process: torch 2.9
    refuses a second Python kernel for an operator and key (2.13 warns and replaces it),
    and one an earlier copy of this module registered serves this one too."""
    global _library
    registered = getattr(torch.library, "_impls", set())
    if "aten/empty.memory_format/XLA" in registered:
        return
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # torch's own says it replaces a kernel: not the target's
        warnings.simplefilter("ignore", UserWarning)
        library.impl("empty.memory_format", _empty, "XLA")
        library.impl("empty_strided", _empty_strided, "XLA")
    _library = library


def _plain_to_aot_autograd(module: Any) -> None:
    """torch 2.13's compiled graphs check, on their first run, that a custom op's inputs
    are tensors of the types they know, and refuse any other subclass: a device tensor is
    a plain CPU tensor underneath, and the shim's collectives are custom ops
    (``torch.compile(backend='openxla')`` of ``xm.all_gather``)."""
    handled = getattr(module, "HANDLED_TYPES", None)
    if isinstance(handled, tuple) and _tensor_type not in handled:
        module.HANDLED_TYPES = (*handled, _tensor_type)


def uninstall() -> None:
    """Restore ``torch.Tensor.to`` (for tests that import the shim in-process). The class
    and the XLA kernels stay while the process lives: the dispatcher takes one
    registration per kernel."""
    global _real_to, _device
    if _real_to is not None:
        import torch

        torch.Tensor.to = _real_to  # type: ignore[method-assign]
    _real_to = _device = None
