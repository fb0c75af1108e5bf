"""harness: run distributed PyTorch/XLA bootstrap code as real rank processes
against a fake torch_xla, inject the faults real pods produce, judge the result.

The names below are imported when first used (PEP 562): ``import harness``, as the
pytest plugin's entry point and ``harness --help`` do, costs nothing until then."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.vocabulary import CRASH, ERROR, FAIL, HANG, PASS  # cheap: no import of their own

__version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC = {
    "run_world": "harness.world.world",
    "WorldConfig": "harness.world.config",
    "WorldResult": "harness.world.result",
    "RankResult": "harness.world.result",
    "Topology": "harness.topology",
    "TOPOLOGIES": "harness.topology",
    "get_topology": "harness.topology",
    "describe": "harness.reports.diagnosis",
}

__all__ = [
    "run_world", "WorldConfig", "WorldResult", "RankResult", "Topology", "TOPOLOGIES", "get_topology",
    "describe", "PASS", "FAIL", "ERROR", "HANG", "CRASH", "__version__",
]

if TYPE_CHECKING:
    from harness.reports.diagnosis import describe
    from harness.topology import TOPOLOGIES, Topology, get_topology
    from harness.world.config import WorldConfig
    from harness.world.result import RankResult, WorldResult
    from harness.world.world import run_world


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
