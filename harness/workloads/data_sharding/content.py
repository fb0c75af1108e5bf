"""Identity by content: a sample is known by what the loader yields for it.

A user's own data has no sample-id column: the harness knows a sample by a digest
of its content (every field of one element of a batch), counted as a multiset (a
dataset may hold the same example twice). Runs in the rank, on whatever the
loader yields; pure otherwise.

What one element of a batch is:

- an array or tensor: each row (its first dimension); a 0-d one is one element;
- a dict: element ``i`` is every entry's row ``i`` (``{"inputs": ..., "labels": ...}``);
  entries without rows (a string, a number) are the batch's, not a sample's;
- a tuple or list holding arrays or dicts: its columns, as ``default_collate`` makes
  them (``(inputs, labels)``; a puzzle loader's ``(set_name, batch, n)``: the name
  and the count are the batch's);
- any other tuple or list: each item is one element (a batch as a list of samples).

An element is **padding** when every field of it with more than one value holds one
value repeated (a row of pad tokens, its labels all ``-100``): it fills a batch and
is no sample. A real sample that is constant would be taken for padding; give the
target a ``harness_ids(batch)`` function then (see ``adapter``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from numbers import Number
from typing import Any

import numpy as np

#: How long a sample's name (a short rendering of its content) may be.
NAME_CHARS = 72


class ContentError(Exception):
    """A batch whose elements cannot be told apart: the message says why."""


def _array(value: Any) -> np.ndarray | None:
    """``value`` as a NumPy array if it is an array or a tensor, else None."""
    if isinstance(value, np.ndarray):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        tensor = value.detach().cpu()
        try:
            return tensor.numpy()
        except TypeError:  # bfloat16 and the like: NumPy has no such dtype
            return tensor.float().numpy()
    return None


def _rows(value: Any) -> int | None:
    """How many elements ``value`` holds as a batch field (None: it is the batch's own)."""
    array = _array(value)
    if array is not None:
        return len(array) if array.ndim else None
    if isinstance(value, Mapping):
        counts = {_rows(v) for v in value.values()} - {None}
        return counts.pop() if len(counts) == 1 else None
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def _row(value: Any, i: int) -> Any:
    if isinstance(value, Mapping):
        return {k: _row(v, i) for k, v in value.items() if _rows(v) is not None}
    array = _array(value)
    return array[i] if array is not None else value[i]


def _columns(batch: Any) -> bool:
    """Whether a tuple or list is a batch's columns (``(inputs, labels)``, a puzzle
    loader's ``(set_name, batch, n)``) rather than a list of samples: it holds fields with
    rows, and either fields without (a name, a count), or at most three, or fields of
    different shapes. A list of dicts is samples (a collated batch is one dict)."""
    if all(isinstance(v, Mapping) for v in batch):
        return False
    rows = [v for v in batch if _rows(v) is not None and not isinstance(v, (list, tuple))]
    if not rows:
        return False
    if len(rows) < len(batch) or len(batch) <= 3:
        return True
    shapes = {(_array(v).shape[1:] if _array(v) is not None else "dict") for v in rows}
    return len(shapes) > 1


def elements(batch: Any) -> list[Any]:
    """The elements (samples, or padding) of one batch, in order."""
    array = _array(batch)
    if array is not None:
        return [array] if array.ndim == 0 else [array[i] for i in range(len(array))]
    if isinstance(batch, Mapping) or (isinstance(batch, (list, tuple)) and _columns(batch)):
        fields = batch.items() if isinstance(batch, Mapping) else enumerate(batch)
        rows = {key: _rows(value) for key, value in fields}
        counts = {n for n in rows.values() if n is not None}
        if not counts:
            raise ContentError(f"a batch of {_kind(batch)} has no field with rows (an array, a "
                               "tensor or a list): nothing in it is a sample")
        if len(counts) > 1:
            shown = ", ".join(f"{k!r}: {n}" for k, n in rows.items() if n is not None)
            raise ContentError(f"a batch's fields have different numbers of rows ({shown}): "
                               "which row is which sample is not clear")
        n = counts.pop()
        if isinstance(batch, Mapping):
            keyed = {key: value for key, value in batch.items() if rows[key] is not None}
            return [{key: _row(value, i) for key, value in keyed.items()} for i in range(n)]
        columns = [value for key, value in enumerate(batch) if rows[key] is not None]
        if len(columns) == 1:
            return [_row(columns[0], i) for i in range(n)]
        return [tuple(_row(value, i) for value in columns) for i in range(n)]
    if isinstance(batch, (list, tuple)):
        return list(batch)
    return [batch]


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"a dict with keys {sorted(map(str, value))[:6]}"
    return f"a {type(value).__name__}"


def _feed(h: Any, value: Any) -> None:
    """The bytes of ``value`` a digest reads: type, shape and content, never an address."""
    array = _array(value)
    if array is not None:
        array = np.ascontiguousarray(array)
        h.update(f"a{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes() if array.dtype.kind != "O" else repr(array.tolist()).encode())
    elif isinstance(value, Mapping):
        h.update(b"{")
        for key in sorted(value, key=repr):
            h.update(repr(key).encode() + b":")
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for item in value:
            _feed(h, item)
            h.update(b",")
        h.update(b"]")
    elif isinstance(value, (str, bytes)):
        h.update(b"s" + (value.encode("utf-8", "surrogatepass") if isinstance(value, str)
                         else value))
    elif isinstance(value, Number) or value is None:
        h.update(f"n{value!r}".encode())  # 1 and 1.0 differ: code downstream sees it
    else:
        raise ContentError(f"an element of type {type(value).__name__} has no content the "
                           "harness can read: give the target a harness_ids(batch) function")


def digest(element: Any) -> int:
    """A 63-bit number that stands for the element's content."""
    h = hashlib.blake2b(digest_size=8)
    _feed(h, element)
    return int.from_bytes(h.digest(), "big") >> 1


def _values(element: Any) -> list[np.ndarray]:
    """Every field of an element as a flat array (strings and scalars as arrays of one)."""
    if isinstance(element, Mapping):
        return [v for value in element.values() for v in _values(value)]
    array = _array(element)
    if array is not None:
        return [array.reshape(-1)]
    if isinstance(element, (list, tuple)):
        if element and all(isinstance(v, Number) for v in element):
            return [np.asarray(element).reshape(-1)]
        return [v for value in element for v in _values(value)]
    return [np.asarray([element], dtype=object)]


def is_padding(element: Any) -> bool:
    """Every field with more than one value holds one value repeated (and one such exists)."""
    multi = [v for v in _values(element) if v.size > 1]
    return bool(multi) and all(bool((v == v[0]).all()) for v in multi)


def name(element: Any) -> str:
    """A short rendering of the element, for a report line."""
    def show(value: Any) -> str:
        array = _array(value)
        if array is not None:
            flat = array.reshape(-1).tolist()
            return "[" + " ".join(map(str, flat[:6])) + (" ...]" if len(flat) > 6 else "]")
        if isinstance(value, Mapping):
            return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
        if isinstance(value, (list, tuple)):
            return "(" + ", ".join(show(v) for v in value[:6]) + (", ...)" if len(value) > 6 else ")")
        return repr(value.item() if isinstance(value, np.generic) else value)
    text = show(element)
    return text if len(text) <= NAME_CHARS else text[:NAME_CHARS - 3] + "..."
