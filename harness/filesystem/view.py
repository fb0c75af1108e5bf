"""A rank's view of the filesystem: virtual paths in, sandbox paths out.

Every file operation the target makes through Python passes through one
``View``: it resolves the virtual path against the mount table, applies the
mount's mode and base (fresh or copy-on-write overlay), asks the fault engine
whether something goes wrong here, and routes writes on non-local mounts
through a staging file that becomes visible to others only as the mount's
consistency model allows. Errors carry the virtual path, never the sandbox's.
"""

from __future__ import annotations

import errno
import io
import os
import posixpath
import shutil
import stat as stat_module
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.filesystem.mounts import Mount, MountTable, normalize, real_root, staging_root, whiteout_root

# The originals, taken before any patch: the view itself must use these.
_open = io.open
_os_open, _os_stat, _os_lstat = os.open, os.stat, os.lstat
_os_listdir, _os_scandir, _os_mkdir = os.listdir, os.scandir, os.mkdir
_os_remove, _os_rmdir, _os_rename, _os_replace = os.remove, os.rmdir, os.rename, os.replace
_os_chmod, _os_access, _os_utime, _os_truncate = os.chmod, os.access, os.utime, os.truncate
_os_readlink, _os_symlink, _os_link = os.readlink, os.symlink, os.link
_os_fsync, _os_write, _os_read, _os_close = os.fsync, os.write, os.read, os.close
_os_makedirs = os.makedirs


def oserror(code: int, vpath: str | None = None, vpath2: str | None = None) -> OSError:
    """The exception the real syscall raises, with the path the target used."""
    args: list[Any] = [code, os.strerror(code)]
    if vpath is not None:
        args.append(vpath)
        if vpath2 is not None:
            args += [None, vpath2]
    return OSError(*args)  # OSError picks the subclass (FileNotFoundError...) from errno


@dataclass
class Resolved:
    vpath: str
    mount: Mount
    key: str  # scope key: shared | host-N | rank-N
    upper: str  # where writes land (and fresh mounts live)
    lower: str | None  # the machine's real path under an overlay
    whiteout: str | None
    staging: str | None  # private write area for non-local consistency

    @property
    def passthrough(self) -> bool:
        return self.mount.base == "passthrough"


_PASS = Mount("/", scope="shared", base="passthrough")


class View:
    """The filesystem as one rank sees it."""

    def __init__(self, table: MountTable, sandbox: str, rank: int, host: int, cwd: str,
                 home: str, hooks: Any = None, private: tuple[str, ...] = ()) -> None:
        self.table = table
        self.sandbox = sandbox
        # The harness's own files (the sandbox's backing store, rank output)
        # are reached by real path, through the same patched functions.
        self._private = tuple(p.rstrip("/") for p in (sandbox, *private))
        self.rank, self.host = rank, host
        self.home = home
        self._cwd = cwd
        self.hooks = hooks or NoHooks()
        self.fds: dict[int, Resolved] = {}

    # -- resolution -----------------------------------------------------------
    def vpath(self, path: Any) -> str:
        return normalize(os.fsdecode(os.fspath(path)), self._cwd, self.home)

    def resolve(self, path: Any) -> Resolved:
        vpath = self.vpath(path)
        mount = self.table.match(vpath)
        if mount.base == "passthrough" or self._is_private(vpath):
            return Resolved(vpath, _PASS, "shared", vpath, None, None, None)
        key = mount.scope_key(self.rank, self.host)
        rel = mount.relative(vpath)
        upper = os.path.join(real_root(self.sandbox, mount, key), rel)
        lower = vpath if mount.base == "overlay" else None
        whiteout = os.path.join(whiteout_root(self.sandbox, mount, key), rel) if lower else None
        staging = None
        if mount.consistency != "local":
            writer = f"rank-{self.rank}" if mount.consistency == "object" else f"host-{self.host}"
            staging = os.path.join(staging_root(self.sandbox, mount, key), writer, rel)
        return Resolved(vpath, mount, key, upper.rstrip("/") or "/", lower, whiteout, staging)

    def _is_private(self, vpath: str) -> bool:
        return any(vpath == p or vpath.startswith(p + "/") for p in self._private)

    def chdir(self, path: Any) -> None:
        r = self.resolve(path)
        st = self.stat(path)
        if not stat_module.S_ISDIR(st.st_mode):
            raise oserror(errno.ENOTDIR, r.vpath)
        self._cwd = r.vpath

    def getcwd(self) -> str:
        return self._cwd

    # -- where things are -----------------------------------------------------
    def _read_location(self, r: Resolved) -> str | None:
        """The real file behind a virtual path for a reader, or None."""
        if r.passthrough:
            return r.vpath
        if r.staging and _exists(r.staging):
            return r.staging
        if _exists(r.upper):
            return r.upper
        if r.lower is not None and not _exists(r.whiteout) and not self._whited_out_above(r):
            if _exists(r.lower):
                return r.lower
        return None

    def _whited_out_above(self, r: Resolved) -> bool:
        if not r.whiteout:
            return False
        root = whiteout_root(self.sandbox, r.mount, r.key)
        parent = os.path.dirname(r.whiteout)
        while len(parent) > len(root):
            if _exists(parent) and not os.path.isdir(parent):
                return True
            parent = os.path.dirname(parent)
        return False

    def _write_location(self, r: Resolved, keep_content: bool) -> str:
        """The real file a writer writes: the upper copy (copied up when needed) or staging."""
        parent = posixpath.dirname(r.vpath)
        if parent != r.vpath and self._read_location(self.resolve(parent)) is None:
            raise oserror(errno.ENOENT, r.vpath)
        target = r.staging or r.upper
        _os_makedirs(os.path.dirname(target), exist_ok=True)
        if keep_content and not _exists(target):
            source = self._read_location(r)
            if source is not None and source != target:
                shutil.copyfile(source, target)
        if r.whiteout and _exists(r.whiteout):
            _os_remove(r.whiteout)
        return target

    def _check_writable(self, r: Resolved) -> None:
        if r.mount.mode == "ro":
            raise oserror(errno.EROFS, r.vpath)

    # -- open -----------------------------------------------------------------
    def open(self, file: Any, mode: str = "r", buffering: int = -1, encoding: str | None = None,
             errors: str | None = None, newline: str | None = None, closefd: bool = True,
             opener: Callable[..., int] | None = None) -> Any:
        if isinstance(file, int):
            return _open(file, mode, buffering, encoding, errors, newline, closefd, opener)
        r = self.resolve(file)
        if r.passthrough:
            return _open(r.vpath, mode, buffering, encoding, errors, newline, closefd, opener)
        flags = _flags_of(mode)
        fd = self._open_fd(r, flags, 0o666)
        raw_mode = _raw_mode(mode)
        raw = ViewFile(fd, raw_mode, closefd=True)
        raw.name = os.fspath(file) if isinstance(file, (str, os.PathLike)) else file
        raw.bind(self, r, writing=bool(flags & (os.O_WRONLY | os.O_RDWR)))
        return _wrap(raw, mode, buffering, encoding, errors, newline)

    def os_open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if dir_fd is not None and not os.path.isabs(os.fspath(path)):
            return _os_open(path, flags, mode, dir_fd=dir_fd)
        r = self.resolve(path)
        if r.passthrough:
            return _os_open(r.vpath, flags, mode)
        return self._open_fd(r, flags, mode)

    def _open_fd(self, r: Resolved, flags: int, mode: int) -> int:
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))
        self.hooks.before(self, "open-write" if writing else "open-read", r)
        if writing:
            self._check_writable(r)
            r = self.hooks.prepare_write(self, r)
            existing = self._read_location(r)
            if flags & os.O_EXCL and flags & os.O_CREAT and existing is not None:
                raise oserror(errno.EEXIST, r.vpath)
            if existing is None and not flags & os.O_CREAT:
                raise oserror(errno.ENOENT, r.vpath)
            if existing is not None and os.path.isdir(existing):
                raise oserror(errno.EISDIR, r.vpath)
            target = self._write_location(r, keep_content=not flags & os.O_TRUNC)
            try:
                fd = _os_open(target, flags, mode)
            except OSError as exc:
                raise oserror(exc.errno or errno.EIO, r.vpath) from None
        else:
            source = self._read_location(r)
            if source is None:
                raise oserror(errno.ENOENT, r.vpath)
            try:
                fd = _os_open(source, flags, mode)
            except OSError as exc:
                raise oserror(exc.errno or errno.EIO, r.vpath) from None
        self.fds[fd] = r
        self.hooks.after_open(self, r, writing)
        return fd

    # -- metadata ---------------------------------------------------------------
    def stat(self, path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True) -> Any:
        if isinstance(path, int):
            return _os_stat(path)
        if dir_fd is not None and not os.path.isabs(os.fspath(path)):
            return _os_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        r = self.resolve(path)
        if r.passthrough:
            return (_os_stat if follow_symlinks else _os_lstat)(r.vpath)
        self.hooks.before(self, "stat", r)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        st = (_os_stat if follow_symlinks else _os_lstat)(source)
        return self.hooks.adjust_stat(self, r, st)

    def lstat(self, path: Any, *, dir_fd: int | None = None) -> Any:
        return self.stat(path, dir_fd=dir_fd, follow_symlinks=False)

    def access(self, path: Any, mode: int, **kwargs: Any) -> bool:
        r = self.resolve(path)
        if r.passthrough:
            return _os_access(r.vpath, mode)
        source = self._read_location(r)
        if source is None:
            return False
        if mode & os.W_OK and r.mount.mode == "ro":
            return False
        return self.hooks.access(self, r, mode, _os_access(source, mode))

    def listdir(self, path: Any = ".") -> list[str]:
        if isinstance(path, int):
            return _os_listdir(path)
        r = self.resolve(path)
        if r.passthrough:
            return _os_listdir(r.vpath)
        self.hooks.before(self, "listdir", r)
        names: set[str] = set()
        found = False
        for candidate in self._dir_layers(r):
            if os.path.isdir(candidate):
                found = True
                names.update(_os_listdir(candidate))
            elif _exists(candidate):
                raise oserror(errno.ENOTDIR, r.vpath)
        if not found:
            raise oserror(errno.ENOENT, r.vpath)
        names.update(self._mount_points_under(r.vpath))
        return sorted(n for n in names if not self._is_whited_out(r, n))

    def _dir_layers(self, r: Resolved) -> list[str]:
        layers = [r.upper]
        if r.staging:
            layers.append(r.staging)
        if r.lower is not None and not (r.whiteout and _exists(r.whiteout)):
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
        return _exists(os.path.join(r.whiteout, name)) and not _exists(child)

    def scandir(self, path: Any = ".") -> Any:
        if isinstance(path, int):
            return _os_scandir(path)
        r = self.resolve(path)
        if r.passthrough:
            return _os_scandir(r.vpath)
        names = self.listdir(path)
        return _ScandirIterator(self, r.vpath, os.fspath(path), names)

    def mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if dir_fd is not None and not os.path.isabs(os.fspath(path)):
            return _os_mkdir(path, mode, dir_fd=dir_fd)
        r = self.resolve(path)
        if r.passthrough:
            return _os_mkdir(r.vpath, mode)
        self.hooks.before(self, "mkdir", r)
        self._check_writable(r)
        if self._read_location(r) is not None:
            raise oserror(errno.EEXIST, r.vpath)
        parent = self.resolve(posixpath.dirname(r.vpath))
        if self._read_location(parent) is None:
            raise oserror(errno.ENOENT, r.vpath)
        _os_makedirs(r.upper, mode=mode, exist_ok=True)
        if r.whiteout and _exists(r.whiteout):
            _rm(r.whiteout)
        return None

    def remove(self, path: Any, *, dir_fd: int | None = None) -> None:
        if dir_fd is not None and not os.path.isabs(os.fspath(path)):
            return _os_remove(path, dir_fd=dir_fd)
        r = self.resolve(path)
        if r.passthrough:
            return _os_remove(r.vpath)
        self.hooks.before(self, "remove", r)
        self._check_writable(r)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        if os.path.isdir(source) and not os.path.islink(source):
            raise oserror(errno.EISDIR, r.vpath)
        self._delete(r)
        return None

    def rmdir(self, path: Any, *, dir_fd: int | None = None) -> None:
        if dir_fd is not None and not os.path.isabs(os.fspath(path)):
            return _os_rmdir(path, dir_fd=dir_fd)
        r = self.resolve(path)
        if r.passthrough:
            return _os_rmdir(r.vpath)
        self.hooks.before(self, "rmdir", r)
        self._check_writable(r)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        if not os.path.isdir(source):
            raise oserror(errno.ENOTDIR, r.vpath)
        if self.listdir(path):
            raise oserror(errno.ENOTEMPTY, r.vpath)
        self._delete(r)
        return None

    def _delete(self, r: Resolved) -> None:
        for layer in (r.staging, r.upper):
            if layer and (_exists(layer) or os.path.islink(layer)):
                _rm(layer)
        if r.lower is not None and _exists(r.lower):
            _os_makedirs(os.path.dirname(r.whiteout), exist_ok=True)
            with _open(r.whiteout, "w"):
                pass
        self.hooks.after_change(self, r)

    def rename(self, src: Any, dst: Any, *, replace: bool = True, src_dir_fd: int | None = None,
               dst_dir_fd: int | None = None) -> None:
        if src_dir_fd is not None or dst_dir_fd is not None:
            return (_os_replace if replace else _os_rename)(
                src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        rs, rd = self.resolve(src), self.resolve(dst)
        if rs.passthrough and rd.passthrough:
            return (_os_replace if replace else _os_rename)(rs.vpath, rd.vpath)
        self.hooks.before(self, "rename", rs, rd)
        self._check_writable(rs)
        self._check_writable(rd)
        source = self._read_location(rs)
        if source is None:
            raise oserror(errno.ENOENT, rs.vpath, rd.vpath)
        if self._read_location(self.resolve(posixpath.dirname(rd.vpath))) is None:
            raise oserror(errno.ENOENT, rs.vpath, rd.vpath)
        is_dir = os.path.isdir(source)
        existing = self._read_location(rd)
        if existing is not None and os.path.isdir(existing) != is_dir:
            raise oserror(errno.EISDIR if os.path.isdir(existing) else errno.ENOTDIR,
                          rs.vpath, rd.vpath)
        self.hooks.rename(self, rs, rd, source, is_dir)
        return None

    def move_into_place(self, rs: Resolved, rd: Resolved, source: str, is_dir: bool) -> None:
        """The rename itself, once hooks have had their say (atomic on one mount)."""
        target = rd.staging or rd.upper
        _os_makedirs(os.path.dirname(target), exist_ok=True)
        if is_dir and rs.lower is not None and source == rs.lower:
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        elif source == rs.lower:
            shutil.copy2(source, target)
        else:
            _os_replace(source, target)
        if rd.whiteout and _exists(rd.whiteout):
            _rm(rd.whiteout)
        if rs.lower is not None and _exists(rs.lower):
            _os_makedirs(os.path.dirname(rs.whiteout), exist_ok=True)
            with _open(rs.whiteout, "w"):
                pass
        for layer in (rs.staging, rs.upper):
            if layer and layer != source and _exists(layer):
                _rm(layer)
        self.hooks.after_change(self, rd)

    def remove_tree_if_empty(self, r: Resolved) -> None:
        """Drop what is left of a directory whose files were all moved out."""
        for layer in (r.staging, r.upper):
            if layer and os.path.isdir(layer):
                shutil.rmtree(layer, ignore_errors=True)
        if r.lower is not None and _exists(r.lower):
            _os_makedirs(os.path.dirname(r.whiteout), exist_ok=True)
            with _open(r.whiteout, "w"):
                pass

    def chmod(self, path: Any, mode: int, **kwargs: Any) -> None:
        if isinstance(path, int):
            return os.fchmod(path, mode)
        r = self.resolve(path)
        if r.passthrough:
            return _os_chmod(r.vpath, mode)
        self.hooks.before(self, "chmod", r)
        self._check_writable(r)
        if self._read_location(r) is None:
            raise oserror(errno.ENOENT, r.vpath)
        target = self._write_location(r, keep_content=True)
        _os_chmod(target, mode)
        return None

    def utime(self, path: Any, times: Any = None, **kwargs: Any) -> None:
        if isinstance(path, int):
            return _os_utime(path, times, **kwargs)
        r = self.resolve(path)
        if r.passthrough:
            return _os_utime(r.vpath, times, **kwargs)
        self._check_writable(r)
        if self._read_location(r) is None:
            raise oserror(errno.ENOENT, r.vpath)
        _os_utime(self._write_location(r, keep_content=True), times,
                  **{k: v for k, v in kwargs.items() if k == "ns"})
        return None

    def truncate(self, path: Any, length: int) -> None:
        if isinstance(path, int):
            return _os_truncate(path, length)
        r = self.resolve(path)
        if r.passthrough:
            return _os_truncate(r.vpath, length)
        self._check_writable(r)
        if self._read_location(r) is None:
            raise oserror(errno.ENOENT, r.vpath)
        _os_truncate(self._write_location(r, keep_content=True), length)
        return None

    def readlink(self, path: Any, *, dir_fd: int | None = None) -> str:
        r = self.resolve(path)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        try:
            return _os_readlink(source)
        except OSError as exc:
            raise oserror(exc.errno or errno.EINVAL, r.vpath) from None

    def symlink(self, src: Any, dst: Any, target_is_directory: bool = False, **kwargs: Any) -> None:
        rd = self.resolve(dst)
        if rd.passthrough:
            return _os_symlink(src, rd.vpath)
        self._check_writable(rd)
        if self._read_location(rd) is not None:
            raise oserror(errno.EEXIST, os.fspath(src), rd.vpath)
        target = self._write_location(rd, keep_content=False)
        _os_symlink(os.fspath(src), target)

    def link(self, src: Any, dst: Any, **kwargs: Any) -> None:
        rs, rd = self.resolve(src), self.resolve(dst)
        self._check_writable(rd)
        source = self._read_location(rs)
        if source is None:
            raise oserror(errno.ENOENT, rs.vpath, rd.vpath)
        if self._read_location(rd) is not None:
            raise oserror(errno.EEXIST, rs.vpath, rd.vpath)
        _os_link(source, self._write_location(rd, keep_content=False))

    # -- fd level -----------------------------------------------------------------
    def fsync(self, fd: Any) -> None:
        fileno = fd if isinstance(fd, int) else fd.fileno()
        r = self.fds.get(fileno)
        if r is not None:
            self.hooks.before(self, "fsync", r)
        _os_fsync(fileno)
        if r is not None:
            self.hooks.after_fsync(self, r, fileno)

    def close_fd(self, fd: int) -> None:
        r = self.fds.pop(fd, None)
        _os_close(fd)
        if r is not None:
            self.hooks.after_close(self, r)

    def real_path_for(self, path: Any, writing: bool) -> str:
        """For code that needs a path, not a file object (C++ writers, mmap)."""
        r = self.resolve(path)
        if r.passthrough:
            return r.vpath
        if writing:
            self._check_writable(r)
            return self._write_location(r, keep_content=False)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        return source


class ViewFile(io.FileIO):
    """A raw file whose reads and writes meet the fault engine, as a real
    ``FileIO`` would meet the kernel: a buffered or text layer sits on top."""

    _view: View | None = None

    def bind(self, view: View, resolved: Resolved, writing: bool) -> None:
        self._view, self._resolved, self._writing = view, resolved, writing
        self.written = 0

    def write(self, b: Any) -> int:
        view = self._view
        if view is not None:
            data = view.hooks.write(view, self._resolved, self, memoryview(b).cast("B"))
            n = super().write(data) if len(data) else 0
            self.written += n
            if len(data) < len(memoryview(b).cast("B")):
                view.hooks.after_short_write(view, self._resolved, self)
            return n
        return super().write(b)

    def readinto(self, b: Any) -> int | None:
        view = self._view
        if view is not None:
            view.hooks.before(view, "read", self._resolved)
        return super().readinto(b)

    def close(self) -> None:
        if self.closed:
            return
        view, fd = self._view, self.fileno()
        view.fds.pop(fd, None) if view is not None else None
        super().close()
        if view is not None:
            view.hooks.after_close(view, self._resolved, self._writing)


class NoHooks:
    """No faults, local consistency: what a plain view does at each point."""

    def before(self, view: View, op: str, r: Resolved, r2: Resolved | None = None) -> None:
        pass

    def prepare_write(self, view: View, r: Resolved) -> Resolved:
        return r

    def after_open(self, view: View, r: Resolved, writing: bool) -> None:
        pass

    def write(self, view: View, r: Resolved, f: ViewFile, data: memoryview) -> memoryview:
        return data

    def after_short_write(self, view: View, r: Resolved, f: ViewFile) -> None:
        pass

    def after_close(self, view: View, r: Resolved, writing: bool = True) -> None:
        if writing and r.staging and _exists(r.staging):
            _os_makedirs(os.path.dirname(r.upper), exist_ok=True)
            _os_replace(r.staging, r.upper)

    def after_fsync(self, view: View, r: Resolved, fd: int) -> None:
        pass

    def after_change(self, view: View, r: Resolved) -> None:
        pass

    def rename(self, view: View, rs: Resolved, rd: Resolved, source: str, is_dir: bool) -> None:
        view.move_into_place(rs, rd, source, is_dir)

    def adjust_stat(self, view: View, r: Resolved, st: Any) -> Any:
        return st

    def access(self, view: View, r: Resolved, mode: int, allowed: bool) -> bool:
        return allowed


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


def _exists(path: str | None) -> bool:
    if path is None:
        return False
    try:
        _os_lstat(path)
        return True
    except OSError:
        return False


def _rm(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        _os_remove(path)


def _flags_of(mode: str) -> int:
    """``open()``'s mode string as ``os.open`` flags (what CPython's FileIO computes)."""
    modes = set(mode)
    if modes - set("rwxabt+U") or len(mode) > len(modes):
        raise ValueError(f"invalid mode: '{mode}'")
    plus = "+" in modes
    if "x" in modes:
        flags = os.O_EXCL | os.O_CREAT
    elif "w" in modes:
        flags = os.O_CREAT | os.O_TRUNC
    elif "a" in modes:
        flags = os.O_APPEND | os.O_CREAT
    else:
        flags = 0
    if "r" in modes and not plus:
        flags |= os.O_RDONLY
    elif plus:
        flags |= os.O_RDWR
    else:
        flags |= os.O_WRONLY
    return flags | getattr(os, "O_CLOEXEC", 0)


def _raw_mode(mode: str) -> str:
    modes = set(mode)
    out = "x" if "x" in modes else "w" if "w" in modes else "a" if "a" in modes else "r"
    return out + ("+" if "+" in modes else "")


def _wrap(raw: ViewFile, mode: str, buffering: int, encoding: str | None, errors: str | None,
          newline: str | None) -> Any:
    """The buffered and text layers ``open()`` would put on a raw file."""
    modes = set(mode)
    binary, text = "b" in modes, "t" in modes
    if binary and text:
        raw.close()
        raise ValueError("can't have text and binary mode at once")
    if binary and (encoding is not None or errors is not None or newline is not None):
        raw.close()
        raise ValueError("binary mode doesn't take an encoding argument")
    line_buffering = False
    if buffering == 1 or (buffering < 0 and raw.isatty()):
        buffering, line_buffering = -1, True
    if buffering < 0:
        buffering = io.DEFAULT_BUFFER_SIZE
        try:
            blksize = _os_stat(raw.fileno()).st_blksize
            if blksize > 1:
                buffering = blksize
        except OSError:
            pass
    if buffering == 0:
        if binary:
            return raw
        raw.close()
        raise ValueError("can't have unbuffered text I/O")
    if "+" in modes:
        buffer: Any = io.BufferedRandom(raw, buffering)
    elif modes & set("wxa"):
        buffer = io.BufferedWriter(raw, buffering)
    else:
        buffer = io.BufferedReader(raw, buffering)
    if binary:
        return buffer
    wrapper = io.TextIOWrapper(buffer, encoding, errors, newline, line_buffering)
    wrapper.mode = mode
    return wrapper
