"""Framing between rank processes and the coordinator.

A frame is ``!IQ`` (header length, payload length), a header (a JSON object,
UTF-8) and raw payload bytes. Payloads (tensor data, rendezvous bytes, a
pickled return value) stay out of the header so that a 4 MB tensor is copied
as few times as possible, and so that reading a header never runs code. Both
lengths are bounded: a frame beyond them is refused before it is allocated.

This module is imported inside rank processes, so it imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
from collections.abc import Iterator

_PREFIX = struct.Struct("!IQ")


_encode = json.JSONEncoder(separators=(",", ":")).encode  # ASCII: a path may hold surrogates


#: Bounds on one frame, checked before a byte of it is allocated.
MAX_HEADER = 1 << 20
MAX_PAYLOAD = 1 << 30


#: A fork server's last argument when more preloads follow, in a ``preload`` frame (the
#: harness starts it before it has read its targets).
MORE_PRELOADS = "+"


class ConnectionLost(EOFError):
    """The other end closed the socket."""


class FrameError(ValueError):
    """A frame that breaks the protocol: too long, or not a well-formed message."""


def encode(header: dict) -> bytes:
    """A header as it travels (``send_frame`` takes it so, to send one reply to many)."""
    return _encode(header).encode()


def decode(head: bytes | bytearray) -> dict:
    """A header as a dict; ``FrameError`` unless it is exactly one JSON object."""
    try:
        header = json.loads(head)
    except ValueError as exc:  # UnicodeDecodeError included
        raise FrameError(f"a header that is not JSON ({exc})") from None
    if type(header) is not dict:
        raise FrameError(f"a header that is not a JSON object but {type(header).__name__}")
    return header


def send_frame(sock: socket.socket, header: dict | bytes,
               payload: bytes | bytearray | memoryview = b"") -> None:
    head = header if type(header) is bytes else encode(header)  # type: ignore[arg-type]
    parts = [_PREFIX.pack(len(head), len(payload)), head]
    if len(payload):
        parts.append(payload)
    total = sum(len(p) for p in parts)
    sent = sock.sendmsg(parts)
    if sent < total:
        # Rare for small frames; large payloads go out in the loop below.
        data = memoryview(b"".join(bytes(p) for p in parts))[sent:]
        while len(data):
            n = sock.send(data)
            data = data[n:]


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionLost(f"connection closed after {got} of {n} bytes")
        got += k
    return buf


def recv_raw(sock: socket.socket) -> tuple[bytearray, bytearray]:
    """One frame's header bytes and payload, refused (``FrameError``) before
    anything is allocated if either length is beyond its bound."""
    head_len, payload_len = _PREFIX.unpack(_recv_exact(sock, _PREFIX.size))
    if head_len > MAX_HEADER:
        raise FrameError(f"a header of {head_len} bytes (the limit is {MAX_HEADER})")
    if payload_len > MAX_PAYLOAD:
        raise FrameError(f"a payload of {payload_len} bytes (the limit is {MAX_PAYLOAD})")
    head = _recv_exact(sock, head_len)
    payload = _recv_exact(sock, payload_len) if payload_len else bytearray()
    return head, payload


def recv_frame(sock: socket.socket) -> tuple[dict, bytearray]:
    """One frame, its header as a dict (the harness decodes a unit's frames with
    ``protocol.decode`` instead, which checks every field)."""
    head, payload = recv_raw(sock)
    return decode(head), payload


#: The directory, of mode 0700, that holds a world's socket in the world's own directory.
CHANNEL_DIR = "channel"

#: The size of ``sun_path``, its NUL included: a longer socket path is reached through a
#: descriptor of its directory (``_reachable``).
_SUN_PATH = 108

#: The machine's own, bound now: a unit's ``os.open`` and ``os.close`` may be its view's.
_open, _close = os.open, os.close


def new_address(label: str, under: str) -> str:
    """A socket path for a world only this user can reach. On Linux, in a directory of mode
    0700 made in ``under`` (the world's directory, which every host's mount namespace sees
    at its own path): a filesystem socket, unlike an abstract one, is reached across network
    namespaces too, and nobody else on the machine may connect to it. Elsewhere a path in
    the temporary directory, as before."""
    if os.uname().sysname == "Linux":
        directory = os.path.join(under, CHANNEL_DIR)
        os.mkdir(directory, 0o700)
        os.chmod(directory, 0o700)  # whatever the umask
        return os.path.join(directory, "world.sock")
    import tempfile
    token = f"harness-{os.getpid()}-{label}-{os.urandom(6).hex()}"
    return os.path.join(tempfile.gettempdir(), token + ".sock")


def remove_address(address: str) -> None:
    """Remove a world's socket, and its directory where ``new_address`` made one."""
    if address.startswith("\0"):
        return
    directory = os.path.dirname(address)
    try:
        os.unlink(address)
        if os.path.basename(directory) == CHANNEL_DIR:
            os.rmdir(directory)
    except OSError:
        pass


@contextlib.contextmanager
def _reachable(address: str) -> Iterator[str]:
    """``address`` as ``bind`` and ``connect`` can take it: itself, or where it is too long
    for ``sun_path`` (a world's directory in a long ``$TMPDIR``), its name under the
    ``/proc/self/fd`` link of its directory (Linux): no chdir, so a unit's working
    directory, which its target sees, never moves."""
    if address.startswith("\0") or len(os.fsencode(address)) < _SUN_PATH:
        yield address
        return
    fd = _open(os.path.dirname(address), os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(address)}"
    finally:
        _close(fd)


def bind(sock: socket.socket, address: str) -> None:
    with _reachable(address) as path:
        sock.bind(path)


def connect(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _reachable(address) as path:
            sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock
