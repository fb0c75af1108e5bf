"""``torch_xla.debug.metrics``: counters and metrics of what this process really did.

The real package keeps two arenas (torch::lazy's and the XLA runtime's) and
stitches their reports together; the shim keeps the same two, with the real
names, bumped where the real C++ bumps them, for what the shim models:

- collectives: ``xla::all_reduce`` (a plain tensor ``xm.all_reduce``, through
  ``torch.ops._c10d_functional``), ``xla::AllReduce`` (with scale, groups or an
  unpinned layout), ``xla::AllReduceInPlace`` (a list), ``xla::AllGather``,
  ``xla::AllGatherOut``, ``xla::ReduceScatter``, ``xla::ReduceScatterOut``,
  ``xla::AllToAll``, each timing a ``LazyTracing`` sample (torch::lazy arena);
  a world of one short-circuits as the real one does, and counts nothing;
- step markers: ``MarkStep`` (runtime arena);
- transfers the shim makes (``send_cpu_data_to_device``, the parallel loaders,
  ``xm.save``/``mesh_reduce``/``do_on_ordinals`` bringing tensors back):
  ``TransferToDeviceTime``/``OutboundData``/``CreateDataHandles`` and
  ``TransferFromDeviceTime``/``InboundData``;
- executions: ``ExecuteTime``, one sample each time a graph ``torch.compile``
  (``openxla``) traced runs, and ``EagerOpExecuteTime``, one per collective in
  eager mode (``torch_xla.experimental.eager_mode(True)``), as the real ones
  execute; the lazy tensors of the real default mode are not modelled, so a step
  marker executes nothing;
- compilations: none (nothing is compiled), so ``CompileTime`` has no samples and,
  as a real counter at zero, is absent.

As in the real one, a counter at zero or a metric without samples is left out
of the names and the reports, and ``counter_value``/``metric_data`` return None.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

from torch_xla.experimental.eager import is_eager_mode

_LOCK = threading.Lock()
_max_samples: int | None = None  # XLA_METRICS_SAMPLES, read at the first sample


def _samples_kept() -> int:
    global _max_samples
    if _max_samples is None:
        _max_samples = int(os.environ.get("XLA_METRICS_SAMPLES", "1024"))
    return _max_samples


def _percentiles() -> list[float]:
    text = os.environ.get("XLA_METRICS_PERCENTILES", "0.01:0.05:0.1:0.2:0.5:0.8:0.9:0.95:0.99")
    return sorted(float(p) for p in text.split(":"))


def _fixed(value: float) -> str:
    return f"{value:.2f}"


def _bytes(value: float) -> str:
    suffixes = ("B", "KB", "MB", "GB", "TB", "PB")
    index = 0
    while index + 1 < len(suffixes) and value >= 1024.0:
        value /= 1024.0
        index += 1
    return f"{value:.2f}{suffixes[index]}"


def _time(value: float) -> str:
    """Nanoseconds as the real MetricFnTime writes them: ``01s523ms512.000us``."""
    parts = (("d", 86400.0e9, 2, 0), ("h", 3600.0e9, 2, 0), ("m", 60.0e9, 2, 0),
             ("s", 1e9, 2, 0), ("ms", 1e6, 3, 0), ("us", 1e3, 7, 3))
    out, count = [], 0
    for i, (suffix, scaler, width, precision) in enumerate(parts):
        ctime = value / scaler
        if ctime >= 1.0 or count > 0 or i + 1 == len(parts):
            out.append(f"{ctime:0{width}.{precision}f}{suffix}")
            value -= math.floor(ctime) * scaler
            count += 1
    return "".join(out)


def _number(value: float) -> str:
    """A double as a C++ ostream writes it by default (6 significant digits)."""
    return f"{value:.6g}"


class _Metric:
    def __init__(self, repr_fn: Callable[[float], str]) -> None:
        self.repr_fn = repr_fn
        self.clear()

    def clear(self) -> None:
        self.count, self.accumulator = 0, 0.0
        self.samples: list[tuple[int, float]] = []

    def add(self, value: float) -> None:
        self.count += 1
        self.accumulator += value
        self.samples.append((time.time_ns(), value))
        if len(self.samples) > _samples_kept():
            del self.samples[0]

    def report(self, name: str) -> str:
        lines = [f"Metric: {name}", f"  TotalSamples: {self.count}",
                 f"  Accumulator: {self.repr_fn(self.accumulator)}"]
        samples = self.samples
        if samples:
            delta = samples[-1][0] - samples[0][0]
            if delta > 0:
                total = sum(v for _, v in samples)
                lines.append(f"  ValueRate: {self.repr_fn(1e6 * (total / (delta / 1000.0)))} / second")
                lines.append(f"  Rate: {_number(1e6 * (len(samples) / (delta / 1000.0)))} / second")
        ordered = sorted(v for _, v in samples)
        points = [f"{_number(p * 100.0)}%={self.repr_fn(ordered[int(p * len(ordered))])}"
                  for p in _percentiles()]
        lines.append("  Percentiles: " + "; ".join(points))
        return "\n".join(lines) + "\n"


class _Arena:
    """One of the two real arenas: metrics and counters by name, reported in name order."""

    def __init__(self) -> None:
        self.metrics: dict[str, _Metric] = {}
        self.counters: dict[str, int] = {}

    def counter(self, name: str) -> int | None:
        value = self.counters.get(name, 0)
        return value if value > 0 else None

    def metric(self, name: str) -> _Metric | None:
        metric = self.metrics.get(name)
        return metric if metric is not None and metric.count > 0 else None

    def report(self) -> str:
        out = [m.report(n) for n, m in sorted(self.metrics.items()) if m.count > 0]
        out += [_counter_report(n, v) for n, v in sorted(self.counters.items()) if v > 0]
        return "".join(out)

    def short_report(self, counter_names: list[str], metric_names: list[str]) -> str:
        out = [m.report(n) for n in metric_names if (m := self.metric(n)) is not None]
        out += [_counter_report(n, v) for n in counter_names if (v := self.counter(n)) is not None]
        out += [_counter_report(n, v) for n, v in sorted(self.counters.items())
                if n.startswith("aten::") and v > 0]
        return "".join(out)


def _counter_report(name: str, value: int) -> str:
    return f"Counter: {name}\n  Value: {value}\n"


# torch::lazy's arena (TORCH_LAZY_COUNTER: xla:: ops, LazyTracing) and the XLA runtime's
# (XLA_COUNTER: MarkStep, transfers, compile and execute times).
_LAZY, _RUNTIME = _Arena(), _Arena()
_TIME_METRICS = {"LazyTracing": _LAZY, "TransferToDeviceTime": _RUNTIME,
                 "TransferFromDeviceTime": _RUNTIME, "ExecuteTime": _RUNTIME,
                 "EagerOpExecuteTime": _RUNTIME}
_BYTES_METRICS = {"OutboundData": _RUNTIME, "InboundData": _RUNTIME}
_RUNTIME_COUNTERS = frozenset({"MarkStep", "CreateDataHandles"})


def _count(name: str, value: int = 1) -> None:
    """Bump a counter as the real C++ does (the shim calls this where the real one counts)."""
    arena = _RUNTIME if name in _RUNTIME_COUNTERS else _LAZY
    with _LOCK:
        arena.counters[name] = arena.counters.get(name, 0) + value


def _sample(name: str, value: float) -> None:
    if name in _TIME_METRICS:
        arena, repr_fn = _TIME_METRICS[name], _time
    elif name in _BYTES_METRICS:
        arena, repr_fn = _BYTES_METRICS[name], _bytes
    else:
        arena, repr_fn = _LAZY, _fixed
    with _LOCK:
        metric = arena.metrics.get(name)
        if metric is None:
            metric = arena.metrics[name] = _Metric(repr_fn)
        metric.add(value)


@contextmanager
def _timed(name: str) -> Iterator[None]:
    start = time.perf_counter_ns()
    try:
        yield
    finally:
        _sample(name, time.perf_counter_ns() - start)


@contextmanager
def _traced_collective(fn_name: str) -> Iterator[None]:
    """TORCH_LAZY_FN_COUNTER_TIMED_TRACING("xla::") in the real binding named ``fn_name``."""
    _count(f"xla::{fn_name}")
    # In eager mode the real one executes the op at once: one execution per collective.
    with _timed("EagerOpExecuteTime") if is_eager_mode() else nullcontext():
        with _timed("LazyTracing"):
            yield


def _transfer(direction: str, tensors: list, elapsed_ns: float) -> None:
    """A transfer of ``tensors`` to (``"to"``) or from (``"from"``) the device that took
    ``elapsed_ns`` (one TimedSection of the real PJRT client)."""
    if not tensors:
        return
    nbytes = float(sum(t.numel() * t.element_size() for t in tensors))
    if direction == "to":
        _sample("TransferToDeviceTime", elapsed_ns)
        _sample("OutboundData", nbytes)
        _count("CreateDataHandles", len(tensors))
    else:
        _sample("TransferFromDeviceTime", elapsed_ns)
        _sample("InboundData", nbytes)


# -- the public API ------------------------------------------------------------

def counter_names() -> list[str]:
    """Every counter above zero: torch::lazy's, then the runtime's."""
    with _LOCK:
        return [n for a in (_LAZY, _RUNTIME) for n, v in sorted(a.counters.items()) if v > 0]


def counter_value(name: str) -> int | None:
    with _LOCK:
        value = _LAZY.counter(name)
        return value if value is not None else _RUNTIME.counter(name)


def clear_counters() -> None:
    with _LOCK:
        for arena in (_LAZY, _RUNTIME):
            arena.counters = dict.fromkeys(arena.counters, 0)


def metric_names() -> list[str]:
    with _LOCK:
        return [n for a in (_LAZY, _RUNTIME) for n, m in sorted(a.metrics.items()) if m.count > 0]


def metric_data(name: str) -> tuple[int, float, tuple[tuple[float, float], ...]] | None:
    """(TOTAL_SAMPLES, ACCUMULATOR, ((time in seconds, value), ...)) or None."""
    with _LOCK:
        metric = _LAZY.metric(name) or _RUNTIME.metric(name)
        if metric is None:
            return None
        return (metric.count, metric.accumulator,
                tuple((1.0e-9 * t, v) for t, v in metric.samples))


def clear_metrics() -> None:
    with _LOCK:
        for arena in (_LAZY, _RUNTIME):
            for metric in arena.metrics.values():
                metric.clear()


def clear_all() -> None:
    clear_metrics()
    clear_counters()


def metrics_report() -> str:
    with _LOCK:
        return _LAZY.report() + _RUNTIME.report()


def short_metrics_report(counter_names: list | None = None, metric_names: list | None = None) -> str:
    if not counter_names:
        counter_names = ["CachedCompile", "MarkStep", "DynamoSyncInputExecuteTime"]
    if not metric_names:
        metric_names = ["CompileTime", "ExecuteTime", "ExecuteReplicatedTime",
                        "TransferToDeviceTime", "TransferFromDeviceTime"]
    with _LOCK:
        return (_LAZY.short_report(counter_names, metric_names)
                + _RUNTIME.short_report(counter_names, metric_names))


def executed_fallback_ops() -> list[str]:
    """Ops run on the CPU because XLA has no lowering: none, every op runs on the CPU here."""
    return []
