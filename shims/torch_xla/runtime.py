"""``torch_xla.runtime`` (xr): the world as PJRT reports it.

One process per chip, as PJRT runs v4 and later: every process addresses one
device, so ordinals, process indices and device counts coincide.
"""

from __future__ import annotations

import os
from typing import Any

from torch_xla._internal import link
from torch_xla._internal import runtime as _runtime
from torch_xla._internal.surface import not_modelled


def device_type() -> str | None:
    pjrt = os.environ.get("PJRT_DEVICE")
    return pjrt.split("_")[0] if pjrt else None


def set_device_type(pjrt_device: str) -> None:
    # The real one refuses only a change once the runtime is up: setting the same type
    # again (as many scripts do before every launch) is fine.
    if _runtime.current().used() and os.environ.get("PJRT_DEVICE") != pjrt_device:
        raise RuntimeError("Can't change device type after XLA runtime is initialized")
    os.environ["PJRT_DEVICE"] = pjrt_device


def is_bf16_supported() -> bool:
    return True


def local_process_count() -> int:
    return int(os.environ.get("PJRT_LOCAL_PROCESS_COUNT", "1"))


def global_device_count() -> int:
    return link.world_size()


def global_runtime_device_count() -> int:
    return link.world_size()


def world_size() -> int:
    return link.world_size()


def addressable_device_count() -> int:
    link.use()
    return 1


def addressable_runtime_device_count() -> int:
    return addressable_device_count()


def local_device_count() -> int:
    return local_process_count() * addressable_device_count()


def global_ordinal() -> int:
    return link.ordinal()


def local_ordinal() -> int:
    return link.local_rank()


def process_index() -> int:
    return link.ordinal()


def process_count() -> int:
    return link.world_size()


def host_index() -> int:
    return link.host_index()


def is_spmd() -> bool:
    return False


def use_spmd(auto: bool | None = False) -> None:
    not_modelled("torch_xla.runtime.use_spmd", "it runs one process per chip, not SPMD")


def get_master_ip() -> str:
    return "10.130.0.2"


def initialize_cache(path: str, readonly: bool = False) -> None:
    link.use()


def using_pjrt() -> bool:
    """Removed in 2.5; present under the ``legacy`` profile."""
    return True


def xla_device(n: int | None = None, devkind: str | None = None) -> Any:
    """Removed in 2.8 (present under ``2.7`` and ``legacy``): what 2.7's ``xm.xla_device``
    called. As the real one, an index past the devices raises IndexError (``n == len``
    from the list itself)."""
    import torch_xla

    if n is None:
        return torch_xla.device()
    from torch_xla.core import xla_model as xm

    devices = xm.get_xla_supported_devices(devkind=devkind)
    if n > len(devices):
        raise IndexError(f"Device index {n} out of range in {devices}")
    devices[n]  # noqa: B018 - the real one indexes the list, which raises for n == len
    return torch_xla.device()


__getattr__ = link.removed_in(__name__, {using_pjrt: "2.5", xla_device: "2.8"})
del using_pjrt, xla_device
