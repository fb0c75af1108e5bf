"""empty-window: readers see the file created but empty until they have all looked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import FaultKind

if TYPE_CHECKING:
    from harness.faults.plan import Fault
    from harness.faults.seal import Sealing
    from harness.filesystem.resolution import Resolved


class EmptyWindow(FaultKind):
    """The file shows up empty at close; its bytes follow once every other rank has looked."""

    kind: Literal["empty-window"] = "empty-window"

    ops = ("close",)
    needs_sandbox = True
    needs_coordinator = True
    watched_path = True
    close_order = 4
    in_between = True

    def at_close(self, engine: Sealing, fault: Fault, r: Resolved, data: bytes) -> None:
        engine.report(fault, "close", r.vpath,
                      message=f"{r.vpath} visible empty until every reader has looked")
        engine.write_file(r.staging, data)
        engine.write_file(r.upper, b"")
        engine.hold(r, fault, until="read")
