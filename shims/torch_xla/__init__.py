"""The harness's fake ``torch_xla``: the real API, backed by a runtime.

The shim stands alone: it reaches the world it runs in only through the
runtime protocol of ``torch_xla._internal.runtime``, which the harness
installs in every rank (collectives go to its coordinator, which matches them
across ranks as the real runtime does). Tensors are real CPU tensors. torch
itself is imported only when a tensor is touched. Departures from torch_xla
2.9 are listed in the harness docs/reference/shim.md.
"""

import os as _os

from torch_xla._internal import link as _link
from torch_xla._internal import surface as _surface

# The real package selects a device when imported; a harness world is a TPU.
_os.environ.setdefault("PJRT_DEVICE", "TPU")

# Every public module and name of the real package imports under the shim (what the
# shim does not model raises NotModelledError naming itself when used).
_surface.install()

from torch_xla.torch_xla import (  # noqa: E402, F401 - the public API
    compile,
    device,
    device_count,
    devices,
    launch,
    manual_seed,
    real_devices,
    step,
    sync,
)


def _register_xla_backend(_module: object) -> None:
    import torch_xla.distributed.xla_backend  # noqa: F401 - registers 'xla' and 'xla://'


# The real package registers the 'xla' torch.distributed backend on import
# (through xla_model -> pjrt -> xla_backend). Doing that eagerly would import
# torch; registering as soon as torch.distributed is imported is the same to
# any code that calls dist.init_process_group.
from torch_xla._internal.imports import when_imported as _when_imported  # noqa: E402


def _register_ops(_module: object) -> None:
    from torch_xla._internal import link

    # the shim's work, whenever torch._dynamo arrives: no world time (torch.library's
    # registration looks at the path of every loaded module)
    link.aside(lambda: __import__("torch_xla._internal.ops"))


def _register_device(_module: object) -> None:
    from torch_xla._internal import device as _device

    _device.install()  # torch.ones(1, device='xla') works before anyone asks for the device


def _hooks() -> None:
    # The real package registers its XLA backend's kernels on import: the shim with torch
    _when_imported("torch", _register_device)
    _when_imported("torch.distributed", _register_xla_backend)
    # torch.compile traces the collectives as ops (see _internal/ops.py): registered when
    # dynamo is first imported (torch.compile imports it), not with torch, which many ranks
    # never compile.
    _when_imported("torch._dynamo", _register_ops)


def _on_import() -> None:
    """What importing the package does to the process beyond defining it. A harness fork
    server that executed this module ahead of its ranks (with ``HARNESS_PREPARING_SHIM``
    set, when nothing of this may reach torch) has each rank call it on its import."""
    _os.environ.setdefault("PJRT_DEVICE", "TPU")
    _surface.install()
    _hooks()


if not _os.environ.get("HARNESS_PREPARING_SHIM"):
    _hooks()


def _own_getattr(name: str) -> object:
    # The version follows the installed runtime's profile, known only once one is.
    if name == "__version__":
        return f"{_link.release()}+harness"
    if name == "_XLAC":  # the C++ bindings: a module of the shim's
        import importlib

        return importlib.import_module("torch_xla._XLAC")
    if name == "eager_mode":
        from torch_xla.experimental.eager import eager_mode

        return eager_mode
    raise AttributeError(f"module 'torch_xla' has no attribute {name!r}")


__getattr__ = _surface.module_getattr(__name__, _own_getattr)
