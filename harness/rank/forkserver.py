"""The warm fork server and each world's leader.

Process tree of a world::

    harness (coordinator, watchdog)
      └─ fork server      one per set of preloaded modules; imported torch etc. once
          └─ leader       one per world; a child subreaper: orphans come back to it
              └─ units    the ranks (or, in exec mode, one launcher per host)
                  └─ ...  whatever the target forks

Every leader and rank dies with its parent (PR_SET_PDEATHSIG), the fork server
stops when the harness's end of its socket closes, and
the leader, as a subreaper, SIGKILLs every descendant it inherits before it
exits, so no process outlives its world whatever the target does.
"""

from __future__ import annotations

import errno
import logging
import os
import pickle
import select
import signal
import socket
import sys
import time

from harness import refs
from harness.rank import confine, namespaces, sweep, warm, wire
from harness.rank.bootstrap import prepare_units, run_unit
from harness.rank.process import (
    after_fork,
    become_subreaper,
    die_with_parent,
    enter_limits,
    name_process,
    say_failed,
    share_in_huge_pages,
    unit_limits,
    unit_name,
)
from harness.rank.spec import WorldSpec
from harness.vocabulary import LEADER, UNIT_FAILED

log = logging.getLogger(__name__)


def main() -> None:
    """Fork server entry point: ``python -c ... FD [MODULE...]``.

    No PR_SET_PDEATHSIG here: it fires when the *thread* that started us ends,
    and the harness starts servers from whichever cell thread needs one first.
    The end of our socket (the harness process exiting, even by SIGKILL) is
    what stops the server, and it takes its leaders with it.
    """
    sweep.find_slot()  # before any import can touch the environment
    name_process("harness-server")
    become_subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(sys.argv[1]))
    first = sys.argv[2:]
    more = first[-1:] == [wire.MORE_PRELOADS]
    preload(first[:-1] if more else first)
    if more:  # the rest, once the harness has read its targets (while we imported the first)
        try:
            header, _ = wire.recv_frame(sock)
        except (EOFError, OSError):
            os._exit(0)
        preload([str(m) for m in header.get("modules", [])])
    warm_up()
    wire.send_frame(sock, {"type": "ready"})
    leaders: set[int] = set()
    suspect = False
    while True:
        readable, _, _ = select.select([sock], [], [], 0.5)
        suspect = _reap(leaders, suspect)
        if not readable:
            continue
        try:
            header, payload = wire.recv_frame(sock)
        except (EOFError, OSError):
            break
        if header.get("type") == "preload":  # what the next world needs, imported here once
            before = len(sys.modules)
            preload([str(m) for m in header.get("modules", [])])
            if len(sys.modules) != before:  # else nothing changed that warm_up would redo
                warm_up(again=True)
            wire.send_frame(sock, {"type": "ready"})
            continue
        if header.get("type") != "world":
            continue
        # The spec is the leader's to read: every object made here between forks is written
        # on pages this process shares with the leaders alive, which copies them and splits
        # each 2 MB page into 512 small ones, for every later fork to copy and exit to free.
        _hold_target(str(header.get("target") or ""), str(header.get("cwd") or "/"))
        sys.stdout.flush()
        sys.stderr.flush()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with_parent(server)
            sock.close()
            spec: WorldSpec = pickle.loads(payload)
            sweep.mark_world(spec.world_id)  # every rank and daemon forked under it inherits it
            run_leader(spec)
        leaders.add(pid)
        wire.send_frame(sock, {"type": "forked", "pid": pid})
    for pid in leaders:
        _kill(pid)
    os._exit(0)


def preload(modules: list[str]) -> None:
    for name in modules:
        try:
            __import__(name)
        except BaseException as exc:  # noqa: BLE001 - a preload is an optimisation only (even sys.exit)
            log.warning("harness fork server: could not preload %s: %s", name, exc)


def warm_up(again: bool = False) -> None:
    """Do once here what every rank would otherwise do after its fork (``again``: after
    more preloads, what they change: a foreign torch_xla, the early bindings, the heap).

    The harness's rank-side modules are imported (so every rank of every world
    runs the same code, compiled once); ``numpy.random`` too when numpy is
    loaded (each rank seeds it); the shim is byte-compiled, its code held and its
    modules executed (``warm``): a rank's import of them does only what acts on the
    rank (its environment, its torch); and the heap is
    frozen so that a rank's garbage collections do not touch, and so copy,
    every page it inherited.
    """
    import gc

    import harness.faults.engine  # noqa: F401
    import harness.filesystem.patch  # noqa: F401
    import harness.filesystem.recording  # noqa: F401
    import harness.filesystem.view  # noqa: F401
    if "numpy" in sys.modules:
        import numpy.random  # noqa: F401
    confine.unavailable()  # tried here once, in a child, for every unit forked from here
    from harness.rank.environment import forget_foreign_torch_xla, shim_root
    if not again:
        try:
            import compileall

            compileall.compile_dir(shim_root(), quiet=2, force=False)
        except Exception:  # noqa: BLE001 - bytecode is an optimisation only (read-only installs)
            pass
        warm.hold(shim_root())  # its code, compiled once
    forget_foreign_torch_xla(shim_root())  # a preload's real torch_xla: gone for every rank
    warm.prepare(shim_root())  # the shim, executed once, less what its import does in a rank
    from harness.filesystem.patch import find_early_bindings
    from harness.rank import clock as rank_clock
    find_early_bindings()  # after every preload: what its modules hold of the real os, once
    rank_clock.find_early_bindings()  # ... and of the machine's clock, locks and queues
    # Frozen without a collection first: whatever garbage the imports left (none after
    # torch's and the catalog's) stays, shared and never looked at again; a collection of
    # torch's heap would delay the first world by 0.1 s.
    gc.freeze()
    share_in_huge_pages()


def _hold_target(target: str, cwd: str) -> None:
    """A target's code, compiled here once for every rank of every world that runs it."""
    if not target or not refs.module_of(target):
        return
    ref = refs.parse(target)
    if ref.is_file:
        warm.hold_file(os.path.normpath(os.path.join(cwd, ref.module)))
    elif ref.module not in sys.modules:  # a rank's sys.path is ours, the shim's ahead of it
        warm.hold_module(ref.module, [p or cwd for p in sys.path])


def _reap(leaders: set[int], suspect: bool) -> bool:
    """Reap what ended; returns whether orphans may have come back to us (a leader that
    ended other than cleanly, a process that was not a leader: its orphans are ours, a
    subreaper's), which are then killed, and looked for again until none is found. A clean
    end leaves none: /proc is not read (each read makes objects here, see ``main``)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        suspect = suspect or pid not in leaders or status != 0
        leaders.discard(pid)
    if not suspect:
        return False
    orphans = [pid for pid in _children() if pid not in leaders]
    for pid in orphans:
        _kill(pid)
    return bool(orphans)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _children(of: int | str = "self") -> list[int]:
    """A process's direct children (this one's by default), from /proc (Linux)."""
    pids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{of}/task"):
            with open(f"/proc/{of}/task/{tid}/children") as f:
                pids.extend(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids


def run_leader(spec: WorldSpec) -> None:
    """One world's leader: start the units, report their exits, leave nothing behind."""
    try:
        after_fork()
        die_with_parent()
        become_subreaper()
        enter_limits(spec)  # before anything of the world is forked
        name_process("harness-leader")
        _lead(spec)
    except BaseException:  # noqa: BLE001
        say_failed(spec.outdir, LEADER)
        os._exit(1)  # its world may have processes left: the server looks for them
    os._exit(0)


def _lead(spec: WorldSpec) -> None:
    # Kernel isolation: the world's processes are a PID namespace of their own, whose init
    # is forked now, before anything else of the world; it makes each host's mount
    # namespace meanwhile.
    init, made = namespaces.world(spec.binds, os.path.join(spec.outdir, "keep")) \
        if spec.binds is not None else (None, None)
    prepare_units(spec)  # after the init's fork: it runs nothing of a unit's
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    conn = wire.connect(spec.address)
    wire.send_frame(conn, {"type": "hello", "role": "leader", "id": 0, "pid": os.getpid(),
                           "channel": "leader", "secret": spec.secret})
    units: dict[int, tuple[str, int]] = {}
    # Kernel isolation: a mount namespace per host, held open here for its units to join.
    hosts: dict[int, namespaces.Held] | None = None if spec.binds is None else {}

    # What a unit's getppid() says of the leader: nothing (0) from inside the namespace.
    leader = os.getpid() if init is None else 0

    def start(role: str, ident: int, life: int = 0, start_ns: int = 0) -> int:
        pid = os.fork()
        if pid == 0:
            die_with_parent(leader)  # first: the leader may die while it forks the others
            conn.close()
            os.close(wake_r)
            os.close(wake_w)
            after_fork()
            unit_limits(spec)
            try:
                if hosts is not None:
                    host = host_of(role, ident)
                    namespaces.enter(hosts, host, spec.topology.hostname(host))
                confine.confine(shared_machine=hosts is None)
            except BaseException:  # noqa: BLE001 - never back into the leader's loop
                say_failed(spec.outdir, unit_name(role, ident))
                os._exit(UNIT_FAILED)
            name_process(os.path.basename(sys.executable))  # as a rank on a pod is called
            run_unit(spec, role, ident, life, start_ns)
        units[pid] = (role, ident)
        return pid

    def host_of(role: str, ident: int) -> int:
        return spec.topology.host_of(ident) if role == "rank" else ident

    if made is None:
        for role, ident in spec.units():
            start(role, ident)
    else:  # each host's units as soon as its namespace is made, while the next is made
        for host, held in made:
            hosts[host] = held
            for role, ident in spec.units():
                if host_of(role, ident) == host:
                    start(role, ident)
    wire.send_frame(conn, {"type": "started",
                           "units": [[pid, role, ident] for pid, (role, ident) in units.items()],
                           "roots": [[host, held[2]] for host, held in (hosts or {}).items()]})

    # Units exit; the harness decides whether one comes back (a pre-empted rank)
    # and, once none is left, says "finish".
    live = set(units)
    killing = finishing = False
    while not finishing or live:
        readable, _, _ = select.select([conn, wake_r], [], [], 1.0)
        if wake_r in readable:
            os.read(wake_r, 4096)
        if conn in readable:
            try:
                header, _ = wire.recv_frame(conn)
            except (EOFError, OSError):
                header = {"type": "kill"}  # the harness is gone: nothing may outlive it
            kind = header.get("type")
            if kind == "kill":
                killing = finishing = True
            elif kind == "finish":
                finishing = True
            elif kind == "stop":  # a grace's hard stop: these units and what they started
                for pid in header.get("pids", ()):
                    if pid in live:
                        for child in sweep.descendants(pid):
                            _kill(child)
                        _kill_group(pid)
                for pgid in header.get("groups", ()):  # of units gone: what they left running
                    if pgid not in live:  # (a live unit with that pid is another one)
                        try:
                            os.killpg(pgid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
            elif kind == "restart" and not killing:
                pid = start("rank", header["rank"], header["life"], header.get("t", 0))
                live.add(pid)
                wire.send_frame(conn, {"type": "started", "units": [[pid, "rank", header["rank"]]]})
        if killing:
            for pid in live:
                _kill_group(pid)
        for pid, status in _reap_all():
            live.discard(pid)
            wire.send_frame(conn, {"type": "exited", "pid": pid, "status": status,
                                   "unit": units.get(pid)})
    leftovers, clean = kill_descendants(conn, units, init=init)
    wire.send_frame(conn, {"type": "done", "leftovers": leftovers, "clean": clean})


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _reap_all() -> list[tuple[int, int]]:
    out = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        out.append((pid, status))
    return out


def kill_descendants(conn: socket.socket, units: dict[int, tuple[str, int]],
                     limit: float = 5.0, init: int | None = None) -> tuple[int, bool]:
    """SIGKILL every process left below the leader; returns how many there were, and
    whether none is left (the leader has no child: as a subreaper, every orphan of its world
    became one), False if ``limit`` passed first. ``init``: the world's PID namespace's
    init, whose children are the world's orphans (a daemon a rank forked): killing it kills
    every process of the namespace."""
    killed: set[int] = set()
    end = time.monotonic() + limit
    while time.monotonic() < end:
        children = _children()
        for pid in children:
            if pid == init:
                killed.update(_children(init))  # the orphans it adopted go with it
            _kill_group(pid)
            killed.add(pid)
        reaped = _reap_all()
        for pid, status in reaped:
            if pid == init:
                continue
            wire.send_frame(conn, {"type": "exited", "pid": pid, "status": status,
                                   "unit": units.get(pid)})
        if not children and not reaped:
            try:
                os.waitpid(-1, os.WNOHANG)
            except ChildProcessError as exc:
                if exc.errno == errno.ECHILD:
                    return len(killed - {init}), True
            time.sleep(0.002)
    return len(killed - {init}), False
