"""What the view says about a path without opening it, and how it changes it.

stat, access, readlink, statvfs and the xattrs read the layer a reader
reaches; chmod, chown, utime, truncate and setxattr land where the rank's
copy is (the open write in staging, else the upper layer, copied up from the
machine's file first: an overlay never changes the real one).
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
from typing import Any

from harness.filesystem import machine
from harness.filesystem.machine import oserror
from harness.filesystem.resolution import Resolution


class Metadata(Resolution):
    """The view's half for metadata (a mixin of ``View``)."""

    def stat(self, path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True) -> Any:
        if isinstance(path, int):
            return machine.stat(path)
        r, done = self._enter(path, dir_fd, lambda p, **kw: machine.stat(
            p, follow_symlinks=follow_symlinks, **kw), follow=follow_symlinks)
        if r is None:
            return done
        try:
            self.hooks.before(self, "stat", r)
            real = self._existing(r)
            st = machine.stat(real, follow_symlinks=follow_symlinks)
        finally:
            self.hooks.looked(self, "stat", r)
        if self.world_ns is not None:
            st = machine.world_stat(real, st)
        return self.hooks.adjust_stat(self, r, st)

    def lstat(self, path: Any, *, dir_fd: int | None = None) -> Any:
        return self.stat(path, dir_fd=dir_fd, follow_symlinks=False)

    def access(self, path: Any, mode: int, *, dir_fd: int | None = None, **kwargs: Any) -> bool:
        r, done = self._enter(path, dir_fd, lambda p, **kw: machine.access(p, mode, **kw),
                              follow=kwargs.get("follow_symlinks", True), at_kwargs=kwargs)
        if r is None:
            return done
        source = self._read_location(r)
        if source is None:
            return False
        if mode & os.W_OK and r.mount.mode == "ro":
            return False
        return self.hooks.access(self, r, mode, machine.access(source, mode))

    def _machine_fd(self, fd: int) -> str | None:
        """The virtual path a change of ``fd``'s metadata is made by, when the descriptor
        itself must not be changed: one open on the machine's own file (an overlay's lower
        layer, opened for reading) or on a read-only mount's, and any the view did not open
        (``foreign``): the change goes to the rank's copy, or meets EROFS, never to the
        machine's file. None: the view's own file, changed through its descriptor."""
        r = self.fds.get(fd)
        if r is None:
            return self.foreign(fd)
        if r.mount.mode == "ro":
            return r.vpath
        if r.lower is None:
            return None
        try:
            st, real = machine.stat(fd), machine.stat(r.lower)
        except OSError:
            return None
        return r.vpath if (st.st_dev, st.st_ino) == (real.st_dev, real.st_ino) else None

    def fchmod(self, fd: int, mode: int) -> None:
        vpath = self._machine_fd(fd)
        return machine.fchmod(fd, mode) if vpath is None else self.chmod(vpath, mode)

    def fchown(self, fd: int, uid: int, gid: int) -> None:
        vpath = self._machine_fd(fd)
        return machine.fchown(fd, uid, gid) if vpath is None else self.chown(vpath, uid, gid)

    def chmod(self, path: Any, mode: int, *, dir_fd: int | None = None,
              follow_symlinks: bool = True) -> None:
        if isinstance(path, int):
            return self.fchmod(path, mode)
        r, done = self._enter(path, dir_fd, lambda p, **kw: machine.chmod(p, mode, **kw),
                              follow=follow_symlinks, op="chmod", writes=True,
                              at_kwargs={"follow_symlinks": follow_symlinks})
        if r is None:
            return done
        self._existing(r)
        machine.chmod(self._meta_location(r), mode)
        return None

    def chown(self, path: Any, uid: int, gid: int, *, dir_fd: int | None = None,
              follow_symlinks: bool = True) -> None:
        if isinstance(path, int):
            return self.fchown(path, uid, gid)
        r, done = self._enter(path, dir_fd, lambda p, **kw: machine.chown(
            p, uid, gid, follow_symlinks=follow_symlinks, **kw), follow=follow_symlinks, writes=True)
        if r is None:
            return done
        self._existing(r)
        try:
            machine.chown(self._meta_location(r), uid, gid, follow_symlinks=False)
        except OSError as exc:
            raise oserror(exc.errno or errno.EPERM, r.vpath) from None
        return None

    def lchown(self, path: Any, uid: int, gid: int) -> None:
        self.chown(path, uid, gid, follow_symlinks=False)

    def utime(self, path: Any, times: Any = None, *, ns: Any = None, dir_fd: int | None = None,
              follow_symlinks: bool = True) -> None:
        extra = {} if ns is None else {"ns": ns}
        if isinstance(path, int):
            vpath = self._machine_fd(path)
            if vpath is None:
                return machine.utime(path, times, **extra)
            path = vpath
        r, done = self._enter(path, dir_fd, lambda p, **kw: machine.utime(
            p, times, follow_symlinks=follow_symlinks, **extra, **kw),
            follow=follow_symlinks, op="utime", writes=True)
        if r is None:
            return done
        self._existing(r)
        where = self._meta_location(r)
        machine.utime(where, times, follow_symlinks=False, **extra)
        if self.world_ns is not None and not stat_module.S_ISLNK(machine.lstat(where).st_mode):
            machine.stamp(where, self.world_ns() if times is None and ns is None else None)
        return None

    def truncate(self, path: Any, length: int) -> None:
        if isinstance(path, int):
            return machine.truncate(path, length)
        r, done = self._enter(path, None, lambda p: machine.truncate(p, length), op="truncate",
                              writes=True)
        if r is None:
            return done
        self._existing(r)
        machine.truncate(self._meta_location(r), length)
        return None

    def readlink(self, path: Any, *, dir_fd: int | None = None) -> str:
        r, done = self._enter(path, dir_fd, lambda p, **kw: machine.readlink(p, **kw), follow=False)
        if r is None:
            return done
        source = self._existing(r)
        try:
            return machine.readlink(source)
        except OSError as exc:
            raise oserror(exc.errno or errno.EINVAL, r.vpath) from None

    def statvfs(self, path: Any) -> Any:
        if isinstance(path, int):
            return machine.statvfs(path)
        r, done = self._enter(path, None, machine.statvfs)
        if r is None:
            return done
        return machine.statvfs(self._existing(r))

    def _xattr(self, original: Any, path: Any, writing: bool, follow_symlinks: bool,
               *args: Any) -> Any:
        """listxattr/getxattr (reading) and setxattr/removexattr (writing), by path or
        through a descriptor: one of the machine's file, or one the view did not open, is
        read and changed by its path in the view (``_machine_fd``), as fchmod is."""
        if path is None:
            path = self._cwd
        if isinstance(path, int):
            vpath = self._machine_fd(path)
            if vpath is None:
                return original(path, *args)
            path, follow_symlinks = vpath, False
        r, done = self._enter(path, None, lambda p: original(
            p, *args, follow_symlinks=follow_symlinks), follow=follow_symlinks, writes=writing)
        if r is None:
            return done
        source = self._existing(r)
        where = self._meta_location(r) if writing else source
        try:
            return original(where, *args, follow_symlinks=False)
        except OSError as exc:
            raise oserror(exc.errno or errno.EIO, r.vpath) from None

    def listxattr(self, path: Any = None, *, follow_symlinks: bool = True) -> list[str]:
        return [name for name in self._xattr(machine.listxattr, path, False, follow_symlinks)
                if name != machine.STAMP]  # the view's own, not the target's

    def getxattr(self, path: Any, attribute: Any, *, follow_symlinks: bool = True) -> bytes:
        return self._xattr(machine.getxattr, path, False, follow_symlinks, attribute)

    def setxattr(self, path: Any, attribute: Any, value: bytes, flags: int = 0, *,
                 follow_symlinks: bool = True) -> None:
        return self._xattr(machine.setxattr, path, True, follow_symlinks, attribute, value, flags)

    def removexattr(self, path: Any, attribute: Any, *, follow_symlinks: bool = True) -> None:
        return self._xattr(machine.removexattr, path, True, follow_symlinks, attribute)
