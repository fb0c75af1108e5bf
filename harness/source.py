"""A user's Python source, read (never run) by the harness: its imports, its names.

One lock for every parse: CPython 3.11 builds an AST with a recursion counter shared
by the whole interpreter, so two cell threads parsing at once can fail with
``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905; seen
on 3.11.7 under load). A file is parsed once while it is unchanged (same mtime and size).
"""

from __future__ import annotations

import ast
import os
import stat
import threading

_lock = threading.Lock()
_parsed: dict[str, tuple[int, int, ast.Module]] = {}


def parse(path: str) -> ast.Module:
    """The syntax tree of the file at ``path``. Raises ``OSError`` when it cannot be read,
    ``ValueError`` when it is not a regular file (a FIFO would block the harness) and
    ``SyntaxError`` when it is not Python. The tree is shared: read it, never change it."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file")
    key = os.path.realpath(path)
    with _lock:
        held = _parsed.get(key)
        if held is not None and held[:2] == (st.st_mtime_ns, st.st_size):
            return held[2]
        with open(path, "rb") as f:  # bytes: the file's own coding cookie decides
            tree = ast.parse(f.read(), filename=path)
        _parsed[key] = (st.st_mtime_ns, st.st_size, tree)
        return tree


def check_defines(what: str, path: str, name: str) -> None:
    """The file exists and defines ``name``: read from its source, never run here,
    so that a typo is a usage error before any world starts, not eight ERROR ranks.
    ``what`` names the reference in the error (``target 'sync.py:fn'``)."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)  # a FIFO or a device would block the CLI
        tree = parse(path) if regular else None
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {path}: {exc.strerror}") from None
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"{what}: {path} is not Python source: {exc}") from None
    if tree is None:
        raise ValueError(f"{what}: {path} is not a regular file")
    defined: set[str] = set()
    for node in ast.walk(tree):  # top level or under if/try: any binding may be the one
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                return  # a star import may bring it in: the rank will tell
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    if name not in defined and "__getattr__" not in defined:
        raise ValueError(f"{what}: {path} defines no {name!r}")
