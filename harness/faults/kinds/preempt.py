"""preempt: the rank's host is pre-empted and comes back, with or without a notice.

A Cloud TPU or Spot VM is stopped in one of two ways (docs/reference/preemption.md):

- ``notice: sigterm``: a soft off. Every process of the host gets SIGTERM at the
  trigger's instant; ``grace`` world seconds later whatever is left is SIGKILLed
  (the hard stop). ``grace`` is seconds, or a preset: ``spot`` (30 s, a Spot or
  pre-emptible VM's shutdown) or ``autocheckpoint`` (300 s, the most Cloud TPU's
  Autocheckpoint waits). On the world's clock a grace costs no wall time while
  the ranks wait.
- ``notice: none`` (the default): a maintenance event without Autocheckpoint, or
  a hard stop: the rank is SIGKILLed where the trigger matches.

Either way the host's ranks then start again with the same identity and host
disk (their ``life`` counts from 0; triggers may name the lives they fire in),
once every process of the host is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from harness.faults.kinds.kill import Kill

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault

#: Named graces, in world seconds.
GRACES: dict[str, float] = {"spot": 30.0, "autocheckpoint": 300.0}
MAX_GRACE_S = 3600.0


class Preempt(Kill):
    """As kill (``notice: none``), or SIGTERM to every process of the host and SIGKILL
    ``grace`` world seconds later (``notice: sigterm``); then the host's ranks start again
    with the same identity and host disk."""

    kind: Literal["preempt"] = "preempt"  # type: ignore[assignment]
    notice: Literal["none", "sigterm"] = "none"
    grace: Literal["spot", "autocheckpoint"] | float | int = Field(
        default="spot", union_mode="left_to_right")

    restarts = True
    said: ClassVar[str] = "pre-empted"

    @field_validator("grace")
    @classmethod
    def _seconds(cls, grace: str | float) -> str | float:
        if isinstance(grace, (int, float)) and not 0 < grace <= MAX_GRACE_S:
            raise ValueError(f"a grace is 'spot' (30 s), 'autocheckpoint' (300 s) or world "
                             f"seconds in (0, {MAX_GRACE_S:g}], got {grace!r}")
        return grace

    @model_validator(mode="after")
    def _grace_needs_notice(self) -> Preempt:
        if "grace" in self.model_fields_set and self.notice != "sigterm":
            raise ValueError("grace is the time between a notice and the hard stop: it needs "
                             "notice: sigterm")
        return self

    @property
    def grace_s(self) -> float:
        """The grace in world seconds (a preset's, or as written)."""
        return GRACES[self.grace] if isinstance(self.grace, str) else float(self.grace)

    def notice_grace(self) -> float | None:
        return self.grace_s if self.notice == "sigterm" else None

    def strike(self, engine: FaultEngine, fault: Fault, op: str, where: str | None) -> None:
        if self.notice == "none":
            super().strike(engine, fault, op, where)
            return
        life = f" (life {engine.life})" if engine.life else ""
        at = f" at {op} {where or ''}".rstrip() if op != "start" else ""
        engine.notice(fault, op, where if op != "collective" else None,
                      message=f"host {engine.host} is pre-empted with notice{at} (rank "
                              f"{engine.rank}{life}): SIGTERM to every process of it, SIGKILL "
                              f"after a {self.grace_s:g} s grace",
                      notice="sigterm", grace_s=self.grace_s, host=engine.host)
