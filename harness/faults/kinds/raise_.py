"""raise: raise an exception in the rank at the trigger point."""

from __future__ import annotations

import builtins
import os
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from harness.faults.kinds._strike import Strike

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault

#: Exceptions a ``raise`` fault may name (builtins a target can meet).
RAISABLE = ("RuntimeError", "ValueError", "OSError", "KeyError", "TimeoutError",
            "AssertionError", "TypeError", "PermissionError", "FileNotFoundError")
_OS_ERRORS = ("OSError", "PermissionError", "FileNotFoundError")


class Raise(Strike):
    """Raise ``exception`` (a builtin of RAISABLE) with ``message``; an OSError
    and its kin need an ``errno`` (1..4095) and carry it as the kernel would."""

    kind: Literal["raise"] = "raise"
    exception: Literal[RAISABLE] = "RuntimeError"
    errno: Annotated[int, Field(ge=1, le=4095)] | None = Field(default=None, validate_default=True)
    message: Annotated[str, Field(max_length=10_000)] | None = None
    breaks_the_run = True

    @field_validator("errno")
    @classmethod
    def _real(cls, code: int | None, info: ValidationInfo) -> int | None:
        exc = info.data.get("exception")
        if code is None and exc in _OS_ERRORS:
            raise ValueError(f"a raised {exc} needs an errno (a real one always has one)")
        return code

    def strike(self, engine: FaultEngine, fault: Fault, op: str, where: str | None) -> None:
        exc_type = getattr(builtins, self.exception)
        exc = exc_type(self.message or f"injected failure at {op} {where or ''}".rstrip())
        if issubclass(exc_type, OSError):  # as the kernel raises it: errno, strerror, filename
            assert self.errno is not None
            exc = OSError(self.errno, os.strerror(self.errno),
                          *([where] if where and op != "collective" else []))
        engine.report(fault, op, where if op != "collective" else None,
                      message=f"rank {engine.rank} raises {type(exc).__name__}: {exc}")
        raise exc
