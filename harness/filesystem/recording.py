"""The view that also tells the coordinator every file operation the target
makes (``record_files``): what a fault-free discovery world learns roles from.

Only the paths the view handles are told (sandboxed virtual paths), never the
harness's own files or a passthrough path. Attempts count as much as
successes: a polling reader's failed opens are what shows it is a reader. A
rank tells at most ``LIMIT`` operations (then one more message, which the
coordinator records as a warning that the rest were dropped), and a stat or
listdir repeated on the same path with the same outcome is told once, then
once more with ``count`` when the run of repeats ends.
"""

from __future__ import annotations

import errno as errno_
import os
import threading
from collections.abc import Callable
from typing import Any

from harness.filesystem import machine
from harness.filesystem.resolution import Resolved
from harness.filesystem.view import View

#: at most this many file events per rank per world
LIMIT = 10_000  # as the server's FILE_EVENTS_LIMIT
_COLLAPSED = ("stat", "listdir")


class RecordingView(View):
    """A ``View`` that reports each operation as a ``file-op`` message."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._told = 0
        self._last: tuple[Any, ...] | None = None  # the stat/listdir being repeated
        self._repeats = 0
        self._inside = threading.local()  # depth: a told operation is under way in this thread

    # -- telling ----------------------------------------------------------------
    def _tell(self, op: str, path: str, exc: BaseException | None, **extra: Any) -> None:
        ok = exc is None
        code = None if ok else (getattr(exc, "errno", None) or errno_.EIO)
        key = (op, path, ok, code)
        if op in _COLLAPSED and key == self._last:
            self._repeats += 1
            return
        self.flush_repeats()
        self._last = key if op in _COLLAPSED else None
        self._send(op, path, ok, code, **extra)

    def flush_repeats(self) -> None:
        """The run of repeated stat/listdir is over: one event says how many there were."""
        if self._repeats and self._last is not None:
            op, path, ok, code = self._last
            self._send(op, path, ok, code, count=self._repeats)
        self._last, self._repeats = None, 0

    def _send(self, op: str, path: str, ok: bool, code: int | None, **extra: Any) -> None:
        if self._told > LIMIT:
            return
        self._told += 1
        message: dict[str, Any] = {"type": "file-op", "op": op, "path": path, "ok": ok}
        if code is not None:
            message["errno"] = code
        message.update({k: v for k, v in extra.items() if v is not None})
        self.notify(message)

    def _handled(self, path: Any, dir_fd: int | None = None, follow: bool = True) -> str | None:
        """The virtual path the view handles for ``path``, or None (an fd it never saw,
        a passthrough path, the harness's own files)."""
        if isinstance(path, int):
            r = self.fds.get(path)
            return r.vpath if r is not None else None
        try:
            vpath = self._at(path, dir_fd)
            if vpath is None:
                return None
            r = self.resolve(vpath, follow=follow)
        except (OSError, TypeError, ValueError):
            return None
        return None if r.passthrough else r.vpath

    def _recorded(self, op: str, vpath: str | None, call: Callable[[], Any],
                  **extra: Any) -> Any:
        """``call``, told as ``op`` on ``vpath``: done, or failed with an OSError's errno.
        Only the target's own call is told, not the view's calls inside it (an
        rmdir's listdir); anything but an OSError is not a file operation's outcome."""
        inside = self._inside
        if vpath is None or getattr(inside, "depth", 0):
            return call()
        inside.depth = 1
        try:
            result = call()
        except OSError as exc:
            inside.depth = 0
            self._tell(op, vpath, exc, **extra)
            raise
        finally:
            inside.depth = 0
        self._tell(op, vpath, None, **extra)
        return result

    # -- the operations ------------------------------------------------------------
    def _open_fd(self, r: Resolved, flags: int, mode: int) -> int:
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))
        return self._recorded("open-write" if writing else "open-read", r.vpath,
                              lambda: super(RecordingView, self)._open_fd(r, flags, mode))

    def file_closed(self, r: Resolved, writing: bool) -> None:
        """Every close of a file the view opened ends here (``close_fd`` and
        ``ViewFile.close``): a writer's close is told with the bytes it left."""
        if not writing:
            return super().file_closed(r, writing)
        size = _size(r)
        return self._recorded("close", r.vpath,
                              lambda: super(RecordingView, self).file_closed(r, writing),
                              size=size)

    def stat(self, path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True) -> Any:
        vpath = None if isinstance(path, int) else self._handled(path, dir_fd, follow_symlinks)
        return self._recorded("stat", vpath, lambda: super(RecordingView, self).stat(
            path, dir_fd=dir_fd, follow_symlinks=follow_symlinks))

    def listdir(self, path: Any = ".") -> list[str]:
        return self._recorded("listdir", self._handled(path),
                              lambda: super(RecordingView, self).listdir(path))

    def mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        return self._recorded("mkdir", self._handled(path, dir_fd, follow=False),
                              lambda: super(RecordingView, self).mkdir(path, mode, dir_fd=dir_fd))

    def remove(self, path: Any, *, dir_fd: int | None = None) -> None:
        return self._recorded("remove", self._handled(path, dir_fd, follow=False),
                              lambda: super(RecordingView, self).remove(path, dir_fd=dir_fd))

    def rmdir(self, path: Any, *, dir_fd: int | None = None) -> None:
        return self._recorded("rmdir", self._handled(path, dir_fd, follow=False),
                              lambda: super(RecordingView, self).rmdir(path, dir_fd=dir_fd))

    def rename(self, src: Any, dst: Any, *, replace: bool = True, src_dir_fd: int | None = None,
               dst_dir_fd: int | None = None) -> None:
        vsrc = self._handled(src, src_dir_fd, follow=False)
        vdst = self._handled(dst, dst_dir_fd, follow=False)
        if vsrc is None and vdst is not None:
            vsrc = os.fsdecode(os.fspath(src))
        return self._recorded(
            "rename", vsrc,
            lambda: super(RecordingView, self).rename(src, dst, replace=replace,
                                                      src_dir_fd=src_dir_fd,
                                                      dst_dir_fd=dst_dir_fd),
            dst=vdst if vdst is not None else (None if vsrc is None else os.fsdecode(os.fspath(dst))))


def _size(r: Resolved) -> int | None:
    """The bytes the writer left, where it wrote them (before a fault rewrites them)."""
    for location in (r.staging, r.upper):
        if location:
            try:
                return machine.stat(location).st_size
            except OSError:
                continue
    return None
