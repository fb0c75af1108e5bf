"""The rank side of the fault plan: fire each fault exactly where its trigger
says, with exactly what a real system would produce.

The engine is the view's hooks object (filesystem faults and each mount's
consistency model) and the rank's collective hook (process faults). Every
fault that fires is reported to the coordinator, which puts it in the
history next to the collective calls, before it takes effect.
"""

from __future__ import annotations

import builtins
import errno
import fnmatch
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from harness.faults.plan import KIND_OPS, RAISABLE, Fault, FaultPlan
from harness.filesystem.sandbox import Leftover
from harness.filesystem.view import NoHooks, Resolved, View, ViewFile, oserror

Notify = Callable[[dict[str, Any]], None]

# Faults that change what a closed file shows others: decided at open, applied at close.
_CONTENT_KINDS = tuple(kind for kind, ops in KIND_OPS.items() if ops == ("close",))
_STRIKES = ("kill", "preempt", "raise")
_EXCEPTIONS = {name: getattr(builtins, name) for name in RAISABLE}


class FaultEngine(NoHooks):
    def __init__(self, plan: FaultPlan, rank: int, host: int, notify: Notify,
                 life: int = 0) -> None:
        self.plan = plan
        self.rank, self.host, self.life = rank, host, life
        self.faults = plan.for_rank(rank, host, life)
        self.notify = notify
        self.counts: Counter[int] = Counter()
        self.watched = plan.held_paths()
        self.owned = {lo.path: lo for lo in plan.leftovers if lo.owner_uid is not None}
        self.owners = {f.trigger.path: f for f in plan.faults if f.kind == "permission-denied"}
        self._holds = 0

    # -- bookkeeping ------------------------------------------------------------
    def _fires(self, fault: Fault, op: str, path: str | None = None, tag: str | None = None) -> bool:
        if fault.trigger.after_ms is not None:
            return False  # fired by its timer (on_start), never by an operation
        if not fault.trigger.matches(op, path, tag):
            return False
        self.counts[fault.index] += 1
        wanted = fault.trigger.occurrences
        if wanted is None and fault.kind == "eio":
            wanted = tuple(range(1, int(fault.params.get("count", 1)) + 1))
        return wanted is None or self.counts[fault.index] in wanted

    def report(self, fault: Fault, op: str, path: str | None = None, **detail: Any) -> None:
        message = detail.pop("message", None) or f"{fault.kind} on {op} {path or ''}".rstrip()
        self.notify({"type": "fault", "fault": fault.kind, "index": fault.index, "op": op,
                     "path": path, "detail": {"message": message, **detail}})

    # -- filesystem hooks -----------------------------------------------------------
    def before(self, view: View, op: str, r: Resolved, r2: Resolved | None = None) -> None:
        self._check_permission(op, r, r2)
        for fault in self.faults:
            if fault.kind == "eio" and op in ("open-read", "open-write", "read", "write", "fsync") \
                    and self._fires(fault, op, r.vpath):
                self.report(fault, op, r.vpath, message=f"EIO on {op} of {r.vpath}")
                raise oserror(errno.EIO, r.vpath if op.startswith("open") else None)
            if fault.kind == "latency" and self._fires(fault, op, r.vpath):
                delay = int(fault.params.get("delay_ms", 100))
                self.report(fault, op, r.vpath, message=f"{op} of {r.vpath} delayed {delay} ms")
                time.sleep(delay / 1000)
            if fault.kind in _STRIKES and op != "write" and self._fires(fault, op, r.vpath):
                self._strike(fault, op, r.vpath)

    def looked(self, view: View, op: str, r: Resolved) -> None:
        # Told after the look, never before: a held write published in between
        # would reach the reader that was meant to miss it.
        if op in ("open-read", "stat", "listdir") and self._watched(r.vpath):
            self.notify({"type": "fs-access", "path": r.vpath})

    def _watched(self, vpath: str) -> bool:
        return any(fnmatch.fnmatchcase(vpath, g) for g in self.watched)

    def prepare_write(self, view: View, r: Resolved) -> Resolved:
        """Decide now what becomes of this write when it is closed."""
        chosen = [f for f in self.faults if f.kind in _CONTENT_KINDS
                  and self._fires(f, "close", r.vpath)]
        if not chosen:
            return r
        self._holds += 1
        r.content_faults = chosen  # type: ignore[attr-defined]
        r.staging = os.path.join(view.sandbox, "held", f"rank-{self.rank}-{self._holds}",
                                 os.path.basename(r.vpath) or "file")
        return r

    def write(self, view: View, r: Resolved, f: ViewFile, data: memoryview) -> memoryview:
        for fault in self.faults:
            if fault.kind == "enospc" and fault.trigger.matches("write", r.vpath):
                limit = int(fault.params.get("at_byte", 0))
                if f.written >= limit:
                    self.report(fault, "write", r.vpath,
                                message=f"ENOSPC writing {r.vpath} at byte {f.written}")
                    raise oserror(errno.ENOSPC)
                data = data[:limit - f.written]
            elif fault.kind in _STRIKES and self._fires(fault, "write", r.vpath):
                if fault.params.get("partial", True) and len(data) > 1:
                    cut = 1 + random.Random(fault.params["rng"]).randrange(len(data) - 1)
                    os.write(f.fileno(), data[:cut])
                    f.flush()
                self._strike(fault, "write", r.vpath)
            elif fault.kind == "eio" and self._fires(fault, "write", r.vpath):
                self.report(fault, "write", r.vpath, message=f"EIO on write of {r.vpath}")
                raise oserror(errno.EIO)
            elif fault.kind == "latency" and self._fires(fault, "write", r.vpath):
                delay = int(fault.params.get("delay_ms", 100))
                self.report(fault, "write", r.vpath, message=f"write of {r.vpath} delayed {delay} ms")
                time.sleep(delay / 1000)
        return data

    def after_close(self, view: View, r: Resolved, writing: bool = True) -> bool:
        """Rewrite or withhold a faulted write's bytes; the mount's model publishes the rest."""
        faults = getattr(r, "content_faults", None)
        if not writing or not faults:
            return False
        data = _read(r.staging)
        target = r.upper
        rng_faults = {f.kind: f for f in faults}
        if "lost-write" in rng_faults:
            self.report(rng_faults["lost-write"], "close", r.vpath,
                        message=f"the write of {r.vpath} ({len(data)} bytes) was lost")
            os.remove(r.staging)
            return True
        if "torn-write" in rng_faults:
            fault = rng_faults["torn-write"]
            offset = torn_offset(data, fault)
            self.report(fault, "close", r.vpath, offset=offset, size=len(data),
                        message=f"{r.vpath} torn at byte {offset} of {len(data)}")
            data = data[:offset]
        if "corrupt" in rng_faults:
            fault = rng_faults["corrupt"]
            data, where = corrupt(data, fault)
            self.report(fault, "close", r.vpath, bytes=where,
                        message=f"{r.vpath}: {len(where)} bytes garbled")
        if "foreign-write" in rng_faults:
            fault = rng_faults["foreign-write"]
            foreign = str(fault.params.get("content", "")).encode()
            self.report(fault, "close", r.vpath,
                        message=f"another job overwrote {r.vpath} right after rank {self.rank} "
                                f"wrote it ({len(foreign)} bytes of its own)")
            data = foreign
        _write(r.staging, data)
        if "empty-window" in rng_faults:
            fault = rng_faults["empty-window"]
            self.report(fault, "close", r.vpath,
                        message=f"{r.vpath} visible empty until every reader has looked")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _write(target, b"")
            self._hold(r, fault, until="read")
        elif "hold-write" in rng_faults:
            fault = rng_faults["hold-write"]
            until = fault.params.get("until", "read")
            self.report(fault, "close", r.vpath,
                        message=f"{r.vpath} held until every other rank has "
                                f"{'looked for it' if until == 'read' else 'finished'}")
            self._hold(r, fault, until=until)
        else:
            return False
        return True

    def _hold(self, r: Resolved, fault: Fault, until: str) -> None:
        self.notify({"type": "hold", "src": r.staging, "dst": r.upper, "path": r.vpath,
                     "until": until, "writer": self.rank, "fault": fault.kind})

    def adjust_stat(self, view: View, r: Resolved, st: Any) -> Any:
        owner = self.owned.get(r.vpath)
        if owner is None:
            return st
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
        if not self.owned:
            return
        for res in (r, r2):
            if res is None:
                continue
            for path, owner in self.owned.items():
                denied = _denied(op, res.vpath, path, owner)
                if denied:
                    fault = self.owners.get(path)
                    if fault is not None:
                        self.report(fault, op, res.vpath,
                                    message=f"EACCES on {op} of {res.vpath}: {path} belongs to "
                                            f"uid {owner.owner_uid}, mode {owner.mode:04o}")
                    raise oserror(errno.EACCES, res.vpath)

    # -- process faults -------------------------------------------------------------
    def on_start(self) -> None:
        for fault in self.faults:
            if fault.kind in _STRIKES and fault.trigger.after_ms is not None:
                timer = threading.Timer(fault.trigger.after_ms / 1000, self._strike,
                                        (fault, "start", None))
                timer.name = f"harness-fault-{fault.index}"
                timer.daemon = True
                timer.start()

    def before_collective(self, op: str, tag: str | None) -> None:
        """Process faults aimed at a collective: ``tag`` globs match its tag or its op."""
        shown = f"{op} {tag!r}" if tag else op
        for fault in self.faults:
            if fault.kind not in (*_STRIKES, "straggle", "never-arrive"):
                continue
            if fault.trigger.after_ms is not None:
                continue
            glob = fault.trigger.tag
            named = tag if tag is not None and (glob is None or fnmatch.fnmatchcase(tag, glob)) \
                else op
            if not self._fires(fault, "collective", None, named):
                continue
            if fault.kind == "straggle":
                delay = int(fault.params.get("delay_ms", 500))
                self.report(fault, "collective", None,
                            message=f"rank {self.rank} straggles {delay} ms before {shown}")
                time.sleep(delay / 1000)
            elif fault.kind == "never-arrive":
                self.report(fault, "collective", None,
                            message=f"rank {self.rank} never arrives at {shown}")
                threading.Event().wait()
            else:
                self._strike(fault, "collective", shown)

    def _strike(self, fault: Fault, op: str, where: str | None) -> None:
        if fault.kind in ("kill", "preempt"):
            what = "pre-empted" if fault.kind == "preempt" else "SIGKILLed"
            life = f" (life {self.life})" if self.life else ""
            self.report(fault, op, where if op != "collective" else None,
                        message=f"rank {self.rank}{life} {what} at {op} {where or ''}".rstrip())
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(10)  # the signal is on its way
        exc_type = _EXCEPTIONS[str(fault.params.get("exception", "RuntimeError"))]
        message = str(fault.params.get("message", f"injected failure at {op} {where or ''}".rstrip()))
        exc = exc_type(message)
        if issubclass(exc_type, OSError):  # as the kernel raises it: errno, strerror, filename
            code = int(fault.params["errno"])
            exc = OSError(code, os.strerror(code), *([where] if where and op != "collective" else []))
        self.report(fault, op, where if op != "collective" else None,
                    message=f"rank {self.rank} raises {type(exc).__name__}: {exc}")
        raise exc


def torn_offset(data: bytes, fault: Fault) -> int:
    """Where a torn write ends: a line boundary (often valid YAML) or mid-line."""
    if "offset" in fault.params:
        return min(int(fault.params["offset"]), len(data))
    if len(data) <= 1:
        return 0
    rng = random.Random(fault.params["rng"])
    boundaries = [i + 1 for i, b in enumerate(data[:-1]) if b == 0x0A]
    mid = [rng.randrange(1, len(data)) for _ in range(max(1, len(boundaries)))]
    candidates = sorted(set(boundaries + mid + [0]))
    return candidates[rng.randrange(len(candidates))]


def corrupt(data: bytes, fault: Fault) -> tuple[bytes, list[int]]:
    """Garble a seeded handful of bytes (never a no-op on non-empty data)."""
    if not data:
        return data, []
    rng = random.Random(fault.params["rng"])
    count = max(1, min(len(data), int(fault.params.get("bytes", 8))))
    where = sorted(rng.sample(range(len(data)), count))
    out = bytearray(data)
    for i in where:
        out[i] = (out[i] + 1 + rng.randrange(255)) % 256
    return bytes(out), where


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


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:  # noqa: PTH123
        f.write(data)
