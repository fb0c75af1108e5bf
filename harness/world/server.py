"""The harness's side of a running world: it wires the event loop, the
coordinator, the publisher and the lifecycle, and routes every message a unit
sends to the one of them whose business it is."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

from harness.filesystem.publisher import Publisher
from harness.world import protocol, wire
from harness.world.assemble import world_result
from harness.world.coordinator import Coordinator
from harness.world.lifecycle import Lifecycle, Progress
from harness.world.loop import Conn, EventLoop
from harness.world.result import WorldResult
from harness.world.spec import WorldSpec

log = logging.getLogger(__name__)

#: at most this many file events per rank per world (``record_files``)
FILE_EVENTS_LIMIT = 10_000

#: how often ``serve`` tells its ``progress`` callback where the world is (seconds)
PROGRESS_EVERY = 0.25

_WHY_VISIBLE = {"read": "every other rank had looked for it",
                "done": "every other rank had finished",
                "time": "its visibility delay passed"}


class WorldServer:
    """Serves one world from its start to its end (see ``run_world``)."""

    def __init__(self, spec: WorldSpec, start: float, watch: list[str], max_restarts: int,
                 timeout: float = 0.0, teardown: bool = False) -> None:
        self.spec = spec
        self.timeout = timeout  # the world's, as progress reports show it
        self.coordinator = Coordinator(spec.topology.world_size, start=start)
        self.publisher = Publisher(spec.topology.world_size)
        self.loop = EventLoop(spec.address, self._on_frame, self._on_refused)
        self.life = Lifecycle(spec, self.loop, self.coordinator, self.publisher,
                              self._publish_due, watch, max_restarts, teardown, timeout)
        self._file_ops: dict[int | None, int] = {}  # file events recorded per rank
        self._handlers = self._make_handlers()

    def serve(self, until: float, detect_deadlock: bool = False,
              abort: threading.Event | None = None,
              progress: Callable[[Progress], None] | None = None) -> bool:
        """Serve until the leader reports the world over (True), or until ``until``, a
        proven deadlock or ``abort`` (the user's Ctrl-C) (False). ``progress`` is told
        where the world is about every ``PROGRESS_EVERY`` seconds."""
        life = self.life
        next_progress = time.monotonic()
        while not life.done:
            now = time.monotonic()
            remaining = until - now
            if remaining <= 0 or (abort is not None and abort.is_set()):
                return False
            if not life.leader_lost and life.leader_gone():
                leader = self.loop.leader()
                if leader is not None:  # what it sent before it went: its "done", often
                    self.loop.read_last(leader, 0.5)
                life.leader_lost = not life.done
            if life.leader_lost and life.all_accounted():
                return False
            if detect_deadlock and life.deadlocked():
                if progress is not None:  # the state it was proven in, for the status line
                    progress(life.progress(self.coordinator.now(), self.timeout))
                return False
            if progress is not None and now >= next_progress:
                next_progress = now + PROGRESS_EVERY
                progress(life.progress(self.coordinator.now(), self.timeout))
            wait = min(remaining, 0.05 if life.suspicious else
                       PROGRESS_EVERY if progress is not None else 0.5)
            next_publish = self.publisher.next_time()
            if next_publish is not None:
                wait = max(0.0, min(wait, next_publish - self.coordinator.now()))
            self.loop.poll(wait, until)
            self._publish_due()
        return True

    def end_at_deadline(self, hard_end: float, stack_wait: float) -> None:
        self.life.end_at_deadline(stack_wait)
        if not self.serve(until=hard_end):
            self.life.kill_by_pid()

    def result(self, duration: float) -> WorldResult:
        return world_result(self.life, self.coordinator, duration)

    def close(self) -> None:
        self.loop.close()
        self.life.close()

    def _publish_due(self) -> None:
        for held in self.publisher.due(self.coordinator.now()):
            self.coordinator.record("publish", rank=held.writer, detail={
                "path": held.path,
                "message": f"{held.path} became visible: {_WHY_VISIBLE[held.until]}"})

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
        handler(sock, conn, msg)

    def _on_refused(self, sock: socket.socket, why: str) -> None:
        conn = self.loop.conns.get(sock)
        if conn is not None:
            self._refuse(sock, conn, why)

    def _refuse(self, sock: socket.socket, conn: Conn, why: str) -> None:
        """A unit broke the protocol: its connection is dropped, the history says why."""
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

    def _hello(self, sock: socket.socket, conn: Conn, msg: protocol.Hello) -> None:
        loop, life = self.loop, self.life
        units = life.ranks if msg.role == "rank" else life.hosts if msg.role == "host" else None
        if (units is None and msg.role != "leader") or (units is not None and msg.id not in units):
            self._refuse(sock, conn, f"a hello from {msg.role} {msg.id}, which this world has not")
            return
        conn.role, conn.ident, conn.channel, conn.pid = msg.role, msg.id, msg.channel, msg.pid
        if msg.role == "rank":
            (loop.call if msg.channel == "call" else loop.control)[msg.id] = sock
            life.started(msg.pid, "rank", msg.id)
        elif msg.role == "host":
            if msg.channel == "control":
                loop.control[-1 - msg.id] = sock
            life.hosts[msg.id].pid = msg.pid

    def _rank_of(self, conn: Conn) -> int | None:
        return conn.ident if conn.role == "rank" else self.life.promoted.get(conn.ident)

    def _collective(self, sock: socket.socket, conn: Conn, msg: protocol.Collective) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            self._reply(self.coordinator.collective(rank, msg))

    def _send(self, sock: socket.socket, conn: Conn, msg: protocol.Send) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            self._reply(self.coordinator.send(rank, msg))

    def _recv(self, sock: socket.socket, conn: Conn, msg: protocol.Recv) -> None:
        rank = self._rank_of(conn)
        if rank is not None:
            self._reply(self.coordinator.recv(rank, msg))

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
        rank = self._rank_of(conn)
        self.coordinator.record("fault", rank=rank, op=msg.fault,
                                detail={"op": msg.op, "path": msg.path, "index": msg.index,
                                        **msg.detail})
        self.life.fault(rank, msg)

    def _hold(self, sock: socket.socket, conn: Conn, msg: protocol.Hold) -> None:
        rank = self._rank_of(conn)
        self.publisher.hold(rank if rank is not None else -1, {
            "src": msg.src, "dst": msg.dst, "path": msg.path, "until": msg.until,
            "delay_ms": msg.delay_ms, "copy": msg.copy}, self.coordinator.now())

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
        for name in ("dst", "size", "count", "offset", "trunc", "new", "dir", "line"):
            value = getattr(msg, name)
            if value is not None:
                detail[name] = value
        self.coordinator.record("file", rank=rank, op=msg.op, detail=detail)

    def _reply(self, replies: list) -> None:
        encoded: dict[int, bytes] = {}  # a step answers its ranks with one header: encode it once
        for r, h, p in replies:
            sock = self.loop.call.get(r)
            if sock is not None:  # a rank between two lives has no socket to answer on
                head = encoded.get(id(h))
                if head is None:
                    head = encoded[id(h)] = wire.encode(h)
                self.loop.send(sock, head, p)

    # -- the leader's messages ------------------------------------------------------
    def _started(self, sock: socket.socket, conn: Conn, msg: protocol.Started) -> None:
        for pid, role, ident in msg.units:
            self.life.started(pid, role, ident)

    def _exited(self, sock: socket.socket, conn: Conn, msg: protocol.Exited) -> None:
        unit = tuple(msg.unit) if msg.unit else self.life.pids.get(msg.pid)
        if unit is not None:
            self.life.exited(unit, msg.status)  # type: ignore[arg-type]

    def _done(self, sock: socket.socket, conn: Conn, msg: protocol.Done) -> None:
        self.life.leftovers = msg.leftovers
        self.life.done = True

    def _make_handlers(self) -> dict[str, dict[type, Callable[..., None]]]:
        """Which messages each kind of connection may send, and who handles them."""
        p = protocol
        unit = {p.Collective: self._collective, p.Send: self._send, p.Recv: self._recv,
                p.Result: self._result, p.Promote: self._promote, p.Stacks: self._stacks,
                p.RankExit: self._rank_exit, p.Fault: self._fault, p.Hold: self._hold,
                p.FsAccess: self._fs_access, p.FileOp: self._file_op}
        return {"pending": {p.Hello: self._hello}, "rank": unit,
                "host": {**unit, p.Spawning: self._spawning},
                "leader": {p.Started: self._started, p.Exited: self._exited, p.Done: self._done}}
