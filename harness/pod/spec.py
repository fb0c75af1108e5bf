"""What the controller hands a worker for one cell, and where a cell's files live there.

The spec travels controller -> worker only (pickled: the worker trusts its
controller, as a rank trusts its harness). Everything that comes back is
plain data read without running a target's code (``collect``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from harness.faults.plan import FaultPlan
from harness.filesystem.sandbox import Leftover
from harness.pod.fabric import FabricAddress
from harness.rank.validator import Validator

#: Everything the harness keeps on a worker, under its home directory.
REMOTE_ROOT = ".harness-pod"


@dataclass(frozen=True)
class PodCellSpec:
    cell_id: str
    run_id: str
    target: str  # module:function or file.py:function, resolved in ``code_dir``
    hosts: int
    ranks_per_host: int
    profile: str
    seed: int
    timeout: float
    start: float  # the controller's time.time() when the cell started: events count from it
    code_dir: str  # relative to the worker's home: the user's code at the synced commit
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    args_by_host: dict[int, tuple[Any, ...]] | None = None
    faults: FaultPlan = field(default_factory=FaultPlan)
    checker: Validator | None = None
    files: tuple[Leftover, ...] = ()  # placed on each host before the ranks start
    clean: tuple[str, ...] = ()  # real paths removed on each host before and after the cell
    watch: tuple[str, ...] = ()
    fabric: FabricAddress | None = None  # the local pod's interconnect; None: the real TPU's
    #: the controller's home: paths under it (a role learned in the simulator, a placed
    #: file) are under the worker's own home there
    home: str = ""
    #: a local pod: the only directories a cell may place files in (its worker's own, and the
    #: pod's writable mounts); the rest of the filesystem is this machine's
    confined: tuple[str, ...] = ()

    def rehome(self, path: str, home: str) -> str:
        """``path`` as it is on a worker whose home is ``home``."""
        if self.home and (path == self.home or path.startswith(self.home.rstrip("/") + "/")):
            return home + path[len(self.home):]
        return path

    @property
    def world_size(self) -> int:
        return self.hosts * self.ranks_per_host

    def ranks_of_host(self, host: int) -> range:
        return range(host * self.ranks_per_host, (host + 1) * self.ranks_per_host)

    def args_of(self, rank: int) -> tuple[Any, ...]:
        return (self.args_by_host or {}).get(rank // self.ranks_per_host, self.args)

    @property
    def workdir(self) -> str:
        """This cell's directory, relative to the worker's home."""
        return posixpath.join(REMOTE_ROOT, "runs", self.run_id, self.cell_id)


def rank_file(workdir: str, rank: int, what: str) -> str:
    """``rank-3.result``, ``rank-3.events``, ``rank-3.stdout``...: one place names them."""
    return posixpath.join(workdir, f"rank-{rank}.{what}")


def host_file(workdir: str, host: int) -> str:
    return posixpath.join(workdir, f"host-{host}.json")


def watched_file(workdir: str, host: int) -> str:
    """The files a cell's checker watches (``spec.watch``), as this host's ranks left them."""
    return posixpath.join(workdir, f"watched-{host}.json")
