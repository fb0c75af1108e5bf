"""What each mount's consistency model makes of a write: one object per mode.

A writer on a non-local mount writes a private staging file; the model decides
when the others see it. The view asks the mount's model at every point where
that can change (close, fsync, rename, a rank's restart), whether or not a
fault is planned: the fault engine only decides what the bytes are (a torn or
lost write) before the model publishes them.

- ``local``: coherent POSIX, no staging; bytes are visible as they are written.
- ``close-to-open`` (NFS): a host's writes are visible to others once closed.
- ``delayed``: visible to the writer's host at once, to others ``delay_ms``
  after close (the coordinator publishes the copy then).
- ``object`` (gcsfuse): each rank stages a whole object, uploaded on close or
  fsync; a directory is renamed object by object; an object a rank had not
  closed when it died was never uploaded.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.filesystem import machine
from harness.filesystem.mounts import Mount, MountTable, staging_root

if TYPE_CHECKING:
    from harness.filesystem.resolution import Resolved
    from harness.filesystem.view import View

Notify = Callable[[dict[str, Any]], None]


class Local:
    """Coherent POSIX: writes land in place; nothing to publish."""

    name = "local"
    writer: str | None = None  # whose staging area a write goes to: None, "host" or "rank"

    def staging(self, sandbox: str, mount: Mount, key: str, rank: int, host: int,
                rel: str) -> str | None:
        """The private file a writer of ``rel`` writes before others may see it."""
        if self.writer is None:
            return None
        who = f"rank-{rank}" if self.writer == "rank" else f"host-{host}"
        return os.path.join(staging_root(sandbox, mount, key), who, rel)

    def shows_staged(self, r: Resolved) -> bool:
        """Whether a reader on the writer's side reads the staged file, not the published one."""
        return machine.is_plain(r.staging)

    def closed(self, view: View, r: Resolved) -> None:
        """A writer closed ``r``: what it staged (if the fault hooks left it) becomes visible."""
        if r.staging and machine.exists(r.staging):
            machine.publish(r.staging, r.upper)

    def synced(self, view: View, r: Resolved) -> None:
        """A writer fsynced ``r``: POSIX makes it durable, not more visible."""

    def rename(self, view: View, rs: Resolved, rd: Resolved, source: str, is_dir: bool) -> None:
        """A rename is a directory operation: visible at once, in one step."""
        view.move_into_place(rs, rd, source, is_dir)

    def restarted(self, sandbox: str, mount: Mount, rank: int, host: int) -> None:
        """``rank`` died and comes back: what it had staged and not closed."""


class CloseToOpen(Local):
    """NFS: a host's writes reach others when the file is closed."""

    name = "close-to-open"
    writer = "host"


class Delayed(CloseToOpen):
    """Visible to the writer's host at once, to the others ``delay_ms`` after close."""

    name = "delayed"

    def shows_staged(self, r: Resolved) -> bool:
        # The writer's host keeps its staging copy after close; once a write at
        # least as new is published (its own, or another host's), it sees that.
        if not machine.is_plain(r.staging):
            return False
        try:
            return machine.stat(r.upper).st_mtime_ns < machine.stat(r.staging).st_mtime_ns
        except OSError:
            return True

    def closed(self, view: View, r: Resolved) -> None:
        if r.staging and machine.exists(r.staging):
            view.notify({"type": "hold", "src": r.staging, "dst": r.upper, "path": r.vpath,
                         "until": "time", "delay_ms": r.mount.delay_ms, "writer": view.rank,
                         "copy": True})


class Object(Local):
    """gcsfuse: whole objects, one staging area per rank, uploaded on close or fsync."""

    name = "object"
    writer = "rank"

    def synced(self, view: View, r: Resolved) -> None:
        # The whole object is uploaded as it is now (unless a fault decides its bytes at close).
        if r.staging and machine.exists(r.staging) and not r.content_faults:
            machine.makedirs(os.path.dirname(r.upper), exist_ok=True)
            tmp = r.upper + f".harness-upload-{view.rank}"
            machine.write_bytes(tmp, machine.read_bytes(r.staging))
            machine.copy_stamp(r.staging, tmp)
            machine.replace(tmp, r.upper)

    def rename(self, view: View, rs: Resolved, rd: Resolved, source: str, is_dir: bool) -> None:
        if not is_dir:
            view.move_into_place(rs, rd, source, is_dir)
            return
        # A directory is renamed object by object: others can see it half moved.
        for root, _dirs, files in os.walk(source):
            for name in sorted(files):
                rel = os.path.relpath(os.path.join(root, name), source)
                child_s = view.resolve(os.path.join(rs.vpath, rel))
                view.hooks.before(view, "rename", child_s)
                child_d = view.resolve(os.path.join(rd.vpath, rel))
                view.move_into_place(child_s, child_d, os.path.join(root, name), False)
        view.remove_tree_if_empty(rs)

    def restarted(self, sandbox: str, mount: Mount, rank: int, host: int) -> None:
        # An object the rank had not closed was never uploaded: it is gone.
        key = mount.scope_key(rank, host)
        shutil.rmtree(os.path.join(staging_root(sandbox, mount, key), f"rank-{rank}"),
                      ignore_errors=True)


MODELS: dict[str, Local] = {m.name: m for m in (Local(), CloseToOpen(), Delayed(), Object())}


def model_of(mount: Mount) -> Local:
    return MODELS[mount.consistency]


def rank_restarted(sandbox: str, table: MountTable | None, rank: int, host: int) -> None:
    """Tell every mount's model that ``rank`` died and comes back (its unclosed writes)."""
    if table is None:
        return
    for mount in table.mounts:
        model_of(mount).restarted(sandbox, mount, rank, host)
