"""``run_world``: start a world, serve its collectives, end it by its deadline.

The harness process is the coordinator's host. A single-threaded loop serves
every rank's socket (no thread hand-offs on the collective round trip), and
the same loop is the watchdog: at the deadline it collects stacks, writes the
hang report and has the leader kill everything that is left.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.faults.kinds import kind_of
from harness.faults.plan import FaultPlan, make_plan
from harness.filesystem import sandbox as sandbox_layout
from harness.filesystem.consistency import rank_restarted
from harness.filesystem.mounts import Mount, MountTable, default_table
from harness.filesystem.publisher import Publisher
from harness.filesystem.sandbox import Leftover
from harness.filesystem.snapshot import snapshot
from harness.history import format_ranks
from harness.topology import PROFILES, Topology, clean_environment, get_topology
from harness.world import pool, watchdog, wire
from harness.world.coordinator import Coordinator
from harness.world.result import (
    CRASH,
    ERROR,
    HANG,
    PASS,
    RankResult,
    WorldResult,
    decode_status,
    one_line,
    world_outcome,
)
from harness.world.spec import WorldSpec

log = logging.getLogger(__name__)

_SHIM_CANDIDATES = (
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_shims"),
    os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shims"),
)
_OUTPUT_LIMIT = 1 << 20
_counter = itertools.count()


def shim_root() -> str:
    """The directory that holds the fake ``torch_xla`` package."""
    for path in _SHIM_CANDIDATES:
        if os.path.isfile(os.path.join(path, "torch_xla", "__init__.py")):
            return path
    raise RuntimeError(f"the torch_xla shim is missing: looked in {', '.join(_SHIM_CANDIDATES)}")


def target_name(target: str | Callable[..., Any]) -> str:
    """A target as the string every process can resolve on its own."""
    if isinstance(target, str):
        return target
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
    if not module or "<" in qualname:
        raise ValueError(
            f"target {target!r} cannot be found by name in a rank process; define it at module "
            "level, or pass 'module.path:function' / 'path/to/file.py:function'")
    if module == "__main__":
        path = getattr(sys.modules["__main__"], "__file__", None)
        if not path:
            raise ValueError("a target defined in an interactive __main__ has no file to load from")
        return f"{os.path.abspath(path)}:{qualname}"
    return f"{module}:{qualname}"


def run_world(target: str | Callable[..., Any] | None = None, *,
              topology: str | Topology = "v4-64", timeout: float = 30.0, seed: int = 0,
              profile: str = "legacy", args: tuple[Any, ...] = (),
              kwargs: dict[str, Any] | None = None, argv: tuple[str, ...] | list[str] | None = None,
              cwd: str | None = None, env: dict[str, str] | None = None,
              preload: tuple[str, ...] | list[str] | None = None,
              mounts: MountTable | list[Mount] | None = None,
              faults: FaultPlan | list[dict[str, Any]] | None = None,
              sandbox: bool = True, detect_deadlock: bool = True,
              files: list[Leftover] | None = None, watch: list[str] | None = None,
              max_restarts: int = 20, keep_output_dir: bool = False) -> WorldResult:
    """Run ``target`` on every rank of a world and return every rank's fate.

    ``preload`` names the modules the warm fork server imports before forking
    (default: the installed modules the target's source imports).

    ``target`` is ``module.path:function``, ``path/to/file.py:function`` or a
    module-level function; it is called as ``target(*args, **kwargs)`` on every
    rank. With ``argv`` instead (exec mode), every host runs ``python *argv``
    and the script's own ``xmp.spawn`` starts the ranks.
    The world ends by ``timeout`` seconds (its processes are SIGKILLed by then,
    and the call returns at most 2 s later, once the leader confirms).

    With ``sandbox`` (the default) every file the target writes lands in the
    world's sandbox, seen through the topology's mount table (``mounts`` adds
    or replaces mounts); ``faults`` are fault specs (or a ready plan) fired
    at their triggers; ``files`` are placed in the sandbox before the world
    starts (a scenario's dataset). ``watch`` globs name files whose content is
    recorded in the history each time a rank exits and, at the end, in
    ``WorldResult.files``. A rank pre-empted by the fault plan comes back with
    the same identity and disk, up to ``max_restarts`` times. With
    ``detect_deadlock`` the watchdog acts as soon as no rank can make progress
    (see ``_WorldLoop._deadlocked``), not only at the deadline.
    """
    if (target is None) == (argv is None):
        raise ValueError("run_world needs exactly one of target= or argv=")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    topo = get_topology(topology)
    name = target_name(target) if target is not None else None
    cwd = os.path.abspath(cwd or os.getcwd())
    try:
        pickle.dumps((tuple(args), dict(kwargs or {})))
    except Exception as exc:  # noqa: BLE001 - any pickling failure is the caller's mistake
        raise ValueError(f"args and kwargs must be picklable to reach the ranks: {exc}") from None
    world_id = f"{os.getpid()}-{next(_counter)}-{os.urandom(2).hex()}"
    base_env = clean_environment(dict(os.environ))
    base_env.update(env or {})
    base_env["HARNESS_SEED"] = str(seed)
    home = os.path.expanduser("~")
    table = None
    if sandbox:
        table = mounts if isinstance(mounts, MountTable) else default_table(topo, home, cwd)
        for mount in (mounts if isinstance(mounts, list) else []):
            table = table.with_mount(mount)
    elif mounts:
        raise ValueError("mounts need the sandbox: pass sandbox=True")
    plan = faults if isinstance(faults, FaultPlan) else make_plan(
        list(faults or []), seed=seed, world_size=topo.world_size, hosts=topo.hosts, home=home)
    if plan.faults and table is None and any(f.spec.needs_sandbox for f in plan.faults):
        raise ValueError("filesystem faults need the sandbox: pass sandbox=True")
    if files and table is None:
        raise ValueError("files need the sandbox: pass sandbox=True")
    grace = min(1.0, 0.1 * timeout)
    modules = tuple(preload) if preload is not None else \
        pool.preload_for(name, tuple(argv) if argv else None, cwd)
    server = pool.fork_server(modules)  # a cold start is not the world's time
    outdir = tempfile.mkdtemp(prefix=f"harness-{world_id}-")  # after every check: nothing leaks
    start_wall, start = time.time(), time.monotonic()
    spec = WorldSpec(
        world_id=world_id, address=wire.new_address(world_id), topology=topo, profile=profile,
        deadline=start_wall + timeout - grace, outdir=outdir, cwd=cwd, base_env=base_env,
        shim_root=shim_root(), target=name, args=tuple(args), kwargs=dict(kwargs or {}),
        argv=tuple(argv) if argv is not None else None, seed=seed, home=home, mounts=table,
        faults=plan)
    try:
        if table is not None:
            sandbox_layout.create(spec.sandbox, table, topo, plan.leftovers + tuple(files or ()))
        loop = _WorldLoop(spec, start, watch=list(watch or []), max_restarts=max_restarts)
        try:
            loop.leader_pid = server.fork_world(spec)
            finished = loop.serve(until=start + timeout - grace, detect_deadlock=detect_deadlock)
            if not finished:
                stack_wait = grace * 0.6
                if time.monotonic() < start + timeout - grace:
                    loop.deadlock_at = time.monotonic() - start
                    # Declared early: there is time to wait for every stack.
                    stack_wait = max(stack_wait, min(1.0, start + timeout - time.monotonic()))
                loop.end_at_deadline(hard_end=start + timeout + 2.0, stack_wait=stack_wait)
            loop.drain()
        finally:
            loop.close()
        return loop.result(time.monotonic() - start, seed)
    finally:
        if not keep_output_dir:
            shutil.rmtree(outdir, ignore_errors=True)


@dataclass
class _Conn:
    role: str  # rank | host | leader | pending
    ident: int = -1
    channel: str = ""
    pid: int | None = None


@dataclass
class _Unit:
    """What the loop knows of one rank or launcher."""

    pid: int | None = None
    result: dict[str, Any] | None = None
    status: int | None = None
    alive_at_deadline: bool = False
    stack: str | None = None
    life: int = 0  # how many times the fault plan's pre-emptions brought it back
    doomed_by: str | None = None  # the fault kind (kill/preempt) that took this life


class _WorldLoop:
    def __init__(self, spec: WorldSpec, start: float, watch: list[str] | None = None,
                 max_restarts: int = 20) -> None:
        self.spec = spec
        self.watch = watch or []
        self.max_restarts = max_restarts
        self.finish_sent = False
        self.topology = spec.topology
        self.coordinator = Coordinator(self.topology.world_size, start=start)
        self.publisher = Publisher(self.topology.world_size)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(spec.address)
        self.listener.listen(4096)
        self.listener.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.conns: dict[socket.socket, _Conn] = {}
        self.call: dict[int, socket.socket] = {}
        self.control: dict[int, socket.socket] = {}
        self.ranks: dict[int, _Unit] = {r: _Unit() for r in range(self.topology.world_size)}
        self.hosts: dict[int, _Unit] = ({h: _Unit() for h in range(self.topology.hosts)}
                                        if spec.exec_mode else {})
        self.promoted: dict[int, int] = {}  # host -> rank, for launchers without spawn
        self.pids: dict[int, tuple[str, int]] = {}
        self.leader_pid: int | None = None
        self.done = False
        self.leftovers = 0
        self.hang_report: str | None = None
        self.deadline_passed = False
        self._stuck_since: float | None = None
        self.held_forever: dict[int, str] = {}  # rank -> the never-arrive fault's message
        self.deadlock_at: float | None = None

    # -- the loop -------------------------------------------------------------
    def serve(self, until: float, detect_deadlock: bool = False) -> bool:
        """Serve until the leader reports the world over (True), or until ``until`` or a
        proven deadlock (False)."""
        while not self.done:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            if detect_deadlock and self._deadlocked():
                return False
            wait = min(remaining, 0.05 if self._stuck_since is not None else 0.5)
            next_publish = self.publisher.next_time()
            if next_publish is not None:
                wait = max(0.0, min(wait, next_publish - self.coordinator.now()))
            for key, _ in self.selector.select(timeout=wait):
                sock = key.fileobj
                if sock is self.listener:
                    self._accept()
                else:
                    self._read(sock, until)  # type: ignore[arg-type]
            self._publish_due()
        return True

    def _deadlocked(self) -> bool:
        """Has no rank any way left to make progress, for at least 100 ms?

        Every live rank is blocked in a collective from its main thread, with no
        other thread, no armed timer and no child process, so no arrival can ever
        complete a step. (Ranks the fault plan holds forever count as blocked.)
        A real pod would wait forever here; the watchdog may as well act now.
        """
        if self.spec.exec_mode:
            return False
        held = self.held_forever
        live = [r for r, u in self.ranks.items() if u.status is None]
        stuck = bool(live) and all(
            r in held or (r in self.coordinator.waiting and not self.coordinator.waiting[r].guarded
                          and not _has_children(self.ranks[r].pid))
            for r in live)
        now = time.monotonic()
        if not stuck:
            self._stuck_since = None
            return False
        if self._stuck_since is None:
            self._stuck_since = now
        return now - self._stuck_since >= 0.1

    def _publish_due(self) -> None:
        for held in self.publisher.due(self.coordinator.now()):
            why = {"read": "every other rank had looked for it",
                   "done": "every other rank had finished",
                   "time": "its visibility delay passed"}[held.until]
            self.coordinator.record("publish", rank=held.writer,
                                    detail={"path": held.path,
                                            "message": f"{held.path} became visible: {why}"})

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(True)
            self.conns[sock] = _Conn("pending")
            self.selector.register(sock, selectors.EVENT_READ)

    def _read(self, sock: socket.socket, until: float) -> None:
        try:
            sock.settimeout(max(until - time.monotonic(), 0.05))
            header, payload = wire.recv_frame(sock)
        except (EOFError, OSError):
            self._forget(sock)
            return
        self._handle(sock, header, payload)

    def _forget(self, sock: socket.socket) -> None:
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        self.conns.pop(sock, None)
        sock.close()

    def _send(self, sock: socket.socket, header: dict, payload: bytes | bytearray = b"") -> None:
        # A peer that is gone may still have frames for us in the socket: the
        # read side forgets the socket once it has read them and met the EOF.
        try:
            sock.settimeout(10)
            wire.send_frame(sock, header, payload)
        except OSError:
            pass

    # -- messages -------------------------------------------------------------
    def _handle(self, sock: socket.socket, header: dict, payload: bytearray) -> None:
        conn = self.conns.get(sock)
        if conn is None:
            return
        kind = header.get("type")
        if conn.role == "pending":
            if kind != "hello":
                self._forget(sock)
                return
            conn.role, conn.ident = header["role"], header["id"]
            conn.channel, conn.pid = header["channel"], header.get("pid")
            if conn.role == "rank":
                (self.call if conn.channel == "call" else self.control)[conn.ident] = sock
                self.ranks[conn.ident].pid = conn.pid
                self.pids[conn.pid] = ("rank", conn.ident)
            elif conn.role == "host":
                if conn.channel == "control":
                    self.control[-1 - conn.ident] = sock
                self.hosts[conn.ident].pid = conn.pid
            return
        if conn.role == "leader":
            self._leader_message(header)
            return
        rank = conn.ident if conn.role == "rank" else self.promoted.get(conn.ident)
        if kind == "collective" and rank is not None:
            self._reply(self.coordinator.collective(rank, header, payload))
        elif kind == "send" and rank is not None:
            self._reply(self.coordinator.send(rank, header, payload))
        elif kind == "recv" and rank is not None:
            self._reply(self.coordinator.recv(rank, header))
        elif kind == "result":
            if conn.role == "host":
                self.hosts[conn.ident].result = header
            if rank is not None:
                self.ranks[rank].result = header
        elif kind == "promote":
            rank = header["rank"]
            self.promoted[conn.ident] = rank
            self.call[rank] = sock
            self.control[rank] = self.control.pop(-1 - conn.ident, None) or sock
            self.ranks[rank].pid = conn.pid
        elif kind == "stacks":
            pass  # a late answer to the watchdog, after it fell back to faulthandler
        elif kind == "rank-exit":
            self._exited(("rank", header["rank"]), header["status"])
        elif kind == "fault":
            self.coordinator.record("fault", rank=rank, op=header["fault"],
                                    detail={"op": header.get("op"), "path": header.get("path"),
                                            **header.get("detail", {})})
            if kind_of(header["fault"]).ends_life and rank is not None:
                self.ranks[rank].doomed_by = header["fault"]
            elif kind_of(header["fault"]).holds_forever and rank is not None:
                self.held_forever[rank] = header.get("detail", {}).get("message", "")
        elif kind == "hold":
            self.publisher.hold(rank if rank is not None else -1, header, self.coordinator.now())
        elif kind == "fs-access":
            if rank is not None:
                self.publisher.accessed(rank, header["path"])
        else:
            log.warning("world %s: unexpected message %r", self.spec.world_id, kind)

    def _reply(self, replies: list) -> None:
        for r, h, p in replies:
            sock = self.call.get(r)
            if sock is not None:  # a rank between two lives has no socket to answer on
                self._send(sock, h, p)

    def _leader_message(self, header: dict) -> None:
        kind = header.get("type")
        if kind == "started":
            for pid, unit in header["units"].items():
                self.pids[pid] = unit
                role, ident = unit
                (self.ranks if role == "rank" else self.hosts)[ident].pid = pid
        elif kind == "exited":
            unit = header.get("unit") or self.pids.get(header["pid"])
            if unit is not None:
                self._exited(tuple(unit), header["status"])
        elif kind == "done":
            self.leftovers = header.get("leftovers", 0)
            self.done = True

    def _exited(self, unit: tuple, status: int) -> None:
        role, ident = unit
        table = self.ranks if role == "rank" else self.hosts
        if table[ident].status is not None:
            return
        table[ident].status = status
        rank = ident if role == "rank" else self.promoted.get(ident)
        if rank is not None:
            if role == "host":
                self.ranks[rank].status = status
            # The leader's word that it exited can overtake the rank's last frames
            # (its result, the fault that killed it): read them before judging.
            self._drain_rank(rank)
            self._snapshot_on_exit(rank)
            unit = self.ranks[rank]
            restarts = unit.doomed_by is not None and kind_of(unit.doomed_by).restarts
            if role == "rank" and restarts and unit.life < self.max_restarts:
                self._restart(rank)
                return
            self.coordinator.rank_exited(rank, self._how(rank, status))
            self.publisher.rank_exited(rank)
            self._publish_due()
        self._finish_if_over()

    def _drain_rank(self, rank: int) -> None:
        sock = self.call.get(rank)
        if sock is not None:  # the process is gone: what it sent is all buffered
            self._drain_socket(sock, 0.5)

    def _restart(self, rank: int) -> None:
        """A pre-empted rank comes back: same rank, same host disk, a new process."""
        old = self.ranks[rank]
        self.ranks[rank] = _Unit(life=old.life + 1)
        rank_restarted(self.spec.sandbox, self.spec.mounts, rank, self.topology.host_of(rank))
        self.call.pop(rank, None)
        self.control.pop(rank, None)
        self.coordinator.forget(rank)
        self.coordinator.record("restart", rank=rank, detail={
            "message": f"rank {rank} restarts after pre-emption (life {old.life + 1})",
            "life": old.life + 1})
        conn = self.leader_conn()
        if conn is not None:
            self._send(conn, {"type": "restart", "rank": rank, "life": old.life + 1})

    def _finish_if_over(self) -> None:
        units = self.hosts if self.spec.exec_mode else self.ranks
        if self.deadline_passed:
            return  # the leader was told to kill: it finishes by itself
        if not self.finish_sent and all(u.status is not None for u in units.values()):
            conn = self.leader_conn()
            if conn is not None:
                self.finish_sent = True
                self._send(conn, {"type": "finish"})

    def _snapshot_on_exit(self, rank: int) -> None:
        if not self.watch or self.spec.mounts is None:
            return
        files = self._files_of(rank)
        self.coordinator.record("snapshot", rank=rank, detail={
            "files": files, "life": self.ranks[rank].life,
            "message": f"{len(files)} watched file(s) as rank {rank} left them"})

    def _files_of(self, rank: int) -> dict[str, str]:
        assert self.spec.mounts is not None
        return snapshot(self.spec.sandbox, self.spec.mounts, self.topology, rank, self.watch,
                        self.spec.cwd, self.spec.home)

    def _how(self, rank: int, status: int) -> str:
        code, sig = decode_status(status)
        result = self.ranks[rank].result
        if sig is not None:
            return f"was killed by {signal.Signals(sig).name}"
        if result is not None and result.get("ok"):
            return "returned"
        if result is not None:
            err = result["error"]
            return f"raised {err['type']}: {one_line(err['message'])}"
        return f"exited with code {code} without a Python exception"

    # -- the deadline ---------------------------------------------------------
    def end_at_deadline(self, hard_end: float, stack_wait: float) -> None:
        self.deadline_passed = True
        live = {r: u for r, u in self.ranks.items() if u.status is None}
        live_hosts = {h: u for h, u in self.hosts.items() if u.status is None}
        for unit in (*live.values(), *live_hosts.values()):
            unit.alive_at_deadline = True
        asked = {r: s for r, s in self.control.items()
                 if (r >= 0 and r in live) or (r < 0 and -1 - r in live_hosts)}
        stacks = watchdog.collect_stacks(asked, timeout=stack_wait * 0.7)
        # The faulthandler fallback is written at the deadline: worth a short,
        # shared wait then, none when the world was found deadlocked early.
        fallback_end = time.monotonic() + (0 if self.deadlock_at is not None else stack_wait * 0.3)
        for key, unit in [*live.items(), *((-1 - h, u) for h, u in live_hosts.items())]:
            name = f"rank-{key}" if key >= 0 else f"host-{-1 - key}"
            unit.stack = stacks.get(key) or watchdog.fallback_stack(
                self.spec.outdir, name, wait=max(0.0, fallback_end - time.monotonic()))
        blocked_ranks = set(self.coordinator.waiting)
        running = {r: watchdog.top_frame(u.stack) for r, u in live.items()}
        for rank, message in self.held_forever.items():  # a rank the fault plan holds says so
            if rank in running:
                running[rank] = f"the fault plan: {message}"
        never = [r for r, u in live.items() if u.pid is None and r not in self.call]
        for r in never:
            running.pop(r, None)
        report = watchdog.hang_report(self.coordinator.blocked(), running,
                                      dict(self.coordinator.exited), blocked_ranks)
        if never:
            report += f"; rank{'s' if len(never) > 1 else ''} {format_ranks(never)} never started"
        if self.deadlock_at is not None:
            report += (f" (no rank could make progress any more: declared at "
                       f"{self.deadlock_at:.1f} s, before the deadline)")
        self.hang_report = report
        self.coordinator.record("hang", detail={"message": report})
        if self.leader_conn() is not None:
            self._send(self.leader_conn(), {"type": "kill"})
        if not self.serve(until=hard_end):
            log.error("world %s: leader did not finish; killing by pid", self.spec.world_id)
            self._kill_by_pid()

    def leader_conn(self) -> socket.socket | None:
        for sock, conn in self.conns.items():
            if conn.role == "leader":
                return sock
        return None

    def _kill_by_pid(self) -> None:
        pids = [self.leader_pid] + [u.pid for u in (*self.ranks.values(), *self.hosts.values())
                                    if u.status is None]
        for pid in pids:
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def drain(self) -> None:
        """Read what dead processes left in their sockets (results sent just before exit)."""
        for sock in list(self.conns):
            self._drain_socket(sock, 0.2)

    def _drain_socket(self, sock: socket.socket, timeout: float) -> None:
        while sock in self.conns:
            try:
                sock.settimeout(timeout)
                header, payload = wire.recv_frame(sock)
            except (EOFError, OSError):
                self._forget(sock)
                return
            self._handle(sock, header, payload)

    def close(self) -> None:
        for sock in list(self.conns):
            self._forget(sock)
        self.selector.close()
        self.listener.close()
        if not self.spec.address.startswith("\0"):
            try:
                os.unlink(self.spec.address)
            except OSError:
                pass

    # -- results ----------------------------------------------------------------
    def result(self, duration: float, seed: int) -> WorldResult:
        launcher_of = {rank: host for host, rank in self.promoted.items()}
        ranks = [self._unit_result(r, self.topology.host_of(r), u,
                                   f"host-{launcher_of[r]}" if r in launcher_of else f"rank-{r}")
                 for r, u in self.ranks.items()]
        hosts = [self._unit_result(h, h, u, f"host-{h}") for h, u in self.hosts.items()]
        if hosts:
            for r in ranks:
                host = hosts[r.host]
                if r.pid is None and r.outcome == CRASH and host.outcome != PASS:
                    r.outcome, r.error, r.stack = host.outcome, host.error, host.stack
        return WorldResult(
            world_id=self.spec.world_id, topology=self.topology.name, profile=self.spec.profile,
            seed=seed, outcome=world_outcome(ranks + hosts), ranks=ranks,
            history=list(self.coordinator.history),
            mismatches=self.coordinator.mismatches + self.coordinator.findings(),
            hang_report=self.hang_report, duration_s=round(duration, 4), hosts=hosts,
            leftovers=self.leftovers,
            files={r: self._files_of(r) for r in self.ranks} if self.watch and self.spec.mounts
            is not None else {})

    def _unit_result(self, ident: int, host: int, unit: _Unit, name: str) -> RankResult:
        code, sig = decode_status(unit.status) if unit.status is not None else (None, None)
        res = unit.result
        out = RankResult(rank=ident, host=host, outcome=CRASH, pid=unit.pid, exit_code=code,
                         signal=sig, stack=unit.stack)
        stdout_path, stderr_path = (os.path.join(self.spec.outdir, f"{name}.{s}")
                                    for s in ("stdout", "stderr"))
        out.stdout, out.stderr = _read_tail(stdout_path), _read_tail(stderr_path)
        out.killed_by_fault = unit.doomed_by is not None and unit.status is not None
        out.restarts = unit.life
        if unit.alive_at_deadline:
            out.outcome = HANG
        elif res is not None and res.get("ok"):
            out.outcome, out.returned = PASS, True
            out.value_pickle = res.get("value")
            out.value_repr = res.get("value_repr")
        elif res is not None:
            out.outcome, out.error = ERROR, res["error"]
        elif unit.pid is None and unit.status is None:
            out.error = {"type": "NeverStarted", "message": "the process never started",
                         "traceback": ""}
        return out


def _has_children(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return bool(f.read().strip())
    except OSError:
        return True  # cannot tell: assume a child could still act


def _read_tail(path: str) -> str:
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if size > _OUTPUT_LIMIT:
                f.seek(size - _OUTPUT_LIMIT)
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return ("[... output truncated ...]\n" + text) if size > _OUTPUT_LIMIT else text
