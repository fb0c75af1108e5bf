"""A pod's own mounts: what its filesystems are, so the scenarios that need them run there.

Seed 004's pods mount a read-only data disk at ``/mnt/data`` and a bucket through Cloud
Storage FUSE at ``/mnt/checkpoints``. ``harness pod run --mount /mnt/data=ro --mount
/mnt/checkpoints=gcsfuse`` says so; a scenario's mount at or under such a path then runs on
the pod (``provides``), on the pod's real filesystem, instead of being skipped. The claim is
checked on every worker before any cell (``check_command``): a path that is not there, a
"read-only" disk that takes writes, a "gcsfuse" mount that is not FUSE, is a pod failure
naming the worker.

A read-only disk cannot take the files a scenario places (a dataset, a host's damaged
copy): those are checked instead (``held``/``held_problems``). The disk must already hold
exactly them, on every host: what the scenario wants absent is absent, what it wants there
has its bytes. A cell whose files the disk does not hold is NOT-EXERCISED, saying which
file: its fault could not happen on this pod.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.filesystem.mounts import is_under

#: What a pod's mount can be, and which scenario mounts each stands for.
KINDS = {
    "ro": "a disk every worker mounts read-only (seed 004's /mnt/data)",
    "gcsfuse": "a bucket every worker mounts through Cloud Storage FUSE (object consistency)",
    "shared": "a filesystem every worker mounts read-write (NFS, Filestore)",
}


@dataclass(frozen=True)
class PodMount:
    path: str
    kind: str

    @classmethod
    def parse(cls, text: str) -> PodMount:
        """``PATH=KIND``; ValueError saying what is wrong."""
        path, sep, kind = text.rpartition("=")
        if not sep or not path:
            raise ValueError(f"{text!r} is not PATH=KIND (KIND: {', '.join(KINDS)})")
        if kind not in KINDS:
            raise ValueError(f"{text!r}: {kind!r} is not a kind of pod mount (one of "
                             f"{', '.join(KINDS)})")
        if not path.startswith("/") or ".." in path.split("/") or path.rstrip("/") == "":
            raise ValueError(f"{text!r}: the path must be absolute, not /, and without '..'")
        return cls(posixpath.normpath(path), kind)

    def __str__(self) -> str:
        return f"{self.path}={self.kind}"

    @property
    def writable(self) -> bool:
        return self.kind != "ro"

    def scratch(self, name: str) -> str:
        """Where a run's cells write on this mount: a directory of the run's own under it
        (``harness-pod-...``), emptied before each cell and removed after the run, so that
        nothing of the pod's own is touched and no cell sees another's objects."""
        return posixpath.join(self.path, name)

    def provides(self, mount: Any) -> bool:
        """This pod mount stands for a scenario's ``mount`` (a ``MountSpec``) at or under it."""
        if mount.path is None or not is_under(posixpath.normpath(mount.path), self.path):
            return False
        if self.kind == "ro":
            return mount.mode == "ro"
        if self.kind == "gcsfuse":
            return mount.mode == "rw" and mount.scope == "shared" and \
                mount.consistency == "object"
        return mount.mode == "rw" and mount.scope == "shared" and \
            mount.consistency in ("local", "close-to-open")


def parse_all(texts: Iterable[str]) -> tuple[PodMount, ...]:
    """Every ``--mount``; ValueError for a bad one or two at the same path."""
    mounts = tuple(PodMount.parse(t) for t in texts)
    paths = [m.path for m in mounts]
    for p in paths:
        if paths.count(p) > 1:
            raise ValueError(f"{p} is given twice: a path is one mount")
    return mounts


def unprovided(scenario_mounts: Iterable[Any], pod_mounts: Iterable[PodMount]) -> list[Any]:
    """The scenario's mounts no pod mount stands for (a role's, or another kind)."""
    pod_mounts = tuple(pod_mounts)
    return [m for m in scenario_mounts if not any(p.provides(m) for p in pod_mounts)]


def describe_kind(mount: Any) -> str:
    """What a pod would need to have for a scenario's mount, in the ``--mount`` words."""
    if mount.mode == "ro":
        return "ro"
    if mount.scope == "shared":
        return "gcsfuse" if mount.consistency == "object" else "shared"
    return "none of a pod's kinds (a host's own fresh directory)"


# -- checked on every worker ----------------------------------------------------------------

_CHECK = """
import json, os, sys
out = {}
for path, kind in MOUNTS:
    if not os.path.isdir(path):
        out[path] = "it is not there (no such directory)"
        continue
    ro = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    types = [line.split()[2] for line in open("/proc/self/mounts")
             if len(line.split()) > 2 and (path == line.split()[1] or
                                           path.startswith(line.split()[1].rstrip("/") + "/"))]
    if kind == "ro" and not ro:
        out[path] = "it takes writes: it is not a read-only disk"
    elif kind != "ro" and (ro or not os.access(path, os.W_OK)):
        out[path] = "it is read-only here: the pod said " + kind
    elif kind == "gcsfuse" and FUSE and not (types and types[-1].startswith("fuse")):
        out[path] = "it is not a FUSE mount (" + (types[-1] if types else "?") + "), not gcsfuse"
print("HARNESS-MOUNTS " + json.dumps(out))
"""


def check_command(python: str, mounts: Iterable[PodMount], fuse: bool = True) -> str:
    """What every worker runs: one ``HARNESS-MOUNTS {path: problem}`` line. ``fuse``: a
    gcsfuse mount must be FUSE (a local pod's stands in with a shared directory)."""
    code = f"MOUNTS = {[(m.path, m.kind) for m in mounts]!r}\nFUSE = {fuse!r}\n{_CHECK}"
    return f"cd ~ && {shlex.quote(python)} -c {shlex.quote(code)}"


def check_answer(stdout: str) -> dict[str, str] | None:
    """A worker's problems by path (empty: every mount is what the pod said); None: no answer."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("HARNESS-MOUNTS "):
            try:
                data = json.loads(line[len("HARNESS-MOUNTS "):])
            except ValueError:
                return None
            return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None
    return None


# -- what a read-only disk must already hold ------------------------------------------------

@dataclass(frozen=True)
class Held:
    """A file a cell would place under a read-only pod mount: the disk must hold it."""

    path: str
    sha256: str
    size: int
    hosts: tuple[int, ...] | None  # None: every host
    is_dir: bool = False


def split(files: Iterable[Any], mounts: Iterable[PodMount]) -> tuple[tuple[Any, ...], tuple[Held, ...]]:
    """A cell's leftovers: those to place, and those a read-only pod mount must hold."""
    ro = [m for m in mounts if m.kind == "ro"]
    placed, held = [], []
    for f in files:
        if any(is_under(posixpath.normpath(f.path), m.path) for m in ro):
            held.append(Held(posixpath.normpath(f.path), hashlib.sha256(f.content).hexdigest(),
                             len(f.content), f.hosts, f.is_dir))
        else:
            placed.append(f)
    return tuple(placed), tuple(held)


def held_problems(held: Iterable[Held], host: int, look: Mapping[str, tuple[str, int] | str | None]
                  ) -> list[str]:
    """What this host's disk does not hold as the cell needs it. ``look[path]`` is what the
    host has there: ``(sha256, size)`` for a file, ``"dir"``, or None (nothing)."""
    wanted: dict[str, Held | None] = {}
    for h in held:
        wanted.setdefault(h.path, None)
        if h.hosts is None or host in h.hosts:
            wanted[h.path] = h
    out = []
    for path, h in sorted(wanted.items()):
        has = look.get(path)
        if h is None:
            if has is not None:
                out.append(f"host {host}'s {path} must be absent, and the disk has it")
        elif h.is_dir:
            if has != "dir":
                out.append(f"host {host}'s {path} must be a directory, and the disk has "
                           f"{'none' if has is None else 'a file'}")
        elif has is None or has == "dir":
            out.append(f"host {host}'s {path} must hold {h.size} bytes, and the disk has "
                       f"{'none' if has is None else 'a directory'}")
        elif has[0] != h.sha256:
            out.append(f"host {host}'s {path} must hold other bytes ({h.size}, sha256 "
                       f"{h.sha256[:12]}) than the disk's ({has[1]}, sha256 {has[0][:12]})")
    return out


_LOOK = """
import hashlib, json, os
out = {}
for path in PATHS:
    if os.path.isdir(path):
        out[path] = "dir"
    elif os.path.isfile(path):
        h, n = hashlib.sha256(), 0
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                n += len(chunk)
        out[path] = [h.hexdigest(), n]
    else:
        out[path] = None
print("HARNESS-HELD " + json.dumps(out))
"""


def look_command(python: str, held: Iterable[Held]) -> str:
    """What every worker runs: one ``HARNESS-HELD {path: [sha256, size] | "dir" | null}``."""
    code = f"PATHS = {sorted({h.path for h in held})!r}\n{_LOOK}"
    return f"cd ~ && {shlex.quote(python)} -c {shlex.quote(code)}"


def look_answer(stdout: str) -> dict[str, tuple[str, int] | str | None] | None:
    """What a worker's disk holds at each path (None: no answer)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("HARNESS-HELD "):
            try:
                data = json.loads(line[len("HARNESS-HELD "):])
                return {str(k): (str(v[0]), int(v[1])) if isinstance(v, list) else v
                        for k, v in data.items()}
            except (ValueError, TypeError, IndexError, AttributeError):
                return None
    return None
