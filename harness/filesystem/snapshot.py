"""Read back what a world wrote: the files matching some virtual globs, as one
rank sees them. The harness records such snapshots when a rank exits (so a
checker can follow a checkpoint across pre-emptions) and when the world ends.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import os

from harness.filesystem.mounts import MountTable, normalize, real_root, whiteout_root
from harness.topology import Topology

_TEXT_LIMIT = 256 * 1024
BINARY = "base64:"


def content_bytes(content: str) -> bytes | None:
    """A snapshot's content back as the file's bytes (None: only its digest was kept)."""
    if content.startswith(BINARY):
        return base64.b64decode(content[len(BINARY):])
    if content.startswith("sha256:") and content.endswith(" bytes)"):
        return None
    return content.encode()


def snapshot(sandbox: str, table: MountTable, topology: Topology, rank: int,
             globs: list[str], cwd: str, home: str) -> dict[str, str]:
    """``{virtual path: content}`` of the files the world wrote that match ``globs``.

    Content is the text of a small UTF-8 file, ``base64:<data>`` of another small file
    (a pickle, a ``torch.save``), ``sha256:<hex> (<n> bytes)`` of a large one.
    Only files the world created or changed are seen, never the machine's own.
    """
    host = topology.host_of(rank)
    found: dict[str, str] = {}
    for pattern in globs:
        vglob = normalize(pattern, cwd, home)
        static = vglob.split("*")[0].split("?")[0].split("[")[0]
        static_dir = static if static.endswith("/") else os.path.dirname(static) or "/"
        mount = table.match(static_dir.rstrip("/") or "/")
        if mount.base == "passthrough":
            continue
        key = mount.scope_key(rank, host)
        root = real_root(sandbox, mount, key)
        start = os.path.join(root, mount.relative(static_dir.rstrip("/") or "/"))
        for dirpath, _dirs, files in os.walk(start):
            for name in files:
                real = os.path.join(dirpath, name)
                rel = os.path.relpath(real, root)
                vpath = ("/" if mount.path == "/" else mount.path + "/") + rel
                vpath = vpath.replace("//", "/")
                if fnmatch.fnmatchcase(vpath, vglob) and not _whited_out(sandbox, mount, key, rel):
                    found[vpath] = _content(real)
    return dict(sorted(found.items()))


def _whited_out(sandbox: str, mount, key: str, rel: str) -> bool:  # noqa: ANN001
    return os.path.isfile(os.path.join(whiteout_root(sandbox, mount, key), rel))


def _content(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) <= _TEXT_LIMIT:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return BINARY + base64.b64encode(data).decode("ascii")
    return f"sha256:{hashlib.sha256(data).hexdigest()} ({len(data)} bytes)"
