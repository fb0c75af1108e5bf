"""Framing between rank processes and the coordinator.

A frame is ``!IQ`` (header length, payload length), a header (a JSON object,
UTF-8) and raw payload bytes. Payloads (tensor data, rendezvous bytes, a
pickled return value) stay out of the header so that a 4 MB tensor is copied
as few times as possible, and so that reading a header never runs code. Both
lengths are bounded: a frame beyond them is refused before it is allocated.

This module is imported inside rank processes, so it imports nothing heavy.
"""

from __future__ import annotations

import json
import os
import socket
import struct

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


def new_address(label: str) -> str:
    """A socket address private to this run: abstract on Linux, a path elsewhere."""
    token = f"harness-{os.getpid()}-{label}-{os.urandom(6).hex()}"
    if hasattr(socket, "AF_UNIX") and os.uname().sysname == "Linux":
        return "\0" + token
    import tempfile
    return os.path.join(tempfile.gettempdir(), token + ".sock")


def connect(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    return sock
