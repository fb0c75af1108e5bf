"""slow-write: the writer takes longer than any polling window.

Defined by what readers observe, whatever way the writer writes: the file's
name shows nothing new until the writer's slowness is over. The writer stops
before the first operation that would make the file's name show new bytes (its
create or truncate, a rename or link onto it, a symlink at it), so a direct
write, write + fsync, staging + ``os.replace``, ``O_TMPFILE`` + link,
``shutil.copy``/``move``, ``torch.save`` and ``np.save`` all meet it alike. It
goes on once every other rank has finished or waits on another rank (a
collective, a message, a lock, a read of a pipe: anything but the clock), and
no sooner than ``at_least_ms``: a reader that polls with a deadline gives up
first, whatever its deadline; one that waits for the writer (a rendezvous after
the write) gets the file; one that polls with no deadline polls until the
world's deadline (a writer slower than any window is, to a poller, a dead one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from harness.faults.kinds._base import FaultKind, Millis

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.faults.engine import FaultEngine
    from harness.faults.plan import Fault
    from harness.filesystem.resolution import Resolved
    from harness.history import Event

#: Operations after which a path names new bytes; a rename's and a link's new name.
_NAMING = ("open-write", "truncate", "symlink")
_RENAMING = ("rename", "link")


class SlowWrite(FaultKind):
    """The writer stops before a matching file's name shows new bytes until every other
    rank has finished or waits on another rank, and at least ``at_least_ms`` (default a
    minute of world time; 0..86,400,000)."""

    kind: Literal["slow-write"] = "slow-write"
    at_least_ms: Millis = 60_000

    ops = _NAMING + _RENAMING
    needs_sandbox = True
    needs_coordinator = True
    holds_for_others = True

    def off_pod(self) -> str | None:
        return ("it holds the writer until every other rank waits on another, which only the "
                "simulator's world clock sees")

    def occurs(self, count: int) -> bool:
        return count == 1  # one slow handoff per life: the first write that would show

    def before(self, engine: FaultEngine, fault: Fault, op: str, r: Resolved,
               r2: Resolved | None = None) -> None:
        named = r2 if op in _RENAMING and r2 is not None else r
        if op not in self.ops or not engine.fires(fault, op, named.vpath):
            return
        where = named.mount.scope_key(engine.rank, engine.host)
        doing = {"op": op, "path": r.vpath, "where": where}
        if r2 is not None:
            doing["dst"] = r2.vpath
        engine.report(fault, op, named.vpath,
                      message=f"rank {engine.rank} is slow at {op} of {named.vpath}: it goes on "
                              f"once every other rank has finished or waits on another, and no "
                              f"sooner than {self.at_least_ms / 1000:g} s from now")
        engine.wait_for_others(doing, self.at_least_ms)

    def without_effect(self, fired: Event, history: Sequence[Event],
                       world_size: int) -> str | None:
        ended = {e.rank for e in history if e.kind == "exit" and e.t <= fired.t}
        if set(range(world_size)) - {fired.rank} <= ended:
            return (f"every other rank had finished before rank {fired.rank} began its slow "
                    f"write: no one could see it late")
        return None
