"""The shim's and each target file's compiled code, held by the fork server for every
rank it forks.

The shim can only be imported inside a rank: its module code reads the rank's
environment and profile and registers itself with the rank's torch, so every
rank runs it, in its world, when the target imports ``torch_xla``. What does
not depend on the world is the code itself: finding ~20 files, reading their
``.pyc`` and unmarshalling them was a third of that import in a forked rank.
``hold`` does it once in the fork server and leaves, for each directory of the
shim, a path finder whose loader returns the held code object while the source
file is unchanged (same mtime and size, checked by one stat, as the ``.pyc``
check does), and reads the file as before otherwise. Which ``torch_xla`` a
rank imports is still decided by ``sys.path``, as before: these finders answer
only for the shim's directories, and only once a rank put the shim on its path.

A target (``path/to/sync.py:fn`` or ``pkg.sync:fn``) is never imported in the server (its
module may import ``torch_xla``), but its code is compiled there once (``hold_file``,
``hold_module``), before the server forks the first world that runs it: each rank used
to compile it again, since a rank's ``.pyc`` is not written back where the next one would
read it (kernel isolation keeps it in the host's copy of the disk, and
``PYTHONDONTWRITEBYTECODE``, common in containers, writes none at all).
"""

from __future__ import annotations

import importlib.machinery as machinery
import logging
import os
import posix
import sys
from types import CodeType

log = logging.getLogger(__name__)

#: source path -> (code, mtime_ns, size) of the source it was compiled from
_held: dict[str, tuple[CodeType, int, int]] = {}


class HeldCodeLoader(machinery.SourceFileLoader):
    """``SourceFileLoader`` that returns the fork server's code while the file is unchanged."""

    def get_code(self, fullname: str) -> CodeType | None:  # type: ignore[override]
        held = _held.get(self.path)
        if held is not None:
            code, mtime_ns, size = held
            try:
                st = posix.stat(self.path)  # the machine's: code is loaded from it, never the view
            except OSError:
                st = None
            if st is not None and st.st_mtime_ns == mtime_ns and st.st_size == size:
                return code
        return super().get_code(fullname)


def hold_file(path: str) -> None:
    """In the fork server: compile ``path`` unless its held code is still its own."""
    try:
        st = posix.stat(path)
    except OSError:
        return  # the rank says what is missing
    held = _held.get(path)
    if held is not None and (held[1], held[2]) == (st.st_mtime_ns, st.st_size):
        return
    name = os.path.splitext(os.path.basename(path))[0]
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # the user's tree: read only
    try:
        code = machinery.SourceFileLoader(name, path).get_code(name)
    except (OSError, SyntaxError, ImportError, ValueError) as exc:
        log.debug("not held: %s: %s", path, exc)  # the rank compiles it and says what failed
        return
    finally:
        sys.dont_write_bytecode = writes
    if code is not None:
        _held[path] = (code, st.st_mtime_ns, st.st_size)


def hold_module(module: str, search: list[str]) -> None:
    """In the fork server: compile the module ``module`` would import from ``search`` (the
    rank's ``sys.path``, its working directory for ``""``) and have the finder of its
    directory, as the rank's import system will look it up, return the held code."""
    from harness.source import module_file

    path = module_file(module, search)
    if path is None:
        return  # the rank's import says what is missing
    hold_file(path)
    directory = os.path.dirname(path)
    if os.path.basename(path) == "__init__.py":
        directory = os.path.dirname(directory)  # a package is found in its parent's directory
    if not isinstance(sys.path_importer_cache.get(directory), _HeldFinder):
        sys.path_importer_cache[directory] = _finder(directory)


class _HeldFinder(machinery.FileFinder):
    """A directory's finder whose source loader is ``HeldCodeLoader``."""


def _finder(directory: str) -> machinery.FileFinder:
    finder = _HeldFinder(directory, *_loaders())
    finder.find_spec("__harness_fills_the_directory_cache__")  # its listing, read once here
    return finder


def _loaders() -> list[tuple[type, list[str]]]:
    """A ``FileFinder``'s loaders in the import system's own order, ours for sources."""
    return [(machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
            (HeldCodeLoader, machinery.SOURCE_SUFFIXES),
            (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES)]


def hold(root: str) -> int:
    """In the fork server: compile every module under ``root`` and put a finder for each of
    its directories in ``sys.path_importer_cache``; returns how many modules are held."""
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            try:
                st = posix.stat(path)
                code = machinery.SourceFileLoader(name[:-3], path).get_code(name[:-3])
            except (OSError, SyntaxError, ImportError) as exc:
                log.debug("not held: %s: %s", path, exc)  # imported as before, by the rank
                continue
            if code is not None:
                _held[path] = (code, st.st_mtime_ns, st.st_size)
        sys.path_importer_cache[directory] = _finder(directory)
    return len(_held)
