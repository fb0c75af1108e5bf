"""A rank's view of the filesystem: virtual paths in, sandbox paths out.

Every file operation the target makes through Python passes through one
``View``: it resolves the virtual path against the mount table, applies the
mount's mode and base (fresh or copy-on-write overlay), asks the fault hooks
whether something goes wrong here, and routes writes on non-local mounts
through a staging file that the mount's consistency model publishes. Errors
carry the virtual path, never the sandbox's.

The view is a facade over its halves, one job each: ``resolution`` (virtual
path to real layers), ``files`` (open, the file object, fsync, close),
``directories``, ``names`` (rename, link, symlink) and ``metadata``. The view,
not the kernel, follows the symlinks a target makes and resolves ``*at()``
calls against the directories it opened itself, and against any descriptor it did
not open by the name the kernel gives its file (``Resolution.foreign``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.filesystem.directories import Directories
from harness.filesystem.files import Files, ViewFile
from harness.filesystem.hooks import NoHooks, Turn, Turning
from harness.filesystem.machine import oserror
from harness.filesystem.metadata import Metadata
from harness.filesystem.mounts import Code, MountTable
from harness.filesystem.names import Names
from harness.filesystem.resolution import Resolved

__all__ = ["NoHooks", "Resolved", "View", "ViewFile", "oserror"]

Notify = Callable[[dict[str, Any]], None]


def _nobody(message: dict[str, Any]) -> None:
    """A view outside a world: no coordinator to publish a delayed write later."""
    raise RuntimeError(f"no coordinator to tell: {message.get('type')}")


class View(Files, Directories, Names, Metadata):
    """The filesystem as one rank sees it."""

    def __init__(self, table: MountTable, sandbox: str, rank: int, host: int, cwd: str,
                 home: str, hooks: Any = None, private: tuple[str, ...] = (),
                 notify: Notify = _nobody, world_ns: Callable[[], int] | None = None,
                 drawn: tuple[str, ...] = (), turn: Turn | None = None,
                 code: tuple[str, ...] = ()) -> None:
        """``drawn``: the directories whose overlay the kernel draws in this rank's host
        namespace (kernel isolation): the view reads and writes them as they are there.
        ``turn``: waits the world's turn before an operation another rank could see
        (``hooks.Turning``); None: the operations run as they come (a pod's view).
        ``code``: the directories of the code every host has (``mounts.Code``: looks at
        them are not the world's)."""
        self.table = table
        self.code = Code.of(code)
        self._drawn = drawn
        self.sandbox = sandbox
        # The harness's own files (the sandbox's backing store, rank output)
        # are reached by real path, through the same patched functions.
        self._private = tuple(p.rstrip("/") for p in (sandbox, *private))
        self._paths_resolved = {}
        self.rank, self.host = rank, host
        self.home = home
        self._cwd = cwd
        self.hooks = hooks or NoHooks()
        if turn is not None:
            self.hooks = Turning(self.hooks, turn)
        self.notify = notify  # to the coordinator: a delayed mount's write, published later
        #: the world's ``time.time_ns`` (None: the machine's): a file written through the view
        #: shows the world's time of its last write as its mtime (``machine.stamp``)
        self.world_ns = world_ns
        self.fds: dict[int, Resolved] = {}  # every fd the view opened, directories included
        self.writing_fds: set[int] = set()
        #: ``O_TMPFILE`` files, nameless until linked: fd -> the directory's path
        self.unnamed: dict[int, str] = {}
