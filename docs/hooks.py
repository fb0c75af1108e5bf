"""MkDocs hooks: the reference pages' generated parts.

A line ``<!-- harness: NAME -->`` in a page is replaced by Markdown made from the code
itself (the fault kinds, the catalog, the scenario and report schemas, the exit codes),
so that the reference cannot drift from what the harness does. A NAME not listed in
``GENERATORS`` fails the build, naming the page and the marker.

Descriptions come from the code's own words: a class's docstring, a field's
``description``, or the ``#:`` comment above a field or member (Sphinx's convention,
which the code follows); nothing here restates what the code says.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from typing_extensions import is_typeddict

MARKER = re.compile(r"^[ \t]*<!-- harness: (\S+) -->[ \t]*$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kw: Any) -> str:
    """Every marker line of the page replaced by what its generator makes."""
    def replace(match: re.Match[str]) -> str:
        name = match[1]
        if name not in GENERATORS:
            # imported here: the generators need the harness alone (the tests call them)
            from mkdocs.exceptions import PluginError

            raise PluginError(f"{page.file.src_uri}: unknown marker <!-- harness: {name} --> "
                              f"(known: {', '.join(GENERATORS)})")
        return GENERATORS[name]().rstrip("\n")

    return MARKER.sub(replace, markdown)


# -- the generators ----------------------------------------------------------------------

def fault_kinds() -> str:
    """One row per kind of ``harness.faults.kinds.KINDS``: what its docstring says first,
    its own parameters (the trigger fields every kind shares are left out), where it fires."""
    from harness.faults.kinds import KINDS, FaultKind
    from harness.faults.trigger import FILE_OPS

    shared = set(FaultKind.model_fields)
    rows = []
    for name, kind in KINDS.items():
        params = [f"`{field}`: {_param(info)}"
                  for field, info in kind.model_fields.items() if field not in shared]
        ops = [f"`{op}`" for op in kind.ops if op not in FILE_OPS]
        if set(FILE_OPS) <= set(kind.ops):
            ops.insert(0, "any file operation")
        else:
            ops[:0] = [f"`{op}`" for op in kind.ops if op in FILE_OPS]
        fires = ", ".join(ops) or "none: at the start"
        if kind.timed:
            fires += "; or `after_ms`"
        rows.append([f"`{name}`", _first_paragraph(kind), "<br>".join(params) or "—", fires])
    return _table(["kind", "what it does", "its own parameters", "`op`"], rows)


def catalog() -> str:
    """The built-in scenarios, as ``harness list`` reads them (``harness.scenarios.catalog``)."""
    from harness.scenarios import catalog

    return _table(["name", "workload", "topology", "expect", "what happens"],
                  [[f"`{s.name}`", s.workload, s.topology, f"`{s.expect}`", s.description]
                   for s in catalog()])


def scenario_schema() -> str:
    """The fields of ``harness.scenarios.Scenario``, then those of each model nested in it."""
    from harness.scenarios import Scenario

    return _records(Scenario)


def report_schema() -> str:
    """What ``harness report`` and ``harness diff`` check a ``matrix.json`` against when they
    read it back (``harness.reports.json_report``), then each cell's own parts."""
    from harness.reports import json_report

    return _records(json_report._File)


def exit_codes() -> str:
    """``harness.vocabulary.ExitCode``: each status and the ``#:`` comment above it."""
    from harness.vocabulary import ExitCode

    said = _comments(ExitCode)
    return _table(["status", "name", "meaning"],
                  [[str(code.value), f"`{code.name}`", said.get(code.name, "")]
                   for code in ExitCode])


GENERATORS: dict[str, Callable[[], str]] = {
    "fault-kinds": fault_kinds,
    "catalog": catalog,
    "scenario-schema": scenario_schema,
    "report-schema": report_schema,
    "exit-codes": exit_codes,
}


# -- records: pydantic models, dataclasses, TypedDicts -------------------------------------

def _records(top: type) -> str:
    """A table of ``top``'s fields, then one of each record type a field holds (a model
    chosen by a discriminator, such as a fault's kind, is documented on its own page)."""
    out: list[str] = []
    seen: set[type] = set()
    todo: list[tuple[type, str]] = [(top, "")]
    while todo:
        record, where = todo.pop(0)
        if record in seen:
            continue
        seen.add(record)
        rows = []
        said = _comments(record)
        for name, (tp, required, default, description) in _fields(record).items():
            rows.append([f"`{name}`", _type(tp), "required" if required else _default(default),
                         description or said.get(name, "")])
            todo += [(nested, f"`{name}`") for nested in _nested(tp)]
        header = ["field", "type", "default", "what it is"]
        if not any(row[-1] for row in rows):  # nothing said of any field: no empty column
            header, rows = header[:-1], [row[:-1] for row in rows]
        if where:
            out.append(f"**`{_name(record)}`**, in {where}:")
        out.append(_table(header, rows))
    return "\n\n".join(out)


def _fields(record: type) -> dict[str, tuple[Any, bool, Any, str]]:
    """Each field's type, whether it is required, its default and its description."""
    if issubclass(record, BaseModel):
        return {name: (_annotated(info), info.is_required(), _default_of(info),
                       info.description or "")
                for name, info in record.model_fields.items()}
    hints = typing.get_type_hints(record, include_extras=True)
    if dataclasses.is_dataclass(record):
        return {f.name: (hints[f.name], _missing(f), _default_of(f), "")
                for f in dataclasses.fields(record)}
    out = {}
    for name, tp in hints.items():  # a TypedDict
        optional = typing.get_origin(tp) is typing.NotRequired or not record.__total__
        if typing.get_origin(tp) in (typing.NotRequired, typing.Required):
            tp = typing.get_args(tp)[0]
        out[name] = (tp, not optional, None, "")
    return out


def _missing(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _default_of(field: FieldInfo | dataclasses.Field[Any]) -> Any:
    factory = field.default_factory
    if factory not in (None, dataclasses.MISSING):
        return factory()
    return None if field.default in (PydanticUndefined, dataclasses.MISSING) else field.default


def _annotated(info: FieldInfo) -> Any:
    """A pydantic field's type with its bounds, which pydantic keeps apart."""
    return typing.Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation


def _nested(tp: Any) -> Iterator[type]:
    """The record types a field holds, not those a discriminator chooses among."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Annotated:
        if not any(getattr(m, "discriminator", None) for m in args[1:]):
            yield from _nested(args[0])
    elif isinstance(tp, type) and _is_record(tp):
        yield tp
    else:
        for arg in args:
            yield from _nested(arg)


def _is_record(tp: type) -> bool:
    return issubclass(tp, BaseModel) or dataclasses.is_dataclass(tp) or is_typeddict(tp)


def _name(record: type) -> str:
    return record.__name__.lstrip("_")


# -- types, bounds, defaults ------------------------------------------------------------------

def _type(tp: Any) -> str:
    """A type as a reader of a YAML or JSON file thinks of it, with its bounds."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        chooser = next((m.discriminator for m in args[1:] if getattr(m, "discriminator", None)),
                       None)
        if chooser is not None:
            return f"`{_common_base(typing.get_args(args[0]))}` (by `{chooser}`)"
        choices = typing.get_args(args[0]) if _is_union(args[0]) else ()
        if type(None) in choices:  # the bounds are the value's, when it is not null
            value = typing.Union[tuple(c for c in choices if c is not type(None))]
            return _type(typing.Annotated[(value, *args[1:])]) + " or null"
        shown, bounds = _type(args[0]), _bounds(args[1:])
        if not bounds:
            return shown
        if typing.get_origin(args[0]) in (list, tuple, dict):  # the container's own bounds
            container, _, items = shown.partition(" of ")
            return f"{container} ({bounds}) of {items}"
        return f"{shown} ({bounds})"
    if _is_union(tp):
        return _either([_type(a) for a in args])
    if origin is typing.Literal:
        return _either([f"`{v}`" for v in args])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _either([f"`{m.value}`" for m in tp])
    if origin in (list, tuple):
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    if tp is typing.Any:
        return "any"
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and _is_record(tp):
        return f"`{_name(tp)}`"
    return getattr(tp, "__name__", str(tp))


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _either(shown: list[str]) -> str:
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _common_base(choices: tuple[type, ...]) -> str:
    """The class every choice of a discriminated union derives from (``FaultKind``)."""
    return next(c.__name__ for c in choices[0].__mro__ if all(issubclass(x, c) for x in choices))


def _bounds(metadata: tuple[Any, ...]) -> str:
    """Bounds as pydantic keeps them (annotated-types objects, ``FieldInfo``,
    ``StringConstraints``), in words."""
    found: dict[str, Any] = {}
    for m in metadata:
        for item in (m.metadata if isinstance(m, FieldInfo) else [m]):
            for key in ("gt", "ge", "lt", "le", "min_length", "max_length", "pattern",
                        "allow_inf_nan"):
                if getattr(item, key, None) is not None:
                    found[key] = getattr(item, key)
    parts = []
    if "ge" in found and "le" in found:
        parts.append(f"{_number(found['ge'])}..{_number(found['le'])}")
    else:
        parts += [f"{sign} {_number(found[key])}" for key, sign in
                  (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")) if key in found]
    low, high = found.get("min_length"), found.get("max_length")
    if low is not None and high is not None:
        parts.append(f"length {_number(low)}..{_number(high)}")
    elif low is not None or high is not None:
        parts.append(f"length ≥ {_number(low)}" if high is None else f"length ≤ {_number(high)}")
    if "pattern" in found:
        parts.append(f"matching `{found['pattern']}`")
    if found.get("allow_inf_nan") is False:
        parts.append("finite")
    return ", ".join(parts)


def _number(n: float) -> str:
    """A bound as a person reads it: ``2^40`` for a large power of two, else with commas."""
    if isinstance(n, int) and abs(n) >= 2**20 and abs(n) & (abs(n) - 1) == 0:
        return f"{'-' if n < 0 else ''}2^{abs(n).bit_length() - 1}"
    return f"{n:,}"


def _default(value: Any) -> str:
    """A default as a scenario file would spell it; "—" when there is none to spell."""
    if value is None:
        return "—"
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{value}`" if isinstance(value, str) and value else f"`{json.dumps(value)}`"


def _param(info: FieldInfo) -> str:
    """One parameter of a fault kind, in one line."""
    shown = _type(_annotated(info))
    if info.is_required():
        return f"{shown}, required"
    default = _default(_default_of(info))
    return shown if default == "—" else f"{shown}, default {default}"


# -- the code's words -----------------------------------------------------------------------

def _first_paragraph(cls: type) -> str:
    return inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0]


_DOC_COMMENT = re.compile(r"^    #: ?(.*)$")
_ATTRIBUTE = re.compile(r"^    (\w+)\s*[:=]")


def _comments(cls: type) -> dict[str, str]:
    """Each attribute's ``#:`` comment (the lines right above it), base classes first."""
    said: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("harness"):
            continue
        lines: list[str] = []
        for line in textwrap.dedent(inspect.getsource(klass)).splitlines():
            if (comment := _DOC_COMMENT.match(line)) is not None:
                lines.append(comment[1])
                continue
            if lines and (attribute := _ATTRIBUTE.match(line)) is not None:
                said[attribute[1]] = " ".join(lines)
            lines = []
    return said


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; each cell on one line, its pipes escaped outside code."""
    def cell(text: str) -> str:
        text = " ".join(text.replace("``", "`").split())
        return re.sub(r"(`[^`]*`)|\|", lambda m: m[1] or r"\|", text)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
