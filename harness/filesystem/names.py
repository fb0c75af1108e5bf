"""New names for files: rename, link, symlink, mknod.

A rename checks what POSIX checks, then asks the source mount's consistency
model how the move happens (in one step, or a directory object by object);
``move_into_place`` is the step itself, across the layers.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat as stat_module
from typing import Any

from harness.filesystem import machine
from harness.filesystem.machine import oserror
from harness.filesystem.resolution import Resolution, Resolved, opaque

#: The kernel's names for a descriptor of this process: an ``O_TMPFILE`` file's way to a name.
_FD_LINK = re.compile(r"/(?:proc/(?:self|(\d+))|dev)/fd/(\d+)")


class Names(Resolution):
    """The view's half that gives paths new names (a mixin of ``View``)."""

    listdir: Any

    def rename(self, src: Any, dst: Any, *, replace: bool = True, src_dir_fd: int | None = None,
               dst_dir_fd: int | None = None) -> None:
        vsrc, vdst = self._at(src, src_dir_fd), self._at(dst, dst_dir_fd)
        if vsrc is None or vdst is None:
            return (machine.replace if replace else machine.rename)(
                src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        rs, rd = self.resolve(vsrc, follow=False), self.resolve(vdst, follow=False)
        if rs.passthrough and rd.passthrough:
            self.machine_write(rs)
            self.machine_write(rd)
            return (machine.replace if replace else machine.rename)(rs.vpath, rd.vpath)
        self.hooks.before(self, "rename", rs, rd)
        self._check_writable(rs)
        self._check_writable(rd)
        if rs.vpath != rd.vpath and self.hooks.rename_withheld(self, rs, rd):
            return None
        source = self._existing(rs, rd.vpath)
        if self._read_location(self.resolve(posixpath.dirname(rd.vpath))) is None:
            raise oserror(errno.ENOENT, rs.vpath, rd.vpath)
        is_dir = machine.is_dir(source)
        existing = self._read_location(rd)
        if existing is not None and machine.is_dir(existing) != is_dir:
            raise oserror(errno.EISDIR if machine.is_dir(existing) else errno.ENOTDIR,
                          rs.vpath, rd.vpath)
        if rs.vpath == rd.vpath:
            return None
        if is_dir and (rd.vpath + "/").startswith(rs.vpath + "/"):
            raise oserror(errno.EINVAL, rs.vpath, rd.vpath)
        if existing is not None and is_dir and self.listdir(rd.vpath):
            raise oserror(errno.ENOTEMPTY, rs.vpath, rd.vpath)
        try:
            rs.model.rename(self, rs, rd, source, is_dir)
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
        machine.makedirs(os.path.dirname(target), exist_ok=True)
        if rd.staging and rd.staging != source and machine.exists(rd.staging):
            machine.rm(rd.staging)  # an unclosed write there: its name now means the new file
        if machine.exists(target) and machine.is_dir(target) and target != source:
            machine.rm(target)  # an empty directory being replaced (non-empty was refused)
        if is_dir and rs.lower is not None and machine.exists(rs.lower):
            self._copy_merged(rs.vpath, target)  # what the rank sees, real files included
        elif source == rs.lower:
            machine.copy(source, target)
        else:
            machine.move(source, target)
        if rd.whiteout and machine.exists(rd.whiteout):
            machine.rm(rd.whiteout)
        if is_dir:
            opaque(rd)  # the moved directory replaces a real one: none of its files show
        if rs.lower is not None and machine.exists(rs.lower):
            machine.whiteout(rs.whiteout)
        for layer in (rs.staging, rs.upper):
            if layer and layer != source and machine.exists(layer):
                machine.rm(layer)
        self.hooks.after_change(self, rd)

    def _copy_merged(self, vdir: str, target: str) -> None:
        """Copy the directory ``vdir`` as this rank sees it (layers merged, deletions applied)."""
        machine.makedirs(target, exist_ok=True)
        for name in self.listdir(vdir):
            child = self._resolve(posixpath.join(vdir, name))
            source = self._read_location(child)
            if source is None:
                continue
            if machine.is_dir(source):
                self._copy_merged(child.vpath, os.path.join(target, name))
            else:
                machine.copy(source, os.path.join(target, name))

    def remove_tree_if_empty(self, r: Resolved) -> None:
        """Drop what is left of a directory whose files were all moved out."""
        for layer in (r.staging, r.upper):
            if layer and machine.is_dir(layer):
                try:
                    machine.rmtree(layer)
                except OSError:
                    pass  # what cannot go stays, as before
        if r.lower is not None and machine.exists(r.lower):
            machine.whiteout(r.whiteout)

    def symlink(self, src: Any, dst: Any, target_is_directory: bool = False, *,
                dir_fd: int | None = None) -> None:
        """The link keeps the target's text; the view, not the kernel, follows it."""
        rd, done = self._enter(dst, dir_fd, lambda p, **kw: machine.symlink(src, p, **kw),
                               follow=False, op="symlink", writes=True)
        if rd is None:
            return done
        if self._read_location(rd) is not None:
            raise oserror(errno.EEXIST, os.fspath(src), rd.vpath)
        machine.symlink(os.fspath(src), self._write_location(rd, keep_content=False, staged=False))
        return None

    def link(self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
             dst_dir_fd: int | None = None, follow_symlinks: bool = True) -> None:
        unnamed = self._unnamed(src) if follow_symlinks else None
        if unnamed is not None:
            return self._name(unnamed, dst, dst_dir_fd)
        vsrc, vdst = self._at(src, src_dir_fd), self._at(dst, dst_dir_fd)
        if vsrc is None or vdst is None:
            return machine.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd,
                                follow_symlinks=follow_symlinks)
        rs, rd = self.resolve(vsrc, follow=follow_symlinks), self.resolve(vdst, follow=False)
        if rs.passthrough and rd.passthrough:
            self.machine_write(rd)
            return machine.link(rs.vpath, rd.vpath)
        self.hooks.before(self, "link", rs, rd)
        self._check_writable(rd)
        source = self._existing(rs, rd.vpath)
        if self._read_location(rd) is not None:
            raise oserror(errno.EEXIST, rs.vpath, rd.vpath)
        target = self._write_location(rd, keep_content=False, staged=False)
        if not source.startswith(self.sandbox + "/"):
            machine.copy(source, target)  # never a second name for the machine's own inode
            return None
        try:
            machine.link(source, target, follow_symlinks=False)
        except OSError as exc:
            raise oserror(exc.errno or errno.EIO, rs.vpath, rd.vpath) from None
        return None

    def _unnamed(self, src: Any) -> int | None:
        """The ``O_TMPFILE`` fd that ``src`` (``/proc/self/fd/N``, ``/dev/fd/N``) names."""
        if isinstance(src, int):
            return None
        m = _FD_LINK.fullmatch(os.fsdecode(os.fspath(src)))
        if m is None or (m.group(1) and int(m.group(1)) != os.getpid()):
            return None
        fd = int(m.group(2))
        return fd if fd in self.unnamed else None

    def _name(self, fd: int, dst: Any, dst_dir_fd: int | None) -> None:
        """The first name of an ``O_TMPFILE`` file: others see it from now on, whole, as a
        closed write (the fault hooks and the mount's model have their say). Its bytes are
        copied to the name (a link through ``/proc`` fails with EXDEV on some kernels,
        never on a TPU VM's ext4): a write through the fd after the link does not reach the
        name, as it would on one inode."""
        vdst = self._at(dst, dst_dir_fd)
        if vdst is None:
            return machine.link(f"/proc/self/fd/{fd}", dst, dst_dir_fd=dst_dir_fd,
                                follow_symlinks=True)
        rd = self.resolve(vdst, follow=False)
        if rd.passthrough:
            self.machine_write(rd)
            return machine.link(f"/proc/self/fd/{fd}", rd.vpath, follow_symlinks=True)
        self.hooks.before(self, "link", rd, rd)
        self._check_writable(rd)
        if self._read_location(rd) is not None:
            raise oserror(errno.EEXIST, f"/proc/self/fd/{fd}", rd.vpath)
        r = self.hooks.prepare_write(self, rd, whole=True)  # a content fault strikes it
        _copy_fd(fd, self._write_location(r, keep_content=False))
        self.file_closed(r, True)  # its bytes show as a closed write's do
        return None


    def mkfifo(self, path: Any, mode: int = 0o666, *, dir_fd: int | None = None) -> None:
        self.mknod(path, mode | stat_module.S_IFIFO, 0, dir_fd=dir_fd)

    def mknod(self, path: Any, mode: int = 0o600, device: int = 0, *,
              dir_fd: int | None = None) -> None:
        r, done = self._enter(path, dir_fd, lambda p, **kw: machine.mknod(p, mode, device, **kw),
                              follow=False, writes=True)
        if r is None:
            return done
        if self._read_location(r) is not None:
            raise oserror(errno.EEXIST, r.vpath)
        target = self._write_location(r, keep_content=False, staged=False)
        try:
            machine.mknod(target, mode, device)
        except OSError as exc:
            raise oserror(exc.errno or errno.EPERM, r.vpath) from None
        return None


def _copy_fd(fd: int, target: str) -> None:
    """What the file open as ``fd`` holds, now, as a new file ``target``."""
    src = machine.os_open(f"/proc/self/fd/{fd}", os.O_RDONLY)  # it may be open write-only
    try:
        out = machine.os_open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            offset = 0
            while chunk := os.pread(src, 1 << 20, offset):
                os.write(out, chunk)
                offset += len(chunk)
            os.fchmod(out, stat_module.S_IMODE(os.fstat(src).st_mode))
        finally:
            machine.close(out)
    finally:
        machine.close(src)
