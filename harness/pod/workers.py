"""Who the workers of a pod are, in worker order: from a hosts file, a Cloud TPU or a local pod.

Worker ``i`` is host ``i`` of the topology: the order is the pod's own (the
hosts file's line order, the TPU's ``networkEndpoints`` order), never sorted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.inputs import InputError, read_text
from harness.vocabulary import UsageError

_LINE = re.compile(r"^(?:(?P<user>[^@\s:]+)@)?(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)"
                   r"(?::(?P<port>\d{1,5}))?$")


#: A hosts file lists workers, one line each: a 256-host pod is a few KiB.
MAX_HOSTS_BYTES = 1 << 20


class HostsFileError(UsageError, ValueError):
    """A hosts file the pod cannot be read from; the message names the file and line."""


@dataclass(frozen=True)
class Worker:
    """One TPU VM (or one local pod server), reached over SSH."""

    index: int
    host: str
    port: int = 22
    user: str | None = None

    @property
    def name(self) -> str:
        """``worker 3 (alice@10.0.0.4:22)``: how every message names it."""
        return f"worker {self.index} ({self.address})"

    @property
    def address(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        return f"{user}{self.host}{port}"


def parse_hosts(text: str, source: str = "<hosts>") -> list[Worker]:
    """One ``user@host[:port]`` per line (``#`` comments and blank lines skipped)."""
    workers: list[Worker] = []
    seen: dict[tuple[str, int], int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LINE.match(line)
        if m is None:
            raise HostsFileError(f"{source}, line {lineno}: {line!r} is not user@host[:port]")
        port = int(m.group("port") or 22)
        if not 0 < port < 65536:
            raise HostsFileError(f"{source}, line {lineno}: port {port} is not in 1..65535")
        host = m.group("host").strip("[]")
        if (host, port) in seen:
            raise HostsFileError(f"{source}, line {lineno}: {host}:{port} is already worker "
                                 f"{seen[host, port]} (line order is worker order; list each "
                                 "worker once)")
        seen[host, port] = len(workers)
        workers.append(Worker(len(workers), host, port, m.group("user")))
    if not workers:
        raise HostsFileError(f"{source}: no worker listed (one user@host[:port] per line)")
    return workers


def read_hosts(path: str | Path) -> list[Worker]:
    """``parse_hosts`` of a file, with an error naming it if it cannot be read."""
    try:
        text = read_text(path, MAX_HOSTS_BYTES, "a hosts file")
    except InputError as exc:
        raise HostsFileError(str(exc)) from None
    return parse_hosts(text, str(path))
