"""A rank that launders descriptors of the machine's files (issue 47): it opens, through the
view, a directory of the machine's and a file in it read-only, copies each descriptor by one
route the view does not watch (or one it does), closes the original, and with the copy alone
makes, deletes, renames, truncates, chmods and sets xattrs, by ``dir_fd=`` and on the
descriptor itself. What each call did is returned (``done``, a value, or the errno's name),
with what the view shows afterwards; the test compares the machine's files byte for byte."""

from __future__ import annotations

import array
import errno
import fcntl
import os
import posix
import socket
import stat

#: Each route: a copy of ``fd`` the rank holds once the original is closed.
ROUTES = ("send_fds", "sendmsg", "socket.dup", "fromfd", "posix.dup", "os.dup", "os.dup2",
          "F_DUPFD", "F_DUPFD_CLOEXEC")


def _socketpair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def _send_fds(fd: int) -> int:
    a, b = _socketpair()
    with a, b:
        socket.send_fds(a, [b"x"], [fd])
        _, fds, _, _ = socket.recv_fds(b, 1, 1)
    return fds[0]


def _sendmsg(fd: int) -> int:
    a, b = _socketpair()
    with a, b:
        a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
        _, ancillary, _, _ = b.recvmsg(1, socket.CMSG_SPACE(array.array("i").itemsize))
    [(level, kind, data)] = ancillary
    assert (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS)
    return array.array("i", data)[0]


def _fromfd(fd: int) -> int:
    """``socket.fromfd`` dups the descriptor, then refuses it (not a socket): the copy it
    made is left open, and the rank finds it in ``/proc/self/fd``."""
    before = {n for n in os.listdir("/proc/self/fd") if _same(int(n), int(n))}
    try:
        socket.fromfd(fd, socket.AF_UNIX, socket.SOCK_STREAM).detach()
    except OSError:
        pass
    [copy] = [int(n) for n in set(os.listdir("/proc/self/fd")) - before if _same(fd, int(n))]
    return copy


def _same(fd: int, other: int) -> bool:
    try:
        a, b = os.fstat(fd), os.fstat(other)
    except OSError:
        return False  # the listing's own descriptor, closed since (its number reused)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


LAUNDER = {
    "send_fds": _send_fds,
    "sendmsg": _sendmsg,
    "socket.dup": socket.dup,
    "fromfd": _fromfd,
    "posix.dup": posix.dup,
    "os.dup": os.dup,
    "os.dup2": lambda fd: os.dup2(fd, fd + 100),
    "F_DUPFD": lambda fd: fcntl.fcntl(fd, fcntl.F_DUPFD, 200),
    "F_DUPFD_CLOEXEC": lambda fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 200),
}


def _try(fn) -> object:
    try:
        value = fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    return "done" if value is None else value


def _create(d: int) -> None:
    fd = os.open("new.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d)
    try:
        os.write(fd, b"made through a laundered fd")
    finally:
        os.close(fd)


def _empty(d: int) -> None:
    os.close(os.open("file.txt", os.O_WRONLY | os.O_TRUNC, dir_fd=d))


def through(d: int, f: int) -> dict[str, object]:
    """Every change a rank can make with a directory's descriptor ``d`` and a read-only
    file's ``f`` (and two reads)."""
    return {
        "open-create": _try(lambda: _create(d)),
        "open-trunc": _try(lambda: _empty(d)),
        "mkdir": _try(lambda: os.mkdir("newdir", dir_fd=d)),
        "rmdir": _try(lambda: os.rmdir("emptydir", dir_fd=d)),
        "unlink": _try(lambda: os.unlink("victim.txt", dir_fd=d)),
        "rename": _try(lambda: os.rename("rename.txt", "renamed.txt", src_dir_fd=d,
                                         dst_dir_fd=d)),
        "chmod-at": _try(lambda: os.chmod("chmod.txt", 0o600, dir_fd=d)),
        "chown-at": _try(lambda: os.chown("chmod.txt", 4321, 4321, dir_fd=d)),
        "utime-at": _try(lambda: os.utime("chmod.txt", (1, 1), dir_fd=d)),
        "symlink-at": _try(lambda: os.symlink("/etc/passwd", "link", dir_fd=d)),
        "link-at": _try(lambda: os.link("chmod.txt", "hard.txt", src_dir_fd=d, dst_dir_fd=d)),
        "mkfifo-at": _try(lambda: os.mkfifo("fifo", dir_fd=d)),
        "proc-fd-create": _try(lambda: open(f"/proc/self/fd/{d}/proc.txt", "w").close()),
        "fchmod": _try(lambda: os.fchmod(f, 0o640)),
        "chmod-fd": _try(lambda: os.chmod(f, 0o604)),
        "fchown": _try(lambda: os.fchown(f, 4321, 4321)),
        "utime-fd": _try(lambda: os.utime(f, (2, 2))),
        "ftruncate": _try(lambda: os.ftruncate(f, 1)),
        "truncate-fd": _try(lambda: os.truncate(f, 1)),
        "setxattr": _try(lambda: os.setxattr(f, "user.probe", b"laundered")),
        "removexattr": _try(lambda: os.removexattr(f, "user.keep")),
        "getxattr": _try(lambda: os.getxattr(f, "user.probe").decode()),
        "listxattr": _try(lambda: sorted(os.listxattr(f))),
        "dir-fchmod": _try(lambda: os.fchmod(d, 0o700)),
        "dir-setxattr": _try(lambda: os.setxattr(d, "user.probe", b"laundered")),
        "dir-removexattr": _try(lambda: os.removexattr(d, "user.keep")),
    }


def by_path(where: str) -> dict[str, object]:
    """The xattr calls on the file's path (the view's copy, or EROFS)."""
    path = os.path.join(where, "file.txt")
    return {
        "setxattr": _try(lambda: os.setxattr(path, "user.probe", b"by path")),
        "removexattr": _try(lambda: os.removexattr(path, "user.keep")),
        "getxattr": _try(lambda: os.getxattr(path, "user.probe").decode()),
    }


def seen(where: str) -> dict[str, object]:
    """What the view shows of ``where`` once the rank is done."""
    file = os.path.join(where, "file.txt")
    chmod = os.path.join(where, "chmod.txt")
    return {
        "names": sorted(os.listdir(where)),
        "file": _try(lambda: open(file, "rb").read().decode()),
        "file_mode": oct(stat.S_IMODE(os.stat(file).st_mode)),
        "file_xattrs": sorted(os.listxattr(file)),
        "chmod_mode": _try(lambda: oct(stat.S_IMODE(os.stat(chmod).st_mode))),
        "dir_mode": oct(stat.S_IMODE(os.stat(where).st_mode)),
        "dir_xattrs": sorted(os.listxattr(where)),
    }


def launder(rw: str, ro: str, routes: list[str]) -> dict[str, dict[str, object]]:
    """For each route and each of ``rw`` (an overlay of the machine's directory) and ``ro``
    (a read-only mount of another), ``<dir>/<route>``'s descriptors laundered and used;
    then the xattr calls on ``<dir>/by-path/file.txt``'s path."""
    out: dict[str, dict[str, object]] = {}
    for base in (rw, ro):
        kind = "rw" if base == rw else "ro"
        for route in routes:
            where = os.path.join(base, route)
            d = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
            f = os.open(os.path.join(where, "file.txt"), os.O_RDONLY)
            copies = LAUNDER[route](d), LAUNDER[route](f)
            os.close(d)
            os.close(f)
            out[f"{kind} {route}"] = through(*copies)
            for copy in copies:
                os.close(copy)
            out[f"{kind} {route} seen"] = seen(where)
        out[f"{kind} by path"] = by_path(os.path.join(base, "by-path"))
    return out
