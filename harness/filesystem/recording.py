"""The view that also tells the coordinator every file operation the target
makes (``record_files``): what a fault-free discovery world learns roles from.

Only the paths the view handles are told (sandboxed virtual paths), never the
harness's own files or a passthrough path. Attempts count as much as
successes: a polling reader's failed opens are what shows it is a reader. A
rank tells at most ``LIMIT`` operations (then one more message, which the
coordinator records as a warning that the rest were dropped), and a stat or
listdir repeated on the same path with the same outcome is told once, then
once more with ``count`` when the run of repeats ends.

What changes the disk is told in full, for the crash-state explorer
(``harness.explore.crash``): each write of a file the view opened (its offset
and size, as ``write(2)`` got them from the buffered layer), each fsync (of a
file or of a directory's fd), whether a writer's open truncated or created the
file, and, for each of these, the target's source line that made it: the
innermost frame that is neither the harness's machinery nor the standard
library nor an installed package other than the target's own
(``user_line``). Only this view does it: a plain world's view tells nothing.
"""

from __future__ import annotations

import errno as errno_
import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from harness import refs
from harness.filesystem import machine
from harness.filesystem.files import ViewFile
from harness.filesystem.resolution import Resolved
from harness.filesystem.view import View
from harness.frames import own_frame

#: at most this many file events per rank per world
LIMIT = 10_000  # as the server's FILE_EVENTS_LIMIT
_COLLAPSED = ("stat", "listdir")
#: The operations told with the target's source line (what changes the disk).
_WITH_LINE = frozenset({"open-write", "write", "fsync", "close", "rename", "remove", "mkdir",
                        "rmdir"})


class RecordingFile(ViewFile):
    """A view's raw file that also tells each write: where it starts and how many
    bytes reached the file (what a crash in the middle of it can tear)."""

    def write(self, b: Any) -> int:
        view = self._view
        if not isinstance(view, RecordingView):
            return super().write(b)
        try:
            offset: int | None = self.tell()
        except OSError:
            offset = None
        return view._recorded("write", self._resolved.vpath, lambda: ViewFile.write(self, b),
                              offset=offset, size=_length(b), _size_of_result=True)


class RecordingView(View):
    """A ``View`` that reports each operation as a ``file-op`` message."""

    file_class = RecordingFile

    def __init__(self, *args: Any, target: str | None = None, **kwargs: Any) -> None:
        """``target``: the world's ``module:function`` or ``file.py:function``, whose own
        frames name the line that made each operation."""
        super().__init__(*args, **kwargs)
        self._lines = LineFinder(target)
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
        try:
            self.notify(message)
        except OSError:
            # a file opened before a fork (pytest's capture file, in the launcher) written
            # from the rank: its view's channel is the launcher's, closed in the rank. What
            # it tells is a diagnosis aid, never the rank's fate: it tells nothing more.
            self._told = LIMIT + 1

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
        if vpath is None or getattr(inside, "depth", 0) or self.code.looked_at(op, vpath):
            return call()
        if op in _WITH_LINE:
            inside.depth = 1  # finding the line stats the code's files: not the target's doing
            try:
                extra["line"] = self._lines.find(sys._getframe(1))
            finally:
                inside.depth = 0
        sized = extra.pop("_size_of_result", False)
        inside.depth = 1
        try:
            result = call()
        except OSError as exc:
            inside.depth = 0
            self._tell(op, vpath, exc, **extra)
            raise
        finally:
            inside.depth = 0
        if sized and isinstance(result, int):
            extra["size"] = result  # the bytes write(2) took, not the bytes offered
        self._tell(op, vpath, None, **extra)
        return result

    # -- the operations ------------------------------------------------------------
    def _open_fd(self, r: Resolved, flags: int, mode: int) -> int:
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))
        if not writing:
            return self._recorded("open-read", r.vpath,
                                  lambda: super(RecordingView, self)._open_fd(r, flags, mode))
        try:
            new = self._read_location(r) is None
        except OSError:
            new = None
        return self._recorded("open-write", r.vpath,
                              lambda: super(RecordingView, self)._open_fd(r, flags, mode),
                              trunc=bool(flags & os.O_TRUNC), new=new,
                              **({"append": True} if flags & os.O_APPEND else {}))

    def fsync(self, fd: Any) -> None:
        try:
            fileno = fd if isinstance(fd, int) else fd.fileno()
        except (AttributeError, ValueError, OSError):
            return super().fsync(fd)  # the machine's own error, told by nobody
        r = self.fds.get(fileno)
        if r is None:
            return super().fsync(fd)
        location = self._read_location(r)
        is_dir = bool(location) and machine.leads_to_dir(location)
        return self._recorded("fsync", r.vpath, lambda: super(RecordingView, self).fsync(fd),
                              dir=is_dir)

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

    def link(self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
             dst_dir_fd: int | None = None, follow_symlinks: bool = True) -> None:
        vdst = self._handled(dst, dst_dir_fd, follow=False)
        vsrc = os.fsdecode(os.fspath(src))  # a nameless file's /proc/self/fd/N as it is
        return self._recorded(
            "link", vsrc if vdst is not None else None,
            lambda: super(RecordingView, self).link(src, dst, src_dir_fd=src_dir_fd,
                                                    dst_dir_fd=dst_dir_fd,
                                                    follow_symlinks=follow_symlinks),
            dst=vdst)


def _length(b: Any) -> int | None:
    try:
        return memoryview(b).nbytes
    except TypeError:
        return None


class LineFinder:
    """``file:line in function`` of the target's own code that made an operation.

    The innermost frame that is not the harness's machinery (as the reports hide it:
    ``harness.frames.own_frame``, which counts the reference targets as
    code under test), not the standard library and not an installed package, except
    the target's own module when it is installed. Decided once per code file."""

    def __init__(self, target: str | None) -> None:
        paths = sysconfig.get_paths()
        self._library = tuple(os.path.realpath(paths[k]) + os.sep
                              for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)
        module = refs.module_of(target) or ""
        self._own_file = os.path.realpath(module) if refs.is_file(module) else None
        self._own_package = None if self._own_file or not module else module.split(".")[0]
        self._verdicts: dict[str, bool] = {}

    def users(self, frame: FrameType) -> bool:
        filename = frame.f_code.co_filename
        verdict = self._verdicts.get(filename)
        if verdict is None:
            verdict = self._decide(filename, frame)
            self._verdicts[filename] = verdict
        return verdict

    def _decide(self, filename: str, frame: FrameType) -> bool:
        if filename.startswith("<"):
            return False  # frozen importlib, exec'd strings
        real = os.path.realpath(filename)
        if self._own_file is not None and real == self._own_file:
            return True
        if own_frame(real) or "/torch_xla/" in real or "/_shims/" in real:
            return False
        if real.startswith(self._library):
            name = str(frame.f_globals.get("__name__", ""))
            return bool(self._own_package) and name.split(".")[0] == self._own_package
        return True

    def find(self, frame: FrameType | None) -> str | None:
        while frame is not None:
            if self.users(frame):
                return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} " \
                       f"in {frame.f_code.co_name}"
            frame = frame.f_back
        return None


def _size(r: Resolved) -> int | None:
    """The bytes the writer left, where it wrote them (before a fault rewrites them)."""
    for location in (r.staging, r.upper):
        if location:
            try:
                return machine.stat(location).st_size
            except OSError:
                continue
    return None
