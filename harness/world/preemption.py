"""The XLA runtime's pre-emption sync point, as the world keeps it.

torch_xla's ``CheckpointManager`` asks the XLA coordinator's preemption sync manager
(tsl's ``PreemptionSyncManager``) at every step whether this is the step to save at
(``_sync_point_reached(step)``). Each process's manager catches SIGTERM in C++; when
one process of the job gets it, every process sends the service the last step it
asked about, and once all have, the sync point is the largest of them plus one. A
process is at the sync point when it asks with exactly that step: every process
agrees on one step, whichever host got the notice. A process that never activated
its manager never joins that exchange, and then no sync point is ever set (the real
barrier times out).

The world sets the sync point at the instant it gives the notice (the processes'
exchange, which in the real runtime holds each ``_sync_point_reached`` until it is
done, takes no world time). Pure state: the coordinator records and replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PreemptionSync:
    """Every process's last step asked about, and the sync point once a notice came."""

    world_size: int
    active: set[int] = field(default_factory=set)  # ranks whose manager catches SIGTERM
    counters: dict[int, int] = field(default_factory=dict)
    sync_point: int | None = None
    #: why a notice set no sync point (the ranks that never activated), once one came
    failed: str | None = None

    def activate(self, rank: int) -> None:
        self.active.add(rank)

    def deactivate(self, rank: int) -> None:
        self.active.discard(rank)

    def reached(self, rank: int, step: int) -> bool:
        self.counters[rank] = step
        return self.sync_point is not None and step == self.sync_point

    def notice(self, ranks: list[int]) -> int | str | None:
        """``ranks`` got SIGTERM: if one's manager caught it, the sync point is set (once).
        Returns it when this notice set it, or why it could not (the first time)."""
        if self.sync_point is not None or self.failed is not None \
                or not any(r in self.active for r in ranks):
            return None
        missing = sorted(set(range(self.world_size)) - self.active)
        if missing:
            self.failed = (f"no pre-emption sync point: processes {missing} never activated "
                           f"their preemption sync manager, so the exchange of steps never "
                           f"completes (the real barrier times out)")
            return self.failed
        self.sync_point = max(self.counters.get(r, 0) for r in range(self.world_size)) + 1
        return self.sync_point

    def forget(self, rank: int) -> None:
        """A new life of ``rank``: its manager is not active until it activates it again."""
        self.active.discard(rank)
        self.counters.pop(rank, None)
