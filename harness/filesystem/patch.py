"""Route a rank's file operations through its ``View``.

Python code reaches files through a handful of functions: ``open``, the
``os`` functions that take paths, and a few libraries that hand a path to C.
Patching them in the rank (after the fork, before the target's import) puts
every one of those calls through the view. What cannot be reached this way is
listed in the README ("Holes in the filesystem view") and pinned by tests.
"""

from __future__ import annotations

import builtins
import io
import os
import sys
from typing import Any

from harness.filesystem.view import View
from harness.imports import when_imported

_installed: View | None = None
_saved: list[tuple[Any, str, Any]] = []


def _set(owner: Any, name: str, value: Any) -> None:
    _saved.append((owner, name, getattr(owner, name)))
    setattr(owner, name, value)


def install(view: View) -> None:
    """Make ``view`` the filesystem of this process (once per process)."""
    global _installed
    if _installed is not None:
        uninstall()
    _installed = view
    v = view
    _set(builtins, "open", v.open)
    _set(io, "open", v.open)
    _set(os, "open", v.os_open)
    _set(os, "stat", v.stat)
    _set(os, "lstat", v.lstat)
    _set(os, "access", v.access)
    _set(os, "listdir", v.listdir)
    _set(os, "scandir", v.scandir)
    _set(os, "mkdir", v.mkdir)
    _set(os, "remove", v.remove)
    _set(os, "unlink", v.remove)
    _set(os, "rmdir", v.rmdir)
    _set(os, "rename", lambda src, dst, **kw: v.rename(src, dst, replace=False, **kw))
    _set(os, "replace", lambda src, dst, **kw: v.rename(src, dst, replace=True, **kw))
    _set(os, "chmod", v.chmod)
    _set(os, "utime", v.utime)
    _set(os, "truncate", v.truncate)
    _set(os, "readlink", v.readlink)
    _set(os, "symlink", v.symlink)
    _set(os, "link", v.link)
    _set(os, "fsync", v.fsync)
    _set(os, "close", v.close_fd)
    _set(os, "chdir", v.chdir)
    _set(os, "getcwd", v.getcwd)
    _set(os, "getcwdb", lambda: os.fsencode(v.getcwd()))
    _set(os, "chown", v.chown)
    _set(os, "fchmod", v.fchmod)
    _set(os, "fchown", v.fchown)
    _set(os, "lchown", v.lchown)
    _set(os, "mkfifo", v.mkfifo)
    _set(os, "mknod", v.mknod)
    _set(os, "statvfs", v.statvfs)
    for name in ("listxattr", "getxattr", "setxattr", "removexattr"):
        if hasattr(os, name):
            _set(os, name, getattr(v, name))
    if hasattr(os, "fdatasync"):
        _set(os, "fdatasync", v.fsync)
    # pathlib on 3.10 bound os functions into an accessor at import time.
    pathlib = sys.modules.get("pathlib")
    accessor = getattr(pathlib, "_normal_accessor", None)
    if accessor is not None:
        for name in ("stat", "lstat", "open", "listdir", "scandir", "mkdir", "unlink", "rmdir",
                     "rename", "replace", "chmod", "utime", "readlink", "symlink", "link"):
            if hasattr(accessor, name):
                _set(accessor, name, getattr(os, name))
    import tempfile
    tempfile.tempdir = None  # recomputed through the view on next use
    when_imported("torch", _patch_torch)
    when_imported("numpy", _patch_numpy)


def uninstall() -> None:
    global _installed
    while _saved:
        owner, name, value = _saved.pop()
        setattr(owner, name, value)
    _installed = None


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
