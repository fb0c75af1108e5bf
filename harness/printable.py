"""Text a target produced, made safe to print and to write: the one place for it.

A target's exception messages, output and file names reach every report. Some of that
text cannot be written at all (a lone surrogate, what ``os.fsdecode`` makes of a file
name that is not UTF-8, fails every UTF-8 encoder: the whole report would be lost),
and some of it acts on whoever reads it (terminal escape codes that recolour or clear
a screen, a carriage return that writes over a line, the bidirectional overrides that
reorder what a reviewer sees). Each such character is written as its ``\\uXXXX``
escape: nothing is dropped, and in JSON the escape is the character itself.
Newlines and tabs stay as they are.
"""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass
from typing import Any

#: C0 controls but tab and newline, DEL and the C1 controls, the line and paragraph
#: separators, the bidirectional embeddings, overrides and isolates, and surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e"
                     "\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def printable(text: str) -> str:
    """``text`` with every unsafe character written as its ``\\uXXXX`` escape."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def printable_data(value: Any) -> Any:
    """``value`` (JSON-like data: dicts, lists, strings) with every string made
    printable, keys included; the rest as it is. Iterative: a deep value cannot
    exhaust the stack."""
    if isinstance(value, str):
        return printable(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: list[Any] = [value]
    # (container to read, where its copy goes: (parent copy, key)); copies made on the way
    stack: list[tuple[Any, list[Any] | dict[Any, Any], Any]] = [(value, root, 0)]
    while stack:
        item, parent, key = stack.pop()
        if isinstance(item, str):
            parent[key] = printable(item)
        elif isinstance(item, dict):
            copy: dict[Any, Any] = {}
            parent[key] = copy
            for k, v in item.items():
                k = printable(k) if isinstance(k, str) else k
                copy[k] = None
                stack.append((v, copy, k))
        elif isinstance(item, (list, tuple)):
            items: list[Any] = [None] * len(item)
            parent[key] = items  # a tuple becomes a list, as JSON holds it
            stack.extend((v, items, i) for i, v in enumerate(item))
        else:
            parent[key] = item
    return root[0]


def printable_fields(row: Any) -> None:
    """Every text a dataclass ``row`` holds made printable, in place: a report's rows use
    it as their ``__post_init__``, so no renderer sees an unsafe character. Lists of rows
    are left to those rows' own."""
    for f in fields(row):
        value = getattr(row, f.name)
        if isinstance(value, str):
            setattr(row, f.name, printable(value))
        elif isinstance(value, dict) or (isinstance(value, list)
                                         and not any(is_dataclass(v) for v in value)):
            setattr(row, f.name, printable_data(value))
