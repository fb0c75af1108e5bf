"""The fault kinds: one module each, found here, and the union a scenario's
``faults:`` is validated against.

A module whose name starts with ``_`` holds what kinds share; every other
module defines one ``FaultKind`` subclass, registered under its ``kind``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter, ValidationError

from harness.faults.kinds._base import FaultKind


def _discover() -> dict[str, type[FaultKind]]:
    found: dict[str, type[FaultKind]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, FaultKind) \
                    and obj.__module__ == module.__name__:
                found[obj.model_fields["kind"].default] = obj
    return dict(sorted(found.items()))


#: Every kind by name.
KINDS: dict[str, type[FaultKind]] = _discover()
#: A fault as a scenario writes it: the kind named by ``kind``.
FaultSpec = Annotated[Union[tuple(KINDS.values())], Field(discriminator="kind")]  # noqa: UP007


@functools.cache
def _adapter() -> TypeAdapter[Any]:
    return TypeAdapter(FaultSpec)  # built on first use: a rank never validates a fault


def kind_of(name: str) -> type[FaultKind]:
    """The kind called ``name`` (a KeyError names the known ones)."""
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"unknown fault kind {name!r}: use one of {', '.join(KINDS)}") from None


def parse_fault(value: Any) -> FaultKind:
    """A fault given as a mapping (the Python API), validated as a scenario's would be."""
    return _adapter().validate_python(value)


def explain(error: Any) -> tuple[str, tuple[Any, ...]]:
    """A pydantic error inside one fault: its message and the path of the key it
    names in the fault as written (the union's tag left out)."""
    loc = tuple(error["loc"])
    kind = error["input"].get("kind") if isinstance(error["input"], dict) else None
    if loc and loc[0] in KINDS:
        kind, loc = loc[0], loc[1:]
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return f"unknown fault {kind!r}; known faults: {', '.join(KINDS)}" if kind is not None \
            else f"a fault needs a kind: one of {', '.join(KINDS)}", ("kind",)
    if error["type"] == "model_attributes_type" or error["type"] == "model_type":
        return "a fault must be a mapping with a 'kind'", ("kind",)
    if error["type"] == "extra_forbidden":
        return f"unknown key; allowed keys are {', '.join(KINDS[kind].model_fields)}", loc
    return error["msg"].removeprefix("Value error, "), loc


__all__ = ["KINDS", "FaultKind", "FaultSpec", "ValidationError", "explain", "kind_of",
           "parse_fault"]
