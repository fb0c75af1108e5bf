"""latency: an operation takes D ms."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import FaultKind, Millis
from harness.faults.trigger import FILE_OPS

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault
    from harness.filesystem.files import ViewFile
    from harness.filesystem.resolution import Resolved


class Latency(FaultKind):
    """A matching file operation takes ``delay_ms`` (0..86,400,000: a day, default 100) longer."""

    kind: Literal["latency"] = "latency"
    delay_ms: Millis = 100
    # a slow operation, not a slow disk: on every operation it would only meet the deadline
    search = {"occurrence": (1, 2, 3)}

    ops = FILE_OPS
    needs_sandbox = True

    def before(self, engine: FaultEngine, fault: Fault, op: str, r: Resolved,
               r2: Resolved | None = None) -> None:
        if engine.fires(fault, op, r.vpath):
            self._wait(engine, fault, op, r.vpath)

    def on_write(self, engine: FaultEngine, fault: Fault, r: Resolved, f: ViewFile,
                 data: memoryview) -> memoryview:
        if engine.fires(fault, "write", r.vpath):
            self._wait(engine, fault, "write", r.vpath)
        return data

    def _wait(self, engine: FaultEngine, fault: Fault, op: str, vpath: str) -> None:
        engine.report(fault, op, vpath, message=f"{op} of {vpath} delayed {self.delay_ms} ms")
        time.sleep(self.delay_ms / 1000)
