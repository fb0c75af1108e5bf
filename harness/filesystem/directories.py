"""Directories as one rank sees them: listing, creating, removing.

A listing merges the layers (the upper directory, the machine's under an
overlay, files written and not yet published), hides what the rank deleted and
shows the mount points below. Removing a real path leaves a whiteout.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat as stat_module
from typing import TYPE_CHECKING, Any

from harness.filesystem import machine
from harness.filesystem.machine import oserror
from harness.filesystem.resolution import Resolution, Resolved, opaque

if TYPE_CHECKING:
    from harness.filesystem.view import View


class Directories(Resolution):
    """The view's half for directories (a mixin of ``View``)."""

    def listdir(self, path: Any = ".") -> list[str]:
        if isinstance(path, int):
            vpath = self.fd_vpath(path)
            if vpath is None:
                return machine.listdir(path)
            path = vpath
        r = self.resolve(path)
        if r.passthrough:
            return machine.listdir(r.vpath)
        try:
            return self._listdir_now(r)
        finally:
            self.hooks.looked(self, "listdir", r)

    def _listdir_now(self, r: Resolved) -> list[str]:
        self.hooks.before(self, "listdir", r)
        names: set[str] = set()
        found = False
        for candidate in self._dir_layers(r):
            if machine.leads_to_dir(candidate):
                found = True
                names.update(machine.listdir(candidate))
            elif machine.exists(candidate):
                raise oserror(errno.ENOTDIR, r.vpath)
        if machine.is_plain(r.staging):
            raise oserror(errno.ENOTDIR, r.vpath)
        if not found:
            raise oserror(errno.ENOENT, r.vpath)
        if r.staging and machine.is_dir(r.staging):  # files written here, not yet published
            names.update(n for n in machine.listdir(r.staging)
                         if machine.is_plain(os.path.join(r.staging, n)))
        names.update(self._mount_points_under(r.vpath))
        return sorted(n for n in names if not self._is_whited_out(r, n))

    def _dir_layers(self, r: Resolved) -> list[str]:
        layers = [r.upper]
        if r.lower is not None and not machine.is_plain(r.whiteout):
            layers.append(r.lower)
        return layers

    def _mount_points_under(self, vdir: str) -> set[str]:
        prefix = vdir.rstrip("/") + "/"
        return {m.path[len(prefix):].split("/")[0] for m in self.table.mounts
                if m.path.startswith(prefix) and m.path != vdir}

    def _is_whited_out(self, r: Resolved, name: str) -> bool:
        if not r.whiteout:
            return False
        child = os.path.join(r.upper, name)
        return machine.is_plain(os.path.join(r.whiteout, name)) and not machine.exists(child)

    def scandir(self, path: Any = ".") -> Any:
        if isinstance(path, int):
            vpath = self.fd_vpath(path)
            if vpath is None:
                return machine.scandir(path)
            return _ScandirIterator(self, vpath, "", self.listdir(vpath))
        r = self.resolve(path)
        if r.passthrough:
            return machine.scandir(r.vpath)
        names = self.listdir(path)
        return _ScandirIterator(self, r.vpath, os.fspath(path), names)

    def mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        r, done = self._enter(path, dir_fd, lambda p, **kw: machine.mkdir(p, mode, **kw),
                              follow=False, op="mkdir", writes=True)
        if r is None:
            return done
        if self._read_location(r) is not None:
            raise oserror(errno.EEXIST, r.vpath)
        parent = self.resolve(posixpath.dirname(r.vpath))
        if self._read_location(parent) is None:
            raise oserror(errno.ENOENT, r.vpath)
        machine.makedirs(r.upper, mode=mode, exist_ok=True)
        if r.whiteout and machine.exists(r.whiteout):
            machine.rm(r.whiteout)
            opaque(r)  # a new directory where the rank deleted a real one starts empty
        return None

    def remove(self, path: Any, *, dir_fd: int | None = None) -> None:
        r, done = self._enter(path, dir_fd, machine.remove, follow=False, op="remove", writes=True)
        if r is None:
            return done
        if machine.is_dir(self._existing(r)):
            raise oserror(errno.EISDIR, r.vpath)
        self._delete(r)
        return None

    def rmdir(self, path: Any, *, dir_fd: int | None = None) -> None:
        r, done = self._enter(path, dir_fd, machine.rmdir, follow=False, op="rmdir", writes=True)
        if r is None:
            return done
        if not machine.is_dir(self._existing(r)):
            raise oserror(errno.ENOTDIR, r.vpath)
        if self.listdir(r.vpath):
            raise oserror(errno.ENOTEMPTY, r.vpath)
        self._delete(r)
        return None

    def _delete(self, r: Resolved) -> None:
        for layer in (r.staging, r.upper):
            if layer and machine.exists(layer):
                machine.rm(layer)
        if r.lower is not None and machine.exists(r.lower):
            machine.whiteout(r.whiteout)
        self.hooks.after_change(self, r)


class _ScandirIterator:
    """``os.scandir`` over a virtual directory: entries whose stat goes through the view."""

    def __init__(self, view: View, vdir: str, given: str, names: list[str]) -> None:
        self._entries = iter([_DirEntry(view, vdir, given, n) for n in names])

    def __iter__(self) -> _ScandirIterator:
        return self

    def __next__(self) -> _DirEntry:
        return next(self._entries)

    def __enter__(self) -> _ScandirIterator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._entries = iter(())


class _DirEntry:
    def __init__(self, view: View, vdir: str, given: str, name: str) -> None:
        self._view = view
        self.name = name
        self.path = os.path.join(given, name)
        self._vpath = posixpath.join(vdir, name)

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"<DirEntry {self.name!r}>"

    def stat(self, *, follow_symlinks: bool = True) -> Any:
        return self._view.stat(self._vpath, follow_symlinks=follow_symlinks)

    def inode(self) -> int:
        return self.stat(follow_symlinks=False).st_ino

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        try:
            return stat_module.S_ISDIR(self.stat(follow_symlinks=follow_symlinks).st_mode)
        except OSError:
            return False

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        try:
            return stat_module.S_ISREG(self.stat(follow_symlinks=follow_symlinks).st_mode)
        except OSError:
            return False

    def is_symlink(self) -> bool:
        try:
            return stat_module.S_ISLNK(self.stat(follow_symlinks=False).st_mode)
        except OSError:
            return False

    def is_junction(self) -> bool:
        return False

