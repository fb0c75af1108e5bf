"""The mount table: which virtual paths a rank sees, and where they really live.

A path the target uses (``/tmp/temp_config.yaml``, ``~/.cache/x``, ``out/ckpt``)
is virtual. The longest mount prefix that contains it decides:

- its **scope**: ``shared`` (one filesystem for every rank), ``host`` (one per
  host, as separate TPU VMs have) or ``rank`` (private, as containers have);
- its **mode**: ``rw`` or ``ro`` (writes fail with EROFS);
- its **base**: ``fresh`` (starts empty, or as the scenario populates it) or
  ``overlay`` (the machine's real directory underneath, copy-on-write: reads
  see installed code and data, writes land in the sandbox);
- its **consistency**: ``local`` (coherent POSIX), ``close-to-open`` (NFS),
  ``delayed`` (visible ``delay_ms`` after close) or ``object`` (gcsfuse);
- its **write bandwidth**, ``write_mb_s``: what a write costs in world time (a
  checkpoint of 2 GB to gcsfuse at 50 MB/s takes 40 world seconds, and may outlast
  a pre-emption's grace); 0, the default, costs nothing.

Pure data: no I/O here.
"""

from __future__ import annotations

import os
import posixpath
import sys
import sysconfig
from dataclasses import dataclass, field, replace

from harness.topology import Topology
from harness.vocabulary import MAX_TIMEOUT_MS

SCOPES = ("shared", "host", "rank")
MODES = ("rw", "ro")
#: ``real``: the machine's own path, through the view and its fault hooks (a pod's ranks:
#: their filesystem is the pod's own, the faults still act on it); never a scenario's.
BASES = ("fresh", "overlay", "passthrough", "real")
CONSISTENCY = ("local", "close-to-open", "delayed", "object")
#: Never translated and never mounted over: the kernel's own trees.
KERNEL_TREES = ("/proc", "/sys", "/dev")
#: The longest mount path a scenario may write: its slug names one directory of the
#: sandbox (255 bytes at most), after home replaces a leading ``~``.
MAX_MOUNT_PATH = 160
#: The longest ``delay_ms`` of a delayed mount: the longest world timeout.
MAX_DELAY_MS = MAX_TIMEOUT_MS
#: The fastest ``write_mb_s`` a mount may be given (a local NVMe's order of magnitude, x10).
MAX_WRITE_MB_S = 100_000.0


def is_under(path: str, tree: str) -> bool:
    """``path`` is ``tree`` or inside it (both normalised)."""
    return path == tree or path.startswith(tree.rstrip("/") + "/")


@dataclass(frozen=True)
class Mount:
    path: str
    scope: str = "host"
    mode: str = "rw"
    base: str = "fresh"
    consistency: str = "local"
    delay_ms: int = 0
    write_mb_s: float = 0.0  # world time a write costs: its bytes at this rate (0: none)

    def __post_init__(self) -> None:
        if not self.path.startswith("/") or "\0" in self.path:
            raise ValueError(f"mount path {self.path!r} must be absolute, without a NUL")
        if not 0 <= self.delay_ms <= MAX_DELAY_MS:
            raise ValueError(f"mount {self.path}: delay_ms {self.delay_ms} is not in "
                             f"0..{MAX_DELAY_MS}")
        if not 0 <= self.write_mb_s <= MAX_WRITE_MB_S:
            raise ValueError(f"mount {self.path}: write_mb_s {self.write_mb_s} is not in "
                             f"0..{MAX_WRITE_MB_S:g}")
        # "/tmp/" is "/tmp", and so is "//tmp" (which normpath alone keeps)
        object.__setattr__(self, "path", posixpath.normpath(self.path).replace("//", "/"))
        for name, value, allowed in (("scope", self.scope, SCOPES), ("mode", self.mode, MODES),
                                     ("base", self.base, BASES),
                                     ("consistency", self.consistency, CONSISTENCY)):
            if value not in allowed:
                raise ValueError(f"mount {self.path}: {name} {value!r} is not one of "
                                 f"{', '.join(allowed)}")

    @property
    def slug(self) -> str:
        """The mount's directory name in the sandbox, one per path: ``/mnt/a`` is
        ``mnt_a``, so a ``_`` (and the ``%`` that escapes it) is escaped, and ``/``
        is ``%root`` (``/mnt_a`` and ``/root`` must not share a backing store)."""
        if self.path == "/":
            return "%root"
        escaped = self.path.strip("/").replace("%", "%25").replace("_", "%5F")
        return escaped.replace("/", "_")

    def scope_key(self, rank: int, host: int) -> str:
        return {"shared": "shared", "host": f"host-{host}", "rank": f"rank-{rank}"}[self.scope]

    def relative(self, vpath: str) -> str:
        """``vpath`` relative to the mount point ('' for the mount point itself)."""
        if self.path == "/":
            return vpath.lstrip("/")
        return vpath[len(self.path):].lstrip("/")


@dataclass(frozen=True)
class MountTable:
    mounts: tuple[Mount, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.mounts, key=lambda m: len(m.path), reverse=True))
        object.__setattr__(self, "mounts", ordered)

    def match(self, vpath: str) -> Mount:
        for mount in self.mounts:
            if is_under(vpath, mount.path):
                return mount
        raise LookupError(f"no mount for {vpath}")  # the table always has "/"

    def with_mount(self, mount: Mount) -> MountTable:
        """This table with ``mount`` added, replacing a mount at the same path."""
        return MountTable(tuple(m for m in self.mounts if m.path != mount.path) + (mount,))

    def get(self, path: str) -> Mount | None:
        return next((m for m in self.mounts if m.path == path), None)

    def replace(self, path: str, **changes: object) -> MountTable:
        mount = self.get(path)
        if mount is None:
            raise KeyError(path)
        return self.with_mount(replace(mount, **changes))  # type: ignore[arg-type]


def normalize(path: str, cwd: str, home: str) -> str:
    """A virtual path as an absolute, normalised string (no symlink resolution)."""
    if path.startswith("~"):
        path = home + path[1:] if path == "~" or path.startswith("~/") else path
    if not path.startswith("/"):
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path).replace("//", "/")


def installed_code() -> tuple[str, ...]:
    """Where this interpreter's code is installed: the prefixes and the library directories.
    A pod's VMs all have it; a venv under ``/tmp`` (a CI checkout, a scratch venv) must not
    vanish behind each host's fresh ``/tmp`` when code lists or reads its own package files
    (``torch.compile`` lists its backends, ``importlib.resources`` reads data files)."""
    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(
        p for p in (sys.prefix, sys.exec_prefix, sys.base_prefix,
                    *(paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")))
        if p))


#: The operations that only look at a file (their turns commute with each other's).
LOOKS = frozenset({"stat", "open-read", "read", "listdir", "fsync"})


@dataclass(frozen=True)
class Code:
    """The directories of the code every host has (the interpreter's installed packages,
    the harness and its shim). A look at them, or a ``stat`` of a directory on the way to
    them, is not the world's: no rank writes them, and how many such looks a rank makes
    depends on what its process had imported before the world began (``inspect`` resolves
    every loaded module's path, and a warm fork server holds more modules in some runs than
    in others). It takes no turn and is not recorded."""

    roots: frozenset[str] = frozenset()
    on_the_way: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    @classmethod
    def of(cls, directories: tuple[str, ...]) -> Code:
        roots = frozenset(posixpath.normpath(p) for p in directories if p.startswith("/"))
        ways = set()
        for root in roots:
            while root != "/":
                root = posixpath.dirname(root)
                ways.add(root)
        return cls(roots, frozenset(ways), tuple(posixpath.join(p, "") for p in roots))

    def looked_at(self, op: str, path: str) -> bool:
        return op in LOOKS and (path.startswith(self.prefixes) or path in self.roots or (
            op == "stat" and path in self.on_the_way))


def default_table(topology: Topology, home: str, cwd: str,
                  installed: tuple[str, ...] | None = None) -> MountTable:
    """What a host of ``topology`` sees unless a scenario says otherwise.

    Every host has its own disk (``/`` is an overlay per host: installed code
    reads through, writes stay on that host) and its own empty ``/tmp``; the
    working directory, home and the interpreter's installed code are always overlays of
    the real ones. On
    one host that is the same as sharing everything. Seed 004's v6e-256 adds a
    read-only data disk and a gcsfuse bucket shared by all hosts.
    """
    mounts = [
        Mount("/", scope="host", base="overlay"),
        Mount("/tmp", scope="host", base="fresh"),
        *(Mount(p, scope="shared", base="passthrough") for p in KERNEL_TREES),
        Mount("/dev/shm", scope="host", base="fresh"),  # each host's own tmpfs, as /tmp
    ]
    if topology.name in ("v6e-256", "v6e-256-spmd"):  # seed 004's pod, either way it runs
        mounts += [
            Mount("/mnt/data", scope="shared", mode="ro", base="fresh"),
            Mount("/mnt/checkpoints", scope="shared", base="fresh", consistency="object"),
        ]
    table = MountTable(tuple(mounts))
    # The working directory (the user's repository), home and the installed code are
    # per-host copies of the real ones, even when they lie under a fresh mount such as
    # /tmp (a CI checkout often does): every VM of a pod has the code and the user's files.
    for path in (home, cwd, *(installed_code() if installed is None else installed)):
        path = posixpath.normpath(path)
        if path != "/" and table.match(path).base == "fresh":
            table = table.with_mount(Mount(path, scope="host", base="overlay"))
    return table


def scope_keys(mount: Mount, topology: Topology) -> list[str]:
    """Every backing directory a mount needs in a world of ``topology``."""
    if mount.scope == "shared":
        return ["shared"]
    if mount.scope == "host":
        return [f"host-{h}" for h in range(topology.hosts)]
    return [f"rank-{r}" for r in range(topology.world_size)]


def real_root(sandbox: str, mount: Mount, key: str) -> str:
    return os.path.join(sandbox, "mounts", mount.slug, key)


def work_root(sandbox: str, mount: Mount, key: str) -> str:
    """The kernel's scratch directory beside a host's copy that it overlays (kernel
    isolation): on the same filesystem as ``real_root``, never inside it."""
    return real_root(sandbox, mount, key) + ".work"


def whiteout_root(sandbox: str, mount: Mount, key: str) -> str:
    return os.path.join(sandbox, "whiteouts", mount.slug, key)


def staging_root(sandbox: str, mount: Mount, key: str) -> str:
    return os.path.join(sandbox, "staging", mount.slug, key)
