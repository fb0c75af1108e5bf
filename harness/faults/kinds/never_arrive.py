"""never-arrive: the rank blocks forever before a collective."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import FaultKind

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault


class NeverArrive(FaultKind):
    """The rank blocks before a matching collective and never comes back: the
    others wait on it, as on a wedged host."""

    kind: Literal["never-arrive"] = "never-arrive"

    ops = ("collective",)
    holds_forever = True

    def at_collective(self, engine: FaultEngine, fault: Fault, shown: str) -> None:
        engine.report(fault, "collective", None,
                      message=f"rank {engine.rank} never arrives at {shown}")
        threading.Event().wait()
