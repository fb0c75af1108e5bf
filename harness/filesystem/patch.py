"""Route a rank's file operations through its ``View``.

Python code reaches files through a handful of functions: ``open``, the
``os`` functions that take paths, and a few libraries that hand a path to C.
Patching them in the rank (after the fork, before the target's import) puts
every one of those calls through the view. What cannot be reached this way is
listed in docs/explanation/isolation.md ("Holes") and pinned by tests.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

from harness.filesystem.view import View
from harness.imports import when_imported
from harness.rebinding import rebind, replace, scan_modules, undo

_installed: View | None = None
_functions = False  # the view's stand-ins are in place (``install_functions``)
_saved: list[tuple[Any, str, Any]] = []
_aside = threading.local()  # ``on``: this thread's calls are the harness's own (``aside``)


@contextlib.contextmanager
def aside() -> Iterator[None]:
    """The harness's own look at the machine's files in a rank (a code file's real path,
    to name the target's line): this thread's calls reach the machine's functions, never
    the view, its faults or its turns."""
    was = getattr(_aside, "on", False)
    _aside.on = True
    try:
        yield
    finally:
        _aside.on = was


def _set(owner: Any, key: Any, value: Any) -> None:
    """``owner.key = value`` (an item when ``owner`` is a dict), undone by ``uninstall``."""
    replace(owner, key, value, _saved)


def install(view: View) -> None:
    """Make ``view`` the filesystem of this process (``install_functions`` first, when the
    process did not inherit them from its world's leader)."""
    global _installed
    install_functions()
    _installed = view
    import tempfile
    tempfile.tempdir = None  # recomputed through the view on next use


def install_functions() -> None:
    """Put the view's functions in the place of the machine's, once per process: each
    passes its call to the installed view, to the machine's own while there is none (a
    world's leader installs them for all its units, which inherit them with its pages)."""
    global _functions
    if _functions:
        return
    _functions = True
    early = find_early_bindings() if _early is None else _early
    for owner, name, method in _VIEW_FUNCTIONS:
        if hasattr(owner, name):
            _set(owner, name, _to_view(method, getattr(owner, name)))
    _set(os, "rename", _to_view("rename", os.rename, replace=False))
    _set(os, "replace", _to_view("rename", os.replace, replace=True))
    _set(os, "getcwdb", _getcwdb)
    # pathlib on 3.10 bound the real functions into an accessor at import time (its open
    # is io.open, not os.open): each is swapped for the stand-in of the function it is.
    pathlib = sys.modules.get("pathlib")
    accessor = getattr(pathlib, "_normal_accessor", None)
    if accessor is not None:
        stand_ins = {id(old): getattr(owner, name) for owner, name, old in _saved
                     if owner in (builtins, io, os)}
        for name in ("stat", "lstat", "open", "listdir", "scandir", "mkdir", "unlink", "rmdir",
                     "rename", "replace", "chmod", "utime", "readlink", "symlink", "link"):
            real = getattr(accessor, name, None)
            if id(real) in stand_ins:
                _set(accessor, name, stand_ins[id(real)])
    import linecache
    _set(linecache, "os", _MACHINE_OS)  # a traceback's source, from the machine (see _KEEP)
    _rebind_early(early)
    when_imported("torch", _patch_torch)
    when_imported("numpy", _patch_numpy)
    when_imported("_posixshmem", _patch_shared_memory)
    when_imported("fcntl", _patch_fcntl)


#: (owner, name, the view's method that takes its place)
_VIEW_FUNCTIONS = [(builtins, "open", "open"), (io, "open", "open"), *(
    (os, name, method) for name, method in (
    ("open", "os_open"), ("stat", "stat"), ("lstat", "lstat"), ("access", "access"),
    ("listdir", "listdir"), ("scandir", "scandir"), ("mkdir", "mkdir"), ("remove", "remove"),
    ("unlink", "remove"), ("rmdir", "rmdir"), ("chmod", "chmod"), ("utime", "utime"),
    ("truncate", "truncate"), ("readlink", "readlink"), ("symlink", "symlink"), ("link", "link"),
    ("fsync", "fsync"), ("close", "close_fd"), ("dup", "dup"), ("dup2", "dup2"),
    ("chdir", "chdir"), ("getcwd", "getcwd"), ("chown", "chown"), ("fchmod", "fchmod"),
    ("fchown", "fchown"), ("lchown", "lchown"), ("mkfifo", "mkfifo"), ("mknod", "mknod"),
    ("statvfs", "statvfs"), ("listxattr", "listxattr"), ("getxattr", "getxattr"),
    ("setxattr", "setxattr"), ("removexattr", "removexattr"), ("fdatasync", "fsync")))]


def _to_view(method: str, machine: Any, **bound: Any) -> Any:
    """``machine``'s stand-in: the installed view's ``method`` (with ``bound``), or
    ``machine`` itself while this process has no view."""
    def call(*args: Any, **kwargs: Any) -> Any:
        view = _installed
        if view is None or getattr(_aside, "on", False):
            return machine(*args, **kwargs)
        return getattr(view, method)(*args, **bound, **kwargs)

    call.__name__ = call.__qualname__ = getattr(machine, "__name__", method)
    call.__doc__ = getattr(machine, "__doc__", None)
    return call


def _getcwdb() -> bytes:
    view = _installed
    return _MACHINE_OS.getcwdb() if view is None else os.fsencode(view.getcwd())


def uninstall() -> None:
    global _installed, _functions
    undo(_saved)
    _installed = None
    _functions = False


# -- references bound before the view existed ------------------------------------

#: What a module imported before the rank's fork holds of the real functions: a
#: global (``tarfile.bltn_open``, ``bz2._builtin_open``) or a default argument
#: (``tempfile``'s ``unlink=_os.unlink``, which deletes the file ``NamedTemporaryFile``
#: made through the view). Found once, in the fork server (``find_early_bindings``),
#: and rebound in each rank at ``install``: a handful of sites, not a scan per rank.
_early: list[tuple[Any, Any, Any]] | None = None
_scanned: set[str] = set()  # the modules looked at for them
#: The real functions ``install`` replaces, by where it replaces them.
_REAL = [(builtins, "open"), (io, "open"), *((os, n) for n in (
    "open", "stat", "lstat", "access", "listdir", "scandir", "mkdir", "remove", "unlink", "rmdir",
    "rename", "replace", "chmod", "utime", "truncate", "readlink", "symlink", "link", "fsync",
    "chdir", "getcwd", "chown", "statvfs", "mkfifo", "mknod", "dup", "dup2"))]
#: Modules whose own references stay real: the view is built on them, and source code
#: (read for tracebacks) is loaded from the machine, as imports are, never through faults.
_KEEP = ("harness", "torch_xla", "os", "posix", "io", "_io", "builtins", "pathlib", "posixpath",
         "tokenize", "linecache")
#: ``os`` as ``linecache`` sees it once the view is installed: the machine's own functions.
#: It reads a traceback's source with ``tokenize.open`` (the real ``open``, kept above) but
#: checks the file with ``os.stat`` at each use: through the view, that stat walked the
#: mount table and the sandbox for every frame of every traceback a rank formats (and
#: counted towards the fault plan's stat operations, which the target never made).
_MACHINE_OS = types.SimpleNamespace(**{k: v for k, v in vars(os).items() if not k.startswith("__")})


def find_early_bindings() -> list[tuple[Any, Any, Any]]:
    """``(owner, key, what it holds)`` for every reference to one of the real functions
    ``install`` replaces that a module imported before the fork holds (see
    ``harness.rebinding``). Run before ``install`` (the fork server runs it once, for
    every rank it forks)."""
    global _early
    _early = [*(_early or ()), *scan_modules({id(getattr(owner, name)) for owner, name in _REAL
                                              if hasattr(owner, name)}, _KEEP, _scanned)]
    return _early


def _rebind_early(sites: list[tuple[Any, Any, Any]]) -> None:
    """Point each early reference at what ``install`` put in the real function's place."""
    rebind(sites, {id(old): getattr(owner, name) for owner, name, old in _saved
                   if owner in (builtins, io, os)}, _saved)


# -- libraries that hand a path to C ---------------------------------------------

def _patch_torch(torch: Any) -> None:
    """torch.save/load open a *path* in C++; give them a file object from the view."""
    original_save, original_load = torch.save, torch.load

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        view = _installed
        if view is not None and isinstance(f, (str, bytes, os.PathLike)):
            with view.open(f, "wb") as fh:
                return original_save(obj, fh, *args, **kwargs)
        return original_save(obj, f, *args, **kwargs)

    def load(f: Any, *args: Any, **kwargs: Any) -> Any:
        view = _installed
        if view is not None and isinstance(f, (str, bytes, os.PathLike)) and not kwargs.get("mmap"):
            with view.open(f, "rb") as fh:
                return original_load(fh, *args, **kwargs)
        return original_load(f, *args, **kwargs)

    save.__wrapped__ = original_save  # type: ignore[attr-defined]
    load.__wrapped__ = original_load  # type: ignore[attr-defined]
    _set(torch, "save", save)
    _set(torch, "load", load)
    serialization = sys.modules.get("torch.serialization")
    if serialization is not None:
        _set(serialization, "save", save)
        _set(serialization, "load", load)


def _patch_shared_memory(posixshmem: Any) -> None:
    """``multiprocessing.shared_memory`` makes its segments with ``shm_open``, a C call
    that opens ``/dev/shm/<name>`` on the machine: shared by every simulated host and left
    behind after the run. Opened through the view, a segment is a file of the host's own
    ``/dev/shm``, in the sandbox, as ``shm_open`` on a pod's VM makes it in that VM's tmpfs."""
    def shm_open(path: str, flags: int, mode: int = 0o777) -> int:
        view = _installed
        name = _segment(path)
        if view is None:
            return original_open(path, flags, mode)
        return view.os_open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)

    def shm_unlink(path: str) -> None:
        view = _installed
        if view is None:
            return original_unlink(path)
        return view.remove(_segment(path))

    original_open, original_unlink = posixshmem.shm_open, posixshmem.shm_unlink
    _set(posixshmem, "shm_open", shm_open)
    _set(posixshmem, "shm_unlink", shm_unlink)


def _patch_fcntl(fcntl: Any) -> None:
    """A copy made with ``fcntl(fd, F_DUPFD)`` is the view's as ``os.dup``'s is."""
    original = fcntl.fcntl
    dups = {getattr(fcntl, n) for n in ("F_DUPFD", "F_DUPFD_CLOEXEC") if hasattr(fcntl, n)}

    def fcntl_(fd: Any, cmd: int, arg: Any = 0) -> Any:
        result = original(fd, cmd, arg)
        view = _installed
        if view is not None and cmd in dups and isinstance(result, int):
            view.copied(fd if isinstance(fd, int) else fd.fileno(), result)
        return result

    _set(fcntl, "fcntl", fcntl_)


def _segment(path: str) -> str:
    """``/psm_1a2b`` as the file ``shm_open`` makes of it; a name with another ``/`` is
    refused as glibc refuses it."""
    name = path[1:] if path.startswith("/") else path
    if not name or "/" in name or name in (".", ".."):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
    return "/dev/shm/" + name


def _patch_numpy(numpy: Any) -> None:
    """``np.fromfile``/``ndarray.tofile`` take a path in C; resolve it first."""
    original_fromfile = numpy.fromfile

    def fromfile(file: Any, *args: Any, **kwargs: Any) -> Any:
        view = _installed
        if view is not None and isinstance(file, (str, bytes, os.PathLike)):
            with view.open(file, "rb") as fh:
                return original_fromfile(fh, *args, **kwargs)
        return original_fromfile(file, *args, **kwargs)

    _set(numpy, "fromfile", fromfile)
