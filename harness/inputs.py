"""The files a user names (a scenario, a report, an expected-differences file, a hosts
file, a key), read once, at the edge, with a bound, or refused with the file's name.

A FIFO would block the command forever and ``/dev/zero`` would fill the machine's
memory, so a file is opened without blocking and without becoming the controlling
terminal, checked to be a regular file on the descriptor itself (a path swapped
between a check and the open cannot slip through), and read up to a limit: a larger
file is refused before it is read. Every refusal is an ``InputError`` (exit 2) that
says which file, and, where a parser knows, the line and the field.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from harness.printable import printable
from harness.vocabulary import UsageError

#: What a file that is not a regular one is, in the refusal.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


@dataclass
class InputError(UsageError):
    """A file the command cannot use: where, and what is wrong with it."""

    label = "bad input"

    file: str
    message: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = printable(self.file) + (f":{self.line}" if self.line else "")
        what = f" (field '{self.field}')" if self.field else ""
        return f"{where}: {printable(self.message)}{what}"


def size_text(n: int) -> str:
    """``256 MiB``, ``1 MiB``, ``512 KiB``: a limit as a person reads it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _kernel_file(fd: int) -> str | None:
    """Where an open file lives when that is /proc or /sys (its path, as the descriptor
    resolved it: a link to /proc/kmsg too), else None."""
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return where if where.startswith(("/proc/", "/sys/")) else None


def read_bytes(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The whole of the regular file at ``path``, at most ``limit`` bytes; ``what`` names
    it in a refusal (``a report``, ``a scenario file``). Raises ``InputError``."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(name, f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        kernel = _kernel_file(fd)
        if kernel is not None:  # /proc/kmsg says it is a regular file, and blocks a read
            raise InputError(name, f"{what} must be a file, and this is {kernel}, a kernel "
                             "interface")
        if not stat.S_ISREG(info.st_mode):
            kind = next((k for test, k in _KINDS if test(info.st_mode)), "not a regular file")
            raise InputError(name, f"{what} must be a regular file, and this is {kind}")
        if info.st_size > limit:
            raise InputError(name, f"{what} is {size_text(info.st_size)} long, larger than the "
                             f"{size_text(limit)} the harness reads")
        chunks: list[bytes] = []
        left = limit + 1  # a file that grows while it is read is refused too
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise InputError(name, f"cannot read {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise InputError(name, f"{what} is larger than the {size_text(limit)} the harness reads")
    return data


def read_text(path: str | os.PathLike[str], limit: int, what: str) -> str:
    """``read_bytes`` as UTF-8 text; bytes that are not UTF-8 are refused with their line."""
    raw = read_bytes(path, limit, what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(os.fspath(path), f"{what} must be UTF-8 text: byte "
                         f"0x{raw[exc.start]:02x} cannot be decoded (a binary file?)",
                         line=line) from None
