"""The XLA device as a separate buffer: ``.to(device)`` copies, as a host-to-device
transfer does.

The shim's device is the CPU (tensors are real CPU tensors), and
``cpu_tensor.to(torch.device('cpu'))`` returns the same tensor. On a TPU the
device tensor is another buffer, so code that changes it in place (a list
``xm.all_reduce``, ``dist.all_reduce``/``broadcast``, an ``all_gather`` into it)
leaves the CPU source untouched, and upstream's tests compare the two. Here
``Tensor.to`` is wrapped, once per process, so that a move to the shim's device
object (the one ``torch_xla.device()`` returns) or to an ``xla`` device always
copies. ``.cpu()`` of such a tensor still returns it (the departure is listed in
docs/reference/shim.md).
"""

from __future__ import annotations

import time
from typing import Any

_device: Any = None  # the one device object torch_xla.device() hands out
_real_to: Any = None


def xla_device() -> Any:
    """The shim's device object, with ``Tensor.to`` made to copy onto it."""
    global _device
    if _device is None:
        import torch

        _device = torch.device("cpu")
        install()
    return _device


def _to_device(value: Any) -> bool:
    if value is None:
        return False
    if value is _device:
        return True
    if isinstance(value, str):
        return value == "xla" or value.startswith("xla:")
    return getattr(value, "type", None) == "xla"  # a torch.device("xla", n)


def _cpu(value: Any) -> Any:
    """An ``xla`` device named by the caller, as the CPU device the shim computes on."""
    return _device if _to_device(value) and value is not _device else value


def install() -> None:
    """Wrap ``torch.Tensor.to`` (idempotent; ``uninstall`` undoes it)."""
    global _real_to
    import torch

    if _real_to is not None:
        return
    _real_to = real = torch.Tensor.to

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not ((args and _to_device(args[0])) or _to_device(kwargs.get("device"))):
            return real(self, *args, **kwargs)
        from torch_xla.debug import metrics

        args = tuple(_cpu(a) for a in args[:1]) + args[1:]
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        kwargs["copy"] = True
        start = time.perf_counter_ns()
        moved = real(self, *args, **kwargs)
        metrics._transfer("to", [moved], time.perf_counter_ns() - start)  # one, as a real one
        return moved

    to.__doc__ = real.__doc__
    torch.Tensor.to = to  # type: ignore[method-assign]


def uninstall() -> None:
    """Restore ``torch.Tensor.to`` (for tests that import the shim in-process)."""
    global _real_to, _device
    if _real_to is not None:
        import torch

        torch.Tensor.to = _real_to  # type: ignore[method-assign]
    _real_to = _device = None
