"""Opening files through the view: the open path, the file object, fsync and close.

A write on a non-local mount goes to the writer's staging file; at close the
fault hooks decide what its bytes are (or withhold them) and the mount's
consistency model publishes them. A ``ViewFile`` is a real ``FileIO`` whose
reads, writes and close meet the hooks, as a real one would meet the kernel;
the buffered and text layers ``open()`` puts on top are the standard ones.
"""

from __future__ import annotations

import errno
import io
import os
import stat as stat_module
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.filesystem import machine
from harness.filesystem.machine import oserror
from harness.filesystem.resolution import Resolution, Resolved

if TYPE_CHECKING:
    from harness.filesystem.view import View

#: Linux's unnamed-file flag (it includes ``O_DIRECTORY``); 0 where there is none.
O_TMPFILE = getattr(os, "O_TMPFILE", 0)


class Files(Resolution):
    """The view's half that opens, syncs and closes files (a mixin of ``View``)."""

    writing_fds: set[int]
    #: The raw file class of the files the view opens (the recording view tells their writes).
    file_class: type[ViewFile]

    def open(self, file: Any, mode: str = "r", buffering: int = -1, encoding: str | None = None,
             errors: str | None = None, newline: str | None = None, closefd: bool = True,
             opener: Callable[..., int] | None = None) -> Any:
        if isinstance(file, int):
            if file in self.fds and closefd:  # os.fdopen of an fd the view opened
                return self._file(file, file, mode, buffering, encoding, errors, newline)
            return machine.open(file, mode, buffering, encoding, errors, newline, closefd, opener)
        if opener is not None:  # tempfile's way: the opener makes the fd (through the view)
            fd = opener(file, _flags_of(mode))
            if fd in self.fds:
                return self._file(fd, file, mode, buffering, encoding, errors, newline)
            f = machine.open(fd, mode, buffering, encoding, errors, newline, True)
            getattr(getattr(f, "buffer", f), "raw", f).name = file
            return f
        r = self.resolve(file, follow=not _exclusive(_flags_of(mode)))
        if r.passthrough:
            if _writes(_flags_of(mode)):
                self.machine_write(r)
            f = machine.open(r.vpath, mode, buffering, encoding, errors, newline, closefd, opener)
            self._forget(f.fileno())
            return f
        fd = self._open_fd(r, _flags_of(mode), 0o666)
        return self._file(fd, file, mode, buffering, encoding, errors, newline)

    def _file(self, fd: int, name: Any, mode: str, buffering: int, encoding: str | None,
              errors: str | None, newline: str | None) -> Any:
        """A file object over an fd the view opened: its reads, writes and close meet the hooks."""
        raw = self.file_class(fd, _raw_mode(mode), closefd=True)
        raw.name = os.fspath(name) if isinstance(name, os.PathLike) else name
        raw.bind(self, self.fds[fd], writing=fd in self.writing_fds)
        return _wrap(raw, mode, buffering, encoding, errors, newline)

    def os_open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return machine.os_open(path, flags, mode, dir_fd=dir_fd)
        r = self.resolve(vpath, follow=not (_exclusive(flags) or flags & os.O_NOFOLLOW))
        if flags & os.O_NOFOLLOW and self._link_at(r.vpath) is not None:
            raise oserror(errno.ELOOP, r.vpath)
        if r.passthrough:
            if _writes(flags):
                self.machine_write(r)
            fd = machine.os_open(r.vpath, flags, mode)
            self._forget(fd)
            return fd
        if O_TMPFILE and flags & O_TMPFILE == O_TMPFILE:
            return self._open_unnamed(r, flags, mode)
        return self._open_fd(r, flags, mode)

    def _open_unnamed(self, r: Resolved, flags: int, mode: int) -> int:
        """``O_TMPFILE``: a file with no name in the directory ``r``, which no one else can
        see until it is linked (``Names.link`` of its ``/proc/self/fd/N``). It is made in
        the directory's own layer: the link is then a link on one filesystem."""
        self._check_writable(r)
        existing = self._read_location(r)
        if existing is None:
            raise oserror(errno.ENOENT, r.vpath)
        if not machine.leads_to_dir(existing):
            raise oserror(errno.ENOTDIR, r.vpath)
        machine.makedirs(r.upper, exist_ok=True)
        try:
            fd = machine.os_open(r.upper, flags, mode)
        except OSError as exc:
            raise oserror(exc.errno or errno.EIO, r.vpath) from None
        self._forget(fd)
        self.unnamed[fd] = r.vpath
        return fd

    def _forget(self, fd: int) -> None:
        """A number the view once gave out, closed behind its back and now reused."""
        self.fds.pop(fd, None)
        self.writing_fds.discard(fd)
        self.unnamed.pop(fd, None)

    def _open_fd(self, r: Resolved, flags: int, mode: int) -> int:
        writing = _writes(flags)
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
            if existing is not None and machine.leads_to_dir(existing):
                raise oserror(errno.EISDIR, r.vpath)
            target = self._write_location(r, keep_content=not flags & os.O_TRUNC)
            try:
                fd = _open_copy(target, flags, mode, existing)
            except OSError as exc:
                raise oserror(exc.errno or errno.EIO, r.vpath) from None
        else:
            source = self._existing(r)
            try:
                fd = machine.os_open(source, flags, mode)
            except OSError as exc:
                raise oserror(exc.errno or errno.EIO, r.vpath) from None
        self.fds[fd] = r
        if writing:
            self.writing_fds.add(fd)
        self.hooks.after_open(self, r, writing)
        return fd

    def fsync(self, fd: Any) -> None:
        fileno = fd if isinstance(fd, int) else fd.fileno()
        r = self.fds.get(fileno)
        if r is not None:
            self.hooks.before(self, "fsync", r)
        machine.fsync(fileno)
        if r is not None:
            r.model.synced(self, r)

    def dup(self, fd: int) -> int:
        return self.copied(fd, machine.dup(fd))

    def dup2(self, fd: int, fd2: int, inheritable: bool = True) -> int:
        return self.copied(fd, machine.dup2(fd, fd2, inheritable))

    def copied(self, fd: int, new: int) -> int:
        """A copy of an fd the view opened (``os.dup``, ``dup2``, ``fcntl``'s ``F_DUPFD``)
        is the view's too: a ``dir_fd`` of it resolves in the view, and ``/proc/self/fd/N``
        of it leads to the view's file, not to the machine's behind it."""
        self._forget(new)
        if fd in self.fds:
            self.fds[new] = self.fds[fd]
        return new

    def close_fd(self, fd: int) -> None:
        self.unnamed.pop(fd, None)
        r = self.fds.pop(fd, None)
        writing = fd in self.writing_fds
        self.writing_fds.discard(fd)
        if writing and self.world_ns is not None:
            machine.stamp(fd, self.world_ns())
        machine.close(fd)
        if r is not None:
            self.file_closed(r, writing)

    def file_closed(self, r: Resolved, writing: bool) -> None:
        """A file the view opened was closed: the fault hooks decide what a write's
        bytes are (or withhold them), then the mount's model publishes them."""
        withheld = self.hooks.after_close(self, r, writing)
        if writing and not withheld:
            r.model.closed(self, r)


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
            rate = self._resolved.mount.write_mb_s
            n = self._paced(data, rate) if rate else super().write(data) if len(data) else 0
            self.written += n
            return n
        return super().write(b)

    def _paced(self, data: memoryview, rate: float) -> int:
        """Write ``data`` at the mount's bandwidth (MB per world second): a second's worth
        at a time, each piece on the disk once its time has passed (``time.sleep`` is the
        world's in a rank), so a process stopped mid-write leaves what had arrived."""
        per_second = rate * 1e6
        piece = max(512, min(1 << 20, int(per_second)))
        done = 0
        while done < len(data):
            chunk = data[done:done + piece]
            time.sleep(len(chunk) / per_second)
            written = super().write(chunk)
            if not written:
                break
            done += written
        return done

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
            if self._writing and view.world_ns is not None:
                machine.stamp(fd, view.world_ns())  # its mtime is the world's time of the write
        super().close()
        if view is not None:
            view.file_closed(self._resolved, self._writing)


Files.file_class = ViewFile


def _open_copy(target: str, flags: int, mode: int, existing: str | None) -> int:
    """Open the rank's copy of a file to write it. A file the view has elsewhere (the
    machine's, under an overlay) that ``O_TRUNC`` empties without ``O_CREAT`` has no copy
    yet (nothing was worth copying): it is made empty, with that file's mode and xattrs,
    as the kernel would truncate the file itself."""
    try:
        return machine.os_open(target, flags, mode)
    except FileNotFoundError:
        if existing is None or flags & os.O_CREAT or existing == target:
            raise
    fd = machine.os_open(target, flags | os.O_CREAT | os.O_EXCL,
                         stat_module.S_IMODE(machine.stat(existing).st_mode))
    machine.copy_xattrs(existing, fd)
    return fd


def _exclusive(flags: int) -> bool:
    return bool(flags & os.O_CREAT and flags & os.O_EXCL)


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
            blksize = machine.stat(raw.fileno()).st_blksize
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


def _writes(flags: int) -> bool:
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))
