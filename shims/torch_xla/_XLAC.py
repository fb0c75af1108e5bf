"""``torch_xla._XLAC``: the real package's C++ bindings, which scripts and tests call now
and then (``_xla_set_mat_mul_precision``, ``_xla_get_default_device``, the metrics ones).

Those that mean something on the shim's CPU tensors are modelled here, on the same state as
the public APIs; every other binding is a stand-in raising ``NotModelledError``.
"""

from __future__ import annotations

from typing import Any

from torch_xla._internal import link
from torch_xla._internal import runtime as _runtime
from torch_xla._internal.surface import stand_in
from torch_xla.debug import metrics as _metrics

_PRECISIONS = ("default", "high", "highest")
_mat_mul_precision = "default"


def _xla_set_mat_mul_precision(precision: str) -> None:
    """Kept and read back; the shim's CPU matmuls are float32 at any setting."""
    global _mat_mul_precision
    if precision not in _PRECISIONS:
        raise ValueError(f"Invalid precision: {precision}")
    _mat_mul_precision = precision


def _xla_get_mat_mul_precision() -> str:
    return _mat_mul_precision


def _xla_get_default_device() -> str:
    return "xla:0"


def _xla_get_devices() -> list[str]:
    link.use()
    return ["xla:0"]


def _xla_real_devices() -> list[str]:
    from torch_xla.core import xla_model as xm

    return xm.xla_real_devices()


def _xla_runtime_is_initialized() -> bool:
    runtime = _runtime.installed()
    return runtime is not None and runtime.used()


def _xla_set_rng_seed(seed: int, device: str = "") -> None:
    from torch_xla.core import xla_model as xm

    xm.set_rng_state(seed)


def _xla_get_rng_seed(device: str = "") -> int:
    from torch_xla.core import xla_model as xm

    return xm.get_rng_state()


def _xla_sync_multi(tensors: Any, devices: Any, wait: bool = True,
                    sync_xla_data: bool = True) -> None:
    """Materialise ``tensors``: CPU tensors always are."""
    link.use()


def _xla_wait_device_ops(devices: Any = ()) -> None:
    link.use()


# -- the XLA coordinator and its preemption sync manager (CheckpointManager's) -------------

_coordinator_initialized = False
_preemption_sync_active = False


def _ensure_xla_coordinator_initialized(global_rank: int, world_size: int, master_addr: str,
                                        master_port: str = "8547") -> None:
    """Every process connects to the coordination service process 0 hosts: a wait for all
    of them, once per process (the world's, on its clock)."""
    global _coordinator_initialized
    if _coordinator_initialized:
        return
    link.use()
    size = link.world_size()
    if size > 1:
        link.collective("initialize_coordinator", "gather_bytes", b"", group="xla-coordinator",
                        groups=[list(range(size))])
    _coordinator_initialized = True


def _check_coordinator() -> None:
    if not _coordinator_initialized:
        raise RuntimeError("Check failed: client->CoordinatorInitialized() Coordinator must "
                           "be initialized")


def _activate_preemption_sync_manager() -> None:
    """Its C++ handler catches SIGTERM from now (the process no longer dies of it)."""
    global _preemption_sync_active
    _check_coordinator()
    if not _preemption_sync_active:
        link.sync_point("activate")
        _preemption_sync_active = True


def _deactivate_preemption_sync_manager() -> None:
    global _preemption_sync_active
    _check_coordinator()
    if _preemption_sync_active:
        link.sync_point("deactivate")
        _preemption_sync_active = False


def _sync_point_reached(step: int) -> bool:
    """Is ``step`` the step every process agreed to save at after a notice?"""
    _check_coordinator()
    return link.sync_point("reached", int(step))


def _xla_increment_counter(name: str, value: int) -> None:
    _metrics._count(name, value)


_xla_counter_names = _metrics.counter_names
_xla_counter_value = _metrics.counter_value
_xla_metric_names = _metrics.metric_names
_xla_metric_data = _metrics.metric_data
_xla_metrics_report = _metrics.metrics_report
_short_xla_metrics_report = _metrics.short_metrics_report
_clear_xla_counters = _metrics.clear_counters
_clear_xla_metrics = _metrics.clear_metrics
_get_executed_fallback_ops = _metrics.executed_fallback_ops


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module 'torch_xla._XLAC' has no attribute {name!r}")
    value = stand_in(f"torch_xla._XLAC.{name}")
    globals()[name] = value
    return value
