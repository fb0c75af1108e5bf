"""lost-write: the writer's write succeeds but never becomes visible."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import FaultKind

if TYPE_CHECKING:
    from harness.faults.plan import Fault
    from harness.faults.seal import Sealing
    from harness.filesystem.resolution import Resolved


class LostWrite(FaultKind):
    """Every call of the writer succeeds; nobody, the writer included, ever sees the bytes
    (a rename of the lost file is lost with it: its new name shows nothing new)."""

    kind: Literal["lost-write"] = "lost-write"

    ops = ("close",)
    needs_sandbox = True
    close_order = 0  # nothing else matters for a write that is gone

    def at_close(self, engine: Sealing, fault: Fault, r: Resolved, data: bytes) -> None:
        engine.report(fault, "close", r.vpath,
                      message=f"the write of {r.vpath} ({len(data)} bytes) was lost")
        engine.remove_file(r.staging)
