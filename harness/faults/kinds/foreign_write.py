"""foreign-write: another job writes the same path right after the writer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from harness.faults.kinds._base import MAX_CONTENT, FaultKind

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault
    from harness.filesystem.resolution import Resolved


class ForeignWrite(FaultKind):
    """Another job sharing the directory writes ``content`` over the file right
    after the writer closes it: the last writer wins."""

    kind: Literal["foreign-write"] = "foreign-write"
    content: Annotated[str, Field(max_length=MAX_CONTENT)] = ""

    ops = ("close",)
    needs_sandbox = True
    close_order = 3

    def at_close(self, engine: FaultEngine, fault: Fault, r: Resolved, data: bytes) -> bytes:
        foreign = self.content.encode()
        engine.report(fault, "close", r.vpath,
                      message=f"another job overwrote {r.vpath} right after rank {engine.rank} "
                              f"wrote it ({len(foreign)} bytes of its own)")
        return foreign
