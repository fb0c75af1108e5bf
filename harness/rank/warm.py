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

import _thread
import importlib
import importlib.machinery as machinery
import logging
import os
import posix
import sys
from types import CodeType, ModuleType

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


# -- the shim's modules, executed once --------------------------------------------------

#: Set while the fork server executes the shim's modules ahead of its ranks: the shim's
#: ``torch_xla/__init__`` then leaves out what its import does to torch (``_on_import``).
PREPARING = "HARNESS_PREPARING_SHIM"
#: What the fork server executes of the shim: what every rank that imports ``torch_xla``
#: executed itself, less the modules whose import acts on torch in a way a rank must do
#: itself (``_internal.ops`` registers the collectives as ops) or reads the rank's profile
#: (``xla_dist``): those run in the rank, as before.
PREPARED = ("torch_xla", "torch_xla.core.xla_model", "torch_xla.runtime",
            "torch_xla.distributed.xla_multiprocessing")
#: ... and, when the server has torch.distributed (a rank's ``import torch_xla`` then
#: imports it at once), the ``xla`` backend: its registration is its ``_on_import``.
WITH_DISTRIBUTED = ("torch_xla.distributed.xla_backend",)
_ACTING = ("torch_xla._internal.ops", "torch_xla.distributed.xla_dist")

_MACHINE_LOCKS = (_thread.LockType, type(_thread.RLock()))
#: name -> module, in the order their imports completed (``import_module`` brings a
#: module's package first when it hands them out)
_prepared: dict[str, ModuleType] = {}
#: (module, name, a plain lock?) for each machine lock the prepared modules made at module
#: level, found once here: a rank that looked through every module's globals for them
#: touched, and so copied, the pages of every object they name
_locks: list[tuple[ModuleType, str, bool]] = []


def prepare(root: str) -> int:
    """In the fork server: execute the shim's ``PREPARED`` modules (from ``root``) once, and
    keep them out of ``sys.modules``; a rank's first ``import torch_xla`` is then handed
    them (``hand_out``). Returns how many modules are kept (0: none, and ranks import
    the shim as before). Once: a server's later preloads change nothing of it."""
    if _prepared:
        return len(_prepared)
    saved_path, saved_meta = list(sys.path), list(sys.meta_path)
    saved_env = {k: os.environ.get(k) for k in (PREPARING, "PJRT_DEVICE")}
    before = set(sys.modules)
    os.environ[PREPARING] = "1"
    sys.path.insert(0, root)
    wanted = PREPARED + (WITH_DISTRIBUTED if "torch.distributed" in sys.modules else ())
    try:
        for name in wanted:
            importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - an optimisation only: ranks import it as before
        log.debug("shim not prepared: %s", exc)
    finally:
        sys.path[:], sys.meta_path[:] = saved_path, saved_meta
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        made = {name: sys.modules.pop(name) for name in list(sys.modules)
                if name not in before and (name == "torch_xla" or name.startswith("torch_xla."))}
    if any(name in made for name in _ACTING) or not all(name in made for name in wanted):
        log.debug("shim not prepared: it imported %s", sorted(made))
        return 0
    _prepared.update(made)
    _locks.extend((module, key, type(value) is _thread.LockType) for module in made.values()
                  for key, value in vars(module).items() if type(value) in _MACHINE_LOCKS)
    return len(_prepared)


def hand_out(root: str) -> None:
    """In a unit, once the shim is on its path: its imports of the prepared modules take
    the fork server's (``_Handout``)."""
    if _prepared and not any(isinstance(f, _Handout) for f in sys.meta_path):
        sys.meta_path.insert(0, _Handout(os.path.join(os.path.abspath(root), "")))


class _Handout:  # a meta-path finder and loader (importlib.abc costs a rank ~8 ms)
    """Answers for the prepared modules while the shim is the ``torch_xla`` the rank's
    path finds. The first of them imported brings every other through the import system
    (so a hook on one of them, as the harness's on the shim's runtime, fires), then runs
    each one's ``_on_import``: what its import does beyond defining it. A lock made at
    module level is made again, the rank's own (its waits on the world's clock)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.given: set[str] = set()

    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> machinery.ModuleSpec | None:
        module = _prepared.get(fullname)
        if module is None or fullname in self.given:
            return None  # imported again after it was dropped: its file runs, as before
        parent, _, _ = fullname.rpartition(".")
        if parent and sys.modules.get(parent) is not _prepared.get(parent):
            return None
        if not parent and not self._shim_first():
            return None
        known = module.__spec__
        spec = machinery.ModuleSpec(fullname, self, origin=known.origin,
                                    is_package=known.submodule_search_locations is not None)
        spec.submodule_search_locations = known.submodule_search_locations
        spec.has_location, spec.cached = known.has_location, known.cached
        return spec

    def _shim_first(self) -> bool:
        """Is the shim the first ``torch_xla`` on the rank's path?"""
        for entry in sys.path:
            if os.path.join(os.path.abspath(entry or "."), "") == self.root:
                return True
            for candidate in ("torch_xla", "torch_xla.py"):
                try:
                    posix.stat(os.path.join(entry or ".", candidate))
                    return False
                except OSError:
                    pass
        return False

    def create_module(self, spec: machinery.ModuleSpec) -> ModuleType:
        return _prepared[spec.name]

    def exec_module(self, module: ModuleType) -> None:
        first = not self.given
        self.given.add(module.__name__)
        if not first:
            return
        for name in _prepared:  # the rest, in the order they were first imported
            if name not in sys.modules:
                importlib.import_module(name)
        import threading

        for prepared, key, plain in _locks:
            setattr(prepared, key, threading.Lock() if plain else threading.RLock())
        for prepared in _prepared.values():
            on_import = vars(prepared).get("_on_import")
            if callable(on_import):
                on_import()
