"""Roles: what a target does with files, learned from its own fault-free run.

A scenario aims its faults at a role ("the handoff": a file one rank writes and
another reads) rather than at the path the seed happened to use, so that the
same scenario hurts anyone's code where that code is fragile. The roles are
derived here, purely, from the ``file`` events of a history recorded with
``run_world(..., record_files=True)``; ``runner.discovery`` runs that world and
caches what it learned.

Roles:

``handoff``      a file written by one rank and looked at (opened, stat'ed) by another
``handoff-dir``  the directory each handoff lives in
``output``       a file a rank writes that no other rank looks at (a shard it uploads, a log);
                 a fault aims at the directories outputs are written to (numbered ones as
                 one: ``tpu_*``), as the next run writes other names there
``state``        a file a rank writes again and again over what it held (a checkpoint it resumes
                 from, rewritten as its work goes on); one it only appends to is an ``output``
``input``        a file ranks read that no rank writes (a dataset, a vocabulary)
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.history import Event, ranks_phrase

ROLES = ("handoff", "handoff-dir", "output", "state", "input")
#: What each role means, for messages ("resolved to nothing: no file ...").
MEANING = {
    "handoff": "file one rank writes and another rank reads",
    "handoff-dir": "directory holding a file one rank writes and another rank reads",
    "output": "file a rank writes that no other rank reads",
    "state": "file a rank writes again and again (a checkpoint)",
    "input": "file ranks read that no rank writes",
}
_LOOKS = ("open-read", "stat")
#: a directory name's number (``tpu_3``, ``worker-12``): every worker's directory is one place
_DIGITS = re.compile(r"\d+")
#: An installed package's metadata (``importlib.metadata`` reading entry points): never the
#: target's data, wherever it is installed (an editable install keeps it in the checkout)
_PACKAGE_METADATA = re.compile(r"\.(dist|egg)-info(/|$)")


@dataclass(frozen=True)
class FileUse:
    """One path and who did what to it in the fault-free run."""

    path: str
    writers: tuple[int, ...] = ()
    readers: tuple[int, ...] = ()  # ranks that looked, other than its writers
    staging: tuple[str, ...] = ()  # paths written and renamed onto it

    def describe(self) -> str:
        parts = [self.path]
        if self.writers:
            parts.append(f"written by {ranks_phrase(self.writers)}")
        if self.readers:
            parts.append(f"read by {ranks_phrase(self.readers)}")
        if self.staging:
            parts.append(f"through {', '.join(self.staging)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Roles:
    """What each role resolved to for one target (and what a previous run left)."""

    uses: Mapping[str, tuple[FileUse, ...]] = field(default_factory=dict)
    #: handoff path -> the bytes another run of the same target left there
    previous: Mapping[str, bytes] = field(default_factory=dict)

    def of(self, role: str) -> tuple[FileUse, ...]:
        return tuple(self.uses.get(role, ()))

    def paths(self, role: str) -> tuple[str, ...]:
        """The exact paths of a role (where a file can be placed before the world starts)."""
        return tuple(u.path for u in self.of(role))

    def globs(self, role: str) -> tuple[str, ...]:
        """What a trigger matches for a role: its paths, and the names a writer stages
        them under (``cfg.yaml.tmp`` then renamed onto ``cfg.yaml``)."""
        if role == "output":  # the next run (or life) writes other names in the same places
            return tuple(dict.fromkeys(place_of(u.path) for u in self.of(role)))
        out: list[str] = []
        for use in self.of(role):
            out.append(use.path)
            for staged in use.staging:
                out += [staged, _staging_glob(staged, use.path)]
        return tuple(dict.fromkeys(out))

    def describe(self, role: str) -> str:
        uses = self.of(role)
        if not uses:
            return f"nothing (the target has no {MEANING[role]})"
        return "; ".join(u.describe() for u in uses)

    def content_for(self, path: str) -> bytes | None:
        """What a previous run of the target left at ``path`` (or at the handoff a
        staging name of it is renamed onto)."""
        if path in self.previous:
            return self.previous[path]
        for use in self.of("handoff"):
            if use.path in self.previous and any(
                    fnmatch.fnmatchcase(path, g) for s in use.staging
                    for g in (s, _staging_glob(s, use.path))):
                return self.previous[use.path]
        return None

    # -- the cache's form ------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"uses": {role: [{"path": u.path, "writers": list(u.writers),
                                 "readers": list(u.readers), "staging": list(u.staging)}
                                for u in uses] for role, uses in self.uses.items()},
                "previous": {p: b.hex() for p, b in self.previous.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Roles:
        uses = {role: tuple(FileUse(u["path"], tuple(u["writers"]), tuple(u["readers"]),
                                    tuple(u["staging"])) for u in items)
                for role, items in data.get("uses", {}).items() if role in ROLES}
        return cls(uses, {p: bytes.fromhex(h) for p, h in data.get("previous", {}).items()})


def place_of(path: str) -> str:
    """The files beside ``path``, every worker's numbered directory as one:
    ``/b/tpu_3/shard_7.jsonl`` -> ``/b/tpu_*/*``."""
    return _DIGITS.sub("*", posixpath.dirname(path)) + "/*"


def _staging_glob(staged: str, final: str) -> str:
    """``/d/.cfg.yaml.x8f2`` renamed onto ``/d/cfg.yaml`` -> ``/d/*cfg.yaml*``: the same
    writer stages under another random name in the next run."""
    name = posixpath.basename(final)
    if name and name in posixpath.basename(staged):
        return posixpath.join(posixpath.dirname(staged), f"*{_escape(name)}*")
    return staged


def _escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def derive(history: Iterable[Event]) -> Roles:
    """The roles a fault-free history shows.

    A path's writers are the ranks that closed a write of it, or renamed or linked a
    written file onto it; its readers are the other ranks that opened or stat'ed
    it (whether or not it was there yet: a poller's attempts count).
    """
    writers: dict[str, set[int]] = {}
    lookers: dict[str, set[int]] = {}
    staging: dict[str, list[str]] = {}
    written_by: dict[str, set[int]] = {}  # every closed write, staging names included
    read_ok: set[str] = set()  # opened for reading and there
    rewrites: dict[str, int] = {}  # closed writes of a path, renames onto it included
    replaced: set[str] = set()  # opened for writing over what it held (O_TRUNC), or renamed onto
    order: list[str] = []  # first appearance, for a stable report
    for e in history:
        if e.kind != "file" or e.rank is None:
            continue
        path = e.detail.get("path")
        if not isinstance(path, str) or _PACKAGE_METADATA.search(path):
            continue
        order.append(path)
        ok = e.detail.get("ok", True)
        if e.op == "close" and ok:
            written_by.setdefault(path, set()).add(e.rank)
            writers.setdefault(path, set()).add(e.rank)
            rewrites[path] = rewrites.get(path, 0) + 1
        elif e.op == "rename" and ok and isinstance(e.detail.get("dst"), str):
            dst = e.detail["dst"]
            order.append(dst)
            if path in written_by:
                writers.setdefault(dst, set()).add(e.rank)
                rewrites[dst] = rewrites.get(dst, 0) + 1
                replaced.add(dst)
                staging.setdefault(dst, []).append(path)
                writers.pop(path, None)  # a staging name is not a file of its own
        elif e.op == "link" and ok and isinstance(e.detail.get("dst"), str):
            dst = e.detail["dst"]  # a new name for a written (or a nameless O_TMPFILE) file
            order.append(dst)
            writers.setdefault(dst, set()).add(e.rank)
            written_by.setdefault(dst, set()).add(e.rank)
            rewrites[dst] = rewrites.get(dst, 0) + 1
            if path in written_by:
                staging.setdefault(dst, []).append(path)
                writers.pop(path, None)
        elif e.op == "open-write" and ok and (e.detail.get("trunc") or (
                e.detail.get("new") is False and not e.detail.get("append"))):
            replaced.add(path)  # written over (or into, r+), not added to
        elif e.op in _LOOKS:
            lookers.setdefault(path, set()).add(e.rank)
            if e.op == "open-read" and ok:
                read_ok.add(path)
    staged = {s for names in staging.values() for s in names}
    # a directory (opened to fsync it, or listed) holds files: no file role is it
    directories: set[str] = set()
    for path in order:
        d = posixpath.dirname(path)
        while d not in directories and d not in ("/", ""):
            directories.add(d)
            d = posixpath.dirname(d)
    uses: dict[str, list[FileUse]] = {role: [] for role in ROLES}
    dirs: dict[str, FileUse] = {}
    for path in dict.fromkeys(order):
        if path in staged or path in directories:
            continue
        w = writers.get(path, set())
        readers = lookers.get(path, set()) - w
        if w and readers:
            use = FileUse(path, tuple(sorted(w)), tuple(sorted(readers)),
                          tuple(dict.fromkeys(staging.get(path, []))))
            uses["handoff"].append(use)
            d = posixpath.dirname(path)
            dirs.setdefault(d, FileUse(d, use.writers, use.readers))
        elif w:
            # written again and again over what it held: a checkpoint; a file only ever
            # added to (opened to append, never truncated) is an output, record by record
            role = "state" if rewrites.get(path, 0) > 1 and path in replaced else "output"
            uses[role].append(FileUse(path, tuple(sorted(w)), (),
                                      tuple(dict.fromkeys(staging.get(path, [])))))
        elif path in read_ok and path not in written_by:
            uses["input"].append(FileUse(path, (), tuple(sorted(lookers[path]))))
    uses["handoff-dir"] = list(dirs.values())
    return Roles({role: tuple(items) for role, items in uses.items() if items})
