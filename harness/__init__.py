"""harness: run distributed PyTorch/XLA bootstrap code as real rank processes
against a fake torch_xla, inject the faults real pods produce, judge the result."""

from harness.topology import TOPOLOGIES, Topology, get_topology
from harness.world.config import WorldConfig
from harness.world.result import CRASH, ERROR, FAIL, HANG, PASS, RankResult, WorldResult
from harness.world.world import run_world

__version__ = "0.1.0"

__all__ = [
    "run_world", "WorldConfig", "WorldResult", "RankResult", "Topology", "TOPOLOGIES", "get_topology",
    "PASS", "FAIL", "ERROR", "HANG", "CRASH", "__version__",
]
