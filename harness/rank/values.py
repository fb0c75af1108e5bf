"""A rank's return value, sent so that the harness reads it without running the
target's code.

A plain ``pickle.loads`` in the harness would run whatever a value's
``__reduce__`` says (a sleep, an ``os.system``) and import the target's own
modules to rebuild its classes. So the harness reads values with an unpickler
that builds only plain data: builtins, the standard library's value types,
numpy arrays and torch tensors (their storage read by torch's own
``weights_only`` loader). The rank checks that its value reads that way before
sending it; a value that does not (an instance of the user's class, a pydantic
model, a dataclass) is sent as its plain form (``plain``) with a note saying so.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import pickle
from typing import Any

#: (module, name) -> what may be built from it; anything else is refused.
_SAFE_NAMES = {
    "builtins": {"set", "frozenset", "complex", "slice", "range", "bytearray", "bytes", "object",
                 "list", "dict", "tuple", "int", "float", "str", "bool"},
    "collections": {"OrderedDict", "deque", "Counter", "defaultdict"},
    "copyreg": {"_reconstructor"},
    "datetime": {"datetime", "date", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "fractions": {"Fraction"},
    "uuid": {"UUID"},
    "pathlib": {"PurePosixPath", "PosixPath", "Path", "PurePath"},
    "numpy": {"ndarray", "dtype", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16",
              "uint32", "uint64", "float16", "float32", "float64", "complex64", "complex128"},
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "torch._utils": {"_rebuild_tensor_v2", "_rebuild_parameter", "_rebuild_tensor"},
    "torch": {"Size", "device", "float32", "float64", "float16", "bfloat16", "int64", "int32",
              "int16", "int8", "uint8", "bool", "complex64", "complex128"},
}
#: Whole modules whose every name is a plain value type (numpy's dtype classes).
_SAFE_MODULES = ("numpy.dtypes",)

#: The most a rank's value may take pickled: the harness holds every rank's value (and
#: reads it into objects several times that size), so a rank beyond it is that rank's
#: ERROR, said with this figure, and its bytes are never read (``limit_problem``).
MAX_VALUE_BYTES = 8 << 20

#: What a pickle may build from its arguments rather than from its bytes: a ``bytes(n)``,
#: a ``list(range(n))``, an array of a given shape. Each is built only from arguments
#: that hold their items already (a list, a bytes object: as big as the pickle), never
#: from a count or a lazy range, so that what a value builds stays a few times its size.
_BUILDS = {("builtins", n) for n in ("bytes", "bytearray", "list", "tuple", "set", "frozenset",
                                     "dict")} | {
    ("collections", n) for n in ("OrderedDict", "deque", "Counter", "defaultdict")} | {
    ("copyreg", "_reconstructor")}
_ARRAYS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")}
#: How deep a value may nest, and how many bytes its arrays may span, once read (an
#: ``ndarray(shape)`` reserves its memory without touching it: refused before anything does).
MAX_DEPTH = 200


class UnreadableValue(ValueError):
    """A value the harness will not build: it names what it refused."""


class ValueTooLarge(UnreadableValue):
    """A value beyond what the harness reads of a rank: the rank's ERROR, its message the
    sentence that says so ("returned a value of ...")."""


def limit_problem(size: int) -> str | None:
    """Why a pickled value of ``size`` bytes is not read (None: it is)."""
    if size <= MAX_VALUE_BYTES:
        return None
    return (f"returned a value of {_mib(size)} pickled: the harness reads at most "
            f"{_mib(MAX_VALUE_BYTES)} of a rank's return value (harness.rank.values."
            "MAX_VALUE_BYTES); return a digest or a summary of it instead")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def _expanding(where: str, arg: Any) -> None:
    """Refuse an argument ``where`` would build more from than it holds: a lazy range
    (``list(range(n))``), a count (``bytes(n)``; a ``_reconstructor``'s state), or a string
    a container takes item by item (``set(b"...")``); a deque's ``maxlen`` is a count too,
    but of nothing built."""
    sized = where.endswith(("bytes", "bytearray"))
    counted = isinstance(arg, int) and not isinstance(arg, bool) and (
        sized or where.endswith("_reconstructor"))
    itemised = not sized and isinstance(arg, (str, bytes, bytearray, memoryview))
    if isinstance(arg, range) or counted or itemised:
        raise ValueTooLarge(f"returned a value that grows as it is read: it builds {where} "
                            f"from {type(arg).__name__} {_short(arg)}, not from items it holds")


def _short(arg: Any) -> str:
    text = repr(arg)
    return text if len(text) <= 40 else text[:37] + "..."


def _guarded(module: str, name: str, fn: Any) -> Any:
    """``fn`` (a constructor a pickle may call), refusing the arguments that make it build
    more than the pickle holds."""
    where = f"{module}.{name}"

    def build(*args: Any, **kwargs: Any) -> Any:  # a defaultdict's factory: _check_built
        if (module, name) in _ARRAYS:
            shape = args[1] if len(args) > 1 else ()
            count = 1
            for n in (shape if isinstance(shape, (tuple, list)) else (shape,)):
                count *= n if isinstance(n, int) and n > 0 else 1
            if count > MAX_VALUE_BYTES:
                raise ValueTooLarge(f"returned a value that grows as it is read: it builds "
                                    f"{where} of shape {_short(shape)}, more than it holds")
        else:
            for arg in (*args, *kwargs.values()):
                _expanding(where, arg)
        return fn(*args, **kwargs)

    build.guarded = fn  # type: ignore[attr-defined]
    return build


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "torch.storage" and name == "_load_from_bytes":
            return _torch_storage
        if name in _SAFE_NAMES.get(module, ()) or module in _SAFE_MODULES:
            found = getattr(importlib.import_module(module), name)
            if (module, name) in _BUILDS or (module, name) in _ARRAYS:
                return _guarded(module, name, found)
            return found
        raise UnreadableValue(f"it holds {module}.{name}, which only the target's code can build")


def _torch_storage(data: bytes) -> Any:
    import torch  # only when a tensor came back: the rank had torch, so does this machine

    return torch.load(io.BytesIO(data), weights_only=True)


def decode(payload: bytes) -> Any:
    """The value, built from plain data only, and no bigger than a few times ``payload``
    (``MAX_VALUE_BYTES`` at most). Raises ``UnreadableValue`` (``ValueTooLarge``)."""
    too_large = limit_problem(len(payload))
    if too_large is not None:
        raise ValueTooLarge(too_large)
    try:
        value = _PlainUnpickler(io.BytesIO(payload)).load()
        _check_built(value)
        return value
    except UnreadableValue:
        raise
    except Exception as exc:  # noqa: BLE001 - a truncated or forged payload: its own words
        raise UnreadableValue(f"{type(exc).__name__}: {exc}") from None


def _check_built(value: Any) -> None:
    """Refuse a value nested deeper than ``MAX_DEPTH`` (a checker would fail on it, not the
    target) or whose arrays span more than ``MAX_VALUE_BYTES`` beyond what it held; give a
    defaultdict back its own factory."""
    spans, stack, seen = 0, [(value, 0)], set()
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple, set, frozenset)) or type(item).__name__ == "deque":
            if id(item) in seen:  # held twice, or holding itself: no bigger for it
                continue
            seen.add(id(item))
        if depth > MAX_DEPTH:
            raise ValueTooLarge(f"returned a value nested more than {MAX_DEPTH} deep: the "
                                "harness reads values no deeper (harness.rank.values.MAX_DEPTH)")
        if isinstance(item, dict):
            stack += [(x, depth + 1) for pair in item.items() for x in pair]
            factory = getattr(item, "default_factory", None)
            if hasattr(factory, "guarded"):  # a defaultdict(list): its list, not our guard
                item.default_factory = factory.guarded  # type: ignore[attr-defined]
        elif isinstance(item, (list, tuple, set, frozenset)) or type(item).__name__ == "deque":
            stack += [(x, depth + 1) for x in item]
        else:
            spans += getattr(item, "nbytes", 0) if type(item).__module__ == "numpy" else 0
    if spans > 2 * MAX_VALUE_BYTES:
        raise ValueTooLarge(f"returned a value whose arrays span {_mib(spans)}: more than the "
                            f"{_mib(MAX_VALUE_BYTES)} the harness reads of a rank's value")


def encode(value: Any) -> tuple[bytes, str | None]:
    """In the rank: ``value`` as the harness can read it, and a note when it had to be
    sent as its plain form (None when it went as it is)."""
    try:
        payload = pickle.dumps(value)
        decode(payload)
        return payload, None
    except ValueTooLarge:
        raise  # as plain data it would be as large: the rank's ERROR
    except Exception as exc:  # noqa: BLE001 - unpicklable, or only the target can build it
        why = str(exc) if isinstance(exc, UnreadableValue) else f"{type(exc).__name__}: {exc}"
    return pickle.dumps(plain(value)), f"sent as plain data ({why})"


def plain(value: Any, _seen: frozenset[int] = frozenset(), _depth: int = 0) -> Any:
    """``value`` as builtins: a pydantic model as its ``model_dump()``, a dataclass as a
    dict of its fields, a named tuple as a tuple, anything else unreadable as its repr."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if id(value) in _seen or _depth > 100:
        return "<circular>" if id(value) in _seen else "<nested too deep>"
    seen, depth = _seen | {id(value)}, _depth + 1
    try:
        if isinstance(value, dict):
            return {plain(k, seen, depth): plain(v, seen, depth) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            items = [plain(v, seen, depth) for v in value]
            kind = type(value) if type(value) in (list, tuple, set, frozenset) else \
                (tuple if isinstance(value, tuple) else list)
            return kind(items)
        dump = getattr(type(value), "model_dump", None)
        if callable(dump):
            return plain(value.model_dump(), seen, depth)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name), seen, depth)
                    for f in dataclasses.fields(value)}
        payload = pickle.dumps(value)  # numpy, torch: readable as they are
        decode(payload)
        return value
    except Exception:  # noqa: BLE001 - the last resort is its repr
        pass
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001
        text = f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"
    return text if len(text) <= 500 else text[:497] + "..."
