"""``run_world``: start a world, serve its collectives, end it by its deadline.

The harness process is the coordinator's host: ``WorldServer`` (server.py)
serves every unit from one thread (loop.py), decodes what they send
(protocol.py), follows their lives (lifecycle.py) and, at the deadline or on a
proven deadlock, collects stacks, writes the hang report and has the leader
kill everything that is left. This module only builds the world and runs it.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from harness import refs
from harness.filesystem import sandbox as sandbox_layout
from harness.rank import confine, namespaces, sweep, wire
from harness.rank.environment import shim_root
from harness.rank.spec import WorldSpec
from harness.topology import clean_environment
from harness.world import cgroups, held, isolation, pool, reaper
from harness.world.config import WorldConfig
from harness.world.limits import Limits, Meter
from harness.world.result import WorldResult
from harness.world.server import ABORTED, DEADLINE, GUARD, LEADER_LOST, LIMIT, WorldServer

_counter = itertools.count()
_said: set[str] = set()  # why kernel isolation was refused: said once per harness process
log = logging.getLogger(__name__)


#: Set by the runner on the user's Ctrl-C: every world in flight ends at once.
ABORT = threading.Event()


def run_world(target: str | Callable[..., Any] | None = None, config: WorldConfig | None = None,
              **overrides: Any) -> WorldResult:
    """Run ``target`` on every rank of a world and return every rank's fate.

    The world is described by ``config`` (a ``WorldConfig``), with ``overrides``
    replacing its fields; ``run_world(target, topology="8x1", timeout=10)``
    builds the config from keywords alone.

    ``target`` is ``module.path:function``, ``path/to/file.py:function`` or a
    module-level function; it is called as ``target(*args, **kwargs)`` on every
    rank. With ``argv`` instead (exec mode), every host runs ``python *argv``
    and the script's own ``xmp.spawn`` starts the ranks. ``preload`` names the
    modules the warm fork server imports before forking (default: the installed
    modules the target's source imports).
    The world runs on a clock of its own (``harness.world.clock``): ``timeout``
    is its deadline in seconds of that clock, which passes only while every
    rank waits (a sleep, a thread's wait, a collective), so a verdict never
    depends on this machine's load. ``wall_limit`` is the last resort against a
    rank that holds the clock forever (an endless loop, a wait the clock cannot
    see): the most wall seconds the world may take, by default scaled to the
    machine (``guard_seconds``). At either end, every process is SIGKILLed and
    the call returns at most a few seconds later, once the leader confirms.

    With ``sandbox`` (the default) every file the target writes lands in the
    world's sandbox, seen through the topology's mount table (``mounts`` adds
    or replaces mounts); ``faults`` are fault specs (or a ready plan) fired
    at their triggers; ``files`` are placed in the sandbox before the world
    starts (a scenario's dataset). ``watch`` globs name files whose content is
    recorded in the history each time a rank exits and, at the end, in
    ``WorldResult.files``. A rank pre-empted by the fault plan comes back with
    the same identity and disk, up to ``max_restarts`` times. With
    ``teardown_on_failure`` the first rank that fails ends the world (the job's
    launcher tears it down), rather than leaving its peers to wait. With
    ``record_files`` every rank tells the coordinator each file operation it
    makes through the view, recorded as ``Event(kind="file", rank, op,
    detail={"path", "ok", "errno"?, "dst"?, "size"?, "count"?})`` (see
    ``harness/filesystem/recording.py``); nothing is sent without it.
    ``checker`` (a pydantic model, a function ``check(value) -> None | str``, a
    JSON schema, or a reference to one: see ``harness.rank.validator``)
    judges every rank's value inside the rank: a value it refuses makes that
    rank FAIL, with what it said in ``RankResult.invalid``. ``progress`` is
    called in this process about four times a second with where the world is
    (``harness.world.lifecycle.Progress``: ranks started, returned, blocked).
    """
    if config is None:
        config = WorldConfig(**overrides)
    elif overrides:
        config = dataclasses.replace(config, **overrides)
    if (target is None) == (config.argv is None):
        raise ValueError("run_world needs exactly one of target= or argv=")
    topo, timeout, seed, cwd = config.topo, config.timeout, config.seed, config.cwd
    assert cwd is not None
    name = refs.name_of(target) if target is not None else None
    world_id = f"{os.getpid()}-{next(_counter)}-{os.urandom(2).hex()}"
    reaper.ensure()  # whatever happens to this process, what it starts is ended
    base_env = clean_environment(dict(os.environ))
    base_env[reaper.RUN_KEY] = reaper.run_token()
    base_env.update(config.env)
    base_env["HARNESS_SEED"] = str(seed)
    table, plan = config.table, config.plan
    modules = config.preload if config.preload is not None else \
        pool.preload_for(name, config.argv, cwd)
    forks = pool.fork_server(modules)  # a cold start is not the world's time
    mode, note = isolation.choose(config.isolation, table is not None)
    if note and note not in _said:
        _said.add(note)
        log.warning("kernel isolation asked for, python isolation given: %s", note)
    unfiltered = confine.unavailable()
    if unfiltered and unfiltered not in _said:
        _said.add(unfiltered)
        log.warning("the ranks run without their seccomp filter (they still hold no "
                    "capability): %s", unfiltered)
    # after every check: nothing leaks
    outdir = tempfile.mkdtemp(prefix=f"harness-{world_id}-", dir=isolation.world_base(mode))
    wall_limit = config.wall_limit if config.wall_limit is not None else guard_seconds()
    start_wall, start = time.time(), time.monotonic()
    spec = WorldSpec(
        world_id=world_id, address=wire.new_address(world_id, outdir),
        secret=secrets.token_hex(32), topology=topo,
        profile=config.profile, deadline=start_wall + wall_limit, outdir=outdir, cwd=cwd,
        base_env=base_env, shim_root=shim_root(), target=name, args=config.args,
        kwargs=config.kwargs, argv=config.argv, seed=seed, home=config.home, mounts=table,
        faults=plan, record_files=config.record_files, args_by_host=config.args_by_host,
        step_seconds=config.step_seconds,
        checker=config.checker, file_size=_file_size(config.limits, table is not None))

    if mode == isolation.KERNEL and table is not None:
        module = refs.module_of(name)
        spec = dataclasses.replace(spec, binds=isolation.binds_for(
            table, topo, outdir, spec.sandbox, [*isolation.machine_paths(
                cwd, module if module and refs.is_file(module) else None, config.argv),
                *config.reads], overlays=_overlays()))
    server = None
    group = _group(world_id, config.limits)
    if group is not None:
        spec = dataclasses.replace(spec, cgroup=group.procs)
    try:
        if table is not None:
            sandbox_layout.create(spec.sandbox, table, topo, plan.leftovers + config.files)
        server = WorldServer(spec, watch=list(config.watch), max_restarts=config.max_restarts,
                             timeout=timeout, teardown=config.teardown_on_failure,
                             limits=config.limits, restart_job=config.restart_job, group=group)
        try:
            server.life.watch_leader(forks.fork_world(spec))
            why = server.serve(until=start + wall_limit * GUARD_TOTAL, abort=ABORT,
                               progress=config.progress, held_limit=wall_limit)
            if why == ABORTED:  # the user's Ctrl-C: end it now, no stacks to wait for
                server.end(why, hard_end=time.monotonic() + 2.0, stack_wait=0.0)
            elif why == LEADER_LOST:  # nobody reports exits any more: end it now
                server.end(why, hard_end=time.monotonic(), stack_wait=0.5)
            elif why == GUARD:
                server.end(why, hard_end=time.monotonic() + 3.0, stack_wait=1.5,
                           guard=_guarded(time.monotonic() - server.held_since, wall_limit,
                                          config.wall_limit is None))
            elif why == DEADLINE:  # on the world's clock: every unit waits, its stacks are quick
                server.end(why, hard_end=time.monotonic() + 3.0, stack_wait=1.0)
            elif why == LIMIT:  # it would harm the machine: at once, no stacks
                assert server.exceeded is not None
                server.stop(server.exceeded, hard_end=time.monotonic() + 3.0)
            server.loop.drain_all(0.2)  # results sent just before exit
        finally:
            server.close()
        if why == ABORTED and threading.current_thread() is threading.main_thread():
            # The user's Ctrl-C, whose KeyboardInterrupt something swallowed on its way (a
            # garbage collector's callback prints "Exception ignored" and goes on): raised
            # again, so the command ends as the user asked, not with the next world.
            raise KeyboardInterrupt
        result = server.result(time.monotonic() - start)
        result.isolation, result.isolation_note = mode, note
        result.read_only = tuple(m.path for m in table.mounts if m.mode == "ro") if table else ()
        return result
    finally:
        if server is not None and server.life.done and server.life.leader_pid is not None:
            # The leader exits right after its "done": let it, rather than have the sweep
            # find it still running, stop it, kill it and look again.
            sweep.wait_gone([server.life.leader_pid], limit=0.5)
        # What outlived the leader's own cleanup: daemons of a world whose leader or fork
        # server was killed, or that kept appearing past its limit. A clean end leaves none
        # (a pass over every process's /proc, 3 ms a world, is then not needed).
        if server is None or not server.life.clean:
            sweep.end_world(world_id)
        if server is not None:
            _remove_segments(server.meter, server.life.pids)
        if group is not None:
            cgroups.remove(group)
        if not config.keep_output_dir:
            reaper.remove_later(outdir)


def _file_size(limits: Limits, sandboxed: bool) -> int | None:
    """The units' RLIMIT_FSIZE: the written limit (no single file holds more of the disk),
    or the output limit if that is larger (a unit's output is a file too)."""
    if not sandboxed or limits.written is None:
        return None
    return max(limits.written, limits.output or 0)


def _group(world_id: str, limits: Limits) -> cgroups.Group | None:
    """The world's cgroup, where the machine gives one (``harness.world.cgroups``); where it
    does not, said once: the meter's accounting alone holds the world."""
    if limits.memory is None and limits.processes is None:
        return None
    why = cgroups.unavailable()
    if why:
        if why not in _said:
            _said.add(why)
            # as root a cgroup is expected; as a user, most machines give none: not a warning
            log.log(logging.WARNING if os.geteuid() == 0 else logging.INFO,
                    "no cgroup of its own for a world: its limits are the harness's "
                    "measurement alone, one call can pass them before it looks (%s)", why)
        return None
    try:
        return cgroups.make(f"{cgroups.PREFIX}{world_id}", limits.memory, limits.processes)
    except OSError as exc:
        log.warning("no cgroup for world %s: %s", world_id, exc)
        return None


def _remove_segments(meter: Meter, units: Collection[int]) -> None:
    """The SysV segments the world's processes made (they outlive every process): gone
    with the world, as on a pod whose containers end (its IPC namespace's). Its processes
    are its units and what the meter saw (a child of a unit's that made a segment and
    exited within a tenth of a second escapes)."""
    mine = {s.shmid for s in held.segments() if meter.segments.get(s.shmid) == s.creator
            or s.creator in meter.seen or s.creator in units}
    held.remove_segments(mine)


def _overlays() -> str:
    """How much of the machine the kernel overlays for each host (``namespaces.overlays``),
    "" for nothing, where the machine refuses (said once)."""
    how, why = namespaces.overlays(isolation.KERNEL_BASE)
    if why and why not in _said:
        _said.add(why)
        log.warning("kernel isolation without overlays: subprocesses and C code meet a "
                    "read-only machine outside each host's fresh directories (%s)", why)
    return how


#: The wall-clock guard on a quiet machine: how long a world's clock may be held (an endless
#: loop, a wait the clock cannot see) before the world ends, HANG, with every rank's stack.
GUARD_SECONDS = 120.0


#: A world whose clock keeps moving (no rank holds it) ends by its deadline; a world whose
#: clock moves by the smallest steps (a rank sleeping a microsecond at a time) may still take
#: this many guards of wall time in all before the guard ends it.
GUARD_TOTAL = 10

#: Sets the wall-clock guard of every world whose config leaves it to the machine (a CI
#: runner's own bound, a test suite's): seconds.
GUARD_ENV = "HARNESS_WALL_LIMIT"


def guard_seconds() -> float:
    """The wall-clock guard, scaled to this machine: ``GUARD_SECONDS`` (or
    ``$HARNESS_WALL_LIMIT``) times how many processes want each core now (at least 1), so
    that a loaded machine that imports slowly is not taken for a rank that holds the
    clock forever."""
    given = os.environ.get(GUARD_ENV)
    try:
        base = float(given) if given else GUARD_SECONDS
    except ValueError:
        base = float("nan")
    if not 0 < base < float("inf"):
        log.warning("%s=%r is not a positive number of seconds: the guard is %g s", GUARD_ENV,
                    given, GUARD_SECONDS)
        base = GUARD_SECONDS
    return base * _load()


def _load() -> float:
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:
        return 1.0


def _guarded(held: float, limit: float, scaled: bool) -> str:
    """The words of a world the wall-clock guard ended."""
    how = (f"the wall-clock guard of {limit:.0f} s, scaled to this machine's load"
           if scaled else f"the wall-clock guard of {limit:g} s (wall_limit)")
    return (f"the world's clock was held for {held:.0f} s of wall time and the world ended "
            f"at {how}: a rank computed, or waited where the clock cannot see, all that time")

