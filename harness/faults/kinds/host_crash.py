"""host-crash: the rank's host loses power at the trigger; what was not durable is lost."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, field_validator

from harness.faults.kinds._base import MAX_BYTES
from harness.faults.kinds.preempt import Preempt

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault


class HostCrash(Preempt):
    """As preempt (SIGKILL, then the rank starts again on the same disk), but first each
    file of ``cut`` (an exact virtual path) is cut to the bytes that were durable: a
    pre-empted VM whose disk persists but whose page cache did not (data written since
    the file's last fsync is lost; the truncate, create or rename that preceded it was
    journaled and persists). ``harness explore --crash-states`` computes ``cut``."""

    kind: Literal["host-crash"] = "host-crash"  # type: ignore[assignment]
    #: virtual path -> the bytes of it that survive (0: an empty file)
    cut: dict[Annotated[str, Field(min_length=1, max_length=4096)],
              Annotated[int, Field(ge=0, le=MAX_BYTES)]] = Field(default_factory=dict,
                                                                  max_length=1000)
    partial: bool = False  # the write in flight is lost with the rest of the cache
    notice: Literal["none"] = "none"  # type: ignore[assignment] - a power loss gives none

    said = "lost its host"
    unsearchable = ("what a host crash loses (cut) comes from the operations before it: harness "
                    "explore --crash-states computes it; drawn blind it is a preempt")

    @field_validator("cut")
    @classmethod
    def _absolute(cls, cut: dict[str, int]) -> dict[str, int]:
        for path in cut:
            if not path.startswith("/") or "\0" in path or any(c in path for c in "*?["):
                raise ValueError(f"cut needs exact absolute paths, got {path!r}")
        return cut

    def strike(self, engine: FaultEngine, fault: Fault, op: str, where: str | None) -> None:
        lost = self._lose(engine)
        life = f" (life {engine.life})" if engine.life else ""
        what = "; ".join(lost) or "no file held data that was not durable"
        engine.report(fault, op, where if op != "collective" else None,
                      message=f"rank {engine.rank}{life} {self.said} at {op} {where or ''}: "
                              f"{what}".replace("  ", " "))
        os.kill(os.getpid(), signal.SIGKILL)
        signal.pause()  # SIGKILL is on its way (a wait off the world's clock: it holds it)

    def _lose(self, engine: FaultEngine) -> list[str]:
        """Cut each file of ``cut`` on this rank's view of the disk; what was done, said."""
        from harness.filesystem import machine, patch

        view = patch._installed
        if view is None:
            return []
        said = []
        for vpath, keep in sorted(self.cut.items()):
            try:
                r = view.resolve(vpath, follow=False)
                location = view._read_location(r)
                if location is None:
                    continue
                size = machine.stat(location).st_size
                if size > keep:
                    machine.truncate(location, keep)
                    said.append(f"{vpath} cut from {size} to {keep} bytes")
            except OSError as exc:
                said.append(f"{vpath} could not be cut ({exc.strerror})")
        return said
