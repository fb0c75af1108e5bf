"""Why a cell's ranks may not have seen a file: on its topology, where it lives is each
host's own.

A target that hands a file from one rank to the others through a path of its pod's
shared filesystem (``/mnt/shared``, an NFS mount) fails on a topology of several hosts
here, where every path no scenario mounts is each host's own disk: its own error (a
``TimeoutError`` while it polls) says nothing of why. So does code read from under
``/tmp`` on this machine, which every host of a world starts without. A failing cell's
one-line reason says so, from what the target's fault-free run showed (its handoffs,
``harness.roles``) and the rank's own words (a path it did not find), with the
``--mount`` that says what the path is on the user's pod.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable

from harness.filesystem.mounts import Mount, default_table
from harness.history import ranks_phrase
from harness.roles import Roles
from harness.topology import Topology
from harness.vocabulary import PASS
from harness.world.result import RankResult

_NOT_FOUND = re.compile(r"No such file or directory: '(/[^']+)'")


def per_host_note(roles: Roles | None, mounts: Iterable[Mount], topology: Topology,
                  ranks: Iterable[RankResult], home: str, cwd: str,
                  pod: bool = False) -> str | None:
    """What a failing cell's reason adds (None: nothing to say). On a ``pod``, only what
    is true of every pod (``/tmp`` is each VM's own): what else its hosts share is the
    pod's, not this machine's."""
    own = list(mounts)  # the scenario's (and --mount's)
    table = default_table(topology, home, cwd)
    for mount in own:
        table = table.with_mount(mount)
    ranks = [] if pod else list(ranks)
    missing: list[str] = []  # the paths the ranks' own errors say they did not find
    for r in ranks:
        error = r.error or {}
        missing += _NOT_FOUND.findall(f"{error.get('message', '')}\n{error.get('traceback', '')}")
    for path in missing:  # a machine path the hosts do not have: the rank's own words name it
        mount = table.match(path)
        if mount.base == "fresh" and os.path.exists(path):
            return (f"'{path}' is on this machine but on no host of the world: {mount.path} "
                    "starts empty on every host, as each VM's own does on a pod (keep code and "
                    "data under the working directory, or a path the pod's hosts have)")
    if topology.hosts < 2:
        return None
    # a reader that did not fail, or that the fault plan killed, is not why the cell failed
    failed = {r.rank for r in ranks if r.outcome != PASS and not r.killed_by_fault}
    for use in (roles.of("handoff") if roles is not None else ()):
        mount = table.match(use.path)
        if mount.scope == "shared" or (pod and (mount.path == "/" or mount.base != "fresh")):
            continue
        wrote = {topology.host_of(r) for r in use.writers if r < topology.world_size}
        looked = [r for r in use.readers if r < topology.world_size
                  and topology.host_of(r) not in wrote and (not ranks or r in failed)]
        if not wrote or not looked:
            continue
        if mount in own:
            why = f"this scenario mounts {mount.path} on each host"
        elif mount.base == "fresh":  # /tmp, /dev/shm
            why = f"{mount.path} is each host's own on a pod"
        else:  # the host's own disk, as any path no one mounts
            place = _suggested(use.path)
            why = f"if {place} is one filesystem on your pod: --mount {place}=shared"
        # The file of this kind the ranks did not find (another step's, say), if they said so
        path = next((p for p in missing if posixpath.basename(p) == posixpath.basename(use.path)
                     and table.match(p) == mount), use.path)
        return (f"'{path}' is per host on {topology.name}: {ranks_phrase(looked)} on "
                f"{ranks_phrase(sorted({topology.host_of(r) for r in looked}), 'host')} "
                f"{'never sees' if len(looked) == 1 else 'never see'} what "
                f"{ranks_phrase(sorted(use.writers))} wrote on "
                f"{ranks_phrase(sorted(wrote), 'host')} ({why})")
    return None


def _suggested(path: str) -> str:
    """The directory a ``--mount`` would name: a mount point's depth (``/mnt/shared``)."""
    parts = [p for p in posixpath.dirname(path).split("/") if p]
    return "/" + "/".join(parts[:2]) if parts else posixpath.dirname(path)
