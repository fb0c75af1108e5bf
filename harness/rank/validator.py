"""A user's own judgement of the value a rank returns: a pydantic model (or a
dataclass, a TypedDict: anything pydantic can validate), a JSON schema, or a
function ``check(value) -> None | str``.

Given on the command line (``--checker``), in a scenario (``checker:``), to
``catalog_cases(checker=...)`` or ``run_world(checker=...)``. It is read and
checked here, at the edge (a typo is a usage error before any world starts),
and it runs inside every rank, on the value the target returned, under the
world's deadline: the user's code never runs in the harness process. What it
says travels back as a string (``RankResult.invalid``).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness import refs
from harness.source import check_defines


@dataclass(frozen=True)
class Validator:
    #: what reports and the replay command show: what the user gave, paths as given
    ref: str
    #: ``module:Name`` or ``/abs/file.py:Name``, resolved inside the rank
    target: str | None = None
    #: a JSON schema, read at the edge
    schema: dict[str, Any] | None = None


def validator(spec: Any, base: str | None = None) -> Validator:
    """``spec`` (a ref string, a module-level class or function, or a JSON schema as a
    dict) as a ``Validator``; ``base`` is the directory relative paths start from (a
    scenario file's; default the working directory). Raises ``ValueError`` naming what
    is wrong."""
    if isinstance(spec, Validator):
        return spec
    if isinstance(spec, dict):
        return Validator("<JSON schema>", schema=_checked_schema(spec, "the JSON schema"))
    if not isinstance(spec, str):
        if not callable(spec):
            raise ValueError(f"checker {spec!r}: expected a pydantic model, a function "
                             "check(value) -> None | str, a JSON schema or a reference to one")
        try:
            ref = refs.name_of(spec)
        except ValueError as exc:
            raise ValueError(str(exc).replace("target", "checker", 1)) from None
        return Validator(ref, target=ref)
    if not spec.strip():
        raise ValueError("checker: empty reference")
    path = os.path.join(base or os.getcwd(), os.path.expanduser(spec))
    if spec.endswith(".json"):
        return Validator(spec, schema=_checked_schema(_read_json(spec, path), spec))
    if ":" not in spec:
        raise ValueError(f"checker {spec!r}: expected module.path:Name, path/to/file.py:Name "
                         "or path/to/schema.json")
    ref = refs.parse(spec, "checker")
    if ref.is_file:
        file = os.path.abspath(os.path.join(base or os.getcwd(), os.path.expanduser(ref.module)))
        check_defines(f"checker {spec!r}", file, ref.attr.split(".")[0])
        return Validator(spec, target=f"{file}:{ref.attr}")
    return Validator(spec, target=spec)


def _read_json(spec: str, path: str) -> Any:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError(f"checker {spec!r}: {path} is not a regular file")
        with open(path, "rb") as f:
            return json.loads(f.read())
    except OSError as exc:
        raise ValueError(f"checker {spec!r}: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"checker {spec!r}: {path} is not JSON: {exc}") from None


def _checked_schema(schema: Any, what: str) -> dict[str, Any]:
    try:
        import jsonschema
    except ImportError:
        raise ValueError(f"checker {what}: a JSON schema needs the jsonschema package "
                         "(the harness's extra 'schema': pip install '.[schema]' from a checkout)") from None
    if not isinstance(schema, dict):
        raise ValueError(f"checker {what}: a JSON schema is an object, not {type(schema).__name__}")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"checker {what}: not a valid JSON schema: {exc.message}") from None
    return schema


# -- inside a rank ---------------------------------------------------------------------

def problem(check: Validator, value: Any) -> str | None:
    """What is wrong with ``value`` (None: nothing). Never raises: a checker that
    cannot be loaded or that raises is reported as what it is."""
    try:
        if check.schema is not None:
            return _schema_problem(check.schema, value)
        assert check.target is not None
        from harness.rank.bootstrap import resolve_target

        judge = resolve_target(check.target, kind="checker")
        if isinstance(judge, type):
            return _model_problem(judge, value)
        return _function_problem(judge, value)
    except Exception as exc:  # noqa: BLE001 - the checker's failure, told as such
        return f"the checker {check.ref} failed: {type(exc).__name__}: {exc}"


def _schema_problem(schema: dict[str, Any], value: Any) -> str | None:
    import jsonschema

    try:
        value = json.loads(json.dumps(value))  # as the JSON a schema describes (tuples are arrays)
    except (TypeError, ValueError) as exc:
        return f"not JSON: {exc}"
    error = jsonschema.exceptions.best_match(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(value))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _model_problem(model: type, value: Any) -> str | None:
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(model).validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"{where or model.__name__}: {err['msg']}{more}"
    return None


def _function_problem(check: Callable[[Any], Any], value: Any) -> str | None:
    verdict = check(value)
    if verdict is None or verdict is True:
        return None
    if verdict is False:
        return f"{getattr(check, '__name__', 'the checker')} returned False"
    if isinstance(verdict, str):
        return verdict or "(the checker gave no reason)"
    return f"the checker returned {verdict!r}: expected None (valid) or a string (what is wrong)"
