"""``WorldConfig``: everything a world is asked to be, checked once, when it is made.

``run_world`` used to take these as 21 keywords and check them inline; a value
that is made is a value that is valid, so a config can be built, passed around
and varied (``dataclasses.replace``) without re-checking at every caller.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.faults.plan import FaultPlan, make_plan
from harness.filesystem.mounts import Mount, MountTable, default_table
from harness.filesystem.sandbox import Leftover
from harness.rank.validator import validator
from harness.topology import PROFILES, Topology, get_topology
from harness.world.isolation import MODES, default_mode
from harness.world.limits import Limits


@dataclass(frozen=True)
class WorldConfig:
    """How to run a world (see ``run_world`` for what each field does).

    ``topology``, ``plan`` and ``table`` are the checked, resolved forms of
    ``topology``, ``faults`` and ``mounts``: computed once, at construction.
    """

    topology: str | Topology = "v4-64"
    #: the world's deadline, in seconds of its own clock (``harness.world.clock``)
    timeout: float = 30.0
    #: the wall-clock guard: the most wall seconds the world may take (None: scaled to
    #: this machine's load, ``guard_seconds``); it ends only a world whose clock is held
    wall_limit: float | None = None
    seed: int = 0
    profile: str = "legacy"
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: host index -> the args its ranks receive instead of ``args`` (other hosts: ``args``)
    args_by_host: dict[int, tuple] | None = None
    argv: tuple[str, ...] | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    preload: tuple[str, ...] | None = None
    mounts: MountTable | list[Mount] | None = None
    faults: FaultPlan | list[dict[str, Any]] | None = None
    sandbox: bool = True
    files: tuple[Leftover, ...] = ()
    watch: tuple[str, ...] = ()
    max_restarts: int = 20
    #: a pre-empted rank's job restarts whole (a training job resubmitted): once every rank
    #: has ended, all start again on their disks; else each pre-empted host comes back alone
    restart_job: bool = False
    #: the cost model of a training step: world seconds at each step marker
    #: (``torch_xla.sync``, ``mark_step``), 0 for none
    step_seconds: float = 0.0
    #: a rank that fails (a signal, a non-zero exit) ends the world at once, its other
    #: units SIGKILLed, as a launcher such as torchrun tears a job down; off by default,
    #: since a pod's ranks wait for a dead peer forever
    teardown_on_failure: bool = False
    keep_output_dir: bool = False
    record_files: bool = False
    #: a ``Validator`` or anything ``harness.rank.validator.validator`` reads
    checker: Any = None
    #: what the world may take of the machine (``harness.world.limits``): memory, output,
    #: disk, processes; the world is stopped at the first it passes
    limits: Limits = field(default_factory=Limits.from_environment)
    #: ``python`` (the view alone) or ``kernel`` (each host a mount namespace too, where the
    #: machine allows it: ``harness.world.isolation``); default ``$HARNESS_ISOLATION`` or kernel
    isolation: str = field(default_factory=default_mode)
    #: the machine's directories the units read by path that the target's ref does not name
    #: (a user's file behind a workload's adapter): kernel isolation keeps them in sight
    reads: tuple[str, ...] = ()
    #: told where the world is (a ``harness.world.lifecycle.Progress``) about four times a
    #: second while the harness waits for it; in the harness process, never in a rank
    progress: Callable[[Any], None] | None = None

    def __post_init__(self) -> None:
        # Normalise what callers pass loosely (lists, None), then check it all.
        set_ = object.__setattr__
        set_(self, "args", tuple(self.args))
        set_(self, "kwargs", dict(self.kwargs or {}))
        if self.args_by_host is not None:
            set_(self, "args_by_host", {int(h): tuple(a) for h, a in self.args_by_host.items()})
        set_(self, "argv", tuple(self.argv) if self.argv is not None else None)
        set_(self, "cwd", os.path.abspath(self.cwd or os.getcwd()))
        set_(self, "env", dict(self.env or {}))
        set_(self, "preload", tuple(self.preload) if self.preload is not None else None)
        set_(self, "files", tuple(self.files or ()))
        set_(self, "watch", tuple(self.watch or ()))
        set_(self, "topology", get_topology(self.topology))
        if self.checker is not None:
            set_(self, "checker", validator(self.checker))
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}: use one of {', '.join(PROFILES)}")
        if self.topology.spmd and self.profile == "legacy":  # type: ignore[union-attr]
            # an SPMD topology implies torch_xla 2.9: 2.0's XRT runtime had no SPMD to model
            set_(self, "profile", "current")
        if self.isolation not in MODES:
            raise ValueError(f"unknown isolation {self.isolation!r}: use one of {', '.join(MODES)}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.wall_limit is not None and not self.wall_limit > 0:
            raise ValueError(f"wall_limit must be positive, got {self.wall_limit}")
        try:
            pickle.dumps((self.args, self.kwargs, self.args_by_host))
        except Exception as exc:  # noqa: BLE001 - any pickling failure is the caller's mistake
            raise ValueError(f"args and kwargs must be picklable to reach the ranks: {exc}") from None
        hosts = self.topology.hosts  # type: ignore[union-attr]
        for h in self.args_by_host or {}:
            if not 0 <= h < hosts:
                raise ValueError(f"args_by_host: {h} is not a host of the topology "
                                 f"(hosts 0-{hosts - 1})")
        if not self.sandbox and self.mounts:
            raise ValueError("mounts need the sandbox: pass sandbox=True")
        plan, table = self.plan, self.table
        if plan.faults and table is None and any(f.spec.needs_sandbox for f in plan.faults):
            raise ValueError("filesystem faults need the sandbox: pass sandbox=True")
        if self.files and table is None:
            raise ValueError("files need the sandbox: pass sandbox=True")

    @property
    def topo(self) -> Topology:
        assert isinstance(self.topology, Topology)
        return self.topology

    @cached_property
    def home(self) -> str:
        return os.path.expanduser("~")

    @cached_property
    def table(self) -> MountTable | None:
        """The mount table every rank sees, or None without the sandbox."""
        if not self.sandbox:
            return None
        mounts = self.mounts
        table = mounts if isinstance(mounts, MountTable) else default_table(
            self.topo, self.home, self.cwd or "")
        for mount in (mounts if isinstance(mounts, list) else []):
            table = table.with_mount(mount)
        return table

    @cached_property
    def plan(self) -> FaultPlan:
        if isinstance(self.faults, FaultPlan):
            return self.faults
        return make_plan(list(self.faults or []), seed=self.seed,
                         world_size=self.topo.world_size, hosts=self.topo.hosts, home=self.home)
