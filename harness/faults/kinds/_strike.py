"""What kill, preempt and raise share: they strike the rank at a file
operation, a collective, or on a timer, and a write they interrupt may be
left partly done."""

from __future__ import annotations

import os
import random
import threading
from typing import TYPE_CHECKING

from harness.faults.kinds._base import FaultKind
from harness.faults.trigger import FILE_OPS

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault
    from harness.filesystem.files import ViewFile
    from harness.filesystem.resolution import Resolved


class Strike(FaultKind):
    """A fault that ends what the rank is doing where its trigger matches.

    ``partial`` (default true): a write it interrupts leaves a seeded prefix behind.
    """

    partial: bool = True

    ops = FILE_OPS + ("collective",)

    def strike(self, engine: FaultEngine, fault: Fault, op: str, where: str | None) -> None:
        raise NotImplementedError

    def before(self, engine: FaultEngine, fault: Fault, op: str, r: Resolved,
               r2: Resolved | None = None) -> None:
        if op != "write" and engine.fires(fault, op, r.vpath):
            self.strike(engine, fault, op, r.vpath)

    def on_write(self, engine: FaultEngine, fault: Fault, r: Resolved, f: ViewFile,
                 data: memoryview) -> memoryview:
        if engine.fires(fault, "write", r.vpath):
            if self.partial and len(data) > 1:
                cut = 1 + random.Random(fault.rng).randrange(len(data) - 1)
                os.write(f.fileno(), data[:cut])
                f.flush()
            self.strike(engine, fault, "write", r.vpath)
        return data

    def at_collective(self, engine: FaultEngine, fault: Fault, shown: str) -> None:
        self.strike(engine, fault, "collective", shown)

    def at_start(self, engine: FaultEngine, fault: Fault, seed: int) -> int:
        if fault.trigger.after_ms is not None:
            timer = threading.Timer(fault.trigger.after_ms / 1000, self.strike,
                                    (engine, fault, "start", None))
            timer.name = f"harness-fault-{fault.index}"
            timer.daemon = True
            timer.start()
        return seed
