"""Pre-emption notices: a host's soft off, its grace and its hard stop.

A notice (``preempt`` with ``notice: sigterm``) sends SIGTERM to every process of
a host at one world instant; ``grace`` world seconds later, whatever of the host
still runs is SIGKILLed, as a VM's hard stop. The host comes back once every
process of it is gone: its ranks start again together, on the same disk. Pure
state, as the coordinator is: the signals, the kills and the clock are the
caller's (``lifecycle.py``, ``server.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Notice:
    """One host's pre-emption, from its notice to its restart."""

    host: int
    at: int  # world ns: when the notice came
    end: int  # world ns: the hard stop
    grace_s: float
    lives: dict[int, int]  # rank -> the life the notice came in
    gone: set[int] = field(default_factory=set)  # those ranks whose process has ended
    stopped: bool = False  # the hard stop came (what was left of the host was SIGKILLed)

    @property
    def down(self) -> bool:
        """Is every process of the host gone (so the host may come back)?"""
        return self.gone >= self.lives.keys()


class Notices:
    """The notices given in a world, one at a time per host."""

    def __init__(self) -> None:
        self.hosts: dict[int, Notice] = {}

    def give(self, host: int, lives: dict[int, int], at: int, grace_s: float) -> Notice | None:
        """A notice for ``host``, whose live ranks are ``lives``; None if the host is under
        one already (a second notice to a host shutting down changes nothing)."""
        if host in self.hosts:
            return None
        notice = Notice(host, at, at + round(grace_s * 1e9), grace_s, dict(lives))
        self.hosts[host] = notice
        return notice

    def of(self, rank: int, life: int) -> Notice | None:
        """The notice this life of ``rank`` is under, if any."""
        return next((n for n in self.hosts.values() if n.lives.get(rank) == life), None)

    def next_end(self) -> int | None:
        """The earliest hard stop still to come (a wake of the world's clock)."""
        return min((n.end for n in self.hosts.values() if not n.stopped and not n.down),
                   default=None)

    def ending(self, now: int) -> list[Notice]:
        """The notices whose grace is over at ``now`` and whose host still runs, in the
        order their graces end (then by host: never the order they were given in); each
        one's ranks still alive are the caller's to SIGKILL (marked ``stopped`` now)."""
        due = sorted((n for n in self.hosts.values()
                      if n.end <= now and not n.stopped and not n.down),
                     key=lambda n: (n.end, n.host))
        for notice in due:
            notice.stopped = True
        return due

    def left(self, rank: int, life: int) -> list[int] | None:
        """This life of ``rank`` ended. None: no notice covers it. Else the ranks to start
        again now: none while the host has a process left, all of its ranks once the last
        is gone (the notice is then over)."""
        notice = self.of(rank, life)
        if notice is None:
            return None
        notice.gone.add(rank)
        if not notice.down:
            return []
        del self.hosts[notice.host]
        return sorted(notice.lives)
