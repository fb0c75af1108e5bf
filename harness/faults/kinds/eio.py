"""eio: the first N attempts of an operation fail with EIO, then succeed."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from harness.faults.kinds._base import FaultKind
from harness.filesystem.view import oserror

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault
    from harness.filesystem.files import ViewFile
    from harness.filesystem.resolution import Resolved


class Eio(FaultKind):
    """The first ``count`` (1..1000) matching attempts fail with EIO, as a flaky
    disk or network filesystem gives it; the filename only on open, as the kernel."""

    kind: Literal["eio"] = "eio"
    count: Annotated[int, Field(ge=1, le=1000)] = 1
    search = {"count": (1, 2)}  # transient: a retry or two gets through
    transient = True

    ops = ("open-read", "open-write", "read", "write", "fsync")
    needs_sandbox = True

    def occurs(self, count: int) -> bool:
        return count <= self.count

    def before(self, engine: FaultEngine, fault: Fault, op: str, r: Resolved,
               r2: Resolved | None = None) -> None:
        if op in self.ops and engine.fires(fault, op, r.vpath):
            engine.report(fault, op, r.vpath, message=f"EIO on {op} of {r.vpath}")
            raise oserror(errno.EIO, r.vpath if op.startswith("open") else None)

    def on_write(self, engine: FaultEngine, fault: Fault, r: Resolved, f: ViewFile,
                 data: memoryview) -> memoryview:
        if engine.fires(fault, "write", r.vpath):
            engine.report(fault, "write", r.vpath, message=f"EIO on write of {r.vpath}")
            raise oserror(errno.EIO)
        return data
