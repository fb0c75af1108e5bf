"""What a world holds that no process's resident memory shows, for the meter
(``harness.world.limits``): memory in a ``memfd`` or a file deleted from a tmpfs (its
pages are the file's, mapped by nobody perhaps), SysV shared memory (it outlives every
process that made it), and disk in files deleted but still open (no walk of the sandbox
finds them).

Each object is counted once however many processes hold it (by its inode, or its SysV id),
at what it has allocated (blocks: a sparse one costs what it holds). Looked up from outside
(``/proc``), as the rest of the meter: nothing a rank can change.

SysV segments are the machine's (an IPC namespace's): a world's are those its processes
made (``/proc/sysvipc/shm``'s creator pid), and the harness removes them when the world
ends (``remove_segments``), or its reaper when the harness died first. A world in an IPC
namespace of its own has its segments die with it; the harness cannot read them (the file
shows the reader's namespace), and the world's cgroup, where there is one, holds them.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

SHM = "/proc/sysvipc/shm"
IPC_RMID = 0
_TMPFS = {"tmpfs", "shm", "hugetlbfs", "ramfs"}


@dataclass(frozen=True)
class Held:
    """One object a process holds: ``kind`` in words (``a memfd``), its bytes."""

    pid: int
    kind: str
    size: int


@dataclass(frozen=True)
class Segment:
    """A SysV shared memory segment: its id, creator, and what it holds (resident+swap)."""

    shmid: int
    creator: int
    size: int


def open_files(pids: Iterable[int]) -> tuple[list[Held], list[Held]]:
    """The memory (memfds, files deleted from a tmpfs) and the disk (regular files deleted
    elsewhere) held open by ``pids``, each object once."""
    memory: list[Held] = []
    disk: list[Held] = []
    seen: set[tuple[int, int]] = set()
    for pid in pids:
        base = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(base)
        except OSError:
            continue
        for fd in fds:
            path = f"{base}/{fd}"
            try:
                link = os.readlink(path)
            except OSError:
                continue
            memfd = link.startswith("/memfd:")
            if not memfd and not link.endswith(" (deleted)"):
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen \
                    or (not memfd and st.st_nlink):
                continue
            seen.add((st.st_dev, st.st_ino))
            size = st.st_blocks * 512
            if memfd:
                memory.append(Held(pid, "a memfd", size))
            elif _in_memory(st.st_dev):
                memory.append(Held(pid, "a deleted file in memory", size))
            else:
                disk.append(Held(pid, "a deleted file", size))
    return memory, disk


_fs_of: dict[int, str] = {}


def _in_memory(dev: int) -> bool:
    """Is the device a filesystem held in memory (a tmpfs: ``/dev/shm``)?"""
    if dev not in _fs_of:
        _fs_of.clear()
        try:
            with open("/proc/self/mountinfo") as f:
                for line in f:
                    fields = line.split()
                    major, minor = fields[2].split(":")
                    sep = fields.index("-")
                    _fs_of[os.makedev(int(major), int(minor))] = fields[sep + 1]
        except (OSError, ValueError, IndexError):
            pass
        _fs_of.setdefault(dev, "")
    return _fs_of[dev] in _TMPFS


def segments() -> list[Segment]:
    """Every SysV shared memory segment this process's IPC namespace shows."""
    out: list[Segment] = []
    try:
        with open(SHM) as f:
            header = f.readline().split()
            rows = f.readlines()
    except OSError:
        return out
    try:
        at = {name: header.index(name) for name in ("shmid", "cpid", "size")}
    except ValueError:
        return out
    held = [header.index(n) for n in ("rss", "swap") if n in header]
    for row in rows:
        fields = row.split()
        try:
            size = sum(int(fields[i]) for i in held) if held else int(fields[at["size"]])
            out.append(Segment(int(fields[at["shmid"]]), int(fields[at["cpid"]]), size))
        except (ValueError, IndexError):
            continue
    return out


_libc = ctypes.CDLL(None, use_errno=True)


def remove_segments(shmids: Iterable[int]) -> int:
    """Remove SysV segments (each goes once no process has it attached); how many were."""
    removed = 0
    for shmid in shmids:
        if _libc.shmctl(ctypes.c_int(shmid), IPC_RMID, None) == 0:
            removed += 1
    return removed
