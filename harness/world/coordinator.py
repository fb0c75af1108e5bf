"""The coordinator: the other end of the shim's collectives.

It matches calls the way the real runtime does, by position, not by tag: the
k-th collective of every rank forms step k. When every rank has arrived it
computes the result and answers them all. It never times out: like a real
``rendezvous``, a step that a rank never reaches stays open until the
watchdog ends the world. Along the way it records the history and names the
mismatches a real pod would turn into a hang or a silent pairing.

Pure state: sockets and time are the caller's business (see ``world.py``): the
times it records are read from ``now``, the world's clock in a simulated world
(``world/clock.py``), the machine's on a pod.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.history import Event, History, ranks_phrase
from harness.world.groups import ProcessGroups
from harness.world.preemption import PreemptionSync
from harness.world.protocol import Collective, Recv, Send, StoreOp, SyncPoint
from harness.world.reductions import ReductionError, reduce_buffers
from harness.world.stores import StoreError, Stores

Reply = tuple[int, dict, bytes | bytearray]


def answer(rank: int, call: object, header: dict, payload: bytes | bytearray = b"") -> Reply:
    """The reply to ``call`` (a request of ``rank``'s): with its number, which a rank whose
    threads ask at once reads its replies by (``Channel``)."""
    req = getattr(call, "req", None)
    return (rank, header if req is None else {**header, "req": req}, payload)


def answering(replies: list[Reply], calls: dict[int, object]) -> list[Reply]:
    """Replies to a step's calls (``calls``: by rank), each with its request's number."""
    return [answer(r, calls[r], h, p) if r in calls else (r, h, p) for r, h, p in replies]


@dataclass
class Waiting:
    """A rank blocked in the coordinator."""

    rank: int
    op: str
    tag: str | None
    step: int | None
    site: str | None
    since: float
    until: float | None = None  # the wait's limit (world s): a process group's or store's timeout
    limit_ms: int | None = None  # the same, as the rank asked for it
    req: int | None = None  # the waiting request's number (its reply carries it)

    def describe(self) -> str:
        return f"{self.op} {self.tag!r}" if self.tag else self.op


@dataclass
class _Step:
    arrivals: dict[int, Collective] = field(default_factory=dict)
    mismatch: str | None = None


def _signature(call: Collective) -> tuple:
    """What must agree across ranks for a step to be well formed."""
    return (call.op, call.kind, [t[:2] for t in call.tensors], call.reduce, call.groups,
            call.root, call.pairs)


def _describe_call(call: Collective) -> str:
    op = call.op
    if call.tensors:
        shapes = ", ".join(f"{d}{list(s)}" for d, s, *_ in call.tensors)
        op += f"({shapes})"
    if call.tag is not None:
        op += f" {call.tag!r}"
    return op


class Coordinator:
    """Matches the collectives of ``world_size`` ranks and records the history."""

    def __init__(self, world_size: int, now: Callable[[], float] | None = None) -> None:
        self.world_size = world_size
        start = time.monotonic()
        self._now = now or (lambda: time.monotonic() - start)
        self.history = History()  # bounded: the head and tail of its repetitive events
        #: the world's decision a rank acts in (``Event.stamp``); the caller's, as time is
        self.stamp: Callable[[int | None], int] = lambda rank: 0
        self.mismatches: list[str] = []
        self.waiting: dict[int, Waiting] = {}
        self.exited: dict[int, str] = {}
        self._steps: dict[tuple[int, int], _Step] = {}  # (spawn round, step) -> its arrivals
        self._next_step = [0] * world_size
        self._round = [0] * world_size  # exec mode: which xmp.spawn of its launcher a rank runs
        self._mailboxes: dict[str, deque[bytes | bytearray]] = {}
        self._receivers: dict[str, tuple[int, Recv]] = {}  # box -> the rank waiting, its call
        self.groups = ProcessGroups()  # torch.distributed's process groups (``groups.py``)
        self.stores = Stores()  # torch.distributed's stores (``stores.py``)
        self.preemption = PreemptionSync(world_size)  # the XLA runtime's (``preemption.py``)
        #: replies no request of their rank's made now: a peer's exit, a wait timed out
        self.outbox: list[Reply] = []
        #: waits a peer's exit closed, answered once the world's instant is over (``settle``)
        self._closing: list[tuple[int, Collective, int, int]] = []  # waiter, call, step, gone

    # -- bookkeeping -----------------------------------------------------
    def now(self) -> float:
        """Seconds since the world began, on its clock."""
        return self._now()

    def record(self, kind: str, **fields: Any) -> Event:
        event = Event(t=round(self.now(), 6), kind=kind, stamp=self.stamp(fields.get("rank")),
                      **fields)
        self.history.append(event)
        return event

    # -- collectives -----------------------------------------------------
    def collective(self, rank: int, call: Collective) -> list[Reply]:
        if call.group is not None:
            return self._group_collective(rank, call)
        step_no, round_ = self._next_step[rank], self._round[rank]
        self._next_step[rank] += 1
        op, tag, site = call.op, call.tag, call.site
        detail: dict[str, Any] = {}
        if call.tensors:
            detail["tensors"] = [f"{d}{list(s)}" for d, s, *_ in call.tensors]
        elif call.kind == "gather_bytes":
            detail["payload_bytes"] = len(call.payload)
        if call.groups is not None:
            detail["groups"] = call.groups
        if round_:
            detail["round"] = round_
        self.record("call", rank=rank, op=op, tag=tag, step=step_no, site=site, detail=detail)
        self.waiting[rank] = Waiting(rank, op, tag, step_no, site, self.now())

        step = self._steps.setdefault((round_, step_no), _Step())
        step.arrivals[rank] = call
        self._check_agreement(step_no, step, rank)
        if step.mismatch is not None or len(step.arrivals) < self.world_size:
            return []
        del self._steps[(round_, step_no)]
        return self._complete(step_no, step)

    def _check_agreement(self, step_no: int, step: _Step, rank: int) -> None:
        """Compare a new arrival with the step's first; a mismatch never completes."""
        first_rank = next(iter(step.arrivals))
        if rank == first_rank or step.mismatch is not None:
            return
        if _signature(step.arrivals[rank]) != _signature(step.arrivals[first_rank]):
            step.mismatch = f"collective mismatch at step {step_no}"
            self.record("mismatch", rank=rank, step=step_no,
                        detail={"message": f"{_describe_call(step.arrivals[rank])} does not match "
                                           f"rank {first_rank}'s "
                                           f"{_describe_call(step.arrivals[first_rank])}"})

    def _note_tags(self, step_no: int, step: _Step) -> None:
        by_tag: dict[Any, list[int]] = {}
        for r, call in sorted(step.arrivals.items()):
            by_tag.setdefault(call.tag, []).append(r)
        if len(by_tag) > 1:
            parts = "; ".join(f"{ranks_phrase(rs)} {tag!r}" for tag, rs in by_tag.items())
            message = (f"rendezvous tags differ at step {step_no}: {parts}; "
                       "the real runtime pairs them up anyway")
            self.mismatches.append(message)
            self.record("warning", step=step_no, op="rendezvous", detail={"message": message})

    def _complete(self, step_no: int, step: _Step) -> list[Reply]:
        arrivals = step.arrivals
        call0 = arrivals[0]
        if call0.kind == "gather_bytes":
            self._note_tags(step_no, step)
        replies: list[Reply] = []
        try:
            for group in _groups(call0.groups, self.world_size):
                replies.extend(self._compute(call0, group, arrivals))
        except (ReductionError, ValueError) as exc:  # a CallError, or numpy refusing a buffer
            replies = [(r, {"error": "TypeError", "message": str(exc)}, b"") for r in arrivals]
        for r in arrivals:
            self.waiting.pop(r, None)
        self.record("complete", op=call0.op, tag=call0.tag, step=step_no)
        return answering(replies, arrivals)

    def _compute(self, call0: Collective, group: list[int],
                 arrivals: dict[int, Collective]) -> list[Reply]:
        kind = call0.kind
        if any(r not in arrivals for r in group):
            raise CallError(f"{call0.op}: groups {call0.groups} name ranks outside the world "
                            f"of {self.world_size}")
        if kind == "gather_bytes" or kind == "gather":
            payloads = [arrivals[r].payload for r in group]
            out = b"".join(payloads)
            reply = {"sizes": [len(p) for p in payloads]}
            return [(r, reply, out) for r in group]
        if kind == "reduce":
            out_parts = []
            offset = 0
            for dtype, _shape, nbytes in call0.tensors:
                bufs = [memoryview(arrivals[r].payload)[offset:offset + nbytes] for r in group]
                if any(len(b) != nbytes for b in bufs):
                    raise CallError(f"{call0.op}: a payload is shorter than its tensors")
                out_parts.append(reduce_buffers(call0.reduce or "", dtype, bufs))
                offset += nbytes
            out = b"".join(out_parts)
            return [(r, {}, out) for r in group]
        if kind == "broadcast":
            root = call0.root
            if root not in group:  # the real op sums zeros: nothing to copy
                return [(r, {"none": True}, b"") for r in group]
            out = arrivals[root].payload
            return [(r, {}, out) for r in group]
        if kind == "permute":
            sources = {dst: src for src, dst in call0.pairs or ()}
            replies = []
            for r in group:
                src = sources.get(r)
                if src is not None and src not in arrivals:
                    raise CallError(f"{call0.op}: pairs {call0.pairs} name ranks outside the world")
                if src is None:
                    replies.append((r, {"none": True}, b""))
                else:
                    replies.append((r, {}, arrivals[src].payload))
            return replies
        raise CallError(f"unknown collective kind {kind!r}")

    # -- torch.distributed's process groups and stores ----------------------
    def _group_collective(self, rank: int, call: Collective) -> list[Reply]:
        """A call on a process group: its own sequence, gloo's answers to a peer's exit."""
        if not call.groups or len(call.groups) != 1 or rank not in call.groups[0] \
                or any(not 0 <= m < self.world_size for m in call.groups[0]):
            return [answer(rank, call, {"error": "ValueError", "message": (
                f"{call.op} on process group {call.group!r}: its members {call.groups} are "
                f"not one list of this world's ranks that holds rank {rank}")})]
        arrival = self.groups.arrive(rank, call)
        detail: dict[str, Any] = {"group": call.group}
        if call.tensors:
            detail["tensors"] = [f"{d}{list(s)}" for d, s, *_ in call.tensors]
        self.record("call", rank=rank, op=call.op, tag=call.tag, step=arrival.seq, site=call.site,
                    detail=detail)
        if arrival.closed is not None:
            return [self._closed_reply(rank, call, arrival.seq, arrival.closed)]
        if arrival.complete is None:
            until = None if call.timeout_ms is None else self.now() + call.timeout_ms / 1000
            self.waiting[rank] = Waiting(rank, call.op, call.tag, arrival.seq, call.site,
                                         self.now(), until, call.timeout_ms, call.req)
            return []
        members = call.groups[0]
        call0 = arrival.complete[members[0]]
        try:
            replies = self._compute(call0, members, arrival.complete)
        except (ReductionError, ValueError) as exc:
            replies = [(r, {"error": "TypeError", "message": str(exc)}, b"")
                       for r in arrival.complete]
        for r in arrival.complete:
            self.waiting.pop(r, None)
        self.record("complete", op=call0.op, tag=call0.tag, step=arrival.seq,
                    detail={"group": call.group})
        return answering(replies, arrival.complete)

    def _closed_reply(self, rank: int, call: Collective, seq: int, gone: int) -> Reply:
        how = self.exited.get(gone, "exited")
        self.record("warning", rank=rank, op="process group", step=seq, detail={
            "message": f"rank {rank}'s call on process group {call.group!r} (step {seq}) "
                       f"fails: rank {gone}, a member, {how} (gloo: connection closed by peer)"})
        return answer(rank, call, {"closed": gone})

    def gone(self, rank: int) -> None:
        """``rank``'s process is gone (it exited, or died to come back): the process groups
        it had joined close. Their members waiting in one are answered by ``settle``, once
        every exit of this world instant is in: which of two processes killed at one instant
        the harness hears of first is the machine's order, not the world's."""
        self.waiting.pop(rank, None)
        self._closing = [c for c in self._closing if c[0] != rank]  # it hears nothing now
        self._closing.extend((w, call, seq, rank) for w, call, seq in self.groups.gone(rank))
        self.stores.withdraw(rank)

    def settle(self) -> None:
        """The world's instant is over (no unit runs): answer the waits that exits in it
        closed (``outbox``), each naming the lowest member gone, in rank order."""
        closing, self._closing = sorted(self._closing, key=lambda c: c[0]), []
        for waiter, call, seq, first in closing:
            waits = self.waiting.get(waiter)
            if waits is None or waits.req != call.req:
                continue  # no longer waiting in it (a new life, an answer since)
            del self.waiting[waiter]
            gone = self.groups.closed_by(call.group or "", call.groups[0], waiter, first)
            self.outbox.append(self._closed_reply(waiter, call, seq, gone))

    def store(self, rank: int, op: StoreOp) -> list[Reply]:
        """An operation on one of the world's stores; a read of a missing key waits."""
        try:
            answers = self.stores.apply(rank, op)
        except StoreError as exc:
            return [answer(rank, op, {"error": "ValueError", "message": str(exc)})]
        if not any(a.rank == rank for a in answers):
            until = None if op.timeout_ms is None else self.now() + op.timeout_ms / 1000
            self.waiting[rank] = Waiting(rank, f"store {op.op}", ", ".join(op.keys), None,
                                         op.site, self.now(), until, op.timeout_ms, op.req)
        replies: list[Reply] = []
        for a in answers:
            if a.rank != rank:
                self.waiting.pop(a.rank, None)
            replies.append(answer(a.rank, a.op, {} if a.value is None else {"value": a.value},
                                  a.data))
        return replies

    def sync_point(self, rank: int, call: SyncPoint) -> list[Reply]:
        """The preemption sync manager's calls: activate, deactivate, reached(step)."""
        sync = self.preemption
        if call.op == "activate":
            sync.activate(rank)
        elif call.op == "deactivate":
            sync.deactivate(rank)
        elif call.op == "reached":
            reached = sync.reached(rank, call.step)
            if reached:
                self.record("sync-point", rank=rank, step=call.step, site=call.site, detail={
                    "message": f"rank {rank} reached the pre-emption sync point, step "
                               f"{call.step}"})
            return [answer(rank, call, {"reached": reached})]
        else:
            return [answer(rank, call, {"error": "ValueError",
                                        "message": f"a sync-point {call.op!r}, not activate, "
                                                   f"deactivate or reached"})]
        return [answer(rank, call, {})]

    def notice_given(self, ranks: list[int]) -> None:
        """``ranks`` (a host's) got SIGTERM: the preemption sync managers that catch it
        agree on a sync point, now."""
        point = self.preemption.notice(ranks)
        if isinstance(point, str):
            self.record("warning", op="sync-point", detail={"message": point})
        elif point is not None:
            counters = self.preemption.counters
            self.record("sync-point", step=point, detail={
                "message": f"the pre-emption sync point is step {point}: the largest step "
                           f"asked about ({max(counters.values(), default=0)}) plus one"})

    def next_deadline(self) -> float | None:
        """The earliest world time a wait with a limit times out."""
        return min((w.until for w in self.waiting.values() if w.until is not None), default=None)

    def expire(self) -> None:
        """Answer every wait whose limit has passed (``outbox``): ``{"timed_out": ms,
        "missing": members that never came}``, the members named before any withdraws."""
        now = self.now()
        due = [w for _, w in sorted(self.waiting.items()) if w.until is not None and w.until <= now]
        missing = {}
        for w in due:
            where = self.groups.waiting_in(w.rank)
            missing[w.rank] = self.groups.missing(*where) if where is not None else []
        for w in due:
            del self.waiting[w.rank]
            self.groups.withdraw(w.rank)
            self.stores.withdraw(w.rank)
            names = missing[w.rank]
            waits_for = f": {ranks_phrase(names)} never called it" if names else ""
            self.record("warning", rank=w.rank, op=w.op, step=w.step, detail={
                "message": f"rank {w.rank}'s {w.describe()} timed out after {w.limit_ms} ms"
                           f"{waits_for}"})
            self.outbox.append(answer(w.rank, w, {"timed_out": w.limit_ms, "missing": names}))

    def take_outbox(self) -> list[Reply]:
        replies, self.outbox = self.outbox, []
        return replies

    # -- point to point --------------------------------------------------
    def send(self, rank: int, call: Send) -> list[Reply]:
        """Point to point: a message waits in its mailbox (``box``) until received."""
        box = call.box
        self.record("call", rank=rank, op="send", site=call.site, detail={"to": call.peer})
        replies: list[Reply] = [answer(rank, call, {})]
        waiting = self._receivers.pop(box, None)
        if waiting is not None:
            receiver, recv = waiting
            self.waiting.pop(receiver, None)
            replies.append(answer(receiver, recv, {}, call.payload))
        else:
            self._mailboxes.setdefault(box, deque()).append(call.payload)
        return replies

    def recv(self, rank: int, call: Recv) -> list[Reply]:
        box, src = call.box, call.peer
        self.record("call", rank=rank, op="recv", site=call.site, detail={"from": src})
        mailbox = self._mailboxes.get(box)
        if mailbox:
            return [answer(rank, call, {}, mailbox.popleft())]
        self._receivers[box] = (rank, call)
        self.waiting[rank] = Waiting(rank, "recv", None, None, call.site, self.now())
        if src in self.exited:
            self.record("warning", rank=rank, op="recv",
                        detail={"message": f"rank {rank} waits to receive from rank {src}, "
                                           f"which {self.exited[src]}"})
        return []

    def forget(self, rank: int) -> None:
        """A rank restarted after pre-emption starts the collective sequence afresh.

        Its dead life's arrivals must not complete a step for the new one (real
        PJRT cannot rejoin a collective at all; the harness restarts only ranks
        of independent workloads, so this keeps them from poisoning a step).
        """
        for step in self._steps.values():
            step.arrivals.pop(rank, None)
        self._steps = {k: st for k, st in self._steps.items() if st.arrivals}
        for box, (receiver, _) in list(self._receivers.items()):
            if receiver == rank:
                del self._receivers[box]
        others = [n for r, n in enumerate(self._next_step) if r != rank]
        open_steps = [n for r, n in self._steps if r == self._round[rank]]
        self._next_step[rank] = min(open_steps, default=max(others, default=0))
        self.groups.forget(rank)
        self.stores.withdraw(rank)
        self.preemption.forget(rank)
        self.waiting.pop(rank, None)
        self.exited.pop(rank, None)

    def next_round(self, rank: int) -> None:
        """Exec mode: ``rank`` lives again in its launcher's next ``xmp.spawn``.

        Its collective sequence starts afresh at step 0 of the new round and
        pairs only with the same round of every other rank, as a real spawn's
        processes join a runtime of their own: a step an earlier round left
        open (a peer that never came) is never completed by a later one.
        """
        self._round[rank] += 1
        self._next_step[rank] = 0
        self.groups.forget(rank)
        self.waiting.pop(rank, None)
        self.exited.pop(rank, None)

    # -- exits and diagnosis --------------------------------------------
    def rank_exited(self, rank: int, how: str) -> None:
        self.exited[rank] = how
        self.waiting.pop(rank, None)
        self.record("exit", rank=rank, detail={"message": how})

    def findings(self) -> list[str]:
        """What is wrong with the steps still open: mismatched calls, ranks left waiting
        on a rank that is gone. Computed at the end, over every arrival."""
        out = []
        for (round_, step_no), step in sorted(self._steps.items()):
            where = f"step {step_no}" + (f" of spawn round {round_}" if round_ else "")
            if step.mismatch is not None:
                groups: dict[str, list[int]] = {}
                for r, call in sorted(step.arrivals.items()):
                    groups.setdefault(_describe_call(call), []).append(r)
                parts = "; ".join(f"{ranks_phrase(rs)}: {call}" for call, rs in groups.items())
                out.append(f"collective mismatch at {where}: {parts} "
                           "(a real pod hangs or fails here)")
            gone = sorted(r for r in self.exited if r not in step.arrivals)
            if gone and step.arrivals:
                call = next(iter(step.arrivals.values()))
                waiting = ranks_phrase(step.arrivals)
                verb = "waits" if len(step.arrivals) == 1 else "wait"
                out.append(f"{ranks_phrase(gone)} exited while {waiting} {verb} for "
                           f"{'it' if len(gone) == 1 else 'them'} in {_describe_call(call)} "
                           f"({where}); a real rendezvous never times out")
        return out

    def blocked(self) -> list[str]:
        """One phrase per group of ranks waiting at the same place, with the time the first
        of them arrived: ``ranks 1-7 wait in rendezvous 'cfg' (step 0) at sync.py:12 since
        t=0.4 s``."""
        by_place: dict[tuple, list[Waiting]] = {}
        for w in self.waiting.values():
            by_place.setdefault((w.describe(), w.step, w.site), []).append(w)
        phrases = []
        for (what, step, site), group in sorted(by_place.items(),
                                                key=lambda kv: min(w.rank for w in kv[1])):
            ranks = [w.rank for w in group]
            where = f" at {site}" if site else ""
            step_txt = f" (step {step})" if step is not None else ""
            since = min(w.since for w in group)
            phrases.append(f"{ranks_phrase(ranks)} {'waits' if len(ranks) == 1 else 'wait'} in "
                           f"{what}{step_txt}{where} since t={since:.1f} s")
        return phrases


class CallError(ValueError):
    """A step whose calls agree but cannot be computed (ranks outside the world, short
    payloads): every rank of the step is answered with the error, as a real runtime would."""


def _groups(groups: list[list[int]] | None, world_size: int) -> list[list[int]]:
    if not groups:
        return [list(range(world_size))]
    return [list(g) for g in groups]
