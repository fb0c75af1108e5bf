"""``torch_xla.core.dynamo_bridge``: what torch's ``openxla`` dynamo backend calls.

``torch.compile(fn, backend='openxla')`` hands the FX graph dynamo traced to
``extract_compiled_graph``; the real one compiles it to one XLA graph, the
shim runs the graph module itself, eagerly on CPU tensors (counted as the real
one counts it: ``DynamoExtractCompiledGraph``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_xla.debug import metrics as _metrics


def extract_compiled_graph(xla_model: Any, xla_args: Any) -> Callable[..., Any]:
    _metrics._count("DynamoExtractCompiledGraph")

    def run(*args: Any) -> Any:
        with _metrics._timed("ExecuteTime"):  # one execution of the compiled graph
            return xla_model(*args)

    return run


def is_xla_tensor(tensor: Any) -> bool:
    from torch_xla.core import xla_model as xm

    return xm.is_xla_tensor(tensor)


def get_fallback_ops() -> list[str]:
    return _metrics.executed_fallback_ops()
