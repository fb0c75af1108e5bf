"""The harness's event loop: one listening socket, every unit's connections, one thread.

Sockets and time only: what a frame means is the caller's (``on_frame``). A
single thread serves every rank, so the collective round trip has no thread
hand-off.
"""

from __future__ import annotations

import os
import select
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.rank import wire


@dataclass
class Conn:
    """Who is at the other end of a socket, once its hello said so."""

    role: str = "pending"  # rank | host | leader | pending
    ident: int = -1
    channel: str = ""
    pid: int | None = None


class EventLoop:
    """Accepts, reads and writes frames; hands each frame read to ``on_frame``,
    its header still bytes: what a frame means is not the loop's business."""

    def __init__(self, address: str,
                 on_frame: Callable[[socket.socket, bytearray, bytearray], None],
                 on_refused: Callable[[socket.socket, str], None]) -> None:
        self.address = address
        self.on_frame = on_frame
        self.on_refused = on_refused  # a frame too long to read: the caller says so, then forgets
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(address)
        self.listener.listen(4096)
        self.listener.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.conns: dict[socket.socket, Conn] = {}
        self.call: dict[int, socket.socket] = {}  # rank -> the socket its requests come on
        self.control: dict[int, socket.socket] = {}  # rank (host h: -1 - h) -> its stacks socket
        self._reads_elsewhere = 0  # reads outside ``poll``'s own round (see ``poll``)

    def poll(self, wait: float, until: float) -> None:
        """Wait up to ``wait`` seconds for frames and hand over every one that arrives;
        a frame that has begun is read to its end, but no later than ``until``."""
        events = self.selector.select(timeout=wait)
        read_before = self._reads_elsewhere
        for key, _ in events:
            sock = key.fileobj
            if sock is self.listener:
                self._accept()
                continue
            # A frame's handler may have read other sockets itself (``settle``,
            # ``read_last``): their events in this list are stale, and a blocking read
            # of a socket whose frames are gone would stall every rank until ``until``.
            if sock not in self.conns or (self._reads_elsewhere != read_before
                                          and not _readable(sock)):  # type: ignore[arg-type]
                continue
            self._read(sock, max(until - time.monotonic(), 0.05))  # type: ignore[arg-type]

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(True)
            self.conns[sock] = Conn()
            self.selector.register(sock, selectors.EVENT_READ)

    def _read(self, sock: socket.socket, timeout: float) -> bool:
        try:
            sock.settimeout(timeout)
            head, payload = wire.recv_raw(sock)
        except wire.FrameError as exc:
            self.on_refused(sock, str(exc))
            self.forget(sock)
            return False
        except (EOFError, OSError):
            self.forget(sock)
            return False
        self.on_frame(sock, head, payload)
        return True

    def forget(self, sock: socket.socket) -> None:
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        self.conns.pop(sock, None)
        sock.close()

    def send(self, sock: socket.socket, header: dict | bytes,
             payload: bytes | bytearray = b"") -> None:
        # A peer that is gone may still have frames for us in the socket: the
        # read side forgets the socket once it has read them and met the EOF.
        try:
            sock.settimeout(10)
            wire.send_frame(sock, header, payload)
        except OSError:
            pass

    def leader(self) -> socket.socket | None:
        for sock, conn in self.conns.items():
            if conn.role == "leader":
                return sock
        return None

    def read_last(self, sock: socket.socket, timeout: float) -> None:
        """Read the frames a process that is gone left in its socket, then forget it.

        Everything it sent is buffered by now, so nothing is waited for: the EOF
        never comes while a child it forked holds the socket, and waiting for it
        would cost the one thread that serves every rank. What such a child sends
        later is not the rank's. (``timeout`` bounds only a frame that has begun.)
        """
        self._reads_elsewhere += 1
        while sock in self.conns and _readable(sock) and self._read(sock, timeout):
            pass
        if sock in self.conns:
            self.forget(sock)

    def settle(self, timeout: float) -> None:
        """Accept every connection in the backlog and read the hello of each one that
        has sent it: a unit killed right after it connected has said who it is, and
        what it sent next, before the harness judges its exit."""
        self._reads_elsewhere += 1
        self._accept()
        pending = {s.fileno(): s for s, c in self.conns.items() if c.role == "pending"}
        if not pending:
            return
        poller = select.poll()  # not select(): a 256-rank world has fds > 1024
        for fd in pending:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(0):
            self._read(pending[fd], timeout)

    def drain_all(self, timeout: float) -> None:
        """At the world's end: read what every unit left in its socket (see ``read_last``)."""
        for sock in list(self.conns):
            self.read_last(sock, timeout)

    def close(self) -> None:
        for sock in list(self.conns):
            self.forget(sock)
        self.selector.close()
        self.listener.close()
        if not self.address.startswith("\0"):
            try:
                os.unlink(self.address)
            except OSError:
                pass


def _readable(sock: socket.socket) -> bool:
    """Has ``sock`` a frame or its EOF waiting, right now?"""
    poller = select.poll()  # not select(): a 256-rank world has fds > 1024
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
