"""divergent-rng: seed every rank's random generators differently."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import FaultKind
from harness.vocabulary import MAX_SEED

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault


class DivergentRng(FaultKind):
    """Each selected rank seeds random, numpy and torch from the world's seed and
    its rank, as launchers that do not share their state leave them."""

    kind: Literal["divergent-rng"] = "divergent-rng"

    def at_start(self, engine: FaultEngine, fault: Fault, seed: int) -> int:
        seed = (seed * 1_000_003 + 7919 * (engine.rank + 1)) % (MAX_SEED + 1)
        engine.report(fault, "start", None, message=f"rank {engine.rank} seeds its generators "
                                                    f"with {seed}")
        return seed
