"""Lay out a world's sandbox: one backing directory per mount and scope, and
the files a scenario places before the world starts."""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.filesystem.mounts import MountTable, real_root, scope_keys
from harness.topology import Topology


@dataclass(frozen=True)
class Leftover:
    """A file or directory that exists before the world starts."""

    path: str
    content: bytes = b""
    is_dir: bool = False
    owner_uid: int | None = None  # another user's: permission checks apply to us
    mode: int = 0o644
    hosts: tuple[int, ...] | None = None  # for host- or rank-scoped mounts: which hosts


def create(sandbox: str, table: MountTable, topology: Topology,
           leftovers: tuple[Leftover, ...] = ()) -> None:
    for mount in table.mounts:
        if mount.base == "passthrough":
            continue
        for key in scope_keys(mount, topology):
            os.makedirs(real_root(sandbox, mount, key), exist_ok=True)
    for leftover in leftovers:
        place(sandbox, table, topology, leftover)


def place(sandbox: str, table: MountTable, topology: Topology, leftover: Leftover) -> None:
    """Put ``leftover`` where every host it applies to will find it."""
    mount = table.match(leftover.path)
    if mount.base == "passthrough":
        raise ValueError(f"cannot place {leftover.path}: {mount.path} is the machine's own")
    hosts = leftover.hosts if leftover.hosts is not None else range(topology.hosts)
    keys = set()
    for host in hosts:
        for rank in topology.ranks_of_host(host):
            keys.add(mount.scope_key(rank, host))
    for key in sorted(keys):
        root = real_root(sandbox, mount, key)
        target = os.path.normpath(os.path.join(root, mount.relative(leftover.path)))
        if not target.startswith(os.path.realpath(sandbox) + os.sep) and \
                not target.startswith(os.path.normpath(sandbox) + os.sep):
            raise ValueError(f"cannot place {leftover.path}: it resolves outside the sandbox")
        if leftover.is_dir:
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(leftover.content)
