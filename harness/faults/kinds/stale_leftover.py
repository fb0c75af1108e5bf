"""stale-leftover: a file from a previous run is there before the world starts."""

from __future__ import annotations

from typing import Literal

from harness.faults.kinds._base import Placed
from harness.faults.trigger import Trigger
from harness.filesystem.sandbox import Leftover


class StaleLeftover(Placed):
    """``content`` sits at ``path`` before any rank starts, as an earlier run left it."""

    kind: Literal["stale-leftover"] = "stale-leftover"

    needs_sandbox = True
    watched_path = True

    def leftover(self, trigger: Trigger) -> Leftover:
        assert trigger.path is not None
        return Leftover(trigger.path, self.content_bytes(), hosts=trigger.hosts)
