"""A user's Python source, read (never run) by the harness: its imports, its names.

One lock for every parse: CPython 3.11 builds an AST with a recursion counter shared
by the whole interpreter, so two cell threads parsing at once can fail with
``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905; seen
on 3.11.7 under load). A file is parsed once while it is unchanged (same mtime and size).
"""

from __future__ import annotations

import ast
import inspect
import os
import stat
import threading
from dataclasses import dataclass

from harness.inputs import InputError, read_bytes

#: The largest source file the harness reads (a target, a checker, a module they import).
MAX_SOURCE_BYTES = 16 << 20
_lock = threading.Lock()
_parsed: dict[str, tuple[int, int, ast.Module]] = {}


def read(path: str) -> bytes:
    """The bytes of the source file at ``path``, read with a bound and without blocking
    (``harness.inputs.read_bytes``). Raises ``InputError``: not a regular file (a FIFO, a
    link to /proc/kmsg), larger than ``MAX_SOURCE_BYTES``, or unreadable."""
    return read_bytes(path, MAX_SOURCE_BYTES, "a Python source file")


def parse(path: str) -> ast.Module:
    """The syntax tree of the file at ``path``. Raises ``OSError`` when it cannot be read,
    ``InputError`` (a ``ValueError`` too) when it is not a regular file of source (a FIFO
    or /proc/kmsg would block the harness, a huge one fill its memory) and ``SyntaxError``
    when it is not Python. The tree is shared: read it, never change it."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise SourceError(path, "a Python source file must be a regular file")
    key = os.path.realpath(path)
    with _lock:
        held = _parsed.get(key)
        if held is not None and held[:2] == (st.st_mtime_ns, st.st_size):
            return held[2]
        try:  # bytes: the file's own coding cookie decides
            tree = ast.parse(read(path), filename=path)
        except InputError as exc:
            raise SourceError(exc.file, exc.message) from None
        _parsed[key] = (st.st_mtime_ns, st.st_size, tree)
        return tree


class SourceError(InputError, ValueError):
    """A source file the harness will not read: which, and why."""


def module_file(module: str, search: list[str]) -> str | None:
    """The source file of ``module`` (``a.b``: ``a/b.py`` or ``a/b/__init__.py``) under the
    first directory of ``search`` that has it, found without importing it or its packages."""
    parts = module.split(".")
    for base in search:
        stem = os.path.join(base or ".", *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def check_defines(what: str, path: str, name: str) -> None:
    """The file exists and defines ``name``: read from its source, never run here,
    so that a typo is a usage error before any world starts, not eight ERROR ranks.
    ``what`` names the reference in the error (``target 'sync.py:fn'``)."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)  # a FIFO or a device would block the CLI
        tree = parse(path) if regular else None
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {path}: {exc.strerror}") from None
    except SourceError as exc:
        raise ValueError(f"{what}: {exc}") from None
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


class _Default:
    """The default of a parameter read from source: there is one, its value is not known."""

    def __repr__(self) -> str:
        return "..."


HAS_DEFAULT = _Default()


@dataclass(frozen=True)
class Callee:
    """What a file's source says of how one of its top-level names is called."""

    signature: inspect.Signature
    is_class: bool = False
    is_async: bool = False
    line: int = 0
    #: what ``NAME.harness_contract = "..."`` in the file declares (a workload's shape)
    declared: str | None = None


def _signature(args: ast.arguments, skip_first: bool = False) -> inspect.Signature:
    P = inspect.Parameter
    positional = [*((a, P.POSITIONAL_ONLY) for a in args.posonlyargs),
                  *((a, P.POSITIONAL_OR_KEYWORD) for a in args.args)]
    if skip_first:
        positional = positional[1:]
    first_default = len(positional) - len(args.defaults)
    params = [P(a.arg, kind, default=HAS_DEFAULT if i >= first_default else P.empty)
              for i, (a, kind) in enumerate(positional)]
    if args.vararg:
        params.append(P(args.vararg.arg, P.VAR_POSITIONAL))
    params += [P(a.arg, P.KEYWORD_ONLY, default=P.empty if d is None else HAS_DEFAULT)
               for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg:
        params.append(P(args.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def callee(path: str, name: str) -> Callee | None:
    """How ``name`` in the file at ``path`` is called, read from its source, or None where
    the source cannot say: not a plain top-level ``def`` or ``class`` (an assignment, an
    import, a decorated function, a class whose ``__init__`` it inherits), or bound more
    than once. Never raises for a file ``check_defines`` accepted."""
    try:
        tree = parse(path)
    except (OSError, SyntaxError, ValueError):
        return None
    found = [node for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             and node.name == name]
    rebound = any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
                  or isinstance(node, ast.alias) and (node.asname or node.name) == name
                  for node in ast.walk(tree))
    if len(found) != 1 or rebound or found[0].decorator_list:
        return None
    node = found[0]
    declared = next((stmt.value.value for stmt in tree.body if isinstance(stmt, ast.Assign)
                     and isinstance(stmt.value, ast.Constant)
                     and isinstance(stmt.value.value, str)
                     and any(isinstance(t, ast.Attribute) and t.attr == "harness_contract"
                             and isinstance(t.value, ast.Name) and t.value.id == name
                             for t in stmt.targets)), None)
    if isinstance(node, ast.ClassDef):
        inits = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        if len(inits) != 1 or inits[0].decorator_list:
            return None
        return Callee(_signature(inits[0].args, skip_first=True), is_class=True,
                      line=node.lineno, declared=declared)
    return Callee(_signature(node.args), is_async=isinstance(node, ast.AsyncFunctionDef),
                  line=node.lineno, declared=declared)
