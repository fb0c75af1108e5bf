"""The harness's fake ``torch_xla``: the real API, backed by a harness world.

Every rank of a world is a real process; collectives go to the harness's
coordinator, which matches them across ranks as the real runtime does.
Tensors are real CPU tensors. torch itself is imported only when a tensor is
touched. Departures from torch_xla 2.9 are listed in the harness README.
"""

import os as _os

from torch_xla._internal import link as _link

_PROFILE = _link.profile()
__version__ = "2.9.0+harness" if _PROFILE == "current" else "2.0.0+harness"

# The real package selects a device when imported; a harness world is a TPU.
_os.environ.setdefault("PJRT_DEVICE", "TPU")

from torch_xla.torch_xla import device, devices, launch, sync  # noqa: E402

__all__ = ["device", "devices", "launch", "sync", "__version__"]
