"""``torch_xla.runtime`` (xr): the world as PJRT reports it.

One process per chip, as PJRT runs v4 and later: every process addresses one
device, so ordinals, process indices and device counts coincide. After
``use_spmd()`` (an SPMD topology: one process per host) each process is one
virtual device: ``world_size()`` 1 and ``global_ordinal()`` 0 on every host, as
torch_xla 2.9 answers; ``process_index()``/``process_count()`` and the runtime
device counts tell the hosts and chips apart.
"""

from __future__ import annotations

import os
import warnings
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
    return 1 if is_spmd() else link.world_size()


def global_runtime_device_count() -> int:
    """Every chip of the slice, SPMD or not (the real one is not SPMD-aware)."""
    return link.world_size() * link.devices_per_process()


def world_size() -> int:
    return 1 if is_spmd() else link.world_size()


def addressable_device_count() -> int:
    link.use()
    return 1


def addressable_runtime_device_count() -> int:
    """The chips this process drives: its host's every chip in an SPMD topology."""
    return link.devices_per_process()


def local_device_count() -> int:
    return local_process_count() * addressable_device_count()


def global_ordinal() -> int:
    return 0 if is_spmd() else link.ordinal()


def local_ordinal() -> int:
    return 0 if is_spmd() else link.local_rank()


def process_index() -> int:
    return link.ordinal()


def process_count() -> int:
    return link.world_size()


def host_index() -> int:
    return link.host_index()


def _flag(name: str) -> bool:
    """``torch_xla.utils.utils.check_env_flag``: a true word or a positive number."""
    value = os.environ.get(name, "").strip().lower()
    return value in ("true", "on", "yes", "y") or (value.isdigit() and int(value) > 0)


def is_spmd() -> bool:
    return _flag("XLA_USE_SPMD")


def use_spmd(auto: bool | None = False) -> None:
    """SPMD from now on, as 2.9's: it warns (never raises) when ``XLA_USE_SPMD`` is already
    set (a second call), and when the device was used first (the real one then moves its
    tensors to the virtual device; the shim's are CPU tensors already). SPMD runs one
    process per host: a topology that runs
    one per chip cannot model it."""
    if link.devices_per_process() == 1 and link.use().ranks_per_host() != 1:
        not_modelled("torch_xla.runtime.use_spmd",
                     f"this topology runs {link.use().ranks_per_host()} processes per host, "
                     "one per chip; SPMD runs one per host (topology v4-64-spmd or "
                     "v6e-256-spmd)")
    if os.environ.get("XLA_USE_SPMD") is not None:
        warnings.warn("XLA_USE_SPMD is being deprecated. Use torch_xla.runtime.use_spmd() "
                      "without setting XLA_USE_SPMD env-var.", stacklevel=2)
    from torch_xla._internal import device as _device

    if _device.used() and not is_spmd():
        warnings.warn("Replicating tensors already initialized on non-virtual XLA device for "
                      "SPMD to force SPMD mode. This is one-time overhead to setup, and to "
                      "minimize such, please set SPMD mode before initializting tensors (i.e., "
                      "call use_spmd() in the beginning of the program).", stacklevel=2)
    os.environ["XLA_USE_SPMD"] = "1"
    if auto:
        os.environ["XLA_AUTO_SPMD"] = "1"


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
