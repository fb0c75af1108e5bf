"""The harness's side of a running world: it wires the event loop, the
coordinator, the publisher and the lifecycle, and routes every message a unit
sends to the one of them whose business it is."""

from __future__ import annotations

import dataclasses
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable

from harness.faults.kinds import KINDS
from harness.filesystem.beneath import Outside
from harness.filesystem.mounts import LOOKS
from harness.filesystem.publisher import Publisher
from harness.rank import wire
from harness.rank.spec import WorldSpec
from harness.rank.sweep import asleep, live_children
from harness.world import cgroups, protocol
from harness.world.assemble import world_result
from harness.world.clock import Key, WorldClock, ns, seconds
from harness.world.coordinator import Coordinator, answer
from harness.world.lifecycle import Lifecycle, Progress
from harness.world.limits import Exceeded, Limits, Meter
from harness.world.loop import Conn, EventLoop, peer_credentials
from harness.world.races import Races, with_races
from harness.world.result import WorldResult
from harness.world.sealing import Sealer, SealRefused

log = logging.getLogger(__name__)

#: at most this many file events per rank per world (``record_files``)
FILE_EVENTS_LIMIT = 10_000

#: how often ``serve`` tells its ``progress`` callback where the world is (seconds)
PROGRESS_EVERY = 0.25

#: What a file event's detail holds beside its path and outcome: every other field of
#: ``protocol.FileOp``, when the rank gave it.
_FILE_DETAIL = tuple(f.name for f in dataclasses.fields(protocol.FileOp)
                     if f.name not in ("op", "path", "ok", "errno"))
_WHY_VISIBLE = {"read": "every other rank had looked for it",
                "done": "every other rank had finished",
                "time": "its visibility delay passed"}


#: How often a held clock is looked at again (its holders may have begun to wait outside).
HELD_LOOK = 0.01
#: How long a busy unit must sleep in the kernel, using no CPU and saying nothing, before
#: it counts as waiting outside the world (a moment's sleep, between a reply and its next
#: request, is not a wait: the clock must not follow the machine's for it).
OUTSIDE_AFTER = 0.05

#: Why ``serve`` stopped.
DONE, DEADLINE, GUARD, ABORTED, LEADER_LOST = "done", "deadline", "guard", "aborted", "leader lost"
#: ``serve`` stopped at one of the world's limits (``WorldServer.exceeded`` says which).
LIMIT = "limit"


class WorldServer:
    """Serves one world from its start to its end (see ``run_world``)."""

    def __init__(self, spec: WorldSpec, watch: list[str], max_restarts: int,
                 timeout: float, teardown: bool = False, limits: Limits | None = None,
                 restart_job: bool = False, group: cgroups.Group | None = None) -> None:
        self.spec = spec
        self.timeout = timeout  # the world's, as progress reports show it
        self.clock = WorldClock(ns(timeout), spec.seed)
        for key in spec.units():
            self.clock.join(key)
        self.coordinator = Coordinator(spec.topology.world_size,
                                       now=lambda: seconds(self.clock.now))
        self.publisher = Publisher(spec.topology.world_size, spec.sandbox)
        self.races = Races(spec.topology.world_size)
        #: the world's decisions so far (the clock's wakes, collectives' completions), and the
        #: one each rank acts in: its events' ``stamp`` (``history.in_world_order``)
        self._decisions = 0
        self._acting: dict[int, int] = {}
        self.coordinator.stamp = lambda rank: self._decisions if rank is None \
            else self._acting.get(rank, 0)
        self.forked: set[int] = set()  # ranks that started a process of their own
        self.networked: set[int] = set()  # ranks that used an IP socket (python isolation)
        self.sealer = Sealer(spec.faults, spec.topology, spec.sandbox)
        self.loop = EventLoop(spec.address, self._on_frame, self._on_refused)
        self.life = Lifecycle(spec, self.loop, self.coordinator, self.publisher,
                              self._publish_due, watch, max_restarts, teardown, timeout,
                              self.clock, restart_job)
        self._file_ops: dict[int | None, int] = {}  # file events recorded per rank
        self._handlers = self._make_handlers()
        #: the clock follows the machine's since (wall, world ns): units with processes of
        #: their own hold it (``world/clock.py``)
        self._real: tuple[float, int] | None = None
        self.held_since = time.monotonic()  # wall time since the clock last moved or was free
        self.stuck_at: float | None = None  # world s after which nothing was due (a jump to the end)
        self._held_by: tuple | None = None  # who the history last said keeps the clock real
        #: busy units seen asleep in the kernel: since when (wall), and their CPU time then
        self._asleep: dict[Key, tuple[float, int]] = {}
        self._looked: dict[Key, float] = {}  # when /proc said a busy unit was not waiting yet
        self.meter = Meter(limits or Limits(), lambda: self.life.leader_pid, self._unit_names,
                           spec.outdir, spec.sandbox if spec.mounts is not None else None,
                           group, spec.file_size)
        self.exceeded: Exceeded | None = None  # the limit that stopped the world

    def serve(self, until: float, abort: threading.Event | None = None,
              progress: Callable[[Progress], None] | None = None, clock: bool = True,
              held_limit: float | None = None) -> str:
        """Serve until the leader reports the world over (``DONE``), the world's clock
        reaches the deadline (``DEADLINE``), the clock stays held for ``held_limit`` wall
        seconds or the wall clock reaches ``until`` (``GUARD``), ``abort`` is set (the
        user's Ctrl-C) or the leader is lost. ``progress`` is told where the world is about
        every ``PROGRESS_EVERY`` seconds. ``clock=False``: the world is being ended, its
        clock stays where it is."""
        life = self.life
        next_progress = time.monotonic()
        while not life.done:
            wall = time.monotonic()
            if abort is not None and abort.is_set():
                return ABORTED
            if wall >= until or (held_limit is not None and wall - self.held_since >= held_limit):
                return GUARD
            if clock and self.exceeded is not None:  # the kernel killed a unit at a limit
                return LIMIT
            if not life.leader_lost and life.leader_gone():
                leader = self.loop.leader()
                if leader is not None:  # what it sent before it went: its "done", often
                    self.loop.read_last(leader, 0.5)
                life.leader_lost = not life.done
                if life.done:  # it said so on its way out: the world is over, nothing to wait for
                    break
                if clock and (exceeded := self.meter.kernel()) is not None:
                    self.exceeded = exceeded  # the OOM killer took the leader: the world's limit
                    return LIMIT
            if life.leader_lost and life.all_accounted():
                return LEADER_LOST
            if clock:
                self.exceeded = self.meter.check(wall)
                if self.exceeded is not None:
                    return LIMIT
            moved = clock and self._move_clock(wall)
            if clock and self.clock.passed:
                if progress is not None:
                    progress(life.progress(self.coordinator.now(), self.timeout))
                return DEADLINE
            if progress is not None and wall >= next_progress:
                next_progress = wall + PROGRESS_EVERY
                progress(life.progress(self.coordinator.now(), self.timeout))
            wait = 0.0 if moved else PROGRESS_EVERY if progress is not None else 0.5
            if clock and self.clock.busy():  # look again soon: it may be a wait outside the world
                wait = min(wait, HELD_LOOK)
            if clock and self._real is not None:  # following the machine's time: until the next due
                due = self.clock.next_wake(self._next_due())
                wait = min(wait, 0.05, max(0.0, seconds(due - self.clock.now)))
            if clock:  # the meter's next look is not left to the next frame
                wait = min(wait, max(0.0, self.meter.next_due() - time.monotonic()))
            self.loop.poll(min(wait, max(0.0, until - wall)), until)
            self._publish_due()
        return DONE

    def end(self, why: str, hard_end: float, stack_wait: float, guard: str | None = None) -> None:
        """End the world: stacks, the hang report, the leader's kill (``why``: ``serve``'s)."""
        self.life.end_at_deadline(stack_wait, stuck_at=self.stuck_at if why == DEADLINE else None,
                                  guard=guard)
        if self.serve(until=hard_end, clock=False) != DONE:
            self.life.kill_by_pid()

    def stop(self, exceeded: Exceeded, hard_end: float) -> None:
        """Stop the world at a limit it passed: every unit still alive is killed, and its
        fate names the limit."""
        self.life.stop_at_limit(exceeded.words)  # once: a unit the kernel killed said it first
        if self.serve(until=hard_end, clock=False) != DONE:
            self.life.kill_by_pid()

    def _unit_names(self) -> dict[int, str]:
        """pid -> ``rank 3`` or ``launcher 1``: whose memory a process is."""
        names = {u.pid: f"launcher {h}" for h, u in self.life.hosts.items() if u.pid is not None}
        names.update({u.pid: f"rank {r}" for r, u in self.life.ranks.items() if u.pid is not None})
        return names

    def result(self, duration: float) -> WorldResult:
        result = world_result(self.life, self.coordinator, duration,
                              world_time=self.coordinator.now())
        result.history = with_races(result.history, self.races)
        result.forked = sorted(self.forked) if self.spec.mounts is not None else []
        result.networked = sorted(self.networked)
        return result

    def close(self) -> None:
        self.loop.close()
        self.life.close()
        self.publisher.close()
        self.sealer.close()

    # -- the world's clock --------------------------------------------------------
    def _move_clock(self, wall: float) -> bool:
        """Move the world's time as far as nothing can happen before (``world/clock.py``);
        wake the units then due. True if it moved or woke anyone."""
        clock = self.clock
        if not clock.members:
            return False  # every unit is gone: the leader's word that the world is over is due
        busy = clock.busy()
        spawned = {k for k in clock.forked() if self._has_processes(k)}
        # A busy unit computes (no time passes), unless every thread of it sleeps in the
        # kernel, on something the clock cannot see (a socket, a real subprocess):
        if any(k not in spawned and not self._waits_outside(k, wall) for k in busy):
            self._real = None
            return False
        self.coordinator.settle()  # the instant's exits are all in: the waits they closed
        if self._flush():
            return True
        outside = frozenset(busy) | frozenset(spawned)  # waits on what only another unit ends
        due_at = clock.next_wake(self._next_due(), outside)
        if busy or spawned:  # only processes of the units' own run: the machine's pace
            if self._real is None:
                self._real = (wall, clock.now)
                self._say_held(busy, spawned)
            since_wall, since_world = self._real
            to = min(due_at, since_world + ns(wall - since_wall))
        else:
            self._real = None
            to = due_at
        before = clock.now
        woken = clock.advance(to, outside)
        self.life.hard_stops(self._decided)
        self.coordinator.expire()  # a process group's or store's wait whose limit came
        self._flush()
        if not woken and clock.now == before:
            return False
        if clock.passed and self._real is None and self._next_due() is None \
                and all(wake is None for wake in clock.waiting().values()):
            self.stuck_at = seconds(before)  # no unit had a wake-up: nothing could ever happen
        self.held_since = wall
        self._decided(woken)
        for role, ident in clock.went_on:
            if role == "rank":
                self.life.went_on(ident)
            self.coordinator.record("clock", rank=ident if role == "rank" else None, detail={
                "message": f"{role} {ident} goes on after its slow write at "
                           f"{seconds(clock.now):.3f} s: every other rank has finished or "
                           f"waits on another"})
        alone = self._alone_until(woken, spawned)
        looks = len(woken) > 1  # side by side: only their looks are theirs alone
        for key in woken:
            self._asleep.pop(key, None)
            self._looked[key] = wall  # it runs now: no look in /proc before HELD_LOOK
            self._send_time(key, alone, looks)
        self._publish_due()
        return bool(woken) or clock.now != before

    def _alone_until(self, woken: list[Key], spawned: set[Key]) -> int | None:
        """The world time before which no unit but ``woken`` can act: every other waits
        for a later time or for another unit, nothing of theirs runs outside the world, and
        no held write is due before. A unit woken alone takes its turns until then without
        a word to the harness (``RankClock.turn``): the world would grant each at once.
        Units woken together take so only their looks (a stat, a read), and only when none
        was granted a change: their looks then all come before any change the next
        decisions grant, in every run. None: no such time."""
        clock = self.clock
        if spawned or self._real is not None:
            return None
        if len(woken) > 1 and any(op["op"] not in LOOKS for op in clock.granted):
            return None
        wakes = [clock.deadline]
        for other, member in clock.members.items():
            if other in woken:
                continue
            if not member.idle:
                return None
            if member.wake is not None:
                wakes.append(member.wake)
        due = self._next_due()
        if due is not None:
            wakes.append(due)
        until = min(wakes)
        return until if until > clock.now else None

    def _decided(self, woken: list[Key]) -> None:
        """A decision of the world: the units it woke act in it from now on."""
        if woken:
            self._decisions += 1
            for role, ident in woken:
                rank = ident if role == "rank" else self.life.promoted.get(ident)
                if rank is not None:
                    self._acting[rank] = self._decisions

    def _say_held(self, busy: list[Key], spawned: set[Key]) -> None:
        """The history's word on what keeps the clock from jumping while it follows the
        machine's: which units wait outside the world, which have processes of their own."""
        def who(keys: list[Key]) -> str:
            return "; ".join(f"{'launcher' if role == 'host' else 'rank'} {i}"
                             for role, i in sorted(keys))
        waiting = [k for k in busy if k not in spawned]
        holders = (tuple(sorted(waiting)), tuple(sorted(spawned)))
        if holders == self._held_by:
            return  # said already: the same units, again after a moment of computing
        self._held_by = holders
        parts = ([f"{who(waiting)} waits outside the world (a socket, a subprocess, a lock "
                  "it cannot see)"] if waiting else []) + \
                ([f"{who(sorted(spawned))} has a process of its own running"] if spawned else [])
        self.coordinator.record("clock", detail={
            "message": "the world's clock follows the machine's: " + ", ".join(parts)})

    def _publish_next(self) -> int | None:
        at = self.publisher.next_time()
        return None if at is None else ns(at)

    def _next_due(self) -> int | None:
        """The earliest time the harness itself acts: a held write published, a grace's
        hard stop (``notices.py``)."""
        limit = self.coordinator.next_deadline()
        times = [t for t in (self._publish_next(), self.life.notices.next_end(),
                             None if limit is None else ns(limit)) if t is not None]
        return min(times, default=None)

    def _has_processes(self, key: Key) -> bool:
        """Has the unit a live process of its own (not a unit of the world)?"""
        pid = self.life.pid_of(key)
        if pid is None:
            return False
        units = {u.pid for u in self.life.ranks.values() if u.pid is not None}
        return any(child not in units for child in live_children(pid))

    def _waits_outside(self, key: Key, wall: float) -> bool:
        """Has the busy unit slept in the kernel for ``OUTSIDE_AFTER``, using no CPU and
        sending nothing? Then it waits on something outside the world. A unit found not
        waiting is looked at again ``HELD_LOOK`` later, not at every frame of the world:
        reading its threads' states in ``/proc`` was a tenth of the harness's own work."""
        if wall - self._looked.get(key, -HELD_LOOK) < HELD_LOOK:
            return False
        pid = self.life.pid_of(key)
        cpu = asleep(pid) if pid is not None else None
        seen = self._asleep.get(key)
        if cpu is None or seen is None or seen[1] != cpu:
            if cpu is None:
                self._asleep.pop(key, None)
            else:
                self._asleep[key] = (wall, cpu)
            self._looked[key] = wall
            return False
        if wall - seen[0] < OUTSIDE_AFTER:
            self._looked[key] = wall
            return False
        return True

    def _send_time(self, key: Key, alone: int | None = None, looks: bool = False) -> None:
        """Tell a unit the world's time: its waits now due wake (on its control socket);
        ``alone``: no other unit can act before that time (``_alone_until``), its looks
        alone if ``looks``."""
        role, ident = key
        control = self._control_of(key)
        if control is None:  # its control connection may still wait in the backlog
            self.loop.settle(0.5)
            control = self._control_of(key)
        if control is None:
            log.warning("world %s: %s %d has no control connection to wake it on",
                        self.spec.world_id, role, ident)
            return
        frame: dict[str, object] = {"type": "time", "t": self.clock.now}
        if alone is not None:
            frame["alone"] = alone
            if looks:
                frame["looks"] = True
        self.loop.send(control, frame)

    def _control_of(self, key: Key) -> socket.socket | None:
        role, ident = key
        if role == "host":
            rank = self.life.promoted.get(ident)
            return self.loop.control.get(rank if rank is not None else -1 - ident)
        return self.loop.control.get(ident)

    def _publish_due(self) -> None:
        for held in self.publisher.due(self.coordinator.now()):
            detail: dict[str, object] = {"path": held.path, "message": (
                f"{held.path} could not be published: {held.error} (its files were changed "
                f"behind the harness's view)" if held.error else
                f"{held.path} had nothing to publish: its writer had renamed or removed it, "
                f"and what it renamed showed at once" if held.gone else
                f"{held.path} became visible: {_WHY_VISIBLE[held.until]}")}
            if held.gone:
                detail["gone"] = True
            self.coordinator.record("publish", rank=held.writer, detail=detail)

    # -- messages -------------------------------------------------------------
    def _on_frame(self, sock: socket.socket, head: bytes | bytearray, payload: bytearray) -> None:
        conn = self.loop.conns.get(sock)
        if conn is None:
            return
        try:
            msg = protocol.decode(head, payload)
            handler = self._handlers[conn.role].get(type(msg))
            if handler is None:
                raise protocol.ProtocolError(f"a {type(msg).__name__} message, which a "
                                             f"{conn.role} connection may not send")
        except protocol.ProtocolError as exc:
            self._refuse(sock, conn, str(exc))
            return
        if conn.role in ("rank", "host") and conn.channel == "call":
            self._asleep.pop((conn.role, conn.ident), None)  # it ran: it said something
            self._clock_heard((conn.role, conn.ident), msg)
        handler(sock, conn, msg)
        self._flush()

    def _flush(self) -> bool:
        """Send the replies no request made now (a peer's exit closed a process group, a
        wait timed out): each wakes its rank, a decision of the world's."""
        replies = self.coordinator.take_outbox()
        if replies:
            self._decided([self.life.key_of(r) for r, _, _ in replies])
            self._reply(replies)
        return bool(replies)

    def _clock_heard(self, key: Key, msg: protocol.Message) -> None:
        """What a unit's message says to the world clock: it runs (it sent it), or every
        thread of it waits (an idle word, alone or carried in a request)."""
        if isinstance(msg, protocol.Idle):
            self.clock.idle(key, msg.seen, msg.wake, msg.turn)
        elif isinstance(msg, protocol.Forked):
            self.clock.started_process(key)
            self.clock.heard(key)
            if key[0] == "rank":
                self.forked.add(key[1])
        else:
            self.clock.heard(key)
            word = getattr(msg, "idle", None)
            if word is not None:
                self.clock.idle(key, word["seen"], word.get("wake"), word.get("turn"))

    def _on_refused(self, sock: socket.socket, why: str) -> None:
        conn = self.loop.conns.get(sock)
        if conn is not None:
            self._refuse(sock, conn, why)

    def _refuse(self, sock: socket.socket, conn: Conn, why: str) -> None:
        """A unit broke the protocol: its connection is dropped, the history says why. A
        connection that has not said a hello with the world's secret is nobody's of the
        world: it is dropped, and the world's history and verdict never hear of it."""
        if conn.role == "pending":
            log.debug("world %s: refused a connection: %s", self.spec.world_id, why)
            self.loop.forget(sock)
            return
        life = self.life
        rank = conn.ident if conn.role == "rank" else life.promoted.get(conn.ident)
        who = (f"rank {rank}" if rank is not None else
               f"host {conn.ident}" if conn.role == "host" else f"a {conn.role} connection")
        message = f"{who} sent a frame the harness refuses: {why}; its connection is dropped"
        log.warning("world %s: %s", self.spec.world_id, message)
        self.coordinator.record("protocol", rank=rank, detail={"message": message})
        unit = life.ranks.get(rank) if rank is not None else (
            life.hosts.get(conn.ident) if conn.role == "host" else None)
        if unit is not None and unit.refused is None:
            unit.refused = message
        self.loop.forget(sock)
        if conn.role in ("rank", "host") and conn.channel == "call":
            # its clock too: no time will come to it again, so its waits for one end and it
            # runs to its end on the machine's time (``RankClock.cut_off``)
            control = self._control_of(("rank", rank) if rank is not None else
                                       (conn.role, conn.ident))
            if control is not None and control is not sock:
                for ident, known in list(self.loop.control.items()):
                    if known is control:
                        del self.loop.control[ident]
                self.loop.forget(control)

    def _hello(self, sock: socket.socket, conn: Conn, msg: protocol.Hello) -> None:
        if not protocol.knows_secret(msg, self.spec.secret):
            self._refuse(sock, conn, f"a hello as {msg.role} {msg.id} without the world's secret")
            return
        loop, life = self.loop, self.life
        units = life.ranks if msg.role == "rank" else life.hosts if msg.role == "host" else None
        if (units is None and msg.role != "leader") or (units is not None and msg.id not in units):
            self._refuse(sock, conn, f"a hello from {msg.role} {msg.id}, which this world has not")
            return
        pid = peer_pid(sock) or msg.pid  # the kernel's word, in the harness's PID namespace
        conn.role, conn.ident, conn.channel, conn.pid = msg.role, msg.id, msg.channel, pid
        if msg.role == "rank":
            (loop.call if msg.channel == "call" else loop.control)[msg.id] = sock
            life.started(pid, "rank", msg.id)
        elif msg.role == "host":
            if msg.channel == "control":
                loop.control[-1 - msg.id] = sock
            life.hosts[msg.id].pid = pid

    def _rank_of(self, conn: Conn) -> int | None:
        return conn.ident if conn.role == "rank" else self.life.promoted.get(conn.ident)

    def _collective(self, sock: socket.socket, conn: Conn, msg: protocol.Collective) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            replies = self.coordinator.collective(rank, msg)
            if replies:  # the step completed: it orders its ranks' pasts before their futures
                self.races.joined([r for r, _, _ in replies])
                self._decided([("rank", r) for r, _, _ in replies])
            self._reply(replies)

    def _store(self, sock: socket.socket, conn: Conn, msg: protocol.StoreOp) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            replies = self.coordinator.store(rank, msg)
            for reader, _, _ in replies:
                if reader != rank:  # a read it unblocked: it acts beside the writer
                    self._acting[reader] = self._acting.get(rank, 0)
            self._reply(replies)

    def _sync_point(self, sock: socket.socket, conn: Conn, msg: protocol.SyncPoint) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            self._reply(self.coordinator.sync_point(rank, msg))

    def _send(self, sock: socket.socket, conn: Conn, msg: protocol.Send) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            replies = self.coordinator.send(rank, msg)
            for receiver, _, _ in replies[1:]:
                self.races.delivered(rank, receiver)
                self._acting[receiver] = self._acting.get(rank, 0)  # it acts beside the sender
            self._reply(replies)

    def _recv(self, sock: socket.socket, conn: Conn, msg: protocol.Recv) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            replies = self.coordinator.recv(rank, msg)
            if replies:  # it was waiting in its mailbox
                self.races.delivered(msg.peer, rank)
            self._reply(replies)

    def _touch(self, sock: socket.socket, conn: Conn, msg: protocol.Touch) -> None:
        """A rank's file operation, in its turn: what the race finder reads (its races go
        in the history at the world's end, ``result``)."""
        rank = self._rank_of(conn)
        if rank is None:
            return
        t = self.coordinator.now()
        self.races.access(rank, msg.op, msg.path, msg.line, t, msg.where)
        if msg.dst is not None:
            self.races.access(rank, msg.op, msg.dst, msg.line, t, msg.where)

    def _result(self, sock: socket.socket, conn: Conn, msg: protocol.Result) -> None:
        rank = self._rank_of(conn)
        if conn.role == "host":
            self.life.hosts[conn.ident].result = msg
        if rank is not None:
            self.life.ranks[rank].result = msg

    def _promote(self, sock: socket.socket, conn: Conn, msg: protocol.Promote) -> None:
        loop, life = self.loop, self.life
        if conn.role != "host" or msg.rank not in life.ranks:
            self._refuse(sock, conn, f"a promotion to rank {msg.rank} from a {conn.role}")
            return
        life.promoted[conn.ident] = msg.rank
        loop.call[msg.rank] = sock
        loop.control[msg.rank] = loop.control.pop(-1 - conn.ident, None) or sock
        life.ranks[msg.rank].pid = conn.pid

    def _stacks(self, sock: socket.socket, conn: Conn, msg: protocol.Stacks) -> None:
        pass  # a late answer to the watchdog, after it fell back to faulthandler

    def _rank_exit(self, sock: socket.socket, conn: Conn, msg: protocol.RankExit) -> None:
        if msg.rank not in self.life.ranks:
            self._refuse(sock, conn, f"the exit of rank {msg.rank}, which this world has not")
            return
        self.life.exited(("rank", msg.rank), msg.status)

    def _spawning(self, sock: socket.socket, conn: Conn, msg: protocol.Spawning) -> None:
        self.life.spawning(conn.ident, msg)

    def _fault(self, sock: socket.socket, conn: Conn, msg: protocol.Fault) -> None:
        kind = KINDS.get(msg.fault)
        if kind is not None and kind.close_order is not None:
            self._refuse(sock, conn, f"a {msg.fault} fault it says it applied itself: the "
                                     f"harness applies content faults, so the target's process "
                                     f"changed the harness's fault engine")
            return
        self._record_fault(self._rank_of(conn), msg)

    def _record_fault(self, rank: int | None, msg: protocol.Fault) -> None:
        self.coordinator.record("fault", rank=rank, op=msg.fault,
                                detail={"op": msg.op, "path": msg.path, "index": msg.index,
                                        **msg.detail})
        self.life.fault(rank, msg)
        if rank is not None and "notice" in msg.detail:
            self._notice(rank, msg)

    def _notice(self, rank: int, msg: protocol.Fault) -> None:
        """A rank's fault gives its host a notice (the plan's grace, never the rank's word):
        every unit of the host gets SIGTERM now, the rank first; a host that had its notice
        already gets nothing, and the rank is told so (signal 0): it waits for the word."""
        faults = self.spec.faults.faults
        if msg.index is None or not 0 <= msg.index < len(faults) \
                or faults[msg.index].kind != msg.fault:
            return
        grace = faults[msg.index].spec.notice_grace()
        if grace is None:
            return
        host = self.spec.topology.host_of(rank)
        keys = self.life.notice(host, grace, rank)
        if keys is not None:
            self.coordinator.notice_given(list(self.spec.topology.ranks_of_host(host)))
        for key in keys if keys is not None else [self.life.key_of(rank)]:
            self._signal(key, signal.SIGTERM if keys is not None else 0)

    def _signal(self, key: Key, signum: int) -> None:
        """Deliver ``signum`` to a unit at the world's time: its control thread does (a wake
        of the unit, so the world does not move until its handler has run)."""
        control = self._control_of(key)
        if control is None:
            self.loop.settle(0.5)
            control = self._control_of(key)
        if control is None:
            return  # not connected yet: the hard stop will find it
        self.clock.woke(key)
        self._asleep.pop(key, None)
        self.loop.send(control, {"type": "signal", "signum": int(signum), "t": self.clock.now})

    def _step(self, sock: socket.socket, conn: Conn, msg: protocol.Step) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            self.coordinator.record("step", rank=rank, detail={"life": self.life.ranks[rank].life})

    def _seal(self, sock: socket.socket, conn: Conn, msg: protocol.Seal) -> None:
        rank = self._rank_of(conn)
        if rank is None:
            self._refuse(sock, conn, "a faulted write from a unit that is no rank")
            return

        def record(event: dict) -> None:
            event = dict(event)
            del event["type"]
            self._record_fault(rank, protocol.Fault(**event))

        def hold(held: dict) -> None:
            self.publisher.hold(rank, held, self.coordinator.now())

        try:
            reply = self.sealer.seal(rank, self.life.ranks[rank].life, msg, record, hold)
        except (SealRefused, OSError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self._refuse(sock, conn, f"a faulted write of {msg.path!r} the harness cannot "
                                     f"seal: {why}")
            return
        self._reply([answer(rank, msg, reply)])

    def _hold(self, sock: socket.socket, conn: Conn, msg: protocol.Hold) -> None:
        rank = self._rank_of(conn)
        try:
            self.publisher.hold(rank if rank is not None else -1, {
                "src": msg.src, "dst": msg.dst, "path": msg.path, "until": msg.until,
                "delay_ms": msg.delay_ms, "copy": msg.copy}, self.coordinator.now())
        except Outside as exc:
            self._refuse(sock, conn, f"a held write of {exc.filename!r}: {exc.strerror}")

    def _hold_moved(self, sock: socket.socket, conn: Conn, msg: protocol.HoldMoved) -> None:
        rank = self._rank_of(conn)
        try:
            if rank is not None and self.publisher.moved(rank, msg.path, msg.to, msg.dst):
                return
        except Outside as exc:
            self._refuse(sock, conn, f"a held write renamed to {exc.filename!r}: {exc.strerror}")
            return
        self._refuse(sock, conn, f"a rename of {msg.path!r}, which the harness holds for no "
                                 f"rank of this connection")

    def _fs_access(self, sock: socket.socket, conn: Conn, msg: protocol.FsAccess) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            self.publisher.accessed(rank, msg.path)

    def _file_op(self, sock: socket.socket, conn: Conn, msg: protocol.FileOp) -> None:
        rank = self._rank_of(conn)
        told = self._file_ops[rank] = self._file_ops.get(rank, 0) + 1
        if told > FILE_EVENTS_LIMIT:
            if told == FILE_EVENTS_LIMIT + 1:
                self.coordinator.record("warning", rank=rank, detail={
                    "message": f"rank {rank} made more than {FILE_EVENTS_LIMIT} file operations: "
                               f"the rest were dropped from the history"})
            return
        detail: dict[str, object] = {"path": msg.path, "ok": msg.ok}
        if not msg.ok:
            detail["errno"] = msg.errno if msg.errno is not None else 0
        for name in _FILE_DETAIL:
            value = getattr(msg, name)
            if value is not None:
                detail[name] = value
        self.coordinator.record("file", rank=rank, op=msg.op, detail=detail)

    def _reply(self, replies: list) -> None:
        """Answer the ranks a request woke, each reply with the world's time."""
        encoded: dict[int, bytes] = {}  # a step answers its ranks with one header: encode it once
        for r, h, p in replies:
            sock = self.loop.call.get(r)
            if sock is not None:  # a rank between two lives has no socket to answer on
                head = encoded.get(id(h))
                if head is None:
                    head = encoded[id(h)] = wire.encode({**h, "t": self.clock.now})
                key = self.life.key_of(r)
                self.clock.woke(key)
                self._asleep.pop(key, None)  # woken: asleep only until it reads this
                self.loop.send(sock, head, p)

    # -- the leader's messages ------------------------------------------------------
    def _started(self, sock: socket.socket, conn: Conn, msg: protocol.Started) -> None:
        for pid, role, ident in msg.units:
            self.life.started(pid, role, ident)
        # Kernel isolation: what the harness writes in a host's overlaid copy while the
        # world runs (a held write published) goes through that host's own root.
        for host, fd in msg.roots or ():
            root = f"/proc/{self.life.leader_pid}/fd/{int(fd)}"
            for bind in (self.spec.binds or {}).get(int(host), ()):
                if bind.overlay is not None:
                    for side in (self.publisher.beneath, self.sealer.beneath):
                        side.through(bind.overlay[0], root, bind.target)

    def _exited(self, sock: socket.socket, conn: Conn, msg: protocol.Exited) -> None:
        unit = tuple(msg.unit) if msg.unit else self.life.pids.get(msg.pid)
        if unit is not None:
            if self.exceeded is None and not self.life.finish_sent:
                role, ident = unit
                name = f"rank {ident}" if role == "rank" else f"launcher {ident}"
                exceeded = self.meter.killed(name, msg.status)
                if exceeded is not None:  # the kernel stopped it at a limit: so is the world
                    self.exceeded = exceeded
                    self.life.stop_at_limit(exceeded.words, also=unit)  # type: ignore[arg-type]
            self.life.exited(unit, msg.status)  # type: ignore[arg-type]

    def _networked(self, sock: socket.socket, conn: Conn, msg: protocol.Networked) -> None:
        if conn.role == "rank":
            self.networked.add(conn.ident)

    def _done(self, sock: socket.socket, conn: Conn, msg: protocol.Done) -> None:
        self.life.leftovers = msg.leftovers
        self.life.done = True
        self.life.clean = msg.clean

    def _make_handlers(self) -> dict[str, dict[type, Callable[..., None]]]:
        """Which messages each kind of connection may send, and who handles them."""
        p = protocol
        unit = {p.Collective: self._collective, p.StoreOp: self._store,
                p.SyncPoint: self._sync_point, p.Send: self._send,
                p.Recv: self._recv, p.Idle: _nothing, p.Forked: _nothing,
                p.Networked: self._networked,
                p.Result: self._result, p.Promote: self._promote, p.Stacks: self._stacks,
                p.RankExit: self._rank_exit, p.Fault: self._fault, p.Hold: self._hold,
                p.Seal: self._seal, p.Step: self._step,
                p.HoldMoved: self._hold_moved,
                p.FsAccess: self._fs_access, p.Touch: self._touch, p.FileOp: self._file_op}
        return {"pending": {p.Hello: self._hello}, "rank": unit,
                "host": {**unit, p.Spawning: self._spawning},
                "leader": {p.Started: self._started, p.Exited: self._exited, p.Done: self._done}}


def peer_pid(sock: socket.socket) -> int | None:
    """The pid of the process at the other end of a Unix socket, as this process sees it.
    A unit's own word for its pid is its PID namespace's (kernel isolation): the kernel
    translates this one."""
    creds = peer_credentials(sock)
    return (creds[0] or None) if creds is not None else None


def _nothing(*_: object) -> None:
    """A message whose whole meaning is what it tells the world clock (``_clock_heard``)."""

