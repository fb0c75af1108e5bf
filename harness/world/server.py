"""The harness's side of a running world: it wires the event loop, the
coordinator, the publisher and the lifecycle, and routes every message a unit
sends to the one of them whose business it is."""

from __future__ import annotations

import logging
import pickle
import socket
import time

from harness.filesystem.publisher import Publisher
from harness.world.assemble import world_result
from harness.world.coordinator import Coordinator
from harness.world.lifecycle import Lifecycle
from harness.world.loop import EventLoop
from harness.world.result import WorldResult
from harness.world.spec import WorldSpec

log = logging.getLogger(__name__)

_WHY_VISIBLE = {"read": "every other rank had looked for it",
                "done": "every other rank had finished",
                "time": "its visibility delay passed"}


class WorldServer:
    """Serves one world from its start to its end (see ``run_world``)."""

    def __init__(self, spec: WorldSpec, start: float, watch: list[str], max_restarts: int) -> None:
        self.spec = spec
        self.coordinator = Coordinator(spec.topology.world_size, start=start)
        self.publisher = Publisher(spec.topology.world_size)
        self.loop = EventLoop(spec.address, self._on_frame)
        self.life = Lifecycle(spec, self.loop, self.coordinator, self.publisher,
                              self._publish_due, watch, max_restarts)

    def serve(self, until: float, detect_deadlock: bool = False) -> bool:
        """Serve until the leader reports the world over (True), or until ``until`` or a
        proven deadlock (False)."""
        life = self.life
        while not life.done:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            if detect_deadlock and life.deadlocked():
                return False
            wait = min(remaining, 0.05 if life.suspicious else 0.5)
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

    def _publish_due(self) -> None:
        for held in self.publisher.due(self.coordinator.now()):
            self.coordinator.record("publish", rank=held.writer, detail={
                "path": held.path,
                "message": f"{held.path} became visible: {_WHY_VISIBLE[held.until]}"})

    # -- messages -------------------------------------------------------------
    def _on_frame(self, sock: socket.socket, head: bytes, payload: bytearray) -> None:
        self._handle(sock, pickle.loads(head), payload)

    def _handle(self, sock: socket.socket, header: dict, payload: bytearray) -> None:
        loop, life = self.loop, self.life
        conn = loop.conns.get(sock)
        if conn is None:
            return
        kind = header.get("type")
        if conn.role == "pending":
            if kind != "hello":
                loop.forget(sock)
                return
            conn.role, conn.ident = header["role"], header["id"]
            conn.channel, conn.pid = header["channel"], header.get("pid")
            if conn.role == "rank":
                (loop.call if conn.channel == "call" else loop.control)[conn.ident] = sock
                life.started(conn.pid, "rank", conn.ident)
            elif conn.role == "host":
                if conn.channel == "control":
                    loop.control[-1 - conn.ident] = sock
                life.hosts[conn.ident].pid = conn.pid
            return
        if conn.role == "leader":
            self._leader_message(header)
            return
        rank = conn.ident if conn.role == "rank" else life.promoted.get(conn.ident)
        if kind == "collective" and rank is not None:
            self._reply(self.coordinator.collective(rank, header, payload))
        elif kind == "send" and rank is not None:
            self._reply(self.coordinator.send(rank, header, payload))
        elif kind == "recv" and rank is not None:
            self._reply(self.coordinator.recv(rank, header))
        elif kind == "result":
            if conn.role == "host":
                life.hosts[conn.ident].result = header
            if rank is not None:
                life.ranks[rank].result = header
        elif kind == "promote":
            rank = header["rank"]
            life.promoted[conn.ident] = rank
            loop.call[rank] = sock
            loop.control[rank] = loop.control.pop(-1 - conn.ident, None) or sock
            life.ranks[rank].pid = conn.pid
        elif kind == "stacks":
            pass  # a late answer to the watchdog, after it fell back to faulthandler
        elif kind == "rank-exit":
            life.exited(("rank", header["rank"]), header["status"])
        elif kind == "fault":
            self.coordinator.record("fault", rank=rank, op=header["fault"],
                                    detail={"op": header.get("op"), "path": header.get("path"),
                                            **header.get("detail", {})})
            life.fault(rank, header)
        elif kind == "hold":
            self.publisher.hold(rank if rank is not None else -1, header, self.coordinator.now())
        elif kind == "fs-access":
            if rank is not None:
                self.publisher.accessed(rank, header["path"])
        else:
            log.warning("world %s: unexpected message %r", self.spec.world_id, kind)

    def _reply(self, replies: list) -> None:
        for r, h, p in replies:
            sock = self.loop.call.get(r)
            if sock is not None:  # a rank between two lives has no socket to answer on
                self.loop.send(sock, h, p)

    def _leader_message(self, header: dict) -> None:
        kind = header.get("type")
        if kind == "started":
            for pid, (role, ident) in header["units"].items():
                self.life.started(pid, role, ident)
        elif kind == "exited":
            unit = header.get("unit") or self.life.pids.get(header["pid"])
            if unit is not None:
                self.life.exited(tuple(unit), header["status"])
        elif kind == "done":
            self.life.leftovers = header.get("leftovers", 0)
            self.life.done = True
