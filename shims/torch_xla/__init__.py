"""The harness's fake ``torch_xla``: the real API, backed by a runtime.

The shim stands alone: it reaches the world it runs in only through the
runtime protocol of ``torch_xla._internal.runtime``, which the harness
installs in every rank (collectives go to its coordinator, which matches them
across ranks as the real runtime does). Tensors are real CPU tensors. torch
itself is imported only when a tensor is touched. Departures from torch_xla
2.9 are listed in the harness README.
"""

import os as _os

from torch_xla._internal import link as _link

# The real package selects a device when imported; a harness world is a TPU.
_os.environ.setdefault("PJRT_DEVICE", "TPU")

from torch_xla.torch_xla import device, devices, launch, sync  # noqa: E402


def _register_xla_backend(_module: object) -> None:
    import torch_xla.distributed.xla_backend  # noqa: F401 - registers 'xla' and 'xla://'


# The real package registers the 'xla' torch.distributed backend on import
# (through xla_model -> pjrt -> xla_backend). Doing that eagerly would import
# torch; registering as soon as torch.distributed is imported is the same to
# any code that calls dist.init_process_group.
from torch_xla._internal.imports import when_imported as _when_imported  # noqa: E402

_when_imported("torch.distributed", _register_xla_backend)


def __getattr__(name: str) -> str:
    # The version follows the installed runtime's profile, known only once one is.
    if name == "__version__":
        return "2.9.0+harness" if _link.profile() == "current" else "2.0.0+harness"
    raise AttributeError(f"module 'torch_xla' has no attribute {name!r}")


__all__ = ["device", "devices", "launch", "sync", "__version__"]
