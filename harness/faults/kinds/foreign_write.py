"""foreign-write: another job writes the same path right after the writer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import Content, FaultKind
from harness.faults.trigger import Trigger
from harness.roles import Roles

if TYPE_CHECKING:
    from harness.faults.plan import Fault
    from harness.faults.seal import Sealing
    from harness.filesystem.resolution import Resolved


class ForeignWrite(FaultKind):
    """Another job sharing the directory writes ``content`` over the file right
    after the writer closes it: the last writer wins. Aimed at a ``role`` without
    a ``content``, the other job is another run of the same target (its own inputs)."""

    kind: Literal["foreign-write"] = "foreign-write"
    content: Content = ""

    ops = ("close",)
    needs_sandbox = True
    close_order = 3

    def _from_target(self) -> bool:
        return self.role is not None and "content" not in self.model_fields_set

    def unresolved(self, trigger: Trigger, roles: Roles | None) -> str | None:
        why = super().unresolved(trigger, roles)
        if why is None and self._from_target() and roles is not None and not roles.previous:
            return ("another run of the target writes none of its handoff files at the same "
                    "path (its files depend on its inputs): no other job can collide with it")
        return why

    def at_close(self, engine: Sealing, fault: Fault, r: Resolved, data: bytes) -> bytes:
        if self._from_target():
            other = engine.plan.roles.content_for(r.vpath) if engine.plan.roles else None
            if other is None:
                return data  # the other run writes no such file: nothing collides here
            foreign = other
        else:
            foreign = self.content.encode() if isinstance(self.content, str) else self.content
        engine.report(fault, "close", r.vpath,
                      message=f"another job overwrote {r.vpath} right after rank {engine.rank} "
                              f"wrote it ({len(foreign)} bytes of its own)")
        return foreign
