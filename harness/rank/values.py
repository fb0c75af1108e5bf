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


class UnreadableValue(ValueError):
    """A value the harness will not build: it names what it refused."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "torch.storage" and name == "_load_from_bytes":
            return _torch_storage
        if name in _SAFE_NAMES.get(module, ()) or module in _SAFE_MODULES:
            return getattr(importlib.import_module(module), name)
        raise UnreadableValue(f"it holds {module}.{name}, which only the target's code can build")


def _torch_storage(data: bytes) -> Any:
    import torch  # only when a tensor came back: the rank had torch, so does this machine

    return torch.load(io.BytesIO(data), weights_only=True)


def decode(payload: bytes) -> Any:
    """The value, built from plain data only. Raises ``UnreadableValue``."""
    try:
        return _PlainUnpickler(io.BytesIO(payload)).load()
    except UnreadableValue:
        raise
    except Exception as exc:  # noqa: BLE001 - a truncated or forged payload: its own words
        raise UnreadableValue(f"{type(exc).__name__}: {exc}") from None


def encode(value: Any) -> tuple[bytes, str | None]:
    """In the rank: ``value`` as the harness can read it, and a note when it had to be
    sent as its plain form (None when it went as it is)."""
    try:
        payload = pickle.dumps(value)
        decode(payload)
        return payload, None
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
