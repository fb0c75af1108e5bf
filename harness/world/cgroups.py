"""A world's own cgroup, where the machine lets this process make one: the kernel's hard
limits beside the meter's measurement (``harness.world.limits``).

The meter looks every tenth of a second; one call (1.5 GiB put in a ``memfd`` at once, a
fork bomb) takes the machine before it looks. Where this process may make a child of its
own cgroup (cgroup v1, as root: a CI runner, this machine), each world's leader joins a
cgroup of its own (``memory`` and ``pids``) before it forks anything, so every process of
the world is in it, and the kernel holds the world a margin above its memory limit
(``memory.limit_in_bytes``: the OOM killer acts inside the world, never on the machine) and
at twice its processes limit (``pids.max`` counts threads too). The meter reads what the
kernel did (``memory.oom_control``'s ``oom_kill``, ``pids.events``' ``max``) and stops the
world naming the limit, as its own measurement would. Where no cgroup can be made (an
unprivileged user, cgroup v2 not delegated) ``unavailable`` says why, once, and the
meter's accounting alone holds the world.

Each cgroup is named ``harness-<pid>-<world>`` after the harness process that made it: the
harness removes it when its world ends, the reaper (``harness.world.reaper``) when the
harness died first.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("memory", "pids")
#: what the kernel allows a world above its memory limit: the meter stops it first when it
#: can (its processes' own memory, page cache written into its sandbox is the kernel's to
#: reclaim), the kernel when one call is faster than the meter
MARGIN = 256 << 20
#: ``pids.max`` counts every thread, the processes limit processes: a rank has a few threads
THREADS_PER_PROCESS = 2
PREFIX = "harness-"


def own(controller: str) -> str | None:
    """This process's cgroup directory of ``controller`` (cgroup v1), if mounted."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            where = os.path.join(ROOT, controller) + path.rstrip("/")
            return where if os.path.isdir(where) else None
    return None


@dataclass(frozen=True)
class Group:
    """One world's cgroup, a directory per controller."""

    memory: str | None
    pids: str | None

    @property
    def dirs(self) -> tuple[str, ...]:
        return tuple(d for d in (self.memory, self.pids) if d is not None)

    @property
    def procs(self) -> tuple[str, ...]:
        """The files the leader writes its pid into to join (``cgroup.procs``)."""
        return tuple(os.path.join(d, "cgroup.procs") for d in self.dirs)


_unavailable: str | None = None


def unavailable() -> str:
    """Why no world gets a cgroup of its own here ("" when it does): tried once per harness
    process, by making one and removing it."""
    global _unavailable
    if _unavailable is None:
        try:
            group = make(f"{PREFIX}{os.getpid()}-probe", memory=1 << 30, processes=64,
                         _probing=True)
        except OSError as exc:
            _unavailable = f"{exc.filename or 'cgroup'}: {exc.strerror or exc}"
        else:
            remove(group)
            _unavailable = ""
    return _unavailable


def make(name: str, memory: int | None, processes: int | None,
         _probing: bool = False) -> Group:
    """A cgroup ``name`` under this process's own, per controller with a limit to hold;
    ``OSError`` (nothing left behind) where the kernel refuses one."""
    if not _probing and unavailable():
        raise OSError(errno.EPERM, unavailable())
    made: list[str] = []
    try:
        memory_dir = pids_dir = None
        if memory is not None:
            memory_dir = _child("memory", name, made)
            _write(memory_dir, "memory.limit_in_bytes", memory + MARGIN)
            # without swap accounting the world could swap the machine full instead
            with contextlib.suppress(FileNotFoundError):
                _write(memory_dir, "memory.memsw.limit_in_bytes", memory + MARGIN)
        if processes is not None:
            pids_dir = _child("pids", name, made)
            _write(pids_dir, "pids.max", processes * THREADS_PER_PROCESS)
    except OSError:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise
    return Group(memory_dir, pids_dir)


def _child(controller: str, name: str, made: list[str]) -> str:
    parent = own(controller)
    if parent is None:
        raise OSError(errno.ENOENT, f"no cgroup v1 {controller} controller", ROOT)
    path = os.path.join(parent, name)
    os.mkdir(path)
    made.append(path)
    return path


def _write(directory: str, name: str, value: int) -> None:
    with open(os.path.join(directory, name), "w") as f:
        f.write(str(value))


def _fields(path: str) -> dict[str, int]:
    """A cgroup file of ``name value`` lines."""
    out: dict[str, int] = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if value.strip().isdigit():
                    out[key] = int(value)
    except OSError:
        pass
    return out


def oom_kills(group: Group) -> int:
    """How many processes the kernel's OOM killer ended inside the world's cgroup."""
    if group.memory is None:
        return 0
    return _fields(os.path.join(group.memory, "memory.oom_control")).get("oom_kill", 0)


def peak(group: Group) -> int:
    """The most memory the world's cgroup held (``memory.max_usage_in_bytes``)."""
    if group.memory is None:
        return 0
    try:
        with open(os.path.join(group.memory, "memory.max_usage_in_bytes")) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def forks_refused(group: Group) -> int:
    """How many forks (and thread starts) the kernel refused at ``pids.max``."""
    if group.pids is None:
        return 0
    return _fields(os.path.join(group.pids, "pids.events")).get("max", 0)


def join(procs: tuple[str, ...]) -> None:
    """In a world's leader, before it forks: this process (and so every process it starts)
    into its world's cgroup."""
    pid = str(os.getpid())
    for path in procs:
        with open(path, "w") as f:
            f.write(pid)


def remove(group: Group, wait: float = 1.0) -> bool:
    """Remove the world's cgroup once its last process is gone (a process being killed
    keeps it busy for a moment); False if one is still there."""
    end = time.monotonic() + wait
    left = list(group.dirs)
    while left:
        for path in list(left):
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    log.warning("could not remove the world's cgroup %s: %s", path, exc)
                    left.remove(path)
                continue
            left.remove(path)
        if not left or time.monotonic() >= end:
            break
        time.sleep(0.005)
    return not left


def remove_orphaned(alive: object) -> int:
    """Remove the cgroups of harness processes for which ``alive(pid)`` is False (a harness
    killed before it removed its worlds')."""
    removed = 0
    for controller in CONTROLLERS:
        parent = own(controller)
        if parent is None:
            continue
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if len(parts) < 3 or f"{parts[0]}-" != PREFIX or not parts[1].isdigit():
                continue
            if alive(int(parts[1])):  # type: ignore[operator]
                continue
            if remove(Group(os.path.join(parent, name), None), wait=0.0):
                removed += 1
    return removed


def remove_of(harness_pid: int) -> None:
    """Remove every cgroup the harness ``harness_pid`` made (its reaper, once it is gone)."""
    remove_orphaned(lambda pid: pid != harness_pid)
