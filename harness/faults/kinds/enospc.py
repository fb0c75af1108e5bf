"""enospc: writes fail with ENOSPC once the file reaches K bytes."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from harness.faults.kinds._base import MAX_BYTES, FaultKind
from harness.filesystem.view import oserror

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault
    from harness.filesystem.files import ViewFile
    from harness.filesystem.resolution import Resolved


class Enospc(FaultKind):
    """The disk fills at byte ``at_byte`` (0..2**40) of a matching file: the write
    that crosses it is cut short, the next one fails with ENOSPC."""

    kind: Literal["enospc"] = "enospc"
    at_byte: Annotated[int, Field(ge=0, le=MAX_BYTES)] = 0
    search = {"at_byte": (0, 64)}

    ops = ("write",)
    needs_sandbox = True

    def on_write(self, engine: FaultEngine, fault: Fault, r: Resolved, f: ViewFile,
                 data: memoryview) -> memoryview:
        if not fault.trigger.matches("write", r.vpath):
            return data
        if f.written >= self.at_byte:
            engine.report(fault, "write", r.vpath,
                          message=f"ENOSPC writing {r.vpath} at byte {f.written}")
            raise oserror(errno.ENOSPC)
        return data[:self.at_byte - f.written]
