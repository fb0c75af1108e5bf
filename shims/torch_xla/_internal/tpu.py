"""``torch_xla._internal.tpu``: the TPU host as the rank's environment describes it.

What the real module reads from the environment (``TPU_PROCESS_BOUNDS``,
``CLOUD_TPU_TASK_ID``) is read the same way; what it reads from PCI devices
(chips) or the GCE metadata server (worker id) is the harness topology's
(ranks per host, host index). The metadata server's ``tpu-env`` is what a
harness host's environment says (``TPU_ACCELERATOR_TYPE``: the topology's), so
``get_tpu_env``, ``version`` and ``get_tpu_type`` answer from it; worker IPs and
the topology set-up are not modelled.
"""

from __future__ import annotations

import functools
import operator
import re
from typing import NamedTuple, TypedDict

from torch_xla._internal import runtime as _runtime
from torch_xla.core import xla_env_vars as xenv
from torch_xla.utils import utils as xu


def _host() -> _runtime.Runtime:
    """The host as the runtime knows it. Asking (the real module reads PCI devices and
    the metadata server) does not initialise the runtime: a launcher may ask before its
    xmp.spawn, as upstream's skipIf decorators do at import."""
    return _runtime.current()


class TpuEnv(TypedDict):
    ACCELERATOR_TYPE: str
    TPU_PROCESS_BOUNDS: str
    TPU_CHIPS_PER_HOST_BOUNDS: str
    WORKER_ID: int


class MeshShape(NamedTuple):
    """A TPU mesh shape ('2,2,1')."""

    x: int
    y: int
    z: int

    @classmethod
    def from_string(cls, mesh: str) -> MeshShape:
        dims = tuple(int(d) for d in mesh.split(","))
        if len(dims) != 3:
            raise ValueError(f"Mesh shape '{mesh}' should be length 3")
        return MeshShape(*dims)

    @property
    def size(self) -> int:
        return functools.reduce(operator.mul, self)

    def __mul__(self, other: object) -> MeshShape:  # type: ignore[override]
        return MeshShape(*(d1 * d2 for d1, d2 in zip(self, other)))  # type: ignore[call-overload]


def process_bounds_size() -> int | None:
    """Processes across all TPU hosts, or None if unknown."""
    bounds = xu.getenv_as(xenv.TPU_PROCESS_BOUNDS, str)
    return MeshShape.from_string(bounds).size if bounds else None


def num_available_chips() -> int:
    """The chips of this host: its ranks, one per chip."""
    return _host().ranks_per_host()


def num_logical_cores_per_chip() -> int:
    """One XLA device per chip (v4 and later, which is what the harness models)."""
    return 1


def num_available_devices() -> int:
    return num_available_chips() * num_logical_cores_per_chip()


def num_local_processes() -> int:
    local_chips = num_available_chips()
    total = process_bounds_size()
    return local_chips if not total else min(local_chips, total)


def num_tpu_workers() -> int:
    """The hosts of the slice."""
    runtime = _host()
    return runtime.world_size() // max(1, runtime.ranks_per_host())


def num_expected_global_devices() -> int:
    return num_available_devices() * num_tpu_workers()


def task_id() -> int | None:
    return xu.getenv_as(xenv.CLOUD_TPU_TASK_ID, int)


def worker_id() -> int:
    """This host's index in the slice."""
    return _host().host_index()


def get_tpu_env() -> TpuEnv:
    """``tpu-env`` as the real ``build_tpu_env_from_vars`` reads it from the environment
    (where the real one asks the metadata server, which says the same on a TPU VM)."""
    return {  # type: ignore[return-value]
        xenv.ACCELERATOR_TYPE: xu.getenv_as(xenv.TPU_ACCELERATOR_TYPE, str),
        xenv.TPU_PROCESS_BOUNDS: xu.getenv_as(
            xenv.TPU_PROCESS_BOUNDS, str, xu.getenv_as(xenv.TPU_HOST_BOUNDS, str)),
        xenv.TPU_CHIPS_PER_PROCESS_BOUNDS: xu.getenv_as(
            xenv.TPU_CHIPS_PER_PROCESS_BOUNDS, str,
            xu.getenv_as(xenv.TPU_CHIPS_PER_HOST_BOUNDS, str)),
        xenv.WORKER_ID: xu.getenv_as(xenv.CLOUD_TPU_TASK_ID, str,
                                     xu.getenv_as(xenv.TPU_WORKER_ID, str)),
    }


def version() -> int:
    """The TPU generation, from the accelerator type (``v4-64`` -> 4), as the real one."""
    accelerator = get_tpu_env()[xenv.ACCELERATOR_TYPE] or ""
    match = re.match(r"^(?:v|tpu)(\d)([A-Za-z]?){7}-(\d+)$", accelerator)
    if not match:
        raise OSError("Failed to parse TPU version from metadata")
    return int(match.groups()[0])


def get_tpu_type() -> str:
    """``v6e-8`` -> ``v6e``, as the real one."""
    accelerator = get_tpu_env()[xenv.ACCELERATOR_TYPE] or ""
    match = re.search(r"^([^-]*)-", accelerator)
    return match.group(1) if match else accelerator
