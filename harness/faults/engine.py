"""The rank side of the fault plan: fire each fault exactly where its trigger
says, with exactly what a real system would produce.

The engine is the view's hooks object, the rank's collective hook and its
start: at each point it asks every fault of this rank what to do, and each
kind answers in its own module (``harness/faults/kinds``). Every fault that
fires is reported to the coordinator, which puts it in the history next to
the collective calls, before it takes effect.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from harness.faults.seal import fault_event, seal
from harness.filesystem import machine
from harness.filesystem.sandbox import Leftover
from harness.filesystem.view import NoHooks, Resolved, View, ViewFile, oserror

if TYPE_CHECKING:
    from harness.faults.plan import Fault, FaultPlan

Notify = Callable[[dict[str, Any]], None]
#: ``wait(doing, at_least_ms)``: this rank waits until every other unit has finished or
#: waits on another one, and at least ``at_least_ms`` of world time (the world's clock).
Wait = Callable[[dict[str, str], int], None]


class Signals(Protocol):
    """The rank's side of the signals the harness delivers (``harness.rank.signals``)."""

    def awaiting(self, host: int) -> AbstractContextManager[None]:
        """What runs inside (a notice to ``host``) is answered by a signal, or the word that
        none comes: the block waits for it on exit."""


class FaultEngine(NoHooks):
    """Calls each planned fault's hooks where the view, the collectives and the
    rank's start reach them; a kind decides in its own module what it does."""

    def __init__(self, plan: FaultPlan, rank: int, host: int, notify: Notify,
                 life: int = 0, ask: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 wait: Wait | None = None, signals: Signals | None = None) -> None:
        """``ask``: a request to the harness, answered (the simulator's server seals a
        faulted write); None (a pod): this rank seals its own.
        ``wait``: the world clock's wait for the others (None: no world, a plain sleep).
        ``signals``: the signals the harness delivers to this rank, on the world's clock
        (``harness.rank.signals``; None: no harness, the rank signals itself)."""
        self.plan = plan
        self.ask = ask
        self._wait = wait
        self._signals = signals
        self.rank, self.host, self.life = rank, host, life
        self.faults = plan.for_rank(rank, host, life)
        self.notify = notify
        self.counts: Counter[int] = Counter()
        self.watched = plan.held_paths()
        # Files placed as another user's: EACCES as a non-owner meets it.
        self.owners: dict[str, tuple[Leftover, Fault]] = {}
        for fault in plan.faults:
            for placed in fault.spec.leftovers(fault, plan.roles):
                if placed.owner_uid is not None:
                    self.owners[placed.path] = (placed, fault)
        self._holds = 0
        self._own: dict[str, str] = {}  # vpath -> the staging file of a held write
        self._follows: set[str] = set()  # held writes whose hold follows a rename
        self._lost: set[str] = set()  # lost writes (a rename of one is lost with it)

    # -- bookkeeping ------------------------------------------------------------
    def fires(self, fault: Fault, op: str, path: str | None = None, tag: str | None = None) -> bool:
        """Whether ``fault`` fires at this operation (counting it when its trigger matches)."""
        if fault.trigger.after_ms is not None:
            return False  # fired by its timer (at_start), never by an operation
        if not fault.trigger.matches(op, path, tag):
            return False
        self.counts[fault.index] += 1
        wanted = fault.trigger.occurrences
        count = self.counts[fault.index]
        return count in wanted if wanted is not None else fault.spec.occurs(count)

    def report(self, fault: Fault, op: str, path: str | None = None, **detail: Any) -> None:
        self.notify(fault_event(fault, op, path, detail))

    def notice(self, fault: Fault, op: str, path: str | None, **detail: Any) -> None:
        """Report ``fault``, a notice to this rank's host, and wait until the harness has
        signalled this rank (it signals every process of the host at that world instant):
        the rank's handler runs here, where the fault struck, in every run."""
        if self._signals is None:
            self.report(fault, op, path, **detail)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        with self._signals.awaiting(self.host):
            self.report(fault, op, path, **detail)

    def start(self, seed: int) -> int:
        """The rank starts: each fault may set its environment or timers; returns
        the seed of its random generators."""
        for fault in self.faults:
            seed = fault.spec.at_start(self, fault, seed)
        return seed

    def before_collective(self, op: str, tag: str | None) -> None:
        """Faults aimed at a collective: ``tag`` globs match its tag or its op."""
        shown = f"{op} {tag!r}" if tag else op
        for fault in self.faults:
            if "collective" not in fault.spec.ops or fault.trigger.after_ms is not None:
                continue
            glob = fault.trigger.tag
            named = tag if tag is not None and (glob is None or fnmatch.fnmatchcase(tag, glob)) \
                else op
            if self.fires(fault, "collective", None, named):
                fault.spec.at_collective(self, fault, shown)

    # -- filesystem hooks -----------------------------------------------------------
    def before(self, view: View, op: str, r: Resolved, r2: Resolved | None = None) -> None:
        self._check_permission(op, r, r2)
        for fault in self.faults:
            fault.spec.before(self, fault, op, r, r2)

    def looked(self, view: View, op: str, r: Resolved) -> None:
        # Told after the look, never before: a held write published in between
        # would reach the reader that was meant to miss it.
        if op in ("open-read", "stat", "listdir") and self._watched(r.vpath):
            self.notify({"type": "fs-access", "path": r.vpath})

    def _watched(self, vpath: str) -> bool:
        return any(fnmatch.fnmatchcase(vpath, g) for g in self.watched)

    def prepare_write(self, view: View, r: Resolved, whole: bool = False) -> Resolved:
        """Decide now what becomes of this write when it is closed (``whole``: it shows up
        in one step, so no fault of the moment between its open and its close applies)."""
        self._lost.discard(r.vpath)  # written again: what a rename moves now is this write
        chosen = [f for f in self.faults if f.spec.close_order is not None
                  and not (whole and f.spec.in_between)
                  and self.fires(f, "close", r.vpath)]
        if not chosen:
            return r
        self._holds += 1
        r.content_faults = chosen
        r.model_staging = r.staging
        r.staging = os.path.join(view.sandbox, "held", f"rank-{self.rank}-{self._holds}",
                                 os.path.basename(r.vpath) or "file")
        return r

    def write(self, view: View, r: Resolved, f: ViewFile, data: memoryview) -> memoryview:
        for fault in self.faults:
            data = fault.spec.on_write(self, fault, r, f, data)
        return data

    def after_close(self, view: View, r: Resolved, writing: bool = True) -> bool:
        """Rewrite or withhold a faulted write's bytes (``harness.faults.seal``): the
        harness seals it where there is one (``ask``), else this rank does; the mount's
        model publishes the rest."""
        faults = getattr(r, "content_faults", None)
        if not writing or not faults:
            return False
        if self.ask is None:
            withheld = seal(self, faults, r)
            if withheld and r.vpath not in self._own:
                self._lost.add(r.vpath)
            return withheld
        reply = self.ask({"type": "seal", "path": r.vpath, "staging": r.staging,
                             "upper": r.on_disk, "model_staging": r.model_staging,
                             "faults": [f.index for f in faults]})
        r.staging = reply["staging"]
        if reply["held"]:
            self._own[r.vpath] = r.staging
            if reply.get("follows"):
                self._follows.add(r.vpath)
        elif reply["withheld"]:
            self._lost.add(r.vpath)
        return bool(reply["withheld"])

    def wait_for_others(self, doing: dict[str, str], at_least_ms: int) -> None:
        """Hold this rank before ``doing`` until every other one has finished or waits on
        another, and at least ``at_least_ms`` (``slow-write``)."""
        if self._wait is not None:
            self._wait(doing, at_least_ms)
        else:  # no world clock to say when the others wait: its least, on the machine's
            time.sleep(at_least_ms / 1000)

    def hold(self, r: Resolved, fault: Fault, until: str) -> None:
        """The coordinator publishes the staged write once ``until`` is met; until then
        the writer alone reads it back (``own_copy``)."""
        self._own[r.vpath] = r.staging
        if fault.spec.follows_rename:
            self._follows.add(r.vpath)
        self.notify({"type": "hold", "src": r.staging, "dst": r.on_disk, "path": r.vpath,
                     "until": until, "writer": self.rank, "fault": fault.kind})

    def rename_withheld(self, view: View, rs: Resolved, rd: Resolved) -> bool:
        """The writer renames a write its faults withheld: a lost one's rename is lost too
        (the new name shows nothing new, and the call succeeds); a held one's hold follows
        it (``follows_rename``), and the new name shows it when the hold ends."""
        if rs.vpath in self._lost:
            self._lost.discard(rs.vpath)
            self._lost.add(rd.vpath)
            return True
        if rs.vpath not in self._follows or self.own_copy(rs.vpath) is None:
            return False
        self.notify({"type": "hold-moved", "path": rs.vpath, "to": rd.vpath, "dst": rd.on_disk})
        self._follows.discard(rs.vpath)
        self._follows.add(rd.vpath)
        self._own[rd.vpath] = self._own.pop(rs.vpath)
        return True

    def own_copy(self, vpath: str) -> str | None:
        staged = self._own.get(vpath)
        if staged is not None and machine.exists(staged):
            return staged
        self._own.pop(vpath, None)  # published (moved into place) or never written
        return None

    def read_file(self, path: str) -> bytes:
        return _read(path)

    def write_file(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:  # noqa: PTH123 - the harness's own I/O
            f.write(data)

    def remove_file(self, path: str) -> None:
        os.remove(path)

    def adjust_stat(self, view: View, r: Resolved, st: Any) -> Any:
        placed = self.owners.get(r.vpath)
        if placed is None:
            return st
        owner = placed[0]
        kind = st.st_mode & ~0o7777
        values = list(st[:10])
        values[0], values[4], values[5] = kind | owner.mode, owner.owner_uid, owner.owner_uid
        return os.stat_result(values)

    def access(self, view: View, r: Resolved, mode: int, allowed: bool) -> bool:
        try:
            self._check_permission("open-write" if mode & os.W_OK else "open-read", r, None)
        except PermissionError:
            return False
        return allowed

    def _check_permission(self, op: str, r: Resolved, r2: Resolved | None) -> None:
        """EACCES as a non-owner meets it, even when the harness runs as root."""
        for res in (r, r2):
            if res is None:
                continue
            for path, (owner, fault) in self.owners.items():
                if _denied(op, res.vpath, path, owner):
                    self.report(fault, op, res.vpath,
                                message=f"EACCES on {op} of {res.vpath}: {path} belongs to "
                                        f"uid {owner.owner_uid}, mode {owner.mode:04o}")
                    raise oserror(errno.EACCES, res.vpath)


def _denied(op: str, vpath: str, owned: str, owner: Leftover) -> bool:
    others = owner.mode & 0o7
    if vpath == owned:
        if op == "stat":
            return False
        if op in ("open-read", "read", "listdir"):
            return not others & 0o4
        if op in ("open-write", "write", "chmod", "truncate"):
            return not others & 0o2
        if op in ("remove", "rename", "rmdir"):
            return False  # decided by the parent directory
        return False
    if owner.is_dir and vpath.startswith(owned.rstrip("/") + "/"):
        if not others & 0o1:
            return True  # cannot traverse
        direct = os.path.dirname(vpath) == owned.rstrip("/")
        creates = op in ("open-write", "mkdir", "remove", "rmdir", "rename")
        return direct and creates and not others & 0o2
    return False


def _read(path: str) -> bytes:
    with open(path, "rb") as f:  # noqa: PTH123 - the harness's own I/O, before any patch
        return f.read()
