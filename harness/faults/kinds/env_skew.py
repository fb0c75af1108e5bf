"""env-skew: set extra environment variables on some hosts."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StringConstraints

from harness.faults.kinds._base import FaultKind

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault

#: A variable name the environment can hold: no '=', no NUL.
Name = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^=\x00]+$")]
Value = (Annotated[str, StringConstraints(max_length=65_536, pattern=r"^[^\x00]*$")]
         | Annotated[int, Field(ge=-2**63, lt=2**64)] | float)


class EnvSkew(FaultKind):
    """The selected hosts start with ``env`` (1..1000 variables) on top of the
    world's environment: a host that composes its config from other values."""

    kind: Literal["env-skew"] = "env-skew"
    env: Annotated[dict[Name, Value], Field(min_length=1, max_length=1000)]
    unsearchable = ("its variables are the ones the target reads: name them in a scenario "
                    "(as divergent-input does)")

    def at_start(self, engine: FaultEngine, fault: Fault, seed: int) -> int:
        extra = {k: str(v) for k, v in self.env.items()}
        os.environ.update(extra)
        engine.report(fault, "start", None, message=f"host {engine.host} sets " + ", ".join(
            f"{k}={v}" for k, v in sorted(extra.items())))
        return seed
