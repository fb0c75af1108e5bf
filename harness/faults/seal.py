"""Sealing a faulted write: at its close, the content faults decided at its open make its
bytes what the disk ends up holding (a prefix, garbled bytes, another job's, none yet).

Who seals is the question that matters. In the simulator the harness does, in its own
process (``harness.world.sealing``): the rank hands over the staged file and waits, so a
target that patches a fault kind in its own process (``TornWrite.at_close`` keeping every
byte) changes nothing that lands on the disk, and a fault it reports itself is refused as a
forgery. On a pod there is no harness process beside the ranks: the rank seals its own
writes (``FaultEngine``), and a target that means to can fake them there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from harness.faults.plan import Fault, FaultPlan
    from harness.filesystem.resolution import Resolved


class Sealing(Protocol):
    """What a fault kind's ``at_close`` may use: the side that seals (a rank's engine or
    the harness), with file operations of its own."""

    plan: FaultPlan
    rank: int

    def report(self, fault: Fault, op: str, path: str | None = None, **detail: Any) -> None: ...
    def read_file(self, path: str) -> bytes: ...
    def write_file(self, path: str, data: bytes) -> None: ...
    def remove_file(self, path: str) -> None: ...
    def hold(self, r: Resolved, fault: Fault, until: str) -> None: ...


def fault_event(fault: Fault, op: str, path: str | None, detail: dict[str, Any]) -> dict[str, Any]:
    """The message that says ``fault`` fired (the history's ``fault`` event)."""
    message = detail.pop("message", None) or f"{fault.kind} on {op} {path or ''}".rstrip()
    return {"type": "fault", "fault": fault.kind, "index": fault.index, "op": op, "path": path,
            "detail": {"message": message, **detail}}


def seal(side: Sealing, faults: Sequence[Fault], r: Resolved) -> bool:
    """Apply ``faults`` (one of each kind, in their close order) to the write staged at
    ``r.staging``; True if its bytes are withheld (lost, or held for the coordinator to
    publish), else they are at ``r.staging`` for the mount's model to publish."""
    data = side.read_file(r.staging)  # type: ignore[arg-type]
    one_of_each = {f.kind: f for f in faults}.values()
    for fault in sorted(one_of_each, key=lambda f: f.spec.close_order or 0):
        changed = fault.spec.at_close(side, fault, r, data)
        if changed is None:
            return True
        data = changed
    if r.model_staging is not None:
        # The mount stages its writes (NFS, gcsfuse): the faulted bytes are what its model
        # publishes, and what the writer's own host sees meanwhile (a rename of it too).
        side.write_file(r.model_staging, data)
        side.remove_file(r.staging)  # type: ignore[arg-type]
        r.staging = r.model_staging
        return False
    side.write_file(r.staging, data)  # type: ignore[arg-type]
    return False
