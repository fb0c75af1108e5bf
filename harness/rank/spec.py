"""What a world is asked to run: the picklable description handed from the
harness to the fork server, the world's leader and every rank."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.faults.plan import FaultPlan
from harness.filesystem.mounts import MountTable
from harness.rank.namespaces import Bind
from harness.rank.validator import Validator
from harness.topology import Topology


@dataclass(frozen=True)
class WorldSpec:
    world_id: str
    address: str  # the coordinator's listening socket
    topology: Topology
    profile: str  # "legacy" | "current"
    deadline: float  # time.time() at which the watchdog ends the world
    outdir: str  # rank stdout/stderr and fallback stack dumps
    cwd: str
    base_env: dict[str, str]
    shim_root: str
    target: str | None = None  # "module:function" or "path/file.py:function"
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    args_by_host: dict[int, tuple[Any, ...]] | None = None  # host -> args replacing ``args``
    argv: tuple[str, ...] | None = None  # exec mode: what follows "python"
    seed: int = 0
    home: str = "/root"
    mounts: MountTable | None = None  # None: the target sees the machine's filesystem
    faults: FaultPlan = field(default_factory=FaultPlan)
    record_files: bool = False  # every rank tells its file operations and imports
    checker: Validator | None = None  # run by every rank on the value its target returned
    #: kernel isolation (``harness.rank.namespaces``): each host's binds, made in a mount
    #: namespace of its own that its units join; None: Python isolation alone
    binds: dict[int, tuple[Bind, ...]] | None = None
    #: the world seconds a training step costs, at its step marker (``HarnessRuntime.step``)
    step_seconds: float = 0.0
    #: the world's cgroup (``harness.world.cgroups``): the files its leader writes its pid
    #: into before it forks anything; empty where the machine gives a world none
    cgroup: tuple[str, ...] = ()
    #: RLIMIT_FSIZE of every unit (the written limit: one call cannot put more on the disk)
    file_size: int | None = None
    #: what every hello to the harness carries (``protocol.knows_secret``): it travels only
    #: in this spec, pickled over the fork server's socket pair and inherited by fork, never
    #: in a file or the environment
    secret: str = field(default="", repr=False)

    def args_of(self, rank: int) -> tuple[Any, ...]:
        """The positional args ``rank`` calls the target with: its host's, else ``args``."""
        by_host = self.args_by_host or {}
        return by_host.get(self.topology.host_of(rank), self.args)

    @property
    def sandbox(self) -> str:
        import os
        return os.path.join(self.outdir, "fs")

    @property
    def exec_mode(self) -> bool:
        return self.argv is not None

    def units(self) -> list[tuple[str, int]]:
        """The processes the leader starts: every rank, or in exec mode every host."""
        if self.exec_mode:
            return [("host", h) for h in range(self.topology.hosts)]
        return [("rank", r) for r in range(self.topology.world_size)]
