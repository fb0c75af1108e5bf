"""The expected-differences file of ``harness diff``: the cells where a pod may disagree
with the simulator, each with why, reviewed like code.

A difference between the simulator and a pod is a fidelity bug of the simulator or a
real-world effect it does not model; the nightly diff fails on every one that nobody has
explained. The file is YAML::

    differences:
      - cell: isolated-tmp[naive-sync]
        sim: ERROR        # optional: omitted means any outcome
        pod: PASS         # optional
        reason: the pod's /tmp is ...

It is read once, at the edge, into typed ``Listed`` entries. A bad file is a
``ScenarioError`` naming the file, the line and the field: the same bounded YAML reader
and the same mapping of pydantic's error locations to lines as scenario files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from harness.reports._common import OUTCOMES
from harness.scenario_yaml import ScenarioError, node_at, read_yaml

#: A cell's name as every report writes it: ``scenario[target]``.
CELL = re.compile(r"^(?P<scenario>[^\[\]\s]+)\[(?P<target>[^\[\]\n]+)\]$")

#: The outcomes a listed difference may name. INFRA is not among them: a pod failure is
#: never an expected difference of the target (``harness diff --allow-infra`` accepts it).
Outcome = Literal[OUTCOMES]  # type: ignore[valid-type]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    cell: str
    sim: Outcome | None = None
    pod: Outcome | None = None
    reason: str

    @field_validator("cell")
    @classmethod
    def _named(cls, value: str) -> str:
        if not CELL.match(value):
            raise ValueError(f"{value!r} does not name a cell: write it as scenario[target], "
                             "e.g. isolated-tmp[naive-sync]")
        return value

    @field_validator("reason")
    @classmethod
    def _explained(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty: a listed difference must say why it is expected")
        return value.strip()


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    differences: list[_Entry]


@dataclass(frozen=True)
class Listed:
    """One reviewed difference. ``sim``/``pod`` None: any outcome (or none) on that side."""

    scenario: str
    target: str
    sim: str | None
    pod: str | None
    reason: str
    line: int | None  # where the entry starts in the file, for warnings about it

    @property
    def name(self) -> str:
        return f"{self.scenario}[{self.target}]"

    def matches(self, sim: str | None, pod: str | None) -> bool:
        """Whether the listed outcomes are the cells' (None for a side that did not run it)."""
        return (self.sim is None or self.sim == sim) and (self.pod is None or self.pod == pod)

    def listed_outcomes(self) -> str:
        """``sim ERROR, pod PASS``, the sides the entry names ("any outcome" if none)."""
        sides = [f"{side} {o}" for side, o in (("sim", self.sim), ("pod", self.pod)) if o]
        return ", ".join(sides) or "any outcome"


@dataclass(frozen=True)
class Expected:
    """A read expected-differences file: where it is, and its entries in file order."""

    path: str
    entries: tuple[Listed, ...]

    def get(self, scenario: str, target: str) -> Listed | None:
        return next((e for e in self.entries if (e.scenario, e.target) == (scenario, target)),
                    None)


_MESSAGES = {
    "extra_forbidden": "unknown key; allowed keys are {allowed}",
    "missing": "required field is missing",
}


def load_expected(path: str | os.PathLike[str]) -> Expected:
    """Read and check an expected-differences file; ``ScenarioError`` (file, line, field)
    for a file that is not one, so ``harness diff`` refuses it with exit 2."""
    path = os.fspath(path)
    root, data = read_yaml(path, "an expected-differences file")
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        raise ScenarioError(path, "an expected-differences file is a mapping with one key, "
                            f"differences (a list; [] for none), not {what}",
                            line=root.start_mark.line + 1 if root else None)
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        model = _Entry if loc[:1] == ("differences",) and len(loc) > 2 else _File
        message = _MESSAGES.get(err["type"], err["msg"].removeprefix("Value error, "))
        message = message.format(allowed=", ".join(model.model_fields))
        node = node_at(root, loc)
        raise ScenarioError(path, message, line=node.start_mark.line + 1 if node else None,
                            field=".".join(str(p) for p in loc)) from None
    entries: list[Listed] = []
    for i, entry in enumerate(parsed.differences):
        node = node_at(root, ("differences", i))
        line = node.start_mark.line + 1 if node else None
        match = CELL.match(entry.cell)
        assert match is not None  # the model checked the form
        listed = Listed(match["scenario"], match["target"], entry.sim, entry.pod, entry.reason,
                        line)
        first = next((e for e in entries if e.name == listed.name), None)
        if first is not None:
            raise ScenarioError(path, f"{listed.name} is listed twice (first at line "
                                f"{first.line}): one entry per cell", line=line,
                                field=f"differences.{i}.cell")
        entries.append(listed)
    return Expected(path, tuple(entries))

