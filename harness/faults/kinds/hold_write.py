"""hold-write: the write becomes visible only after the others have looked (or finished)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import FaultKind

if TYPE_CHECKING:
    from harness.faults.plan import Fault
    from harness.faults.seal import Sealing
    from harness.filesystem.resolution import Resolved


class HoldWrite(FaultKind):
    """The coordinator publishes the closed file only once every other rank has
    looked for it (``until: read``) or has finished (``until: done``); renamed by its
    writer meanwhile, it shows under its new name when the hold ends."""

    kind: Literal["hold-write"] = "hold-write"
    until: Literal["read", "done"] = "read"
    search = {"until": ("read", "done")}

    ops = ("close",)
    needs_sandbox = True
    needs_coordinator = True
    watched_path = True
    close_order = 5
    follows_rename = True

    def at_close(self, engine: Sealing, fault: Fault, r: Resolved, data: bytes) -> None:
        engine.report(fault, "close", r.vpath,
                      message=f"{r.vpath} held until every other rank has "
                              f"{'looked for it' if self.until == 'read' else 'finished'}")
        engine.write_file(r.staging, data)
        engine.hold(r, fault, until=self.until)
