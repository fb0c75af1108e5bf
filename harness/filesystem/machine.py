"""The machine's own file calls, taken before any patch, and what the view builds on them.

The view reaches the sandbox and an overlay's lower layer only through these:
those real paths look virtual, and the patched ``os`` functions would resolve
them in the view again. Read it as ``machine.stat(...)``: the kernel's stat.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import stat as stat_module
from typing import Any

open = io.open  # the machine's open: this module names the originals as os does
stat, lstat, listdir, scandir, mkdir = os.stat, os.lstat, os.listdir, os.scandir, os.mkdir
remove, rmdir, rename, replace = os.remove, os.rmdir, os.rename, os.replace
chmod, access, utime, truncate = os.chmod, os.access, os.utime, os.truncate
readlink, symlink, link = os.readlink, os.symlink, os.link
fsync, close = os.fsync, os.close
os_open = os.open
dup, dup2 = os.dup, os.dup2
chown, fchmod, fchown = os.chown, os.fchmod, os.fchown
mknod, statvfs = os.mknod, os.statvfs
listxattr = getattr(os, "listxattr", None)
getxattr = getattr(os, "getxattr", None)
setxattr = getattr(os, "setxattr", None)
removexattr = getattr(os, "removexattr", None)


def oserror(code: int, vpath: str | None = None, vpath2: str | None = None) -> OSError:
    """The exception the real syscall raises, with the path the target used."""
    args: list[Any] = [code, os.strerror(code)]
    if vpath is not None:
        args.append(vpath)
        if vpath2 is not None:
            args += [None, vpath2]
    return OSError(*args)  # OSError picks the subclass (FileNotFoundError...) from errno


def exists(path: str | None) -> bool:
    if path is None:
        return False
    try:
        lstat(path)
        return True
    except OSError:
        return False


def is_dir(path: str) -> bool:
    """A directory itself, not a symlink to one (the view follows links, not the kernel)."""
    try:
        return stat_module.S_ISDIR(lstat(path).st_mode)
    except OSError:
        return False


def leads_to_dir(path: str) -> bool:
    """``os.path.isdir`` by the machine's own stat."""
    try:
        return stat_module.S_ISDIR(stat(path).st_mode)
    except OSError:
        return False


def is_plain(path: str | None) -> bool:
    """Something other than a directory is there: a staged file, or a whiteout
    (a whiteout *directory* only holds the whiteouts of some of its children)."""
    return path is not None and exists(path) and not is_dir(path)


#: The extended attribute that holds the world's time of a file's last write through a view
#: (with the file's own mtime then, to know it was not changed since): see ``stamp``.
STAMP = "user.harness.mtime"


def stamp(file: int | str, world_ns: int | None) -> None:
    """Record that ``file`` (an open fd, or a real path) was last written at ``world_ns``
    (the world's ``time.time_ns()``): the view shows that as its mtime, as a real disk
    shows the time of the write. None: its mtime is what it is (a time set explicitly).
    Where the filesystem keeps no extended attributes, nothing."""
    if setxattr is None or removexattr is None:
        return
    try:
        if world_ns is None:
            removexattr(file, STAMP)
        else:
            setxattr(file, STAMP, f"{stat(file).st_mtime_ns} {world_ns}".encode())
    except OSError:
        pass


def world_stat(path: str | int, st: os.stat_result) -> os.stat_result:
    """``st`` with the world's time of the file's last write as its mtime, when one was
    stamped and the file has not changed since; else ``st`` as it is."""
    if getxattr is None:
        return st
    try:
        real, world = (int(x) for x in getxattr(path, STAMP, follow_symlinks=False).split())
    except (OSError, ValueError):
        return st
    if real != st.st_mtime_ns:
        return st
    fields = list(st[:os.stat_result.n_sequence_fields])
    fields[8] = world // 1_000_000_000
    extra = {k: getattr(st, k) for k in _HIDDEN_STAT_FIELDS if hasattr(st, k)}
    extra["st_mtime"], extra["st_mtime_ns"] = world / 1e9, world
    return os.stat_result(fields, extra)


_HIDDEN_STAT_FIELDS = ("st_atime", "st_mtime", "st_ctime", "st_atime_ns", "st_mtime_ns",
                       "st_ctime_ns", "st_blksize", "st_blocks", "st_rdev")


def copy_stamp(source: int | str, target: int | str) -> None:
    """Give ``target`` (a copy of ``source``, as a publication makes it; a path or a
    descriptor) ``source``'s world time of writing."""
    if getxattr is None or setxattr is None:
        return
    try:
        _, world = getxattr(source, STAMP).split()
        setxattr(target, STAMP, f"{stat(target).st_mtime_ns} {int(world)}".encode())
    except (OSError, ValueError):
        pass


def copy(source: str, target: str) -> None:
    """Copy a file (a symlink as a symlink) with its mode and times: ``source``
    may be a real path the view shadows."""
    st = lstat(source)
    if stat_module.S_ISLNK(st.st_mode):
        symlink(readlink(source), target)
        return
    with open(source, "rb") as fin, open(target, "wb") as fout:
        shutil.copyfileobj(fin, fout)
        copy_xattrs(fin.fileno(), fout.fileno())
    chmod(target, stat_module.S_IMODE(st.st_mode))
    utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))


def copy_xattrs(source: int | str, target: int | str) -> None:
    """The extended attributes of ``source`` on ``target`` (paths or descriptors), as an
    overlay's copy-up keeps them: a rank's ``removexattr`` of a machine file's attribute
    acts on its copy. Those the kernel keeps to itself (``security.``, ``trusted.``, for
    a process without the right) are left."""
    if listxattr is None or getxattr is None or setxattr is None:
        return
    try:
        names = listxattr(source)
    except OSError:
        return  # a filesystem without them
    for name in names:
        try:
            setxattr(target, name, getxattr(source, name))
        except OSError:
            pass


def touch(path: str) -> None:
    makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w"):
        pass


def whiteout(path: str | None) -> None:
    """Mark the real path behind ``path`` deleted (dropping its children's marks)."""
    if path is None:
        return
    if is_dir(path):
        rmtree(path)
    touch(path)


def rm(path: str) -> None:
    if is_dir(path):
        rmtree(path)
    else:
        remove(path)


def rmtree(path: str) -> None:
    """``shutil.rmtree`` by the machine's own calls: shutil's go through the patched ``os``,
    and a path the kernel overlays (kernel isolation) is the view's again there."""
    for name in listdir(path):
        child = os.path.join(path, name)
        if is_dir(child):
            rmtree(child)
        else:
            remove(child)
    rmdir(path)


def move(source: str, target: str) -> None:
    """``os.replace``, and across filesystems (a host's overlaid copy and its fresh ``/tmp``,
    one disk on a pod's VM) a copy then the source removed, as ``mv`` does."""
    try:
        replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        if is_dir(source):
            makedirs(target, exist_ok=True)
            for name in listdir(source):
                move(os.path.join(source, name), os.path.join(target, name))
            rmdir(source)
        else:
            copy(source, target + ".harness-move")
            copy_stamp(source, target + ".harness-move")
            replace(target + ".harness-move", target)
            remove(source)


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def makedirs(path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
    """``os.makedirs`` on the machine's own ``mkdir`` and ``lstat``: the standard one looks
    them up in ``os`` when called, where the view's may be patched in."""
    head, tail = os.path.split(path)
    if not tail:
        head, tail = os.path.split(head)
    if head and tail and not exists(head):
        try:
            makedirs(head, exist_ok=exist_ok)
        except FileExistsError:
            pass
    try:
        mkdir(path, mode)
    except OSError:
        if not exist_ok or not leads_to_dir(path):
            raise


def publish(src: str, dst: str) -> None:
    """Move a staged file into the place every reader sees, in one step. Across filesystems
    (a pod's staging area and its /tmp) it is copied beside the destination first, then
    renamed, as a careful writer publishes."""
    makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        replace(src, dst)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        beside = f"{dst}.harness-{os.getpid()}"
        copy(src, beside)
        replace(beside, dst)
        remove(src)
