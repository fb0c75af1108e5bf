"""The crash model: from one rank's file operations, the states its disk can be left in.

Pure: a sequence of operations in (``FileOp``, read from a fault-free world's
history by ``ops_of``), crash states out (``enumerate_states``), per mount
consistency. Nothing here runs a world; ``harness.explore.crash`` materialises
each state as one.

**Crash points.** Before each operation that changes the disk (open for writing,
write, fsync, rename, remove, mkdir, rmdir) and, for a write, within it (a torn
prefix reached the file). A close is not a crash point of its own: a crash just
before it leaves what the last write left (or, on ``object``, what the open left).
Only the first ``MAX_OCCURRENCES`` occurrences of each operation site are crash
points (a site: the same operation at the same source line on paths alike up to
their numbers, as ``shard_0003`` is like ``shard_0000``): the first creates a file,
the second replaces it, and CrashMonkey's survey found that most crash bugs need
three operations or fewer. The state after the last operation is not a crash
point (no operation is left to crash at).

**Two crashes.**

- *process* (the host survives): every operation issued persists, as the kernel
  holds it; the write in flight is torn at a seeded byte.
- *host* (a pre-empted VM whose disk persists, its page cache lost): a file's data
  not made durable is lost, its metadata is not. On ``local`` (ext4 data=ordered
  with delayed allocation and no ``auto_da_alloc``, the conservative reading ALICE
  takes): the data of a file becomes durable at its fsync; a truncating or
  creating open, a rename and an unlink are journaled in order and persist (the
  worst case: the journal committed, the data blocks did not), so a file is left
  with the bytes it held at its last fsync, cut to 0 by a truncation since, and a
  rename carries its file's durable bytes to the new name (the zero-length file
  after rename without fsync). A directory fsync adds nothing in this model
  (metadata always persists): a forgotten directory fsync is not reported. An
  in-place overwrite of bytes already durable, without truncation, is not undone
  (the file keeps the new bytes). On ``close-to-open``/``delayed`` (NFS) data is
  durable at close or fsync (NFS commits on close). On ``object`` (gcsfuse) an
  object appears whole at close (or fsync) or not at all, on either crash: a host
  crash there is the process crash. A rename on ``object`` is one step in the
  simulator (gcsfuse's copy then delete of a file is not split).

**Distinct states.** Each state has a signature (which version of which file is at
which name, and what a host crash cut); a crash point whose state equals an
earlier one's is not listed again, so a write to an ``object`` file adds no state
(nothing shows until its close).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: Operations that change the disk (what a crash can interrupt or lose).
MUTATING = ("open-write", "write", "fsync", "close", "rename", "remove", "mkdir", "rmdir")
#: Crash points (a close is not one: see the module docstring).
CRASH_POINTS = ("open-write", "write", "fsync", "rename", "remove", "mkdir", "rmdir")
#: At most this many occurrences of each operation site are crash points.
MAX_OCCURRENCES = 2
PROCESS, HOST = "process", "host"
#: What makes two file names alike: their numbers and hex digests (``shard_0003``,
#: ``shard_sample-00038_5ed1a5d77b63``).
_ALIKE = re.compile(r"[0-9a-f]{8,}|\d+")
LOCAL, OBJECT = "local", "object"


@dataclass(frozen=True)
class FileOp:
    """One operation a rank made on a file, as the recording view told it."""

    index: int  # its place in the rank's sequence of operations that changed the disk
    op: str
    path: str
    occurrence: int = 1  # the k-th attempt of (op, path) by this rank: what a trigger counts
    dst: str | None = None
    offset: int | None = None
    size: int | None = None  # a write's bytes; a close's file size
    trunc: bool = False
    new: bool | None = None
    dir: bool = False
    line: str | None = None
    nth: int = 1  # the k-th time its site ran (``site``): a temporary file's name is new each time

    @property
    def site(self) -> tuple[str, str, str | None]:
        """The operation site: the same operation at the same source line, in directories
        alike up to their numbers (``tpu_0``, ``tpu_1``); without a line, on paths alike."""
        if self.line is None:
            return (self.op, _ALIKE.sub("#", self.path), None)
        return (self.op, _ALIKE.sub("#", self.path.rsplit("/", 1)[0]), self.line)

    def describe(self) -> str:
        """``write 2 of checkpoint_worker_0.json``."""
        name = self.path.rsplit("/", 1)[-1] or self.path
        what = {"open-write": "open for writing" + (" (truncating)" if self.trunc else ""),
                "fsync": "directory fsync" if self.dir else "fsync"}.get(self.op, self.op)
        text = f"{what} {self.occurrence} of `{name}`"
        if self.op == "rename" and self.dst:
            text += f" onto `{self.dst.rsplit('/', 1)[-1]}`"
        return text

    def to_dict(self) -> dict[str, Any]:
        out = {"op": self.op, "path": self.path, "occurrence": self.occurrence}
        for name in ("dst", "offset", "size", "line"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.trunc:
            out["trunc"] = True
        if self.dir:
            out["dir"] = True
        return out


def ops_of(events: Iterable[Any], rank: int) -> list[FileOp]:
    """``rank``'s operations that changed the disk, in order, from a recorded history
    (``Event``s or their dicts). Occurrences count every attempt of (op, path), failed
    ones and reads too, as a fault's trigger counts them; only the ones that succeeded
    are kept."""
    counts: Counter[tuple[str, str]] = Counter()
    sites: Counter[tuple[str, str, str | None]] = Counter()
    out: list[FileOp] = []
    for event in events:
        get = event.get if isinstance(event, Mapping) else lambda k, e=event: getattr(e, k, None)
        if get("kind") != "file" or get("rank") != rank:
            continue
        op, detail = get("op"), get("detail") or {}
        path = detail.get("path")
        if not isinstance(op, str) or not isinstance(path, str):
            continue
        counts[(op, path)] += 1 + int(detail.get("count") or 0)
        if op not in MUTATING or not detail.get("ok"):
            continue
        made = FileOp(len(out), op, path, counts[(op, path)], dst=detail.get("dst"),
                      offset=detail.get("offset"), size=detail.get("size"),
                      trunc=bool(detail.get("trunc")), new=detail.get("new"),
                      dir=bool(detail.get("dir")), line=detail.get("line"))
        sites[made.site] += 1
        out.append(replace(made, nth=sites[made.site]))
    return out


@dataclass
class _Inode:
    number: int
    consistency: str
    size: int = 0
    durable: int | None = 0  # None: unknown (it held bytes before the run: all kept)
    version: int = 0  # bumped by every change a reader of this host would see
    shown: int = 0  # the version an object reader sees (its last upload; 0: none yet)
    existed: bool = False  # it was there before the rank's first operation on it
    dirty_by: FileOp | None = None  # the operation that made its bytes not durable


@dataclass(frozen=True)
class CrashState:
    """One state the disk can be left in, and how to make it."""

    rank: int
    at: FileOp  # the crash comes before it (or, ``torn``, within it)
    crash: str  # process | host
    torn: bool = False
    #: host: file -> the bytes of it that survive
    cut: Mapping[str, int] = field(default_factory=dict)
    #: the operation the state depends on (what a report names)
    depends: FileOp | None = None
    consistency: str = LOCAL
    why: str = ""  # what the state is, in words
    files: tuple[str, ...] = ()  # the names of the rank's files at the crash point
    damaged: str | None = None  # the file it leaves torn, empty or cut (None: all whole)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "crash": self.crash, "at": self.at.to_dict(),
                               "torn": self.torn, "consistency": self.consistency,
                               "why": self.why}
        if self.cut:
            out["cut"] = dict(self.cut)
        if self.depends is not None:
            out["depends"] = self.depends.to_dict()
        return out


class _Disk:
    """The names and files a rank's operations leave, as the model sees them."""

    def __init__(self, consistency: Callable[[str], str]) -> None:
        self.consistency = consistency
        self.names: dict[str, _Inode] = {}
        self.dirs: set[str] = set()
        self.numbers = 0
        self.last_change: FileOp | None = None

    def _inode(self, path: str, existed: bool) -> _Inode:
        self.numbers += 1
        return _Inode(self.numbers, self.consistency(path), durable=None if existed else 0,
                      existed=existed)

    def apply(self, op: FileOp) -> None:
        before = self.signature()
        kind = op.op
        if kind == "open-write":
            inode = self.names.get(op.path)
            if inode is None:
                inode = self.names[op.path] = self._inode(op.path, existed=op.new is False)
                inode.version += 1
                inode.dirty_by = op
            if op.trunc or op.new:
                inode.size = 0
                if inode.consistency != OBJECT:
                    inode.durable = 0  # the truncate is journaled; the old bytes are gone
                inode.version += 1
                inode.dirty_by = op
        elif kind == "write":
            inode = self.names.get(op.path) or self.names.setdefault(
                op.path, self._inode(op.path, existed=True))
            end = (op.offset or 0) + (op.size or 0)
            inode.size = max(inode.size, end)
            inode.version += 1
            if inode.dirty_by is None or inode.durable == inode.size:
                inode.dirty_by = op
        elif kind in ("close", "fsync") and not op.dir:
            inode = self.names.get(op.path)
            if inode is not None:
                if kind == "close" and op.size is not None:
                    inode.size = op.size
                if kind == "fsync" or inode.consistency != LOCAL:
                    inode.durable, inode.dirty_by = inode.size, None  # fsync; NFS or gcsfuse close
                if inode.consistency == OBJECT or kind == "close":
                    inode.shown = inode.version
        elif kind == "rename" and op.dst:
            moved = {p: i for p, i in self.names.items() if p == op.path or p.startswith(op.path + "/")}
            for p, inode in moved.items():
                del self.names[p]
                self.names[op.dst + p[len(op.path):]] = inode
                if inode.dirty_by is not None and inode.consistency == LOCAL:
                    inode.dirty_by = op  # the rename persisted, the bytes it carries did not
            self.dirs = {op.dst + d[len(op.path):] if d == op.path or d.startswith(op.path + "/")
                         else d for d in self.dirs}
        elif kind == "remove":
            self.names.pop(op.path, None)
        elif kind == "mkdir":
            self.dirs.add(op.path)
        elif kind == "rmdir":
            self.dirs.discard(op.path)
        if self.signature() != before:
            self.last_change = op

    def signature(self, cut: Mapping[str, int] | None = None) -> tuple[Any, ...]:
        files = []
        for path, inode in sorted(self.names.items()):
            if inode.consistency == OBJECT:
                if inode.shown or inode.existed:  # an object not yet uploaded is not there
                    files.append((path, inode.number, "object", inode.shown))
            elif cut and path in cut:
                files.append((path, inode.number, "cut", cut[path]))
            else:
                files.append((path, inode.number, inode.version))
        return (tuple(files), tuple(sorted(self.dirs)))

    def lost(self) -> dict[str, tuple[int, FileOp | None]]:
        """What a host crash now cuts: file -> (the bytes that survive, what made the rest
        not durable)."""
        out = {}
        for path, inode in sorted(self.names.items()):
            if inode.consistency == OBJECT or inode.durable is None:
                continue
            if inode.durable < inode.size:
                out[path] = (inode.durable, inode.dirty_by)
        return out


def enumerate_states(ops: list[FileOp], rank: int, consistency: Callable[[str], str],
                     max_occurrences: int = MAX_OCCURRENCES) -> list[CrashState]:
    """Every distinct state a crash of ``rank`` can leave, in the order of its crash points:
    process crashes (before each crash point, torn within each write) and host crashes
    (before each crash point); ``consistency`` names each path's mount consistency."""
    disk = _Disk(consistency)
    seen = {disk.signature()}  # the state before any operation: a fresh start, not a crash
    sites: Counter[tuple[str, str, str | None]] = Counter()
    states: list[CrashState] = []

    def add(state: CrashState, signature: tuple[Any, ...]) -> None:
        if signature not in seen:
            seen.add(signature)
            states.append(state)

    for op in ops:
        point = op.op in CRASH_POINTS
        if point:
            sites[op.site] += 1
            point = sites[op.site] <= max_occurrences
        if point:
            last = disk.last_change
            files = tuple(sorted(disk.names))
            emptied = last is not None and last.op == "open-write" and (last.trunc or bool(last.new)) \
                and consistency(last.path) != OBJECT
            add(CrashState(rank, op, PROCESS, depends=last, files=files,
                           consistency=consistency(last.path) if last else LOCAL,
                           why=_after(last, op), damaged=last.path if emptied and last else None),
                disk.signature())
            lost = disk.lost()
            if lost:
                cut = {p: keep for p, (keep, _) in lost.items()}
                first = _blamed(lost)
                keep, culprit = lost[first]
                # a host crash adds to the process crash at the same point only what it cuts:
                # a later point that loses the same bytes to the same operations is the same
                loss = ("host", tuple(sorted((p, k, c.index if c else -1)
                                             for p, (k, c) in lost.items())))
                add(CrashState(rank, op, HOST, cut=cut, depends=culprit or last, files=files,
                               consistency=consistency(first), why=_lost(first, keep, culprit),
                               damaged=first),
                    loss)
            if op.op == "write" and (op.size or 0) > 1:
                signature = disk.signature()
                inode = disk.names.get(op.path)
                if inode is not None and inode.consistency != OBJECT:
                    signature = signature + (("torn", op.path, inode.number, inode.version),)
                add(CrashState(rank, op, PROCESS, torn=True, depends=op, damaged=op.path,
                               files=tuple(sorted({*files, op.path})),
                               consistency=consistency(op.path),
                               why=f"a crash during {op.describe()} leaves a torn file"),
                    signature)
        disk.apply(op)
    return states


def _blamed(lost: Mapping[str, tuple[int, FileOp | None]]) -> str:
    """The file whose loss a host state is reported by: one a rename carried unsynced
    data onto (the zero-length file after rename), else the oldest loss (what a restart
    reads is rarely the file being written right now)."""
    def rank(path: str) -> tuple[int, int]:
        culprit = lost[path][1]
        return (0 if culprit is not None and culprit.op == "rename" else 1,
                culprit.index if culprit is not None else -1)
    return min(lost, key=rank)


def _after(op: FileOp | None, next_op: FileOp) -> str:
    if op is None:
        return "a crash before any change to the disk"
    if op.op == "open-write" and (op.trunc or op.new):
        return f"a crash right after {op.describe()} leaves the file empty"
    return f"a crash after {op.describe()}, before {next_op.describe()} (no file torn)"


def _lost(path: str, keep: int, culprit: FileOp | None) -> str:
    name = path.rsplit("/", 1)[-1]
    left = "empty" if keep == 0 else f"cut to its {keep} durable bytes"
    if culprit is not None and culprit.op == "rename":
        return (f"a host crash after {culprit.describe()}, whose data was never fsynced, leaves "
                f"`{name}` {left}")
    if culprit is not None:
        return f"a host crash after {culprit.describe()}, with no fsync since, leaves `{name}` {left}"
    return f"a host crash leaves `{name}` {left}"


def signature_of_rank(ops: list[FileOp]) -> frozenset[tuple[str, str, str | None]]:
    """The operation sites of a rank: ranks with the same sites are one writer (the same
    code on files named alike, as workers writing their own numbered files). Directory
    creations are left out: which rank creates a shared parent first is a race."""
    return frozenset(op.site for op in ops if op.op not in ("mkdir", "rmdir"))


def writers(ops_by_rank: Mapping[int, list[FileOp]]) -> list[int]:
    """The ranks to crash: every rank that changes the disk, one per set of sites."""
    chosen: dict[frozenset[Any], int] = {}
    for rank in sorted(ops_by_rank):
        ops = ops_by_rank[rank]
        if not any(op.op in CRASH_POINTS for op in ops):
            continue
        chosen.setdefault(signature_of_rank(ops), rank)
    return sorted(chosen.values())


# -- what the operations say without a world ---------------------------------------

@dataclass(frozen=True)
class Pattern:
    """A protocol the model flags from the operations alone (ALICE's static reading):
    confirmed or not by a world, as the report says."""

    kind: str  # in-place | rename-unsynced
    op: FileOp
    text: str
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "rank": self.rank, "op": self.op.to_dict(), "text": self.text}


def patterns(ops: list[FileOp], consistency: Callable[[str], str], rank: int = 0,
             scratch: Iterable[str] = ()) -> list[Pattern]:
    """Files written in place without an fsync, and renames of files never fsynced:
    one per operation site. ``scratch``: paths some rank removes (a probe file that
    nobody reads back), never flagged."""
    out: list[Pattern] = []
    sites: set[tuple[str, str, str | None]] = set()
    renamed = {op.path for op in ops if op.op == "rename"}
    removed = {op.path for op in ops if op.op == "remove"} | set(scratch)
    for i, op in enumerate(ops):
        if op.op == "open-write" and (op.trunc or op.new) and op.path not in renamed | removed \
                and consistency(op.path) != OBJECT and op.site not in sites:
            rest = ops[i + 1:]
            end = next((j for j, o in enumerate(rest) if o.op == "close" and o.path == op.path),
                       len(rest))
            wrote = [o for o in rest[:end] if o.op == "write" and o.path == op.path]
            if wrote and not any(o.op == "fsync" and o.path == op.path for o in rest[:end]):
                sites.add(op.site)
                name = op.path.rsplit("/", 1)[-1]
                out.append(Pattern("in-place", op, rank=rank, text=(
                    f"`{name}` is written in place ({'truncated' if op.trunc else 'created'} "
                    f"at its final name) with no fsync: a crash during its write leaves it torn, "
                    f"a host crash after it leaves it empty")))
        if op.op == "rename" and op.site not in sites and consistency(op.path) == LOCAL:
            written = any(o.op == "write" and o.path == op.path for o in ops[:i])
            if written and not any(o.op == "fsync" and o.path == op.path for o in ops[:i]):
                sites.add(op.site)
                out.append(Pattern("rename-unsynced", op, rank=rank, text=(
                    f"`{op.path.rsplit('/', 1)[-1]}` is renamed onto `{(op.dst or '').rsplit('/', 1)[-1]}` "
                    "before its data is fsynced: a host crash after the rename leaves the new "
                    "name empty")))
    return out
