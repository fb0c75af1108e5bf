"""stale-leftover: a file from a previous run is there before the world starts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import Placed
from harness.faults.trigger import Trigger
from harness.filesystem.sandbox import Leftover
from harness.roles import Roles

if TYPE_CHECKING:
    from harness.faults.plan import Fault


class StaleLeftover(Placed):
    """``content`` sits at ``path`` before any rank starts, as an earlier run left it.
    Aimed at a ``role`` without a ``content``, each file holds what another run of
    the same target wrote there (another run name, another learning rate)."""

    kind: Literal["stale-leftover"] = "stale-leftover"

    needs_sandbox = True
    needs_coordinator = True
    watched_path = True

    def _from_target(self) -> bool:
        return self.role is not None and "content" not in self.model_fields_set

    def leftovers(self, fault: Fault, roles: Roles | None = None) -> list[Leftover]:
        out = []
        for path in self.places(fault.trigger):
            content = (roles.content_for(path) if roles else None) if self._from_target() \
                else self.content_bytes()
            if content is not None:
                out.append(Leftover(path, content, hosts=fault.trigger.hosts))
        return out

    def unresolved(self, trigger: Trigger, roles: Roles | None) -> str | None:
        why = super().unresolved(trigger, roles)
        if why is None and self._from_target() and roles is not None and not any(
                roles.content_for(p) is not None for p in self.places(trigger)):
            return (f"another run of the target leaves nothing at {', '.join(self.places(trigger))}"
                    " (its files depend on its inputs): no leftover can be in its way")
        return why
