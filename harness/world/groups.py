"""torch.distributed's process groups as the world runs them: gloo's semantics, the
world's clock.

A process group's collectives are a sequence of their own, apart from the XLA
runtime's (``coordinator.py``) and from every other group's: the k-th call of each
member on a group forms that group's step k, complete when every member has arrived.
Its creation (``CONNECTS``: gloo's constructor connecting every pair of members through
the store) is step 0, whatever each member's calls before: a group created again (after
``destroy_process_group``, or by a member's new life) starts afresh.

What a peer sees when a member's process is gone is what gloo's TCP pairs make of
it: every member still waiting in a step of a group the gone process had joined,
and every later call on that group, fails at once ("Connection closed by peer").
A member that is alive but never calls leaves the others waiting until their
group's timeout (``Collective.timeout_ms``; the coordinator expires the wait).

Pure state: the coordinator records, replies and keeps the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.world.protocol import Collective

CONNECTS = frozenset({"init_process_group", "new_group"})  # a group's creation, its step 0


@dataclass
class Arrival:
    """What ``ProcessGroups.arrive`` decided for one call."""

    seq: int
    #: complete: every member's call, by rank; closed: the member whose exit closed the
    #: group for this caller; neither: the caller waits
    complete: dict[int, Collective] | None = None
    closed: int | None = None


@dataclass
class _Group:
    joined: set[int] = field(default_factory=set)  # members whose processes hold its pairs
    closed: set[int] = field(default_factory=set)  # joined members whose processes are gone


class ProcessGroups:
    """Every process group of a world, by its key (the shim's name for it)."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}
        self._seq: dict[tuple[int, str], int] = {}  # (rank, group) -> its next step
        self._steps: dict[tuple[str, int], dict[int, Collective]] = {}  # -> arrivals by rank

    def arrive(self, rank: int, call: Collective) -> Arrival:
        key = call.group
        assert key is not None and call.groups, "a process group's call names its members"
        members = call.groups[0]
        group = self._groups.setdefault(key, _Group())
        connect = call.op in CONNECTS
        seq = 0 if connect else self._seq.get((rank, key), 1)
        if not connect:
            self._seq[(rank, key)] = seq + 1
            if any(m in group.closed and m != rank for m in members):
                return Arrival(seq, closed=self.closed_by(key, members, rank))
        arrivals = self._steps.setdefault((key, seq), {})
        arrivals[rank] = call
        if not set(members) <= arrivals.keys():
            return Arrival(seq)
        del self._steps[(key, seq)]
        if connect:  # a new group: every member holds its pairs, and calls step 1 next
            group.joined, group.closed = set(members), set()
            for m in members:
                self._seq[(m, key)] = 1
        return Arrival(seq, complete=arrivals)

    def gone(self, rank: int) -> list[tuple[int, Collective, int]]:
        """``rank``'s process is gone: the groups it had joined close for the others.
        Returns (waiting rank, its call, step) for each member then waiting in one."""
        failed = []
        for key, group in self._groups.items():
            if rank not in group.joined:
                continue
            group.joined.discard(rank)
            group.closed.add(rank)
            for (k, seq), arrivals in list(self._steps.items()):
                if k == key and seq > 0:  # a group's creation waits on: it never had the pair
                    del self._steps[(k, seq)]
                    failed.extend((r, arrivals[r], seq) for r in sorted(arrivals) if r != rank)
        return failed

    def closed_by(self, key: str, members: list[int], rank: int, gone: int | None = None) -> int:
        """The member whose exit closed group ``key`` for ``rank``: the lowest gone (with
        ``gone``, one known gone though the group was created again since)."""
        closed = self._groups[key].closed
        return min([m for m in members if m in closed and m != rank] + ([gone] if gone is not None else []))

    def withdraw(self, rank: int) -> None:
        """``rank`` no longer waits in its open step (its wait timed out)."""
        for key_seq, arrivals in list(self._steps.items()):
            if arrivals.pop(rank, None) is not None and not arrivals:
                del self._steps[key_seq]

    def forget(self, rank: int) -> None:
        """A new life of ``rank``: it holds no group until it creates one again."""
        self.withdraw(rank)
        for rank_key in [k for k in self._seq if k[0] == rank]:
            del self._seq[rank_key]

    def waiting_in(self, rank: int) -> tuple[str, int] | None:
        """The group and step ``rank`` waits in, if any."""
        for key_seq, arrivals in self._steps.items():
            if rank in arrivals:
                return key_seq
        return None

    def missing(self, key: str, seq: int) -> list[int]:
        """The members an open step still waits for."""
        arrivals = self._steps.get((key, seq), {})
        call = next(iter(arrivals.values()), None)
        if call is None or not call.groups:
            return []
        return sorted(m for m in call.groups[0] if m not in arrivals)
