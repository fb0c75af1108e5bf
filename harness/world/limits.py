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
  shared by eight ranks once, not eight times.
- ``output``: what one rank (or launcher) printed, stdout and stderr together. Reports keep
  the last MiB of each anyway.
- ``written``: the disk the world's sandbox takes (its hosts' ``/tmp``, home, mounts):
  blocks, so a sparse file costs what it holds.
- ``processes``: the world's processes at once (a fork bomb).

The meter looks often enough to stop a runaway within a second of passing a limit (more
often for small worlds), and rarely enough to cost a few per cent of one core.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from harness.inputs import size_text

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
_EVERY = {"processes": (0.1, 0.001), "written": (0.5, 0.0001)}

class Meter:
    """Measures one world against its ``Limits``: ``check()`` is called from the world's
    server loop as often as it likes and measures only when each kind is due."""

    def __init__(self, limits: Limits, leader: Callable[[], int | None],
                 units: Callable[[], Mapping[int, str]], outdir: str,
                 sandbox: str | None) -> None:
        self.limits = limits
        self._leader = leader  # the root of the world's process tree, once it is known
        self._units = units  # pid -> ``rank 3`` / ``launcher 1``, for the words
        self._outdir = outdir
        self._sandbox = sandbox
        self._due = {"processes": 0.0, "written": 0.0}
        self._count = {"processes": 1, "written": 1}

    def check(self, now: float | None = None) -> Exceeded | None:
        now = time.monotonic() if now is None else now
        exceeded = None
        if now >= self._due["processes"]:
            exceeded = self._processes()
            self._reschedule("processes", now)
        if exceeded is None and self._sandbox is not None and self.limits.written is not None \
                and now >= self._due["written"]:
            exceeded = self._written()
            self._reschedule("written", now)
        return exceeded

    def _reschedule(self, kind: str, now: float) -> None:
        base, each = _EVERY[kind]
        self._due[kind] = now + base + each * self._count[kind]

    # -- processes and their memory, output ----------------------------------------------
    def _processes(self) -> Exceeded | None:
        leader = self._leader()
        limits = self.limits
        if leader is None:
            return None
        tree = process_tree(leader)
        self._count["processes"] = len(tree)
        if limits.processes is not None and len(tree) > limits.processes:
            return Exceeded("processes", f"the world's limit of {limits.processes} processes: "
                                         f"{len(tree)} were running")
        if limits.output is not None:
            printed = self._printed()
            if printed is not None:
                return printed
        if limits.memory is not None:
            return self._memory(leader, tree)
        return None

    def _printed(self) -> Exceeded | None:
        limit = self.limits.output
        assert limit is not None
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
            return None
        who = over[0].replace("rank-", "rank ").replace("host-", "launcher ")
        return Exceeded("output", f"the world's output limit of {size_text(limit)} a rank: "
                                  f"{who} printed {_amount(sizes[over[0]])}")

    def _memory(self, leader: int, tree: dict[int, int]) -> Exceeded | None:
        limit = self.limits.memory
        assert limit is not None
        base = anonymous(leader) or 0  # what every process of the world inherited
        estimate = sum(max(0, (anonymous(pid) or 0) - (0 if pid == leader else base))
                       for pid in tree)
        if estimate <= limit:
            return None
        held = {pid: proportional(pid) or 0 for pid in tree}
        total = sum(held.values())
        if total <= limit:
            return None
        units = self._units()
        by_unit: dict[str, int] = {}
        for pid, amount in held.items():
            by_unit[_owner(pid, tree, units)] = by_unit.get(_owner(pid, tree, units), 0) + amount
        top, most = max(by_unit.items(), key=lambda kv: kv[1])
        return Exceeded("memory", f"the world's memory limit of {size_text(limit)}: its "
                                  f"processes held {_amount(total)} ({top}: {_amount(most)})")

    # -- the sandbox's disk ---------------------------------------------------------------
    def _written(self) -> Exceeded | None:
        limit = self.limits.written
        assert limit is not None and self._sandbox is not None
        used, files = disk_usage(self._sandbox, stop_above=limit)
        self._count["written"] = files
        if used <= limit:
            return None
        return Exceeded("written", f"the world's limit of {size_text(limit)} written into its "
                                   f"sandbox: its files took more than {_amount(limit)}")


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


def proportional(pid: int) -> int | None:
    """``pid``'s proportional share of the memory it has resident (``Pss``), in bytes."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return 0


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
