"""The JSON report (schema ``harness.matrix/1``): the one format read back.

``harness report`` and ``harness diff`` start from a saved file, maybe written
on a pod by another version, so ``load`` says which file is wrong and why
rather than failing with a KeyError deep in a renderer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.runner.cells import MODES, SCHEMA, Matrix
from harness.vocabulary import VERDICTS

#: The order of an event's keys in the file (the rest follow, sorted).
_EVENT_KEYS = ("t", "kind", "rank", "op", "tag", "step", "site", "detail")
_TOP_KEYS = ("schema", "harness_version", "seed", "created", "cells")
_CELL_KEYS = ("scenario", "target", "topology", "seed", "outcome", "expected", "verdict",
              "duration_s", "detail", "ranks", "faults_fired", "replay")
_RANK_KEYS = ("rank", "host", "outcome", "exit_code", "error")


def _stable(value: Any) -> Any:
    """Free-form dicts (event details) with sorted keys, so two runs diff line by line."""
    if isinstance(value, dict):
        return {str(k): _stable(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
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


def _check(data: Any) -> str | None:
    """What makes ``data`` not a ``harness.matrix/1`` report, or None."""
    if not isinstance(data, dict):
        return f"the top level is a JSON {type(data).__name__}, not an object"
    if data.get("schema") != SCHEMA:
        return f"not a {SCHEMA} report (schema: {data.get('schema')!r})"
    missing = [k for k in _TOP_KEYS if k not in data]
    if missing:
        return f"missing top-level field {missing[0]!r}"
    if not isinstance(data["cells"], list):
        return "'cells' is not a list"
    if data.get("mode", "sim") not in MODES:
        return f"mode {data['mode']!r} is not one of {', '.join(MODES)}"
    for i, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict):
            return f"cell {i} is not an object"
        name = f"cell {i} ({cell.get('scenario')}[{cell.get('target')}])"
        missing = [k for k in _CELL_KEYS if k not in cell]
        if missing:
            return f"{name}: missing field {missing[0]!r}"
        if cell["verdict"] not in VERDICTS:
            return f"{name}: verdict {cell['verdict']!r} is not one of {', '.join(VERDICTS)}"
        if not isinstance(cell["ranks"], list) or not isinstance(cell["faults_fired"], list):
            return f"{name}: 'ranks' and 'faults_fired' must be lists"
        for j, rank in enumerate(cell["ranks"]):
            if not isinstance(rank, dict):
                return f"{name}: rank entry {j} is not an object"
            missing = [k for k in _RANK_KEYS if k not in rank]
            if missing:
                return f"{name}: rank entry {j}: missing field {missing[0]!r}"
    return None


def load(path: str | Path) -> Matrix:
    """Read a saved report; ValueError naming the file if it is not one."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the report: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a JSON report (not UTF-8 text: {exc.reason})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg})") from exc
    problem = _check(data)
    if problem:
        raise ValueError(f"{path}: {problem}")
    try:
        return Matrix.from_dict(data)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a valid {SCHEMA} report ({exc})") from exc
