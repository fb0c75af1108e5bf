"""permission-denied: the file or directory belongs to another user."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import field_validator

from harness.faults.kinds._base import Placed
from harness.filesystem.sandbox import Leftover
from harness.roles import Roles
from harness.vocabulary import Expect

if TYPE_CHECKING:
    from harness.faults.plan import Fault

OTHER_UID = 1001  # not the rank's user, even when the harness runs as root


class PermissionDenied(Placed):
    """``path`` is placed before the world starts, owned by another user with
    ``mode`` (octal, e.g. '0600'; default 0600, or 0500 for a ``directory``):
    the rank meets EACCES as a non-owner would."""

    kind: Literal["permission-denied"] = "permission-denied"
    mode: str | int | None = None
    directory: bool = False

    needs_sandbox = True

    @classmethod
    def expectation(cls, role: str | None = None) -> Expect:
        # data the code must read, made unreadable: saying so is the best it can do
        return Expect.FAIL_LOUDLY if role == "input" else super().expectation(role)

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

    def leftovers(self, fault: Fault, roles: Roles | None = None) -> list[Leftover]:
        mode = self.mode if self.mode is not None else 0o500 if self.directory else 0o600
        return [Leftover(path, self.content_bytes(), is_dir=self.directory, owner_uid=OTHER_UID,
                         mode=int(mode), hosts=fault.trigger.hosts)
                for path in self.places(fault.trigger) if not _shared_root(path)]



def _shared_root(path: str) -> bool:
    """A directory every user shares (``/tmp``, ``/``, a home): no other user owns it."""
    return path.rstrip("/") in ("", "/tmp", "/var/tmp", "/home", "/mnt", "/root") or \
        path.rstrip("/").count("/") <= 2 and path.startswith("/home/")
