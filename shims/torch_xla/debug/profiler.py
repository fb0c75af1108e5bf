"""``torch_xla.debug.profiler`` (xp): trace annotations a training loop wraps its steps in.

There is no profiler to collect them: ``Trace`` and ``trace_me`` annotate
nothing, ``StepTrace`` ends with the step marker the real one ends with, and
``start_server`` returns a server object that serves nothing. Capturing a trace
(``trace``, ``trace_detached``, ``start_trace``/``stop_trace``) is not modelled.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch_xla
from torch_xla._internal import link

_tracer_marked_step = False


def set_tracer_marked_step(value: bool) -> None:
    global _tracer_marked_step
    _tracer_marked_step = value


def get_tracer_marked_step() -> bool:
    return _tracer_marked_step


class _ProfilerServer:
    def __init__(self, port: int) -> None:
        self.port = port


def start_server(port: int, only_on_master: bool = True) -> object:
    """A profiler server on ``port`` (on the local master only, by default); None elsewhere."""
    if not only_on_master or link.local_rank() == 0:
        return _ProfilerServer(port)
    return None


class Trace:
    """``with xp.Trace('forward'):`` a named scope of the trace."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name, self.kwargs = name, kwargs

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class StepTrace(Trace):
    """``with xp.StepTrace('train_step', step_num=i):`` a step, closed by ``torch_xla.sync()``."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, _r=1, **kwargs)

    def __enter__(self) -> None:
        set_tracer_marked_step(True)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        torch_xla.sync()
        return super().__exit__(*exc)


def trace_me(scope: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator_trace_me(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper_trace_me(*args: Any, **kwargs: Any) -> Any:
            with Trace(scope):
                return func(*args, **kwargs)

        return wrapper_trace_me

    return decorator_trace_me
