"""Under Python isolation a world's hosts share the machine's network: a rank's use of it is
told to the harness, so that a cell it passed says so.

On a pod each TPU VM has its own loopback: a server rank 0 opens on ``127.0.0.1`` is
reached by the ranks of its own host only. Kernel isolation gives each host a network
namespace of its own (``namespaces``), so a sync through ``127.0.0.1`` fails there as on a
pod; Python isolation cannot, and a sync that passed through the machine's one loopback
is a PASS no pod would give. So in a unit of a Python-isolated world, the first IP socket
it connects or binds (``socket.socket.connect``, ``connect_ex``, ``bind``; C code's are
not seen) sends one ``networked`` word; a process the unit forks says nothing (its
channel is its parent's)."""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from typing import Any

_IP = (socket.AF_INET, socket.AF_INET6)
#: the unit's way to tell the harness, once (None: told, or not a unit's process)
_tell: Callable[[], None] | None = None


def watch() -> None:
    """In a world's leader, before it forks its units: Python's IP sockets tell ``_tell``."""
    import os

    for name in ("connect", "connect_ex", "bind"):
        setattr(socket.socket, name, _telling(getattr(socket.socket, name)))
    os.register_at_fork(after_in_child=disarm)


def arm(tell: Callable[[], None]) -> None:
    """In a unit, once its channel is up: the first IP socket's use calls ``tell``."""
    global _tell
    _tell = tell


def disarm() -> None:
    global _tell
    _tell = None


def _telling(real: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def call(self: socket.socket, *args: Any) -> Any:
        global _tell
        tell = _tell
        if tell is not None and self.family in _IP:
            _tell = None
            tell()
        return real(self, *args)
    return call
