"""Which walls a world has: ``python`` (the view alone) or ``kernel`` (each host a mount
namespace too: ``harness.rank.namespaces``), and what a host's namespace binds.

``kernel`` is the default (``WorldConfig.isolation``, ``$HARNESS_ISOLATION``, ``harness run
--isolation`` choose); where this machine refuses it (no unprivileged user namespaces, a
container without the capability) the world falls back to ``python`` and its result says
so, with the kernel's reason. What each mode guarantees is in docs/explanation/isolation.md.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterable

from harness.filesystem.mounts import (
    KERNEL_TREES,
    Mount,
    MountTable,
    is_under,
    real_root,
    work_root,
)
from harness.rank import namespaces
from harness.rank.namespaces import Bind
from harness.topology import Topology

log = logging.getLogger(__name__)

PYTHON, KERNEL = "python", "kernel"
MODES = (PYTHON, KERNEL)
#: Sets the isolation of every world that does not set its own.
ISOLATION_ENV = "HARNESS_ISOLATION"
#: Where a kernel-isolated world keeps its directory (captured output, the sandbox): never
#: under a directory a host's namespace covers (``/tmp``, ``/dev/shm``).
KERNEL_BASE = "/var/tmp"


def default_mode() -> str:
    """``$HARNESS_ISOLATION``, else ``kernel``: the kernel's walls wherever the machine
    allows them (``choose`` falls back to ``python``, saying why, where it does not)."""
    given = os.environ.get(ISOLATION_ENV, "").strip().lower()
    if given and given not in MODES:
        log.warning("%s=%r is not one of %s: kernel isolation where the machine allows it",
                    ISOLATION_ENV, given, ", ".join(MODES))
        return KERNEL
    return given or KERNEL


def choose(mode: str, sandboxed: bool) -> tuple[str, str]:
    """The mode a world gets, and why it is not the one asked for ("" when it is)."""
    if mode != KERNEL:
        return PYTHON, ""
    if not sandboxed:
        return PYTHON, ""  # no sandbox, no walls: the world sees the machine as it is
    why = namespaces.unavailable()
    if why:
        return PYTHON, f"this machine refuses a world its namespaces ({why})"
    if not os.access(KERNEL_BASE, os.W_OK | os.X_OK):
        return PYTHON, f"{KERNEL_BASE} cannot hold the world's directory"
    return KERNEL, ""


def world_base(mode: str) -> str:
    """Where a world's directory is made."""
    return KERNEL_BASE if mode == KERNEL else tempfile.gettempdir()


def binds_for(table: MountTable, topology: Topology, world_dir: str, sandbox: str,
              machine_paths: Iterable[str], overlays: str = namespaces.WHOLE
              ) -> dict[int, tuple[Bind, ...]]:
    """Each host's binds: its fresh mounts (``/tmp``, ``/dev/shm``, a scenario's) over the
    machine's directories of the same path, where the machine has one or the host's copy
    can take one (a mount point is never made on the machine); with ``overlays``
    (``namespaces.WHOLE`` or ``DIRECTORIES``; "": none), the kernel's overlay of each
    directory a host has its own copy of (``drawn``), writes landing
    in the host's copy in the sandbox; then the machine's own directories the world needs
    that those cover (``machine_paths``: the working directory, the target's, the
    interpreter's paths, the overlays'), bound back at their own path, read-only as the rest
    of the machine is; and what stays writable, each bound on itself: the world's directory
    (its sandbox, the ranks' output) and a scenario's passthrough mounts."""
    overlaid = drawn(table, overlays == namespaces.WHOLE) if overlays else {}
    copied = set(namespaces.copied_mounts()) if overlaid else set()

    def mountable(path: str) -> bool:
        """A mount point the machine has, or one the host's copy can take."""
        if os.path.islink(path):
            return False
        return os.path.isdir(path) or (not os.path.lexists(path)
                                       and any(is_under(path, o) for o in overlaid))

    fresh = sorted((m for m in table.mounts if m.base == "fresh" and m.scope in ("host", "shared")
                    and m.path != "/" and mountable(m.path)), key=lambda m: m.path.count("/"))
    covered = [m.path for m in fresh]
    passthrough = [m.path for m in table.mounts if m.base == "passthrough"
                   and m.path not in KERNEL_TREES and os.path.isdir(m.path)]
    wanted = {*(m.path for m in table.mounts if m.base in ("overlay", "real")
                and m.path != "/" and m.path not in KERNEL_TREES), *machine_paths}
    wanted -= set(passthrough)
    back: list[str] = []
    for path in sorted((os.path.normpath(p) for p in wanted if p), key=len):
        if not os.path.isdir(path) or not any(is_under(path, c) and path != c for c in covered):
            continue
        nearest = max((c for c in (*covered, *overlaid) if is_under(path, c)), key=len)
        if nearest in overlaid or any(is_under(path, b) for b in back):
            continue  # the host's copy of it is overlaid, or it is bound with its parent
        back.append(path)
    out: dict[int, tuple[Bind, ...]] = {}
    for host in range(topology.hosts):
        key = f"host-{host}"
        out[host] = (*(Bind(real_root(sandbox, m, m.scope_key(-1, host)), m.path,
                            readonly=m.mode == "ro") for m in fresh),
                     *(Bind(path, path, overlay=(
                         os.path.join(real_root(sandbox, m, key), m.relative(path)),
                         os.path.join(work_root(sandbox, m, key), m.relative(path))),
                            optional=path in copied)
                       for path, m in overlaid.items()),
                     *(Bind(p, p, readonly=True, machine=True) for p in back),
                     *(Bind(p, p, machine=True) for p in passthrough),
                     Bind(world_dir, world_dir))
    return out


def drawn(table: MountTable, whole: bool = True) -> dict[str, Mount]:
    """The directories whose overlay the kernel draws in a host's namespace, each with its
    mount: every overlay a host has its own copy of (a host-scoped, read-write, local
    mount: ``/``, a working directory under ``/tmp``), so what the view does not see (a
    subprocess, C code) writes the host's copy as Python code does, never the machine; and
    each writable mount of the machine's below one (``namespaces.copied_mounts``: a
    ``/home`` or a data disk of its own, which the overlay of ``/`` does not reach), but one
    that holds the worlds' directories. Not ``whole`` (in a user namespace): ``/`` is drawn
    as each of its directories, and only a directory with no mount of the machine's below
    it (``namespaces.DIRECTORIES``); the rest stays read-only to what the view does not
    see."""
    own = [m for m in table.mounts
           if (m.base, m.scope, m.mode, m.consistency) == ("overlay", "host", "rw", "local")
           and os.path.isdir(m.path) and not os.path.islink(m.path)]
    points = [p for p in namespaces.mount_points() if p != "/"]
    copied = [p for p in namespaces.copied_mounts() if not is_under(KERNEL_BASE, p)]
    out: dict[str, Mount] = {}
    for m in own:
        paths = [m.path] if whole or m.path != "/" else [
            "/" + name for name in sorted(os.listdir("/")) if "/" + name not in KERNEL_TREES]
        paths += [p for p in copied if is_under(p, m.path) and p != m.path]
        for path in paths:
            if not os.path.isdir(path) or os.path.islink(path) or table.match(path) is not m:
                continue
            if not whole and any(is_under(p, path) and (p != path or p not in copied)
                                 for p in points):
                continue  # a mount below it (or it, of a kind not copied) is locked to it
            out[path] = m
    return out


def machine_paths(cwd: str, target_file: str | None, argv: tuple[str, ...] | None) -> list[str]:
    """The machine's directories a world's units read by path, whatever the mode: its
    working directory, its target's or script's, and what Python imports from."""
    paths = [cwd, *(p for p in sys.path if p and os.path.isabs(p))]
    if target_file:
        paths.append(os.path.dirname(os.path.abspath(os.path.join(cwd, target_file))))
    if argv:
        script = next((a for a in argv if a.endswith(".py")), None)
        if script:
            paths.append(os.path.dirname(os.path.abspath(os.path.join(cwd, script))))
    return paths
