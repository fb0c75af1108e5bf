"""straggle: delay the rank before a collective."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import FaultKind, Millis

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault


class Straggle(FaultKind):
    """The rank arrives ``delay_ms`` (0..86,400,000: a day, default 500) late at a matching collective."""

    kind: Literal["straggle"] = "straggle"
    delay_ms: Millis = 500
    # a slow operation, not a slow disk: on every operation it would only meet the deadline
    search = {"occurrence": (1, 2, 3)}

    ops = ("collective",)

    def at_collective(self, engine: FaultEngine, fault: Fault, shown: str) -> None:
        engine.report(fault, "collective", None,
                      message=f"rank {engine.rank} straggles {self.delay_ms} ms before {shown}")
        time.sleep(self.delay_ms / 1000)
