"""kill: SIGKILL the rank at the trigger point."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, ClassVar, Literal

from harness.faults.kinds._strike import Strike

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault


class Kill(Strike):
    """SIGKILL the rank at a file operation, a collective or ``after_ms`` from its start."""

    kind: Literal["kill"] = "kill"

    timed = True
    ends_life = True
    said: ClassVar[str] = "SIGKILLed"

    def strike(self, engine: FaultEngine, fault: Fault, op: str, where: str | None) -> None:
        life = f" (life {engine.life})" if engine.life else ""
        engine.report(fault, op, where if op != "collective" else None,
                      message=f"rank {engine.rank}{life} {self.said} at {op} {where or ''}".rstrip())
        os.kill(os.getpid(), signal.SIGKILL)
        signal.pause()  # SIGKILL is on its way (a wait off the world's clock: it holds it)
