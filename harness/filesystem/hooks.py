"""What the view asks at each point a fault could strike: the hooks protocol.

``NoHooks`` is the plain answer (nothing goes wrong); the fault engine
overrides the points its faults use. Visibility is not a hook: the mount's
consistency model decides it, with or without faults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.filesystem.files import ViewFile
    from harness.filesystem.resolution import Resolved
    from harness.filesystem.view import View


class NoHooks:
    """No faults: what a plain view does at each point."""

    def before(self, view: View, op: str, r: Resolved, r2: Resolved | None = None) -> None:
        """Before ``op`` on ``r`` (and ``r2`` for a rename): may raise, delay or kill."""

    def prepare_write(self, view: View, r: Resolved, whole: bool = False) -> Resolved:
        """At a writer's open: may set ``content_faults`` and a private staging file.
        ``whole``: the file shows up whole, in one step (a linked ``O_TMPFILE``)."""
        return r

    def after_open(self, view: View, r: Resolved, writing: bool) -> None:
        pass

    def looked(self, view: View, op: str, r: Resolved) -> None:
        """After a reader's open, stat or listdir has returned or raised."""

    def write(self, view: View, r: Resolved, f: ViewFile, data: memoryview) -> memoryview:
        return data

    def after_close(self, view: View, r: Resolved, writing: bool = True) -> bool:
        """A file was closed: may rewrite the staged bytes of a write. True when the
        hooks withheld them (lost, or held by the coordinator): the mount's model
        then publishes nothing."""
        return False

    def after_change(self, view: View, r: Resolved) -> None:
        pass

    def rename_withheld(self, view: View, rs: Resolved, rd: Resolved) -> bool:
        """A rename of a write the hooks withheld: True when they take it (the view then
        moves nothing): a held write's hold follows it to its new name, a lost write's
        rename is lost with it."""
        return False

    def own_copy(self, vpath: str) -> str | None:
        """The real file of this rank's own write that the hooks keep from the others
        (a held write): its writer reads it back, as on a real filesystem."""
        return None

    def adjust_stat(self, view: View, r: Resolved, st: Any) -> Any:
        return st

    def access(self, view: View, r: Resolved, mode: int, allowed: bool) -> bool:
        return allowed


#: ``turn(op, path, dst, where)``: waits the world's turn for ``op`` on ``path`` (``dst``:
#: a rename's; ``where``: whose file it is, the mount's scope key: ``shared``,
#: ``host-N``), then tells the world what it does.
Turn = Callable[[str, str, "str | None", str], None]


class Turning:
    """Hooks whose every point where another unit could see the operation first waits
    the world's turn (``RankClock.turn``): units at one instant of world time act in the
    seed's order, so that a write and a read of one file at one instant are ordered the
    same way in every run. The rest is ``hooks``'s own."""

    def __init__(self, hooks: Any, turn: Turn) -> None:
        self._hooks = hooks
        self._turn = turn

    def _take(self, view: View, op: str, r: Resolved, r2: Resolved | None = None) -> None:
        """The turn, where another rank could see the operation: never on a read-only
        mount (its files change for nobody), a rank's own one (nobody else sees it), or
        a look at the code every host has (``mounts.Code``)."""
        if r2 is None and view.code.looked_at(op, r.vpath):
            return
        if any(x.mount.mode != "ro" and x.mount.scope != "rank" for x in (r, r2) if x):
            self._turn(op, r.vpath, None if r2 is None else r2.vpath,
                       r.mount.scope_key(view.rank, view.host))

    def before(self, view: View, op: str, r: Resolved, r2: Resolved | None = None) -> None:
        self._take(view, op, r, r2)
        self._hooks.before(view, op, r, r2)

    def write(self, view: View, r: Resolved, f: ViewFile, data: memoryview) -> memoryview:
        self._take(view, "write", r)
        return self._hooks.write(view, r, f, data)

    def after_close(self, view: View, r: Resolved, writing: bool = True) -> bool:
        if writing:  # what was written may become visible now
            self._take(view, "close", r)
        return self._hooks.after_close(view, r, writing)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hooks, name)
