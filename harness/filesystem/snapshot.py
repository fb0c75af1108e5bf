"""Read back what a world wrote: the files matching some virtual globs, as one
rank sees them. The harness records such snapshots when a rank exits (so a
checker can follow a checkpoint across pre-emptions) and when the world ends.
"""

from __future__ import annotations

import base64
import errno
import fnmatch
import hashlib
import os
import stat

from harness.filesystem.mounts import MountTable, normalize, real_root, whiteout_root
from harness.topology import Topology

_TEXT_LIMIT = 256 * 1024
#: A watched file larger than this is recorded by its size: a snapshot is taken in the
#: harness's event loop, so what it reads is bounded (a 600 MB sparse file cost 13 s).
SIZE_CAP = 16 * 1024 * 1024
#: And what one snapshot reads in all (a glob may match many files): past it, files are
#: recorded by their size. The walk is sorted, so the same files are read every run.
SNAPSHOT_BUDGET = 64 * 1024 * 1024
_CHUNK = 1024 * 1024
BINARY = "base64:"
#: Content that was not read: a FIFO, a socket, a symlink, a file over the cap.
NOT_READ = "not read: "
_KINDS = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "directory"))


def content_bytes(content: str) -> bytes | None:
    """A snapshot's content back as the file's bytes (None: only its digest, or what
    the file was, was kept)."""
    if content.startswith(BINARY):
        return base64.b64decode(content[len(BINARY):])
    if content.startswith("sha256:") and content.endswith(" bytes)"):
        return None
    if content.startswith(NOT_READ):
        return None
    return content.encode()


def snapshot(sandbox: str, table: MountTable, topology: Topology, rank: int,
             globs: list[str], cwd: str, home: str) -> dict[str, str]:
    """``{virtual path: content}`` of the files the world wrote that match ``globs``.

    Content is the text of a small UTF-8 file, ``base64:<data>`` of another small file
    (a pickle, a ``torch.save``), ``sha256:<hex> (<n> bytes)`` of a large one, and
    ``not read: ...`` of what is not read: a file over ``SIZE_CAP`` or past the
    ``SNAPSHOT_BUDGET`` (its size), a FIFO, socket or device (what it is), a
    symlink (its text: the target's links hold virtual paths, which lead out of
    the sandbox on the machine).
    Only files the world created or changed are seen, never the machine's own; a
    file that vanishes while it is read (a live rank removed it) is left out.
    """
    host = topology.host_of(rank)
    found: dict[str, str] = {}
    budget = [SNAPSHOT_BUDGET]  # bytes this snapshot may still read
    for pattern in globs:
        vglob = normalize(pattern, cwd, home)
        static = vglob.split("*")[0].split("?")[0].split("[")[0]
        static_dir = static if static.endswith("/") else os.path.dirname(static) or "/"
        mount = table.match(static_dir.rstrip("/") or "/")
        if mount.base == "passthrough":
            continue
        key = mount.scope_key(rank, host)
        root = real_root(sandbox, mount, key)
        start = os.path.join(root, mount.relative(static_dir.rstrip("/") or "/"))
        for dirpath, dirs, files in os.walk(start):
            dirs.sort()
            for name in sorted(files):
                real = os.path.join(dirpath, name)
                rel = os.path.relpath(real, root)
                vpath = ("/" if mount.path == "/" else mount.path + "/") + rel
                vpath = vpath.replace("//", "/")
                if vpath in found or not fnmatch.fnmatchcase(vpath, vglob):
                    continue
                if not _whited_out(sandbox, mount, key, rel):
                    content = _content(real, budget)
                    if content is not None:
                        found[vpath] = content
    return dict(sorted(found.items()))


def _whited_out(sandbox: str, mount, key: str, rel: str) -> bool:  # noqa: ANN001
    """Deleted: by the view (a file in its whiteout tree) or by the kernel's overlay (a
    character device 0/0 in the host's copy, under kernel isolation)."""
    if os.path.isfile(os.path.join(whiteout_root(sandbox, mount, key), rel)):
        return True
    return is_kernel_whiteout(os.path.join(real_root(sandbox, mount, key), rel))


def is_kernel_whiteout(path: str) -> bool:
    """The kernel overlay's mark of a deleted file: a character device numbered 0/0."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def snapshot_real(globs: list[str], home: str, recorded_home: str = "") -> dict[str, str]:
    """``snapshot`` on a real filesystem (a pod's host, which has no sandbox): the files
    matching ``globs`` (``~`` is ``home``), recorded under ``recorded_home`` where they are
    under ``home`` (the controller's home, as the simulator records them). Every file there
    is seen, not only those the world wrote: a pod cell cleans what an earlier one left."""
    found: dict[str, str] = {}
    budget = [SNAPSHOT_BUDGET]
    for pattern in globs:
        real_glob = home + pattern[1:] if pattern == "~" or pattern.startswith("~/") else pattern
        static = real_glob.split("*")[0].split("?")[0].split("[")[0]
        start = static if static.endswith("/") else os.path.dirname(static) or "/"
        for dirpath, dirs, files in os.walk(start):
            dirs.sort()
            for name in sorted(files):
                real = os.path.join(dirpath, name)
                if not fnmatch.fnmatchcase(real, real_glob):
                    continue
                shown = real
                if recorded_home and (real == home or real.startswith(home.rstrip("/") + "/")):
                    shown = recorded_home + real[len(home):]
                if shown not in found and (content := _content(real, budget)) is not None:
                    found[shown] = content
    return dict(sorted(found.items()))


def _content(path: str, budget: list[int]) -> str | None:
    """What a snapshot records of ``path``; None if it is gone.

    Never blocks and never reads past ``SIZE_CAP`` (but the one byte that shows a
    file grew past it while it was read): only a regular file
    is opened, with O_NONBLOCK and without following a link, so a FIFO swapped in
    after the ``lstat`` opens at once and is recognised by its ``fstat``.
    """
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return f"{NOT_READ}symlink -> {os.readlink(path)}"
        if not stat.S_ISREG(info.st_mode):
            return NOT_READ + _kind(info.st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link swapped in after the lstat
            return f"{NOT_READ}symlink"
        return f"{NOT_READ}{os.strerror(exc.errno or 0) or type(exc).__name__}"
    try:
        return _read_regular(fd, budget)
    except OSError as exc:
        return f"{NOT_READ}{os.strerror(exc.errno or 0) or type(exc).__name__}"
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), f"file of mode {mode:o}")


def _read_regular(fd: int, budget: list[int]) -> str:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        return NOT_READ + _kind(info.st_mode)
    if info.st_size > SIZE_CAP:
        return _over_cap(info.st_size)
    if info.st_size > budget[0]:
        return (f"{NOT_READ}{info.st_size} bytes, past the {SNAPSHOT_BUDGET} bytes "
                "one snapshot reads at most")
    digest, head, size = hashlib.sha256(), bytearray(), 0
    while size <= SIZE_CAP:  # the file may grow while it is read: one byte past the cap says so
        chunk = os.read(fd, min(_CHUNK, SIZE_CAP + 1 - size))
        if not chunk:
            break
        size += len(chunk)
        digest.update(chunk)
        if len(head) <= _TEXT_LIMIT:
            head += chunk
    budget[0] -= size
    if size > SIZE_CAP:
        return _over_cap(max(size, os.fstat(fd).st_size))
    if size <= _TEXT_LIMIT:
        data = bytes(head)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return BINARY + base64.b64encode(data).decode("ascii")
    return f"sha256:{digest.hexdigest()} ({size} bytes)"


def _over_cap(size: int) -> str:
    return f"{NOT_READ}{size} bytes, larger than the {SIZE_CAP} bytes read at most"
