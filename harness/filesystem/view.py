"""A rank's view of the filesystem: virtual paths in, sandbox paths out.

Every file operation the target makes through Python passes through one
``View``: it resolves the virtual path against the mount table, applies the
mount's mode and base (fresh or copy-on-write overlay), asks the fault engine
whether something goes wrong here, and routes writes on non-local mounts
through a staging file that becomes visible to others only as the mount's
consistency model allows. Errors carry the virtual path, never the sandbox's.

The view, not the kernel, follows the symlinks a target makes (their text is
a virtual path; on the machine it would lead out of the sandbox), and
resolves ``*at()`` calls against the directories it opened itself. On real
paths (an overlay's lower layer) it uses only the machine's own calls: those
paths look virtual, and the patched ``os`` functions would resolve them again.
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
_os_chown, _os_fchmod, _os_fchown = os.chown, os.fchmod, os.fchown
_os_mkfifo, _os_mknod, _os_statvfs = os.mkfifo, os.mknod, os.statvfs
_os_listxattr = getattr(os, "listxattr", None)
_os_getxattr = getattr(os, "getxattr", None)
_os_setxattr = getattr(os, "setxattr", None)
_os_removexattr = getattr(os, "removexattr", None)
_MAX_LINKS = 40  # symlinks followed in one lookup before ELOOP, as Linux allows


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
        self.fds: dict[int, Resolved] = {}  # every fd the view opened, directories included
        self.writing_fds: set[int] = set()

    # -- resolution -----------------------------------------------------------
    def vpath(self, path: Any) -> str:
        return normalize(os.fsdecode(os.fspath(path)), self._cwd, self.home)

    def resolve(self, path: Any, follow: bool = True) -> Resolved:
        """Where ``path`` lives for this rank; symlinks the target made are
        followed here, through the view (the last one only if ``follow``)."""
        return self._resolve(self._expand(self.vpath(path), follow))

    def _at(self, path: Any, dir_fd: int | None) -> Any:
        """``path`` as ``*at()`` calls read it: relative to ``dir_fd`` if the view
        opened that directory. None: an fd the view never saw (the caller falls
        back to the machine's own call)."""
        if dir_fd is None or isinstance(path, int):
            return path
        text = os.fsdecode(os.fspath(path))
        if text.startswith("/"):
            return text
        base = self.fds.get(dir_fd)
        return None if base is None else posixpath.join(base.vpath, text)

    def _expand(self, vpath: str, follow: bool) -> str:
        """``vpath`` with every symlink that lives in the sandbox replaced by its
        target, resolved in the view. The kernel must never follow those links:
        their targets are virtual paths, and on the machine they lead out."""
        done, rest, hops = "", [p for p in vpath.split("/") if p], 0
        while rest:
            candidate = done + "/" + rest.pop(0)
            link = None if (not rest and not follow) else self._link_at(candidate)
            if link is None:
                done = candidate
                continue
            hops += 1
            if hops > _MAX_LINKS:
                raise oserror(errno.ELOOP, vpath)
            target = posixpath.normpath(posixpath.join(posixpath.dirname(candidate), link))
            rest = [p for p in target.split("/") if p] + rest
            done = ""
        return done or "/"

    def _link_at(self, vpath: str) -> str | None:
        """The text of the symlink at ``vpath`` if the target made it (it lives in the sandbox)."""
        r = self._resolve(vpath)
        if r.passthrough or _is_staged_file(r.staging):
            return None  # (staging never holds links: a staged file is what this path is)
        try:
            if not stat_module.S_ISLNK(_os_lstat(r.upper).st_mode):
                return None
            return _os_readlink(r.upper)
        except OSError:
            return None

    def _resolve(self, vpath: str) -> Resolved:
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
        if _is_staged_file(r.staging) and not self._published_since(r):
            return r.staging  # staging holds files; its directories only contain them
        if _exists(r.upper):
            return r.upper
        if r.lower is not None and not _is_whiteout(r.whiteout) and not self._whited_out_above(r):
            if _exists(r.lower):
                return r.lower
        return None

    @staticmethod
    def _published_since(r: Resolved) -> bool:
        """On a ``delayed`` mount the writer's host keeps its staging copy after
        close; once a write at least as new is published (its own, or another
        host's), the published file is what this host sees."""
        if r.mount.consistency != "delayed":
            return False
        try:
            return _os_stat(r.upper).st_mtime_ns >= _os_stat(r.staging).st_mtime_ns
        except OSError:
            return False

    def _whited_out_above(self, r: Resolved) -> bool:
        if not r.whiteout:
            return False
        root = whiteout_root(self.sandbox, r.mount, r.key)
        parent = os.path.dirname(r.whiteout)
        while len(parent) > len(root):
            if _exists(parent) and not _is_dir(parent):
                return True
            parent = os.path.dirname(parent)
        return False

    def _write_location(self, r: Resolved, keep_content: bool, staged: bool = True) -> str:
        """The real file a writer writes: the upper copy (copied up when needed) or
        staging (``staged``: content written through an open file, which the
        mount's consistency model publishes at close)."""
        parent = posixpath.dirname(r.vpath)
        if parent != r.vpath and self._read_location(self.resolve(parent)) is None:
            raise oserror(errno.ENOENT, r.vpath)
        target = (r.staging if staged else None) or r.upper
        _os_makedirs(os.path.dirname(target), exist_ok=True)
        if keep_content and not _exists(target):
            source = self._read_location(r)
            if source is not None and source != target:
                _copy(source, target)
        if r.whiteout and _exists(r.whiteout):
            _rm(r.whiteout)
        return target

    def _meta_location(self, r: Resolved) -> str:
        """Where a metadata change (mode, owner, times, xattrs) lands: the open
        write in staging if there is one, else the upper copy, visible at once."""
        if _is_staged_file(r.staging):
            return r.staging
        return self._write_location(r, keep_content=True, staged=False)

    def _check_writable(self, r: Resolved) -> None:
        if r.mount.mode == "ro":
            raise oserror(errno.EROFS, r.vpath)

    # -- open -----------------------------------------------------------------
    def open(self, file: Any, mode: str = "r", buffering: int = -1, encoding: str | None = None,
             errors: str | None = None, newline: str | None = None, closefd: bool = True,
             opener: Callable[..., int] | None = None) -> Any:
        if isinstance(file, int):
            if file in self.fds and closefd:  # os.fdopen of an fd the view opened
                return self._file(file, file, mode, buffering, encoding, errors, newline)
            return _open(file, mode, buffering, encoding, errors, newline, closefd, opener)
        if opener is not None:  # tempfile's way: the opener makes the fd (through the view)
            fd = opener(file, _flags_of(mode))
            if fd in self.fds:
                return self._file(fd, file, mode, buffering, encoding, errors, newline)
            f = _open(fd, mode, buffering, encoding, errors, newline, True)
            getattr(getattr(f, "buffer", f), "raw", f).name = file
            return f
        r = self.resolve(file, follow=not _exclusive(_flags_of(mode)))
        if r.passthrough:
            f = _open(r.vpath, mode, buffering, encoding, errors, newline, closefd, opener)
            self._forget(f.fileno())
            return f
        fd = self._open_fd(r, _flags_of(mode), 0o666)
        return self._file(fd, file, mode, buffering, encoding, errors, newline)

    def _file(self, fd: int, name: Any, mode: str, buffering: int, encoding: str | None,
              errors: str | None, newline: str | None) -> Any:
        """A file object over an fd the view opened: its reads, writes and close meet the hooks."""
        raw = ViewFile(fd, _raw_mode(mode), closefd=True)
        raw.name = os.fspath(name) if isinstance(name, os.PathLike) else name
        raw.bind(self, self.fds[fd], writing=fd in self.writing_fds)
        return _wrap(raw, mode, buffering, encoding, errors, newline)

    def os_open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_open(path, flags, mode, dir_fd=dir_fd)
        r = self.resolve(vpath, follow=not (_exclusive(flags) or flags & os.O_NOFOLLOW))
        if flags & os.O_NOFOLLOW and self._link_at(r.vpath) is not None:
            raise oserror(errno.ELOOP, r.vpath)
        if r.passthrough:
            fd = _os_open(r.vpath, flags, mode)
            self._forget(fd)
            return fd
        return self._open_fd(r, flags, mode)

    def _forget(self, fd: int) -> None:
        """A number the view once gave out, closed behind its back and now reused."""
        self.fds.pop(fd, None)
        self.writing_fds.discard(fd)

    def _open_fd(self, r: Resolved, flags: int, mode: int) -> int:
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))
        if not writing:
            try:
                return self._open_fd_now(r, flags, mode, writing)
            finally:  # the reader has tried: a held write may be published now, not before
                self.hooks.looked(self, "open-read", r)
        return self._open_fd_now(r, flags, mode, writing)

    def _open_fd_now(self, r: Resolved, flags: int, mode: int, writing: bool) -> int:
        self.hooks.before(self, "open-write" if writing else "open-read", r)
        if writing:
            self._check_writable(r)
            r = self.hooks.prepare_write(self, r)
            existing = self._read_location(r)
            if flags & os.O_EXCL and flags & os.O_CREAT and existing is not None:
                raise oserror(errno.EEXIST, r.vpath)
            if existing is None and not flags & os.O_CREAT:
                raise oserror(errno.ENOENT, r.vpath)
            if existing is not None and _leads_to_dir(existing):
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
        if writing:
            self.writing_fds.add(fd)
        self.hooks.after_open(self, r, writing)
        return fd

    # -- metadata ---------------------------------------------------------------
    def stat(self, path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True) -> Any:
        if isinstance(path, int):
            return _os_stat(path)
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        r = self.resolve(vpath, follow=follow_symlinks)
        if r.passthrough:
            return (_os_stat if follow_symlinks else _os_lstat)(r.vpath)
        try:
            self.hooks.before(self, "stat", r)
            source = self._read_location(r)
            if source is None:
                raise oserror(errno.ENOENT, r.vpath)
            st = (_os_stat if follow_symlinks else _os_lstat)(source)
        finally:
            self.hooks.looked(self, "stat", r)
        return self.hooks.adjust_stat(self, r, st)

    def lstat(self, path: Any, *, dir_fd: int | None = None) -> Any:
        return self.stat(path, dir_fd=dir_fd, follow_symlinks=False)

    def access(self, path: Any, mode: int, *, dir_fd: int | None = None, **kwargs: Any) -> bool:
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_access(path, mode, dir_fd=dir_fd, **kwargs)
        r = self.resolve(vpath, follow=kwargs.get("follow_symlinks", True))
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
            if path not in self.fds:
                return _os_listdir(path)
            path = self.fds[path].vpath
        r = self.resolve(path)
        if r.passthrough:
            return _os_listdir(r.vpath)
        try:
            return self._listdir_now(r)
        finally:
            self.hooks.looked(self, "listdir", r)

    def _listdir_now(self, r: Resolved) -> list[str]:
        self.hooks.before(self, "listdir", r)
        names: set[str] = set()
        found = False
        for candidate in self._dir_layers(r):
            if _leads_to_dir(candidate):
                found = True
                names.update(_os_listdir(candidate))
            elif _exists(candidate):
                raise oserror(errno.ENOTDIR, r.vpath)
        if _is_staged_file(r.staging):
            raise oserror(errno.ENOTDIR, r.vpath)
        if not found:
            raise oserror(errno.ENOENT, r.vpath)
        if r.staging and _is_dir(r.staging):  # files written here, not yet published
            names.update(n for n in _os_listdir(r.staging)
                         if _is_staged_file(os.path.join(r.staging, n)))
        names.update(self._mount_points_under(r.vpath))
        return sorted(n for n in names if not self._is_whited_out(r, n))

    def _dir_layers(self, r: Resolved) -> list[str]:
        layers = [r.upper]
        if r.lower is not None and not _is_whiteout(r.whiteout):
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
        return _is_whiteout(os.path.join(r.whiteout, name)) and not _exists(child)

    def scandir(self, path: Any = ".") -> Any:
        if isinstance(path, int):
            if path not in self.fds:
                return _os_scandir(path)
            return _ScandirIterator(self, self.fds[path].vpath, "", self.listdir(path))
        r = self.resolve(path)
        if r.passthrough:
            return _os_scandir(r.vpath)
        names = self.listdir(path)
        return _ScandirIterator(self, r.vpath, os.fspath(path), names)

    def mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_mkdir(path, mode, dir_fd=dir_fd)
        r = self.resolve(vpath, follow=False)
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
            _opaque(r)  # a new directory where the rank deleted a real one starts empty
        return None

    def remove(self, path: Any, *, dir_fd: int | None = None) -> None:
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_remove(path, dir_fd=dir_fd)
        r = self.resolve(vpath, follow=False)
        if r.passthrough:
            return _os_remove(r.vpath)
        self.hooks.before(self, "remove", r)
        self._check_writable(r)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        if _is_dir(source):
            raise oserror(errno.EISDIR, r.vpath)
        self._delete(r)
        return None

    def rmdir(self, path: Any, *, dir_fd: int | None = None) -> None:
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_rmdir(path, dir_fd=dir_fd)
        r = self.resolve(vpath, follow=False)
        if r.passthrough:
            return _os_rmdir(r.vpath)
        self.hooks.before(self, "rmdir", r)
        self._check_writable(r)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        if not _is_dir(source):
            raise oserror(errno.ENOTDIR, r.vpath)
        if self.listdir(r.vpath):
            raise oserror(errno.ENOTEMPTY, r.vpath)
        self._delete(r)
        return None

    def _delete(self, r: Resolved) -> None:
        for layer in (r.staging, r.upper):
            if layer and _exists(layer):
                _rm(layer)
        if r.lower is not None and _exists(r.lower):
            _whiteout(r.whiteout)
        self.hooks.after_change(self, r)

    def rename(self, src: Any, dst: Any, *, replace: bool = True, src_dir_fd: int | None = None,
               dst_dir_fd: int | None = None) -> None:
        vsrc, vdst = self._at(src, src_dir_fd), self._at(dst, dst_dir_fd)
        if vsrc is None or vdst is None:
            return (_os_replace if replace else _os_rename)(
                src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        rs, rd = self.resolve(vsrc, follow=False), self.resolve(vdst, follow=False)
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
        is_dir = _is_dir(source)
        existing = self._read_location(rd)
        if existing is not None and _is_dir(existing) != is_dir:
            raise oserror(errno.EISDIR if _is_dir(existing) else errno.ENOTDIR,
                          rs.vpath, rd.vpath)
        if rs.vpath == rd.vpath:
            return None
        if is_dir and (rd.vpath + "/").startswith(rs.vpath + "/"):
            raise oserror(errno.EINVAL, rs.vpath, rd.vpath)
        if existing is not None and is_dir and self.listdir(rd.vpath):
            raise oserror(errno.ENOTEMPTY, rs.vpath, rd.vpath)
        try:
            self.hooks.rename(self, rs, rd, source, is_dir)
        except OSError as exc:  # the machine's error about sandbox paths: say it with ours
            if not any(str(f).startswith(self.sandbox) for f in (exc.filename, exc.filename2)
                       if f is not None):
                raise
            raise oserror(exc.errno or errno.EIO, rs.vpath, rd.vpath) from None
        return None

    def move_into_place(self, rs: Resolved, rd: Resolved, source: str, is_dir: bool) -> None:
        """The rename itself, once hooks have had their say (atomic on one mount).

        A rename is a directory operation: it is visible at once, whatever the
        mount's consistency (the destination goes to the upper layer, never to
        the renaming host's private staging)."""
        target = rd.upper
        _os_makedirs(os.path.dirname(target), exist_ok=True)
        if rd.staging and rd.staging != source and _exists(rd.staging):
            _rm(rd.staging)  # an unclosed write at the destination: its name now means the new file
        if _exists(target) and _is_dir(target) and target != source:
            _rm(target)  # an empty directory being replaced (non-empty was refused)
        if is_dir and rs.lower is not None and _exists(rs.lower):
            self._copy_merged(rs.vpath, target)  # what the rank sees, real files included
        elif source == rs.lower:
            _copy(source, target)
        else:
            _os_replace(source, target)
        if rd.whiteout and _exists(rd.whiteout):
            _rm(rd.whiteout)
        if is_dir:
            _opaque(rd)  # the moved directory replaces a real one: none of its files show
        if rs.lower is not None and _exists(rs.lower):
            _whiteout(rs.whiteout)
        for layer in (rs.staging, rs.upper):
            if layer and layer != source and _exists(layer):
                _rm(layer)
        self.hooks.after_change(self, rd)

    def _copy_merged(self, vdir: str, target: str) -> None:
        """Copy the directory ``vdir`` as this rank sees it (layers merged, deletions applied)."""
        _os_makedirs(target, exist_ok=True)
        for name in self.listdir(vdir):
            child = self._resolve(posixpath.join(vdir, name))
            source = self._read_location(child)
            if source is None:
                continue
            if _is_dir(source):
                self._copy_merged(child.vpath, os.path.join(target, name))
            else:
                _copy(source, os.path.join(target, name))

    def remove_tree_if_empty(self, r: Resolved) -> None:
        """Drop what is left of a directory whose files were all moved out."""
        for layer in (r.staging, r.upper):
            if layer and _is_dir(layer):
                shutil.rmtree(layer, ignore_errors=True)
        if r.lower is not None and _exists(r.lower):
            _whiteout(r.whiteout)

    def _machine_fd(self, fd: int) -> str | None:
        """The virtual path of ``fd`` if it is open on the machine's own file (an
        overlay's lower layer, opened for reading): a change of its metadata must
        go to the rank's copy, never to that file."""
        r = self.fds.get(fd)
        if r is None or r.lower is None:
            return None
        try:
            st, real = _os_stat(fd), _os_stat(r.lower)
        except OSError:
            return None
        return r.vpath if (st.st_dev, st.st_ino) == (real.st_dev, real.st_ino) else None

    def fchmod(self, fd: int, mode: int) -> None:
        vpath = self._machine_fd(fd)
        return _os_fchmod(fd, mode) if vpath is None else self.chmod(vpath, mode)

    def fchown(self, fd: int, uid: int, gid: int) -> None:
        vpath = self._machine_fd(fd)
        return _os_fchown(fd, uid, gid) if vpath is None else self.chown(vpath, uid, gid)

    def chmod(self, path: Any, mode: int, *, dir_fd: int | None = None,
              follow_symlinks: bool = True) -> None:
        if isinstance(path, int):
            return self.fchmod(path, mode)
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_chmod(path, mode, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        r = self.resolve(vpath, follow=follow_symlinks)
        if r.passthrough:
            return _os_chmod(r.vpath, mode)
        self.hooks.before(self, "chmod", r)
        self._check_writable(r)
        if self._read_location(r) is None:
            raise oserror(errno.ENOENT, r.vpath)
        _os_chmod(self._meta_location(r), mode)
        return None

    def chown(self, path: Any, uid: int, gid: int, *, dir_fd: int | None = None,
              follow_symlinks: bool = True) -> None:
        if isinstance(path, int):
            return self.fchown(path, uid, gid)
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_chown(path, uid, gid, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        r = self.resolve(vpath, follow=follow_symlinks)
        if r.passthrough:
            return _os_chown(r.vpath, uid, gid, follow_symlinks=follow_symlinks)
        self._check_writable(r)
        if self._read_location(r) is None:
            raise oserror(errno.ENOENT, r.vpath)
        try:
            _os_chown(self._meta_location(r), uid, gid, follow_symlinks=False)
        except OSError as exc:
            raise oserror(exc.errno or errno.EPERM, r.vpath) from None
        return None

    def lchown(self, path: Any, uid: int, gid: int) -> None:
        self.chown(path, uid, gid, follow_symlinks=False)

    def utime(self, path: Any, times: Any = None, *, ns: Any = None, dir_fd: int | None = None,
              follow_symlinks: bool = True) -> None:
        extra = {} if ns is None else {"ns": ns}
        if isinstance(path, int):
            if self._machine_fd(path) is None:
                return _os_utime(path, times, **extra)
            path = self._machine_fd(path)
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_utime(path, times, dir_fd=dir_fd, follow_symlinks=follow_symlinks, **extra)
        r = self.resolve(vpath, follow=follow_symlinks)
        if r.passthrough:
            return _os_utime(r.vpath, times, follow_symlinks=follow_symlinks, **extra)
        self._check_writable(r)
        if self._read_location(r) is None:
            raise oserror(errno.ENOENT, r.vpath)
        _os_utime(self._meta_location(r), times, follow_symlinks=False, **extra)
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
        _os_truncate(self._meta_location(r), length)
        return None

    def readlink(self, path: Any, *, dir_fd: int | None = None) -> str:
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_readlink(path, dir_fd=dir_fd)
        r = self.resolve(vpath, follow=False)
        if r.passthrough:
            return _os_readlink(r.vpath)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        try:
            return _os_readlink(source)
        except OSError as exc:
            raise oserror(exc.errno or errno.EINVAL, r.vpath) from None

    def symlink(self, src: Any, dst: Any, target_is_directory: bool = False, *,
                dir_fd: int | None = None) -> None:
        """The link keeps the target's text; the view, not the kernel, follows it."""
        vdst = self._at(dst, dir_fd)
        if vdst is None:
            return _os_symlink(src, dst, dir_fd=dir_fd)
        rd = self.resolve(vdst, follow=False)
        if rd.passthrough:
            return _os_symlink(src, rd.vpath)
        self._check_writable(rd)
        if self._read_location(rd) is not None:
            raise oserror(errno.EEXIST, os.fspath(src), rd.vpath)
        _os_symlink(os.fspath(src), self._write_location(rd, keep_content=False, staged=False))
        return None

    def link(self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
             dst_dir_fd: int | None = None, follow_symlinks: bool = True) -> None:
        vsrc, vdst = self._at(src, src_dir_fd), self._at(dst, dst_dir_fd)
        if vsrc is None or vdst is None:
            return _os_link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd,
                            follow_symlinks=follow_symlinks)
        rs, rd = self.resolve(vsrc, follow=follow_symlinks), self.resolve(vdst, follow=False)
        if rs.passthrough and rd.passthrough:
            return _os_link(rs.vpath, rd.vpath)
        self._check_writable(rd)
        source = self._read_location(rs)
        if source is None:
            raise oserror(errno.ENOENT, rs.vpath, rd.vpath)
        if self._read_location(rd) is not None:
            raise oserror(errno.EEXIST, rs.vpath, rd.vpath)
        target = self._write_location(rd, keep_content=False, staged=False)
        if not source.startswith(self.sandbox + "/"):
            _copy(source, target)  # never a second name for the machine's own inode
            return None
        try:
            _os_link(source, target, follow_symlinks=False)
        except OSError as exc:
            raise oserror(exc.errno or errno.EIO, rs.vpath, rd.vpath) from None
        return None

    def mkfifo(self, path: Any, mode: int = 0o666, *, dir_fd: int | None = None) -> None:
        self.mknod(path, mode | stat_module.S_IFIFO, 0, dir_fd=dir_fd)

    def mknod(self, path: Any, mode: int = 0o600, device: int = 0, *,
              dir_fd: int | None = None) -> None:
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return _os_mknod(path, mode, device, dir_fd=dir_fd)
        r = self.resolve(vpath, follow=False)
        if r.passthrough:
            return _os_mknod(r.vpath, mode, device)
        self._check_writable(r)
        if self._read_location(r) is not None:
            raise oserror(errno.EEXIST, r.vpath)
        target = self._write_location(r, keep_content=False, staged=False)
        try:
            _os_mknod(target, mode, device)
        except OSError as exc:
            raise oserror(exc.errno or errno.EPERM, r.vpath) from None
        return None

    def statvfs(self, path: Any) -> Any:
        if isinstance(path, int):
            return _os_statvfs(path)
        r = self.resolve(path)
        if r.passthrough:
            return _os_statvfs(r.vpath)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        return _os_statvfs(source)

    def _xattr(self, original: Any, path: Any, writing: bool, follow_symlinks: bool,
               *args: Any) -> Any:
        """listxattr/getxattr (reading) and setxattr/removexattr (writing) by path."""
        if path is None:
            path = self._cwd
        if isinstance(path, int):
            return original(path, *args)
        r = self.resolve(path, follow=follow_symlinks)
        if r.passthrough:
            return original(r.vpath, *args, follow_symlinks=follow_symlinks)
        if writing:
            self._check_writable(r)
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath)
        where = self._meta_location(r) if writing else source
        try:
            return original(where, *args, follow_symlinks=False)
        except OSError as exc:
            raise oserror(exc.errno or errno.EIO, r.vpath) from None

    def listxattr(self, path: Any = None, *, follow_symlinks: bool = True) -> list[str]:
        return self._xattr(_os_listxattr, path, False, follow_symlinks)

    def getxattr(self, path: Any, attribute: Any, *, follow_symlinks: bool = True) -> bytes:
        return self._xattr(_os_getxattr, path, False, follow_symlinks, attribute)

    def setxattr(self, path: Any, attribute: Any, value: bytes, flags: int = 0, *,
                 follow_symlinks: bool = True) -> None:
        return self._xattr(_os_setxattr, path, True, follow_symlinks, attribute, value, flags)

    def removexattr(self, path: Any, attribute: Any, *, follow_symlinks: bool = True) -> None:
        return self._xattr(_os_removexattr, path, True, follow_symlinks, attribute)

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
        writing = fd in self.writing_fds
        self.writing_fds.discard(fd)
        _os_close(fd)
        if r is not None:
            self.hooks.after_close(self, r, writing)

    def real_path_for(self, path: Any, writing: bool) -> str:
        """For code that needs a path, not a file object (C++ writers, mmap)."""
        r = self.resolve(path)
        if r.passthrough:
            return r.vpath
        if writing:
            self._check_writable(r)
            return self._write_location(r, keep_content=False, staged=False)
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
            # A hook may shorten the data (ENOSPC at byte K): a short count, as from
            # write(2); the buffered layer retries the rest and meets the error then.
            data = view.hooks.write(view, self._resolved, self, memoryview(b).cast("B"))
            n = super().write(data) if len(data) else 0
            self.written += n
            return n
        return super().write(b)

    def readinto(self, b: Any) -> int | None:
        view = self._view
        if view is not None:
            view.hooks.before(view, "read", self._resolved)
        return super().readinto(b)

    # BufferedReader.read() calls readall, and FileIO.read(n) reads in C:
    # both must meet the engine too (neither goes through readinto).
    def readall(self) -> bytes:
        view = self._view
        if view is not None:
            view.hooks.before(view, "read", self._resolved)
        return super().readall()

    def read(self, size: int = -1) -> bytes | None:
        view = self._view
        if view is not None:
            view.hooks.before(view, "read", self._resolved)
        return super().read(size)

    def close(self) -> None:
        if self.closed:
            return
        view, fd = self._view, self.fileno()
        if view is not None:
            view.fds.pop(fd, None)
            view.writing_fds.discard(fd)
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

    def looked(self, view: View, op: str, r: Resolved) -> None:
        """After a reader's open, stat or listdir has returned or raised."""

    def write(self, view: View, r: Resolved, f: ViewFile, data: memoryview) -> memoryview:
        return data

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


def _is_dir(path: str) -> bool:
    """A directory itself, not a symlink to one (the view follows links, not the kernel)."""
    try:
        return stat_module.S_ISDIR(_os_lstat(path).st_mode)
    except OSError:
        return False


def _leads_to_dir(path: str) -> bool:
    """``os.path.isdir`` by the machine's own stat: the view's real paths (an
    overlay's lower layer) look like virtual ones, and the patched ``os.stat``
    would resolve them in the view."""
    try:
        return stat_module.S_ISDIR(_os_stat(path).st_mode)
    except OSError:
        return False


def _copy(source: str, target: str) -> None:
    """Copy a file (a symlink as a symlink) with its mode and times, by the
    machine's own calls: ``source`` may be a real path the view shadows."""
    st = _os_lstat(source)
    if stat_module.S_ISLNK(st.st_mode):
        _os_symlink(_os_readlink(source), target)
        return
    with _open(source, "rb") as fin, _open(target, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    _os_chmod(target, stat_module.S_IMODE(st.st_mode))
    _os_utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))


def _is_staged_file(path: str | None) -> bool:
    return path is not None and _exists(path) and not _is_dir(path)


def _is_whiteout(path: str | None) -> bool:
    """A whiteout file marks a deleted real path; a whiteout *directory* only
    holds the whiteouts of some of its children."""
    return path is not None and _exists(path) and not _is_dir(path)


def _touch(path: str) -> None:
    _os_makedirs(os.path.dirname(path), exist_ok=True)
    with _open(path, "w"):
        pass


def _whiteout(path: str | None) -> None:
    """Mark the real path behind ``path`` deleted (dropping its children's marks)."""
    if path is None:
        return
    if _is_dir(path):
        shutil.rmtree(path)
    _touch(path)


def _opaque(r: Resolved) -> None:
    """Hide the real children of ``r`` that its upper directory does not have."""
    if r.lower is None or r.whiteout is None or not _leads_to_dir(r.lower):
        return
    for name in _os_listdir(r.lower):
        if not _exists(os.path.join(r.upper, name)):
            _touch(os.path.join(r.whiteout, name))


def _exclusive(flags: int) -> bool:
    return bool(flags & os.O_CREAT and flags & os.O_EXCL)


def _rm(path: str) -> None:
    if _is_dir(path):
        shutil.rmtree(path)  # only ever the sandbox's own paths
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
