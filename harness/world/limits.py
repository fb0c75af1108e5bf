"""What a world may take of the machine, and the meter that stops it at the first limit.

Without limits one rank can harm the machine the harness runs on: 20 GB allocated wakes
the machine's OOM killer, which kills whatever it likes (the harness, the user's editor);
1 GB printed or 5 GB written fill its disk. So the harness measures each world while it
runs, from outside (``/proc`` and the world's own directories: nothing a rank can change),
and stops the world at the first limit passed. Its ranks still alive are then CRASH, each
with the limit's words, as a pod's OOM killer would leave them; the report names the limit.

- ``memory``: the whole world's, not a rank's: every process under its leader, ranks,
  launchers and whatever they started. Summed cheaply first (each process's anonymous
  memory beyond what it inherited from the fork server); only when that passes the limit
  is it confirmed with the kernel's proportional count (``Pss``), which counts a page
  shared by eight ranks once, not eight times. Memory no process's resident set shows is
  added, each object once (``harness.world.held``): memfds and tmpfs files deleted but held
  open, SysV segments the world's processes made.
- ``output``: what one rank (or launcher) printed, stdout and stderr together. Reports keep
  the last MiB of each anyway. Not capped where it is written: a unit's stdout is a file of
  its own, written by the target, its C code and its subprocesses alike, and a cap there
  (a pipe the harness reads, a hook on every write) would cost every print. It is looked at
  every 20 ms instead, and while it grows again before it can reach the limit at the rate
  it grows (``OUTPUT_SOONEST`` at most): a rank printing a GiB a second stops a few times
  its limit past it at most.
- ``written``: the disk the world's sandbox takes (its hosts' ``/tmp``, home, mounts):
  blocks, so a sparse file costs what it holds; and files deleted but held open.
- ``processes``: the world's processes at once (a fork bomb).

The meter looks often enough to stop a runaway within a second of passing a limit (more
often for small worlds), and rarely enough to cost a few per cent of one core. One call is
faster than any meter, so the kernel holds the world too where it can: a cgroup of the
world's own (``harness.world.cgroups``: memory and processes, a margin above their limits;
what the kernel did there stops the world naming the limit, ``Meter.kernel``), and every
unit's RLIMIT_FSIZE at the written limit (no single file past it: the unit that tries ends
by the kernel's SIGXFSZ, seen in its exit status, ``Meter.killed``; an ``OSError`` the
target could swallow is not something the harness sees from outside).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from harness.inputs import size_text
from harness.world import cgroups, held

GiB, MiB = 1 << 30, 1 << 20
log = logging.getLogger(__name__)


def _memory_default() -> int:
    """8 GiB, or half this machine's memory if that is less: several worlds run at once."""
    try:
        with open("/proc/meminfo") as f:
            total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 8 * GiB
    return min(8 * GiB, total // 2)


@dataclass(frozen=True)
class Limits:
    """A world's limits, in bytes (``processes``: a count); ``None``: no limit."""

    memory: int | None = _memory_default()
    output: int | None = 64 * MiB
    written: int | None = 2 * GiB
    processes: int | None = 4096

    @classmethod
    def from_environment(cls) -> Limits:
        """The defaults, with what ``$HARNESS_LIMITS`` changes (``memory=4GiB,output=16MiB``,
        ``written=none``): a CI runner's or a test's own bounds for every world. A value
        that cannot be read is said once and left at its default."""
        given = os.environ.get(LIMITS_ENV, "").strip()
        if not given:
            return cls()
        try:
            return cls(**parse_limits(given))
        except ValueError as exc:
            log.warning("%s=%r: %s; the defaults hold", LIMITS_ENV, given, exc)
            return cls()


#: Changes the limits of every world that does not set its own (see ``Limits.from_environment``).
LIMITS_ENV = "HARNESS_LIMITS"
_SIZE = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*(b|kib|mib|gib|tib|kb|mb|gb|tb|k|m|g|t)?\s*$")
_UNITS = {"b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 10**3, "m": 1 << 20, "mib": 1 << 20,
          "mb": 10**6, "g": 1 << 30, "gib": 1 << 30, "gb": 10**9, "t": 1 << 40, "tib": 1 << 40,
          "tb": 10**12}


def parse_limits(text: str) -> dict[str, int | None]:
    """``memory=4GiB,output=16MiB,processes=512,written=none`` as ``Limits`` fields;
    ``ValueError`` naming what cannot be read."""
    out: dict[str, int | None] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or name not in Limits.__dataclass_fields__:
            raise ValueError(f"{part!r} is not name=value with a name of "
                             f"{', '.join(Limits.__dataclass_fields__)}")
        if value.strip().lower() in ("none", "off"):
            out[name] = None
            continue
        match = _SIZE.match(value)
        if match is None or (name == "processes" and match[2]):
            raise ValueError(f"{part!r}: {value!r} is not "
                             + ("a count" if name == "processes" else "a size (4GiB, 512MiB)"))
        amount = int(float(match[1]) * _UNITS[(match[2] or "b").lower()])
        if amount <= 0:
            raise ValueError(f"{part!r}: a limit is more than 0 (or none)")
        out[name] = amount
    return out


@dataclass(frozen=True)
class Exceeded:
    """The first limit a world passed, in words a report shows."""

    limit: str  # memory | output | written | processes
    words: str  # ``the world's memory limit of 8 GiB: its processes held 8.2 GiB (rank 3: 7.9 GiB)``


#: How often each kind is measured: a walk of /proc costs per process, a walk of the sandbox
#: per file, so the larger the world the less often (seconds: base + per item).
_EVERY = {"processes": (0.1, 0.001), "written": (0.5, 0.0001), "output": (0.02, 0.0002)}
#: While a unit's output grows, it is looked at again before it can reach the limit at the
#: rate it grew, but not more often than this (seconds: a listing of the world's directory).
OUTPUT_SOONEST = 0.005

class Meter:
    """Measures one world against its ``Limits``: ``check()`` is called from the world's
    server loop as often as it likes and measures only when each kind is due."""

    def __init__(self, limits: Limits, leader: Callable[[], int | None],
                 units: Callable[[], Mapping[int, str]], outdir: str,
                 sandbox: str | None, group: cgroups.Group | None = None,
                 file_size: int | None = None) -> None:
        self.limits = limits
        self._leader = leader  # the root of the world's process tree, once it is known
        self._units = units  # pid -> ``rank 3`` / ``launcher 1``, for the words
        self._outdir = outdir
        self._sandbox = sandbox
        self.group = group  # the world's cgroup, whose kernel limits hold it too
        self.file_size = file_size  # the units' RLIMIT_FSIZE: no file of theirs grows past it
        self._due = {"processes": 0.0, "written": 0.0, "output": 0.0}
        self._count = {"processes": 1, "written": 1, "output": 1}
        self._printed_at: tuple[float, int] | None = None  # the largest output, when
        self._deleted = 0  # disk in files the world deleted but holds open, at the last look
        #: every process of the world seen, and the SysV segments they made (id -> creator):
        #: what the harness removes when the world ends
        self.seen: set[int] = set()
        self.segments: dict[int, int] = {}

    def check(self, now: float | None = None) -> Exceeded | None:
        now = time.monotonic() if now is None else now
        exceeded = None
        if now >= self._due["processes"]:
            exceeded = self.kernel() or self._processes()
            self._reschedule("processes", now)
        if exceeded is None and self.limits.output is not None and now >= self._due["output"]:
            exceeded = self._printed(now)
        if exceeded is None and self._sandbox is not None and self.limits.written is not None \
                and now >= self._due["written"]:
            exceeded = self._written()
            self._reschedule("written", now)
        return exceeded

    def next_due(self) -> float:
        """When ``check`` next measures something (a server that waits no longer)."""
        return min(self._due.values())

    def _reschedule(self, kind: str, now: float) -> None:
        base, each = _EVERY[kind]
        self._due[kind] = now + base + each * self._count[kind]

    # -- what the kernel did: the world's cgroup, a unit it killed ------------------------
    def kernel(self) -> Exceeded | None:
        """A limit the kernel held the world at (its cgroup's): the OOM killer acted in
        it, or it refused a fork."""
        group, limits = self.group, self.limits
        if group is None:
            return None
        if limits.memory is not None and cgroups.oom_kills(group):
            return Exceeded("memory", f"the world's memory limit of {size_text(limits.memory)}: "
                                      f"its processes held {_amount(cgroups.peak(group))} "
                                      "and the kernel's OOM killer ended one at the world's "
                                      f"hard limit of {_amount(limits.memory + cgroups.MARGIN)}")
        if limits.processes is not None and cgroups.forks_refused(group):
            return Exceeded("processes", f"the world's limit of {limits.processes} processes: "
                                         "the kernel refused a fork at the world's hard limit "
                                         f"of {limits.processes * cgroups.THREADS_PER_PROCESS} "
                                         "processes and threads")
        return None

    def killed(self, unit: str, status: int) -> Exceeded | None:
        """``unit`` (``rank 3``) exited with ``status``: the limit that killed it, if the
        kernel did (the world's OOM killer, the file-size limit of its written limit)."""
        if not os.WIFSIGNALED(status):
            return None
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXFSZ and self.file_size is not None and self.limits.written:
            return Exceeded("written", f"the world's limit of {size_text(self.limits.written)} "
                                       f"written into its sandbox: {unit} wrote a file past "
                                       f"{_amount(self.file_size)}, which the kernel refused")
        if sig == signal.SIGKILL:
            return self.kernel()
        return None

    # -- processes and their memory, output ----------------------------------------------
    def _processes(self) -> Exceeded | None:
        leader = self._leader()
        limits = self.limits
        if leader is None:
            return None
        tree = process_tree(leader)
        self._count["processes"] = len(tree)
        self.seen.update(tree)
        if limits.processes is not None and len(tree) > limits.processes:
            return Exceeded("processes", f"the world's limit of {limits.processes} processes: "
                                         f"{len(tree)} were running")
        if limits.memory is None and self._sandbox is None:
            return None
        in_memory, on_disk = held.open_files(tree)
        self._deleted = sum(h.size for h in on_disk)
        if limits.memory is not None:
            return self._memory(leader, tree, in_memory)
        return None

    def _printed(self, now: float) -> Exceeded | None:
        """The output limit: looked at every tenth of a second, and sooner while a unit's
        output grows, at the rate it grows: a rank printing a GiB a second stops a few
        MiB past its limit, not hundreds."""
        limit = self.limits.output
        assert limit is not None
        base, each = _EVERY["output"]
        self._due["output"] = now + base + each * len(self._units())
        sizes: dict[str, int] = {}
        try:
            names = os.listdir(self._outdir)
        except OSError:
            return None
        for name in names:
            unit, _, stream = name.rpartition(".")
            if stream in ("stdout", "stderr"):
                try:
                    sizes[unit] = sizes.get(unit, 0) + os.stat(os.path.join(self._outdir, name)).st_size
                except OSError:
                    continue
        over = sorted((u for u, size in sizes.items() if size > limit), key=_unit_order)
        if not over:
            largest = max(sizes.values(), default=0)
            if self._printed_at is not None and largest > self._printed_at[1]:
                then, before = self._printed_at
                rate = (largest - before) / max(now - then, 1e-3)
                self._due["output"] = min(self._due["output"], now + max(
                    OUTPUT_SOONEST, (limit - largest) / rate / 2))
            self._printed_at = (now, largest)
            return None
        who = over[0].replace("rank-", "rank ").replace("host-", "launcher ")
        return Exceeded("output", f"the world's output limit of {size_text(limit)} a rank: "
                                  f"{who} printed {_amount(sizes[over[0]])}")

    def _memory(self, leader: int, tree: dict[int, int],
                objects: list[held.Held]) -> Exceeded | None:
        """Summed cheaply first (anonymous memory beyond what was inherited, and the memory
        objects held: memfds, SysV segments), confirmed with ``Pss`` only past the limit.
        A mapped object is in its mappers' ``Pss`` too: the confirmation takes the larger
        of ``Pss`` alone and ``Pss`` without shared memory plus the objects, never both."""
        limit = self.limits.memory
        assert limit is not None
        for segment in held.segments():
            if segment.creator in tree:
                self.segments[segment.shmid] = segment.creator
            if self.segments.get(segment.shmid) == segment.creator:
                owner = segment.creator if segment.creator in tree else leader
                objects.append(held.Held(owner, "a SysV segment", segment.size))
        base = anonymous(leader) or 0  # what every process of the world inherited
        estimate = sum(max(0, (anonymous(pid) or 0) - (0 if pid == leader else base))
                       for pid in tree) + sum(o.size for o in objects)
        if estimate <= limit:
            return None
        shares = {pid: proportional(pid, shmem=True) for pid in tree}
        whole = sum(s[0] for s in shares.values())
        apart = sum(s[0] - s[1] for s in shares.values()) + sum(o.size for o in objects)
        total = max(whole, apart)
        if total <= limit:
            return None
        units = self._units()
        by_unit: dict[str, int] = {}
        kinds: dict[str, dict[str, int]] = {}
        for pid, (pss, shmem) in shares.items():
            owner = _owner(pid, tree, units)
            by_unit[owner] = by_unit.get(owner, 0) + (pss if whole >= apart else pss - shmem)
        if whole < apart:
            for o in objects:
                owner = _owner(o.pid, tree, units)
                by_unit[owner] = by_unit.get(owner, 0) + o.size
                kinds.setdefault(owner, {})[o.kind] = kinds.get(owner, {}).get(o.kind, 0) + o.size
        top, most = max(by_unit.items(), key=lambda kv: kv[1])
        kind, amount = max(kinds.get(top, {"": 0}).items(), key=lambda kv: kv[1])
        what = f"{_amount(most)} in {kind}" if kind and amount * 2 > most else _amount(most)
        return Exceeded("memory", f"the world's memory limit of {size_text(limit)}: its "
                                  f"processes held {_amount(total)} ({top}: {what})")

    # -- the sandbox's disk ---------------------------------------------------------------
    def _written(self) -> Exceeded | None:
        limit = self.limits.written
        assert limit is not None and self._sandbox is not None
        used, files = disk_usage(self._sandbox, stop_above=limit)
        self._count["written"] = files
        if used <= limit and used + self._deleted <= limit:
            return None
        gone = f" ({_amount(self._deleted)} of them deleted, still open)" \
            if used <= limit else ""
        return Exceeded("written", f"the world's limit of {size_text(limit)} written into its "
                                   f"sandbox: its files took more than {_amount(limit)}{gone}")


def _unit_order(name: str) -> tuple[int, str]:
    return (0 if name.startswith("rank-") else 1, name)


def _owner(pid: int, tree: Mapping[int, int], units: Mapping[int, str]) -> str:
    """The unit ``pid`` belongs to: itself, or the nearest unit it descends from."""
    seen = 0
    while pid in tree and seen < len(tree):
        if pid in units:
            return units[pid]
        pid = tree[pid]
        seen += 1
    return "the world's leader"


def _amount(n: int) -> str:
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


def process_tree(root: int) -> dict[int, int]:
    """``root`` and every process under it, each with its parent (``root``'s: 0)."""
    tree = {root: 0}
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    children = f.read().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in tree:
                    tree[child] = pid
                    stack.append(child)
    return tree


def _status_kib(pid: int, field: bytes) -> int | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return 0  # a kernel thread, a zombie: nothing of its own


def anonymous(pid: int) -> int | None:
    """The anonymous memory ``pid`` has resident (heap, stacks: not files), in bytes."""
    return _status_kib(pid, b"RssAnon:")


def proportional(pid: int, shmem: bool = False) -> tuple[int, int]:
    """``pid``'s proportional share of the memory it has resident (``Pss``), and of that
    its share of shared memory (``Pss_Shmem``: memfds, SysV, tmpfs files it maps), bytes."""
    pss = shared = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    pss = int(line.split()[1]) * 1024
                    if not shmem:
                        break
                elif line.startswith(b"Pss_Shmem:"):
                    shared = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return pss, shared


def disk_usage(root: str, stop_above: int | None = None) -> tuple[int, int]:
    """The bytes of disk the files under ``root`` take (blocks: a sparse file counts what it
    holds), and how many entries were looked at; the walk stops once past ``stop_above``.
    Symlinks are not followed."""
    used = entries = 0
    stack = [root]
    while stack:
        try:
            listing: Iterable[os.DirEntry[str]] = os.scandir(stack.pop())
        except OSError:
            continue
        with listing as it:  # type: ignore[attr-defined]
            for entry in it:
                entries += 1
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        used += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
                if stop_above is not None and used > stop_above:
                    return used, entries
    return used, entries
