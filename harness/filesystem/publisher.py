"""The coordinator's half of visibility: writes that others see later.

A rank that closes a file whose visibility is held (a ``delayed`` mount, a
``hold-write`` or ``empty-window`` fault) leaves it in a private staging file
and asks the coordinator to publish it. The coordinator knows what no single
rank does (who has looked for the path, who has exited, what time it is) and
so can force the unlucky interleaving every time: publish only once every
other rank has tried its read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.filesystem.beneath import Beneath


@dataclass
class Held:
    src: str
    dst: str
    path: str  # the virtual path, for the history
    writer: int
    until: str  # read | done | time
    at: float | None = None  # for "time": when, on the coordinator's clock
    copy: bool = False  # publish a copy and leave the writer's host its staging file
    seen: set[int] = field(default_factory=set)
    #: why it could not be published ("" when it was): its paths were changed behind the view
    error: str = ""
    #: nothing was left to publish: its writer had renamed or removed it (the hold hid nothing)
    gone: bool = False


class Publisher:
    def __init__(self, world_size: int, sandbox: str = "/") -> None:
        """``sandbox``: where every held write and its publication must lie (a rank names
        them: ``harness.filesystem.beneath``)."""
        self.world_size = world_size
        self.held: list[Held] = []
        self.exited: set[int] = set()
        self.beneath = Beneath(sandbox)

    def hold(self, rank: int, message: dict, now: float) -> None:
        """Hold a write until its condition holds; ``Outside`` if either of its paths is not
        the sandbox's."""
        self.beneath.relative(message["src"])
        self.beneath.relative(message["dst"])
        at = now + message.get("delay_ms", 0) / 1000 if message["until"] == "time" else None
        self.held.append(Held(message["src"], message["dst"], message["path"], rank,
                              message["until"], at, bool(message.get("copy"))))

    def moved(self, rank: int, path: str, to: str, dst: str) -> bool:
        """``rank`` renamed its held write of ``path`` to ``to`` (``dst`` on the disk): it is
        published there, once the readers of ``to`` have looked. False: no such hold."""
        self.beneath.relative(dst)
        for h in self.held:
            if h.writer == rank and h.path == path:
                h.path, h.dst, h.seen = to, dst, set()
                return True
        return False

    def accessed(self, rank: int, path: str) -> None:
        for h in self.held:
            if h.path == path and rank != h.writer:
                h.seen.add(rank)

    def rank_exited(self, rank: int) -> None:
        self.exited.add(rank)

    def next_time(self) -> float | None:
        times = [h.at for h in self.held if h.at is not None]
        return min(times) if times else None

    def due(self, now: float) -> list[Held]:
        """Publish every held write whose condition now holds; return them."""
        others = set(range(self.world_size))
        ready = []
        for h in self.held:
            waiting_for = others - {h.writer} - self.exited
            if h.until == "time":
                ok = h.at is not None and now >= h.at
            elif h.until == "read":
                ok = waiting_for <= h.seen
            else:  # done: every other rank has finished
                ok = not waiting_for
            if ok:
                ready.append(h)
        for h in ready:
            self.held.remove(h)
            try:
                self._publish(h)
            except OSError as exc:
                h.error = f"{exc.strerror or exc} ({exc.filename or h.src})"
        return ready

    def _publish(self, h: Held) -> None:
        beneath = self.beneath
        if not beneath.exists(h.src):
            h.gone = True
            return
        if h.copy:
            beneath.copy(h.src, h.dst)
        else:
            beneath.replace(h.src, h.dst)

    def close(self) -> None:
        self.beneath.close()
