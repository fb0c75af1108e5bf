"""What the kernel lets a process of this machine do, asked where a refusal or a change
costs this process nothing: in a forked child."""

from __future__ import annotations

import os
from collections.abc import Callable


def in_a_child(attempt: Callable[[], str]) -> tuple[bool, str]:
    """Run ``attempt`` in a forked child of this one: (True, what it returned), or (False,
    the words of what it raised). Whatever it does to its namespaces, its capabilities or
    its filters stays in the child, which exits at once."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            said = b"+" + attempt().encode()
        except BaseException as exc:  # noqa: BLE001 - the child's words, whatever they are
            said = b"!" + (str(exc).encode()[:2000] or type(exc).__name__.encode())
        try:
            os.write(write, said)
        finally:
            os._exit(0)
    os.close(write)
    try:
        said = os.read(read, 4096).decode(errors="replace")
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    return said.startswith("+"), said[1:] or "the probe said nothing"
