"""The JSON report (schema ``harness.matrix/1``): the one format read back.

``harness report`` and ``harness diff`` start from a saved file, maybe written
on a pod by another version, so ``load`` says which file is wrong and why
rather than failing with a KeyError deep in a renderer.
"""

from __future__ import annotations

import functools
import json
import math
import re
from json.decoder import scanstring
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError
from typing_extensions import NotRequired, TypedDict

from harness.inputs import InputError, read_text
from harness.runner.cells import SCHEMA, Cell, Matrix
from harness.vocabulary import VERDICTS

#: The largest report read back: a campaign of 100 seeds over the catalog is about
#: 200 MB; a file larger than this is a mistake (or ``/dev/zero``), refused unread.
MAX_BYTES = 256 << 20

#: The order of an event's keys in the file (the rest follow, sorted).
_EVENT_KEYS = ("t", "kind", "rank", "op", "tag", "step", "site", "detail")


def _stable(value: Any) -> Any:
    """Free-form dicts (event details) with sorted keys, so two runs diff line by line."""
    if isinstance(value, dict):
        return {str(k): _stable(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # JSON has no NaN: ``NaN`` in the file would make it unreadable
    return value


def _event(event: dict[str, Any]) -> dict[str, Any]:
    first = [k for k in _EVENT_KEYS if k in event]
    rest = sorted((k for k in event if k not in _EVENT_KEYS), key=str)
    return {k: _stable(event[k]) for k in first + rest}


def to_dict(matrix: Matrix) -> dict[str, Any]:
    """The report as a dict: the schema's key order, event keys in a fixed order."""
    data = matrix.to_dict()
    for cell in data["cells"]:
        cell["history"] = [_event(e) if isinstance(e, dict) else e for e in cell.get("history", [])]
    return data


def to_json(matrix: Matrix) -> str:
    """The report as JSON text: indent 2, a stable key order, UTF-8 left readable."""
    return json.dumps(to_dict(matrix), indent=2, ensure_ascii=False, default=repr) + "\n"


class ReportError(InputError, ValueError):
    """A file that is not a report this version can read: which file, the line, the field."""

    label = "bad report"


class _Summary(TypedDict, total=False):
    duration_s: float
    interrupted: bool
    planned: int | None


class _File(TypedDict):
    """The file as saved; its cells are read into ``Cell`` (their fields, their types)."""

    schema: Literal["harness.matrix/1"]  # SCHEMA, spelled out for pydantic
    harness_version: str
    seed: int
    created: str
    cells: list[Cell]
    summary: NotRequired[_Summary]
    mode: NotRequired[Literal["sim", "pod"]]  # MODES
    pod: NotRequired[dict[str, Any] | None]
    campaign: NotRequired[dict[str, Any] | None]


@functools.cache
def _file_adapter() -> TypeAdapter[_File]:
    """The report's validator, built on the first read (not when a run imports this module
    to write one)."""
    return TypeAdapter(_File)


_AT_LINE = re.compile(r" at line (\d+) column (\d+)$")


def load(path: str | Path) -> Matrix:
    """Read a saved report: a regular file of at most ``MAX_BYTES``, UTF-8 JSON nested at
    most 200 deep, every field of the type it has when the harness writes it (strictly:
    a duration is a number, never the string of one). Raises ``ReportError``."""
    name = str(path)
    try:
        text = read_text(path, MAX_BYTES, "a report")
    except InputError as exc:
        raise ReportError(exc.file, exc.message, exc.line) from None
    try:
        data = _file_adapter().validate_json(text, strict=True)
    except ValidationError as exc:
        raise _refusal(name, text, exc.errors(include_url=False)[0]) from None
    for i, cell in enumerate(data["cells"]):
        field, problem = _cell_problem(cell)
        if problem:
            loc = ("cells", i, *field)
            raise ReportError(name, f"cell {i} ({cell.scenario}[{cell.target}]): {problem}",
                              line=line_of(text, loc), field=_dotted(loc))
    summary = data.get("summary", {})
    duration = summary.get("duration_s", 0.0)
    if not math.isfinite(duration):
        loc = ("summary", "duration_s")
        raise ReportError(name, f"a duration of {duration} seconds", line=line_of(text, loc),
                          field=_dotted(loc))
    return Matrix(cells=data["cells"], seed=data["seed"], created=data["created"],
                  harness_version=data["harness_version"], duration_s=duration,
                  interrupted=summary.get("interrupted", False), planned=summary.get("planned"),
                  mode=data.get("mode", "sim"), pod=data.get("pod"),
                  campaign=data.get("campaign"))


def _cell_problem(cell: Cell) -> tuple[tuple[Any, ...], str | None]:
    """What the types let through but a cell cannot be: a verdict this version does not
    know (its counts would be wrong), a time that is not a number of seconds."""
    if cell.verdict not in VERDICTS:
        return ("verdict",), f"verdict {cell.verdict!r} is not one of {', '.join(VERDICTS)}"
    for field, value in (("duration_s", cell.duration_s), ("world_time_s", cell.world_time_s)):
        if value is not None and not math.isfinite(value):
            return (field,), f"a duration of {value} seconds"
    for j, fault in enumerate(cell.faults_fired):
        if not math.isfinite(fault.t):
            return ("faults_fired", j, "t"), f"a fault fired at t={fault.t}"
    return (), None


def _refusal(name: str, text: str, err: Any) -> ReportError:
    """The first thing pydantic refused, in the words of the file: what, the line, the field."""
    loc = tuple(err["loc"])
    kind, message = err["type"], err["msg"]
    if kind == "json_invalid":
        at = _AT_LINE.search(message)
        what = message.removeprefix("Invalid JSON: ")
        what = _AT_LINE.sub("", what).replace("recursion limit exceeded",
                                              "nested deeper than 200 levels")
        return ReportError(name, f"not valid JSON: {what}" + (f" (column {at[2]})" if at else ""),
                           line=int(at[1]) if at else None)
    if loc == ("schema",) or (not loc and kind in ("dict_type", "model_type")):
        shown = _top_level(text)
        return ReportError(name, f"not a {SCHEMA} report ({shown})", line=line_of(text, loc))
    if kind == "missing":
        message = f"missing field {loc[-1]!r}"
    else:
        got = err.get("input")
        message = message[0].lower() + message[1:]
        if isinstance(got, (str, int, float, bool)) or got is None:
            message += f", not {json.dumps(got)[:60]}"
        elif isinstance(got, (dict, list)):
            message += f", not a JSON {'object' if isinstance(got, dict) else 'array'}"
    where = loc[:-1] if kind == "missing" else loc
    if len(loc) > 1 and loc[0] == "cells" and isinstance(loc[1], int):
        message = f"cell {loc[1]}{_cell_name(text, loc[1])}: {message}"
    return ReportError(name, message, line=line_of(text, where), field=_dotted(loc))


def _cell_name(text: str, index: int) -> str:
    """`` (scenario[target])`` of the cell at ``index``, as far as the file says it."""
    try:
        cell = json.loads(text)["cells"][index]
        return f" ({cell.get('scenario')}[{cell.get('target')}])"
    except (ValueError, LookupError, TypeError, AttributeError, RecursionError):
        return ""


def _top_level(text: str) -> str:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return "unreadable"
    if not isinstance(data, dict):
        return f"the top level is a JSON {_JSON_TYPES.get(type(data), type(data).__name__)}, " \
               "not an object"
    return f"schema: {json.dumps(data.get('schema'))[:60]}"


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


_WS = re.compile(r"[ \t\n\r]*")


def line_of(text: str, loc: tuple[Any, ...]) -> int:
    """The line of ``text`` (JSON) where the value at ``loc`` (keys and indexes) starts, or
    of the nearest enclosing value that is there: how a field's error gets its line."""
    decoder = json.JSONDecoder()
    pos = _WS.match(text).end()
    try:
        for key in loc:
            start = pos
            if text.startswith("{", pos) and isinstance(key, str):
                pos = _WS.match(text, pos + 1).end()
                while text.startswith('"', pos):
                    name, pos = scanstring(text, pos + 1)
                    pos = _WS.match(text, _WS.match(text, pos).end() + 1).end()  # past ':'
                    if name == key:
                        break
                    pos = _next(decoder, text, pos)
                else:
                    pos = start
                    break
            elif text.startswith("[", pos) and isinstance(key, int):
                pos = _WS.match(text, pos + 1).end()
                for _ in range(key):
                    if text.startswith("]", pos):
                        break
                    pos = _next(decoder, text, pos)
                if text.startswith("]", pos):
                    pos = start
                    break
            else:
                break
    except (ValueError, IndexError, RecursionError):
        pass
    return text.count("\n", 0, pos) + 1


def _next(decoder: json.JSONDecoder, text: str, pos: int) -> int:
    """Past the value at ``pos`` and the comma after it, to the next value or key."""
    _, pos = decoder.raw_decode(text, pos)
    pos = _WS.match(text, pos).end()
    if text.startswith(",", pos):
        pos = _WS.match(text, pos + 1).end()
    return pos
