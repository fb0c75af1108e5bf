"""corrupt: readers see garbled bytes."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from harness.faults.kinds._base import FaultKind

if TYPE_CHECKING:
    from harness.faults.plan import Fault
    from harness.faults.seal import Sealing
    from harness.filesystem.resolution import Resolved


class Corrupt(FaultKind):
    """``bytes`` (1..1,000,000, default 8) seeded positions of the closed file are
    changed, never to their old value."""

    kind: Literal["corrupt"] = "corrupt"
    bytes: Annotated[int, Field(ge=1, le=1_000_000)] = 8

    ops = ("close",)
    needs_sandbox = True
    close_order = 2

    def at_close(self, engine: Sealing, fault: Fault, r: Resolved, data: bytes) -> bytes:
        garbled, where = self.garble(data, fault.rng)
        engine.report(fault, "close", r.vpath, bytes=where,
                      message=f"{r.vpath}: {len(where)} bytes garbled")
        return garbled

    def garble(self, data: bytes, seed: int) -> tuple[bytes, list[int]]:
        """Garble a seeded handful of bytes (never a no-op on non-empty data)."""
        if not data:
            return data, []
        rng = random.Random(seed)
        where = sorted(rng.sample(range(len(data)), min(len(data), self.bytes)))
        out = bytearray(data)
        for i in where:
            out[i] = (out[i] + 1 + rng.randrange(255)) % 256
        return bytes(out), where
