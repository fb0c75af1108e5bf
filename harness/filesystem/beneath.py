"""The harness's own file operations inside a world's sandbox, on paths a rank gave it.

A rank's word names files the harness then reads, writes, moves or deletes: a held write's
staging file and where it is published, a faulted write the harness seals. A rank can
also change the sandbox's directories behind the view (python isolation is no wall for a
target that means it), so a path it names may lead, through a symlink it planted, to any
file of the machine's. ``Beneath`` walks every path from a descriptor of the sandbox held
since the world began, one component at a time with ``O_NOFOLLOW``: a link anywhere is
``Outside``, never followed, and a path that is not under the sandbox is refused before
anything is touched. Opening is non-blocking and only regular files are read or written:
a FIFO planted in their place cannot stall the harness.
"""

from __future__ import annotations

import errno
import os
import stat

from harness.filesystem import machine

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data`` to ``fd`` (``os.write`` may take fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Outside(OSError):
    """A path the harness will not act on for a rank: not under the sandbox, or through a
    link, or not a regular file."""


class Beneath:
    """File operations confined to ``root`` (a directory the harness made)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self._fd: int | None = None
        #: (a host's copy under the root, that host's own root, where the copy is seen there)
        self._windows: list[tuple[str, str, str]] = []

    def through(self, copy: str, root: str, at: str) -> None:
        """Act on the files under ``copy`` (a host's copy in the sandbox, which the kernel
        overlays in that host's namespace while the world runs) at ``at`` in the tree of
        ``root`` (the host's own root: ``/proc/<leader>/fd/N``): a change made below a
        mounted overlay is one the overlay may never show. Once that root is gone (the
        world ended, its namespaces with it) the copy is acted on as it is."""
        self._windows.append((os.path.normpath(copy), root, at))

    def _root_fd(self) -> int:
        if self._fd is None:
            os.makedirs(self.root, exist_ok=True)
            self._fd = os.open(self.root, _DIR)
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def relative(self, path: str) -> list[str]:
        """``path``'s components under the root; ``Outside`` if it is not a plain path there."""
        if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
            raise Outside(errno.EPERM, "not an absolute path", path)
        rel = os.path.relpath(path, self.root)
        parts = rel.split(os.sep)
        if os.path.normpath(path) != path.rstrip("/") or rel == "." or parts[0] == "..":
            raise Outside(errno.EPERM, f"not under the world's sandbox {self.root}", path)
        return parts

    def _start(self, path: str) -> tuple[int, list[str]]:
        """Where ``path``'s walk starts (a descriptor the caller closes) and its components
        from there: the root, or the host's own root where a window shows ``path``."""
        parts = self.relative(path)
        for copy, root, at in self._windows:
            if path == copy or path.startswith(copy + "/"):
                try:
                    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # ours
                except OSError:
                    continue  # the world's namespaces are gone: its copy is plain files
                rel = os.path.relpath(path, copy)
                return fd, [p for p in at.split("/") if p] + ([] if rel == "." else
                                                               rel.split("/"))
        return os.dup(self._root_fd()), parts

    def _parent(self, path: str, make: bool = False) -> tuple[int, str]:
        """A descriptor of ``path``'s directory (the caller closes it) and its last name."""
        fd, parts = self._start(path)
        try:
            for part in parts[:-1]:
                if make:
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                try:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise Outside(errno.ELOOP, "a link or a file where a directory was",
                                      path) from None
                    raise
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def open(self, path: str, flags: int, make: bool = False) -> int:
        """A descriptor of the regular file at ``path`` (the caller closes it)."""
        parent, name = self._parent(path, make)
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644,
                         dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Outside(errno.ELOOP, "a link", path) from None
            raise
        finally:
            os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise Outside(errno.EINVAL, "not a regular file", path)
        return fd

    def exists(self, path: str) -> bool:
        parent, name = self._parent(path)
        try:
            os.stat(name, dir_fd=parent, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(parent)

    def read(self, path: str) -> bytes:
        fd = self.open(path, os.O_RDONLY)
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def write(self, path: str, data: bytes) -> None:
        """``path`` holds ``data`` (made, with its directories, if missing)."""
        fd = self.open(path, os.O_WRONLY | os.O_CREAT, make=True)
        try:
            os.ftruncate(fd, 0)
            write_all(fd, data)
        finally:
            os.close(fd)

    def remove(self, path: str) -> None:
        parent, name = self._parent(path)
        try:
            os.unlink(name, dir_fd=parent)
        finally:
            os.close(parent)

    def replace(self, src: str, dst: str) -> None:
        """``os.replace`` of two paths under the root (a link at either is moved as a link,
        never followed), ``dst``'s directories made; into another filesystem (a host's
        overlaid copy) a ``copy``, then ``src`` removed."""
        src_dir, src_name = self._parent(src)
        try:
            dst_dir, dst_name = self._parent(dst, make=True)
            try:
                os.replace(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
                return
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
            finally:
                os.close(dst_dir)
        finally:
            os.close(src_dir)
        self.copy(src, dst)
        self.remove(src)

    def copy(self, src: str, dst: str) -> None:
        """``dst`` becomes a copy of ``src`` (its bytes, mode and world time of writing),
        written beside it and renamed into place whole."""
        beside = dst + ".harness-publish"
        fd_in = self.open(src, os.O_RDONLY)
        try:
            fd_out = self.open(beside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make=True)
            try:
                os.fchmod(fd_out, stat.S_IMODE(os.fstat(fd_in).st_mode))
                while chunk := os.read(fd_in, 1 << 20):
                    write_all(fd_out, chunk)
                machine.copy_stamp(fd_in, fd_out)
            finally:
                os.close(fd_out)
        finally:
            os.close(fd_in)
        self.replace(beside, dst)
