"""The harness's event loop: one listening socket, every unit's connections, one thread.

Sockets and time only: what a frame means is the caller's (``on_frame``). A
single thread serves every rank, so the collective round trip has no thread
hand-off.
"""

from __future__ import annotations

import logging
import os
import select
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.rank import wire

log = logging.getLogger(__name__)


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
        wire.bind(self.listener, address)
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
            if not trusted_peer(sock):
                sock.close()
                continue
            sock.setblocking(True)
            self.conns[sock] = Conn()
            self.selector.register(sock, selectors.EVENT_READ)

    def _read(self, sock: socket.socket, timeout: float) -> bool:
        """Read one frame, waiting up to ``timeout`` for the rest of one that has begun;
        a connection that has not said who it is yet is waited for not at all (a hello
        is one small send, which arrives whole): anyone may connect."""
        try:
            sock.settimeout(0.0 if self.conns[sock].role == "pending" else timeout)
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
        wire.remove_address(self.address)


def _readable(sock: socket.socket) -> bool:
    """Has ``sock`` a frame or its EOF waiting, right now?"""
    poller = select.poll()  # not select(): a 256-rank world has fds > 1024
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def peer_credentials(sock: socket.socket) -> tuple[int, int, int] | None:
    """``(pid, uid, gid)`` of the process that connected ``sock``, as this process sees them
    (the kernel's word, translated into its namespaces); None where the platform cannot say."""
    try:
        return struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                   struct.calcsize("3i")))
    except (OSError, AttributeError):
        return None


def trusted_peer(sock: socket.socket) -> bool:
    """Did this user's process, or root's, connect ``sock``? The kernel's word
    (``SO_PEERCRED``), so that another user's is not heard at all; where the platform
    cannot say, the world's secret alone decides (``protocol.knows_secret``)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    creds = peer_credentials(sock)
    if creds is not None and creds[1] in (os.geteuid(), os.getuid(), 0):
        return True
    log.debug("refused a connection from %s: not this user's, nor root's",
              f"uid {creds[1]} (pid {creds[0]})" if creds else "an unknown peer")
    return False
