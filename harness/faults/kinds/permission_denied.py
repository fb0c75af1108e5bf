"""permission-denied: the file or directory belongs to another user."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from harness.faults.kinds._base import Placed
from harness.faults.trigger import Trigger
from harness.filesystem.sandbox import Leftover

OTHER_UID = 1001  # not the rank's user, even when the harness runs as root


class PermissionDenied(Placed):
    """``path`` is placed before the world starts, owned by another user with
    ``mode`` (octal, e.g. '0600'; default 0600, or 0500 for a ``directory``):
    the rank meets EACCES as a non-owner would."""

    kind: Literal["permission-denied"] = "permission-denied"
    mode: str | int | None = None
    directory: bool = False

    needs_sandbox = True

    @field_validator("mode")
    @classmethod
    def _octal(cls, mode: str | int) -> int:
        try:
            value = int(mode, 8) if isinstance(mode, str) else mode
        except ValueError:
            value = -1
        if not 0 <= value <= 0o7777:
            raise ValueError(f"mode must be an octal permission like '0600', got {mode!r}")
        return value

    def leftover(self, trigger: Trigger) -> Leftover:
        assert trigger.path is not None
        mode = self.mode if self.mode is not None else 0o500 if self.directory else 0o600
        return Leftover(trigger.path, self.content_bytes(), is_dir=self.directory,
                        owner_uid=OTHER_UID, mode=int(mode), hosts=trigger.hosts)

