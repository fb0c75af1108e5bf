"""torn-write: readers see a prefix of what the writer wrote."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from harness.faults.kinds._base import MAX_BYTES, FaultKind

if TYPE_CHECKING:
    from harness.faults.plan import Fault
    from harness.faults.seal import Sealing
    from harness.filesystem.resolution import Resolved


class TornWrite(FaultKind):
    """The closed file holds only a prefix: ``offset`` bytes (0..2**40), or a
    seeded cut at a line boundary (often still valid YAML) or mid-line."""

    kind: Literal["torn-write"] = "torn-write"
    offset: Annotated[int, Field(ge=0, le=MAX_BYTES)] | None = None

    ops = ("close",)
    needs_sandbox = True
    close_order = 1

    def at_close(self, engine: Sealing, fault: Fault, r: Resolved, data: bytes) -> bytes:
        offset = self.cut(data, fault.rng)
        engine.report(fault, "close", r.vpath, offset=offset, size=len(data),
                      message=f"{r.vpath} torn at byte {offset} of {len(data)}")
        return data[:offset]

    def cut(self, data: bytes, seed: int) -> int:
        """Where the write ends."""
        if self.offset is not None:
            return min(self.offset, len(data))
        if len(data) <= 1:
            return 0
        rng = random.Random(seed)
        boundaries = [i + 1 for i, b in enumerate(data[:-1]) if b == 0x0A]
        mid = [rng.randrange(1, len(data)) for _ in range(max(1, len(boundaries)))]
        candidates = sorted(set(boundaries + mid + [0]))
        return candidates[rng.randrange(len(candidates))]
