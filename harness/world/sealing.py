"""The harness's half of a faulted write's close: it seals the write in its own process
(``harness.faults.seal``), from the plan it made, on the file the rank staged, so what
lands on the disk is the fault's doing whatever the target changed in its own process.

A rank's word is checked before anything is touched: every fault it names must be a
content fault the plan gives that rank; the staged file must be one of that rank's staging
files; every path must lie under the world's sandbox, reached without a link
(``harness.filesystem.beneath``). Anything else is refused as a broken protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.faults.seal import fault_event, seal
from harness.filesystem.beneath import Beneath, Outside

if TYPE_CHECKING:
    from harness.faults.plan import Fault, FaultPlan
    from harness.filesystem.resolution import Resolved
    from harness.topology import Topology
    from harness.world.protocol import Seal


class SealRefused(Exception):
    """A seal request the harness will not act on: why."""


class _StagedWrite:
    """What a fault kind's ``at_close`` reads of the write (a ``Resolved``'s paths)."""

    def __init__(self, msg: Seal) -> None:
        self.vpath, self.staging, self.upper = msg.path, msg.staging, msg.upper
        self.model_staging = msg.model_staging


class _HarnessSide:
    """The side that seals, in the harness: faults are recorded and held writes handed to
    the publisher here, and every file operation goes through ``Beneath``."""

    def __init__(self, plan: FaultPlan, rank: int, beneath: Beneath,
                 record: Callable[[dict[str, Any]], None],
                 hold: Callable[[dict[str, Any]], None]) -> None:
        self.plan, self.rank, self.beneath = plan, rank, beneath
        self._record, self._hold = record, hold
        self.held = False
        self.follows = False  # the hold follows the write when its writer renames it

    def report(self, fault: Fault, op: str, path: str | None = None, **detail: Any) -> None:
        self._record(fault_event(fault, op, path, detail))

    def read_file(self, path: str) -> bytes:
        return self.beneath.read(path)

    def write_file(self, path: str, data: bytes) -> None:
        self.beneath.write(path, data)

    def remove_file(self, path: str) -> None:
        self.beneath.remove(path)

    def hold(self, r: Resolved, fault: Fault, until: str) -> None:
        self._hold({"src": r.staging, "dst": r.upper, "path": r.vpath, "until": until})
        self.held = True
        self.follows = self.follows or fault.spec.follows_rename


class Sealer:
    """Seals the faulted writes of one world's ranks."""

    def __init__(self, plan: FaultPlan, topology: Topology, sandbox: str) -> None:
        self.plan, self.topology = plan, topology
        self.beneath = Beneath(sandbox)
        self._by_index = {f.index: f for f in plan.faults}

    def seal(self, rank: int, life: int, msg: Seal, record: Callable[[dict[str, Any]], None],
             hold: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Seal the write ``msg`` names for ``rank`` (in its ``life``): the reply it waits
        for. ``record`` takes each fault's event, ``hold`` a write the publisher keeps back.
        ``SealRefused`` or ``OSError`` (``Outside``) if the request is not one to act on."""
        faults = [self._fault(i, rank, life) for i in msg.faults]
        if not faults:
            raise SealRefused("a faulted write with no fault")
        staged = self.beneath.relative(msg.staging)
        if len(staged) != 3 or staged[0] != "held" or not staged[1].startswith(f"rank-{rank}-"):
            raise Outside(1, f"not a staging file of rank {rank}'s", msg.staging)
        self.beneath.relative(msg.upper)
        if msg.model_staging is not None:
            self.beneath.relative(msg.model_staging)
        side = _HarnessSide(self.plan, rank, self.beneath, record, hold)
        r = _StagedWrite(msg)
        withheld = seal(side, faults, r)  # type: ignore[arg-type]
        return {"type": "sealed", "withheld": withheld, "staging": r.staging, "held": side.held,
                "follows": side.follows}

    def _fault(self, index: int, rank: int, life: int) -> Fault:
        fault = self._by_index.get(index)
        if fault is None or fault.spec.close_order is None:
            raise SealRefused(f"fault #{index} is no content fault of this world's plan")
        if not fault.trigger.selects(rank, self.topology.host_of(rank), life):
            raise SealRefused(f"{fault.name} is not planned for rank {rank} (life {life})")
        return fault

    def close(self) -> None:
        self.beneath.close()
