"""preempt: SIGKILL the rank and start it again, as a pre-empted TPU VM comes back."""

from __future__ import annotations

from typing import Literal

from harness.faults.kinds.kill import Kill


class Preempt(Kill):
    """As kill, then the rank starts again with the same identity and host disk
    (its ``life`` counts from 0; triggers may name the lives they fire in)."""

    kind: Literal["preempt"] = "preempt"  # type: ignore[assignment]

    restarts = True
    said = "pre-empted"
