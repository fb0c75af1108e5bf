"""The lifecycle of a world's units: who started, who exited how, who comes back
after a pre-emption, when the world is over, and what happens at its deadline
(stacks, the hang report, the kill) or as soon as it is proven deadlocked."""

from __future__ import annotations

import logging
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.faults.kinds import KINDS
from harness.filesystem.consistency import rank_restarted
from harness.filesystem.publisher import Publisher
from harness.filesystem.snapshot import snapshot
from harness.history import format_ranks, ranks_phrase
from harness.rank import sweep
from harness.rank.process import failure_of
from harness.rank.spec import WorldSpec
from harness.vocabulary import LEADER
from harness.world import fates, watchdog
from harness.world.clock import Key, WorldClock, ns, seconds
from harness.world.coordinator import Coordinator
from harness.world.loop import EventLoop
from harness.world.notices import Notices
from harness.world.protocol import Fault, Result, Spawning
from harness.world.result import decode_status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Progress:
    """Where a running world is, for a face that shows it while it waits (``harness exec``)."""

    elapsed: float
    timeout: float
    world_size: int
    started: int  # ranks whose process said hello
    returned: int  # ranks that returned
    exited: int  # ranks gone, whichever way (returned included)
    blocked: int  # ranks waiting in a collective now

    def describe(self) -> str:
        """``3.2 s / 60 s · ranks: 4/4 started, 1 returned, 3 blocked`` (one short line)."""
        gone = self.exited - self.returned
        return (f"{self.elapsed:.1f} s / {self.timeout:g} s · ranks: {self.started}/"
                f"{self.world_size} started, {self.returned} returned, "
                + (f"{gone} failed, " if gone else "") + f"{self.blocked} blocked")


@dataclass
class Unit:
    """What the harness knows of one rank or launcher."""

    pid: int | None = None
    result: Result | None = None
    status: int | None = None
    alive_at_deadline: bool = False
    stack: str | None = None
    life: int = 0  # how many times the fault plan's pre-emptions brought it back
    doomed_by: str | None = None  # the fault kind (kill/preempt) that took this life
    refused: str | None = None  # why the harness dropped its connection (a malformed frame)
    round: int = 0  # exec mode: which xmp.spawn call of its launcher started this life
    stopped: str | None = None  # the world's limit it was alive at when the world passed it
    earlier: list[Unit] = field(default_factory=list)  # exec mode: its lives in earlier spawns

    @property
    def returned(self) -> bool:
        """Did this life return its target's result (not exit, however cleanly: a trainer's
        ``sys.exit(0)`` after its pre-emption save has not finished its work)?"""
        return self.status is not None and not self.failed and self.result is not None \
            and self.result.exit_code is None

    @property
    def failed(self) -> bool:
        """Did this life end without returning (raised, was killed, exited non-zero)?"""
        if self.status is None:
            return False
        return self.result is None or not self.result.ok or os.WIFSIGNALED(self.status) \
            or os.WEXITSTATUS(self.status) != 0


class Lifecycle:
    """Every unit's fate, from start to exit, restart or the deadline's kill."""

    def __init__(self, spec: WorldSpec, loop: EventLoop, coordinator: Coordinator,
                 publisher: Publisher, publish_due: Callable[[], None],
                 watch: list[str], max_restarts: int, teardown: bool = False,
                 timeout: float = 0.0, clock: WorldClock | None = None,
                 restart_job: bool = False) -> None:
        self.spec = spec
        self.timeout = timeout  # the world's deadline, as the hang report names it
        self.clock = clock if clock is not None else WorldClock(ns(timeout))
        self.topology = spec.topology
        self.loop = loop
        self.coordinator = coordinator
        self.publisher = publisher
        self.publish_due = publish_due
        self.watch = watch
        self.max_restarts = max_restarts
        #: a pre-emption restarts the whole job once every rank has ended (a training job
        #: resubmitted), not each rank alone (an independent worker's VM back)
        self.restart_job = restart_job
        self.teardown = teardown  # a failed rank ends the world (``teardown_on_failure``)
        self.ranks: dict[int, Unit] = {r: Unit() for r in range(self.topology.world_size)}
        self.hosts: dict[int, Unit] = ({h: Unit() for h in range(self.topology.hosts)}
                                       if spec.exec_mode else {})
        self.promoted: dict[int, int] = {}  # host -> rank, for launchers without spawn
        self.pids: dict[int, tuple[str, int]] = {}
        self.leader_pid: int | None = None
        self._leader_fd: int | None = None  # a pidfd: readable once the leader has exited
        self.done = False
        self.leader_lost = False  # the leader died before it said the world was over
        self.finish_sent = False
        self.leftovers = 0
        self.clean = False  # the leader's "done" says nothing of the world runs any more
        self.hang_report: str | None = None
        self.deadline_passed = False
        #: rank -> the message of the fault that holds it (never-arrive, slow-write)
        self.held_forever: dict[int, str] = {}
        self.single: set[int] = set()  # exec mode: hosts whose launcher ran a world of one
        self.notices = Notices()  # hosts pre-empted with notice, until they come back
        self.limit_words: str | None = None  # the limit the world was stopped at

    # -- starts and faults ------------------------------------------------------
    def started(self, pid: int | None, role: str, ident: int) -> None:
        if pid is not None:
            self.pids[pid] = (role, ident)
        unit = (self.ranks if role == "rank" else self.hosts)[ident]
        if role == "rank" and self.spec.exec_mode and None not in (pid, unit.pid) \
                and pid != unit.pid:
            self._next_round(ident, pid)  # type: ignore[arg-type]
            return
        if role == "rank" and self.spec.exec_mode and unit.status is None \
                and ("rank", ident) not in self.clock:
            self.clock.join(("rank", ident))  # said hello before its launcher's word on it
        unit.pid = pid

    def _launchers_at_deadline(self, live_hosts: dict[int, Unit], importing: dict[int, str]
                               ) -> str:
        """Exec mode: where the launchers still running at the deadline were, those whose
        ranks never started named by what they were importing (``launchers 0-1 were still
        importing `slowmod` before starting their ranks``) or the line they ran."""
        waiting: dict[str, list[int]] = {}
        for host, unit in live_hosts.items():
            mine = [self.ranks[r] for r in self.topology.ranks_of_host(host) if r in self.ranks]
            if any(r.pid is not None for r in mine):
                continue  # its ranks are under way: their fates say where the world is
            module = importing.get(-1 - host) or watchdog.importing(unit.stack)
            where = (f"still importing `{module}`" if module is not None else
                     f"still running in {watchdog.top_frame(unit.stack) or 'an unknown place'}")
            waiting.setdefault(where, []).append(host)
        return "; ".join(f"{ranks_phrase(hosts, 'launcher')} {'were' if len(hosts) > 1 else 'was'}"
                         f" {where} before starting {'their' if len(hosts) > 1 else 'its'} ranks"
                         for where, hosts in sorted(waiting.items(), key=lambda kv: min(kv[1])))

    def _next_round(self, rank: int, pid: int) -> None:
        """Exec mode: another xmp.spawn of its launcher started ``rank`` again.

        The launcher forks a new round only once every rank of the last one is
        gone, so what the old life sent is all buffered: it is read now, before
        the new life takes the rank's place (its exit, on the launcher's
        connection, may still come: ``exited`` gives it to the oldest life).
        """
        old = self.ranks[rank]
        for sock, conn in list(self.loop.conns.items()):
            if conn.role == "rank" and conn.ident == rank and conn.pid == old.pid:
                self.loop.read_last(sock, 0.5)
        earlier, old.earlier = [*old.earlier, old], []
        self.ranks[rank] = Unit(pid=pid, round=old.round + 1, earlier=earlier)
        if ("rank", rank) not in self.clock:
            self.clock.join(("rank", rank))
        self.coordinator.next_round(rank)
        self.coordinator.record("spawn", rank=rank, detail={
            "message": f"rank {rank} starts again, in xmp.spawn call {old.round + 2} of its "
                       "launcher", "round": old.round + 1})

    def reported(self, rank: int) -> Unit:
        """The life a report shows for ``rank``: its first that failed, else its last."""
        unit = self.ranks[rank]
        return next((u for u in unit.earlier if u.failed), unit)

    def fault(self, rank: int | None, msg: Fault) -> None:
        """A fault fired: the kinds that end or hold a rank change how its exit is judged."""
        kind = KINDS.get(msg.fault)  # the rank names it: an unknown name changes nothing
        if kind is None or rank is None:
            return
        if kind.ends_life:
            self.ranks[rank].doomed_by = msg.fault
        elif kind.holds_forever or kind.holds_for_others:  # (until it goes on: ``went_on``)
            self.held_forever[rank] = str(msg.detail.get("message", ""))

    def notice(self, host: int, grace_s: float, struck: int) -> list[Key] | None:
        """``host`` is pre-empted with notice (rank ``struck``'s fault): every live rank of
        it restarts once the host is down. Returns the units to send SIGTERM now (``struck``
        first, then its other ranks and, in exec mode, its launcher); None if the host had
        its notice already."""
        lives = {r: self.ranks[r].life for r in self.topology.ranks_of_host(host)
                 if self.ranks[r].status is None}
        notice = self.notices.give(host, lives, self.clock.now, grace_s)
        if notice is None:
            return None
        for rank in lives:
            self.ranks[rank].doomed_by = "preempt"
        self.coordinator.record("notice", rank=struck, detail={
            "message": f"host {host} gets a pre-emption notice: SIGTERM to "
                       f"{ranks_phrase(sorted(lives))}; the hard stop comes after a "
                       f"{grace_s:g} s grace, at {seconds(notice.end):.3f} s",
            "host": host, "grace_s": grace_s, "ranks": sorted(lives)})
        keys: list[Key] = [self.key_of(struck)] + [("rank", r) for r in sorted(lives)
                                                   if r != struck]
        if self.spec.exec_mode and self.hosts.get(host) and self.hosts[host].status is None:
            keys.append(("host", host))
        return [k for k in keys if k in self.clock]

    def hard_stops(self, decided: Callable[[list[Key]], None]) -> None:
        """The graces over at the world's time: what is left of each host is SIGKILLed (a
        decision of the world: ``decided`` is told whom it stops, before the history is)."""
        for notice in self.notices.ending(self.clock.now):
            left = [r for r, life in notice.lives.items()
                    if self.ranks[r].life == life and self.ranks[r].status is None]
            pids = [self.ranks[r].pid for r in left if self.ranks[r].pid is not None]
            if self.spec.exec_mode and self.hosts[notice.host].pid is not None \
                    and self.hosts[notice.host].status is None:
                pids.append(self.hosts[notice.host].pid)
            if not pids:
                continue
            keys: list[Key] = [("rank", r) for r in left] + [("host", notice.host)]
            for key in keys:
                self.clock.woke(key)  # busy until its exit is told: the world waits for it
            decided([k for k in keys if k in self.clock])
            self.coordinator.record("stop", rank=left[0] if left else None, detail={
                "message": f"{ranks_phrase(left)} of host {notice.host} still ran when its "
                           f"{notice.grace_s:g} s grace ended: SIGKILLed (the hard stop)",
                "host": notice.host, "ranks": left, "grace_s": notice.grace_s})
            self._tell_leader({"type": "stop", "pids": pids})

    def went_on(self, rank: int) -> None:
        """A rank the fault plan held until the others wait goes on: it is held no more."""
        self.held_forever.pop(rank, None)

    def spawning(self, host: int, msg: Spawning) -> None:
        """An exec-mode launcher forked its ranks for an ``xmp.spawn`` (or runs it as a
        world of one): each is a unit of the world clock from now, busy until it says
        otherwise, so the launcher's wait for them never looks like a world at rest."""
        mine = set(self.topology.ranks_of_host(host))
        for rank in msg.ranks:  # none of them can have been told to exit yet: that comes after
            if rank in mine and ("rank", rank) not in self.clock:
                self.clock.join(("rank", rank))
        if msg.single and host not in self.single:
            self.single.add(host)
            self.coordinator.record("spawn", detail={
                "message": f"launcher {host} runs its function itself, as a world of one "
                           "(xmp.spawn with nprocs=1)", "host": host})

    # -- exits ----------------------------------------------------------------
    def exited(self, unit: tuple[str, int], status: int) -> None:
        role, ident = unit
        table = self.ranks if role == "rank" else self.hosts
        if role == "rank":  # exec mode: a life of an earlier xmp.spawn may still be unjudged
            earlier = next((u for u in table[ident].earlier if u.status is None), None)
            if earlier is not None:
                earlier.status = status
                self.coordinator.record("exit", rank=ident, detail={
                    "message": self._how(earlier, status), "round": earlier.round})
                return
        if table[ident].status is not None:
            return
        table[ident].status = status
        self.clock.leave((role, ident))
        rank = ident if role == "rank" else self.promoted.get(ident)
        if rank is not None:
            if role == "host":
                self.ranks[rank].status = status
            # The leader's word that it exited can overtake the rank's last frames
            # (its result, the fault that killed it): read them before judging.
            sock = self.loop.call.get(rank)
            if sock is None:  # its hello may still wait in the backlog
                self.loop.settle(0.5)
                sock = self.loop.call.get(rank)
            if sock is not None:  # the process is gone: what it sent is all buffered
                self.loop.read_last(sock, 0.5)
            self._snapshot_on_exit(rank)
            self.coordinator.gone(rank)  # its process groups' connections close, come back or not
            unit_ = self.ranks[rank]
            doomed = unit_.doomed_by is not None and KINDS[unit_.doomed_by].restarts \
                and unit_.life < self.max_restarts
            if role == "rank" and doomed and not self.restart_job and self._comes_back(rank):
                return
            self.clock.leave(("rank", rank))
            how = self._how(self.ranks[rank], status)
            self.coordinator.rank_exited(rank, how)
            self.publisher.rank_exited(rank)
            self.publish_due()
            if self.teardown and not self.finish_sent and self._failed(rank, status):
                self.coordinator.record("teardown", rank=rank, detail={
                    "message": f"rank {rank} {how}: the job is torn down, every other "
                               "process SIGKILLed"})
                self.finish_sent = self._tell_leader({"type": "kill"})
                return
        self._finish_if_over()

    def _comes_back(self, rank: int) -> bool:
        """A pre-empted rank's life ended: True if it comes back (now, or once its host is
        down: a notice's host comes back once every process of it is gone). A life that
        returned its result is done (a worker that finished within its grace), and is told
        as any exit is; its host-mates come back without it."""
        unit = self.ranks[rank]
        again = not unit.returned
        back = self.notices.left(rank, unit.life)
        if back is None:  # no notice: back at once, as a pre-empted VM
            if again:
                self._restart(rank)
            return again
        if back:  # the host is down: the VM powers off, what its ranks started goes with it
            self._tell_leader({"type": "stop", "groups": [
                self.ranks[r].pid for r in back if self.ranks[r].pid is not None]})
            for other in back:
                if not self.ranks[other].returned:
                    self._restart(other)
        elif again:
            self.clock.leave(("rank", rank))  # it waits for its host to be down
        return again

    def _failed(self, rank: int, status: int) -> bool:
        """Did the rank die, exit non-zero or raise (what a launcher tears a job down for)?"""
        code, sig = decode_status(status)
        result = self.ranks[rank].result
        return sig is not None or code != 0 or (result is not None and not result.ok)

    def _restart(self, rank: int) -> None:
        """A pre-empted rank comes back: same rank, same host disk, a new process."""
        old = self.ranks[rank]
        self.ranks[rank] = Unit(life=old.life + 1)
        rank_restarted(self.spec.sandbox, self.spec.mounts, rank, self.topology.host_of(rank))
        self.loop.call.pop(rank, None)
        self.loop.control.pop(rank, None)
        self.coordinator.forget(rank)
        self.coordinator.record("restart", rank=rank, detail={
            "message": f"rank {rank} restarts after pre-emption (life {old.life + 1})",
            "life": old.life + 1})
        self.clock.join(("rank", rank))  # busy from now: its new process is on its way
        self._tell_leader({"type": "restart", "rank": rank, "life": old.life + 1,
                           "t": self.clock.now})

    def _finish_if_over(self) -> None:
        units = self.hosts if self.spec.exec_mode else self.ranks
        if self.deadline_passed:
            return  # the leader was told to kill: it finishes by itself
        if self._job_restarts():
            return
        if not self.finish_sent and all(u.status is not None for u in units.values()):
            self.finish_sent = self._tell_leader({"type": "finish"})

    def _job_restarts(self) -> bool:
        """A job pre-empted (``restart_job``): once every rank has ended, the job is
        resubmitted, every rank a new life on the disks its hosts left. True if it was."""
        ranks = self.ranks.values()
        if not self.restart_job or self.spec.exec_mode or any(u.status is None for u in ranks):
            return False
        if not any(u.doomed_by is not None and KINDS[u.doomed_by].restarts
                   and u.life < self.max_restarts for u in ranks) \
                or all(u.returned for u in ranks):  # it finished: nothing to resubmit
            return False
        self.notices = Notices()  # every host is down: the notices are over
        self.coordinator.record("restart", detail={
            "message": "the job restarts after its pre-emption: every rank starts again, on "
                       "the disks its host left"})
        for rank in sorted(self.ranks):
            self._restart(rank)
        return True

    def _tell_leader(self, header: dict) -> bool:
        sock = self.loop.leader()
        if sock is None:
            return False
        self.loop.send(sock, header)
        return True

    def _snapshot_on_exit(self, rank: int) -> None:
        if not self.watch or self.spec.mounts is None:
            return
        files = self.files_of(rank)
        self.coordinator.record("snapshot", rank=rank, detail={
            "files": files, "life": self.ranks[rank].life,
            "message": f"{len(files)} watched file(s) as rank {rank} left them"})

    def files_of(self, rank: int) -> dict[str, str]:
        assert self.spec.mounts is not None
        return snapshot(self.spec.sandbox, self.spec.mounts, self.topology, rank, self.watch,
                        self.spec.cwd, self.spec.home)

    def _how(self, unit: Unit, status: int) -> str:
        code, sig = decode_status(status)
        result = unit.result
        if sig is not None:
            return f"was killed by {signal.Signals(sig).name}"
        if result is not None and result.ok:
            return "returned"
        if result is not None and result.error is not None:
            return fates.raised(result.error)
        return f"exited with code {code} without a Python exception"

    # -- the world clock's units ------------------------------------------------------
    def key_of(self, rank: int) -> Key:
        """Which unit of the world clock a rank's requests come from (a promoted launcher
        is its host's rank, and keeps its unit)."""
        host = next((h for h, r in self.promoted.items() if r == rank), None)
        return ("host", host) if host is not None else ("rank", rank)

    def pid_of(self, key: Key) -> int | None:
        role, ident = key
        unit = (self.ranks if role == "rank" else self.hosts).get(ident)
        return unit.pid if unit is not None else None

    def progress(self, elapsed: float, timeout: float) -> Progress:
        ranks = self.ranks.values()
        return Progress(elapsed=elapsed, timeout=timeout, world_size=len(self.ranks),
                        started=sum(u.pid is not None for u in ranks),
                        returned=sum(u.status is not None and u.result is not None
                                     and u.result.ok for u in ranks),
                        exited=sum(u.status is not None for u in ranks),
                        blocked=len(self.coordinator.waiting))

    @property
    def suspicious(self) -> bool:
        """Might the world be deadlocked (then it is checked often)?"""
        return self._stuck_since is not None

    def watch_leader(self, pid: int) -> None:
        """The world's leader is ``pid``: watched through a pidfd (asked at every turn of
        the serving loop, it costs a poll, not a read of /proc), or /proc without one."""
        self.leader_pid = pid
        try:
            self._leader_fd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self._leader_fd = None

    def close(self) -> None:
        if self._leader_fd is not None:
            os.close(self._leader_fd)
            self._leader_fd = None

    def leader_gone(self) -> bool:
        """Has the leader died without saying the world was over? (A rank that kills it,
        or the fork server it hangs under: then no exit is reported any more.)"""
        if self.done or self.leader_pid is None:
            return False
        if self._leader_fd is not None:  # poll, not select: a busy harness has fds past 1024
            poller = select.poll()
            poller.register(self._leader_fd, select.POLLIN)
            return bool(poller.poll(0))
        return not sweep.running(self.leader_pid)

    def all_accounted(self) -> bool:
        """With the leader gone (no exit is reported any more): has every unit either
        sent its result or died?"""
        return all(u.result is not None or u.status is not None or not sweep.running(u.pid)
                   for u in (*self.ranks.values(), *self.hosts.values()))

    def end_at_deadline(self, stack_wait: float, stuck_at: float | None = None,
                        guard: str | None = None) -> None:
        """Collect the stacks of every unit still alive, write the hang report and
        have the leader kill everything that is left.

        The world ends here when its clock reached the deadline (``stuck_at``: the
        world time after which nothing was due any more, when the clock went straight
        to it), when the wall-clock guard fired (``guard`` says how long the clock was
        held, and by whom), or when its leader died."""
        self.deadline_passed = True
        live = {r: u for r, u in self.ranks.items() if u.status is None and not (
            self.leader_lost and (u.result is not None or not sweep.running(u.pid)))}  # returned, died
        live_hosts = {h: u for h, u in self.hosts.items() if u.status is None}
        for unit in (*live.values(), *live_hosts.values()):
            unit.alive_at_deadline = True
        asked = {r: s for r, s in self.loop.control.items()
                 if (r >= 0 and r in live) or (r < 0 and -1 - r in live_hosts)}
        stacks, importing = watchdog.collect_stacks(asked, timeout=stack_wait * 0.7)
        # The faulthandler fallback is written when the wall-clock guard fires: worth a
        # short, shared wait then; a world that reached its deadline on its own clock has
        # units that answer (they wait, their control thread is free).
        fallback_end = time.monotonic() + (stack_wait * 0.3 if guard is not None else 0.0)
        for key, unit in [*live.items(), *((-1 - h, u) for h, u in live_hosts.items())]:
            name = f"rank-{key}" if key >= 0 else f"host-{-1 - key}"
            unit.stack = stacks.get(key) or watchdog.fallback_stack(
                self.spec.outdir, name, wait=max(0.0, fallback_end - time.monotonic()))
        blocked_ranks = set(self.coordinator.waiting)
        running = {r: watchdog.top_frame(u.stack) for r, u in live.items()}
        for rank, message in self.held_forever.items():  # a rank the fault plan holds says so
            if rank in running:
                running[rank] = f"the fault plan: {message}"
        never = [r for r, u in live.items() if u.pid is None and r not in self.loop.call]
        for r in never:
            running.pop(r, None)
        in_import = {r: m for r, u in live.items() if r in running
                     and not str(running[r]).startswith("the fault plan")
                     and (m := importing.get(r) or watchdog.importing(u.stack)) is not None}
        waits = {r: w for r, u in live.items() if (w := watchdog.own_wait(u.stack)) is not None}
        due = self.clock.waiting()
        wakes = {r: seconds(wake) for r in waits if (wake := due.get(self.key_of(r))) is not None}
        report = watchdog.hang_report(self.coordinator.blocked(), running,
                                      dict(self.coordinator.exited), blocked_ranks,
                                      importing=in_import, waits=waits,
                                      held=guard is not None, wakes=wakes)
        report = "; ".join(p for p in (report if report != "the deadline passed" else "",
                                        self._launchers_at_deadline(live_hosts, importing)) if p
                           ) or report
        if never:
            report += f"; rank{'s' if len(never) > 1 else ''} {format_ranks(never)} never started"
        if guard is not None:
            report = f"{guard}: {report}"
        elif self.timeout and not self.leader_lost:
            report = (f"the deadline ({self.timeout:g} s) passed" if report == "the deadline passed"
                      else f"{report}; deadline {self.timeout:g} s")
            if any(r not in blocked_ranks and r in wakes for r in waits):  # a poll, still going
                report += (" (a wait of the target's own was still going: a longer --timeout "
                           "shows how it ends)")
            if stuck_at is not None:
                report += (f" (nothing could happen any more after t={stuck_at:.1f} s: the "
                           "world's clock went straight to the deadline)")
        if self.leader_lost:
            _, failed = failure_of(self.spec.outdir, LEADER)
            how = (f"failed ({failed}: a bug of the harness's, not the target's)" if failed
                   else "died (killed by a rank, or with the fork server it runs under)")
            report = (f"the world's leader process {how} at {self.coordinator.now():.1f} s "
                      "before the world was over, so no rank's exit could be followed and the "
                      f"world was ended then: {report}")
        self.hang_report = report
        self.coordinator.record("hang", detail={"message": report})
        self._tell_leader({"type": "kill"})

    def stop_at_limit(self, words: str, also: tuple[str, int] | None = None) -> None:
        """The world passed one of its limits (``harness.world.limits``): every unit still
        alive is killed now, each with the limit's words as its fate, as is ``also``, a
        unit the kernel killed at the limit (said once: again, it does nothing)."""
        if self.limit_words is not None:
            return
        self.limit_words = words
        for unit in (*self.ranks.values(), *self.hosts.values()):
            if unit.status is None and (unit.result is None or sweep.running(unit.pid)):
                unit.stopped = words
        if also is not None:
            role, ident = also
            (self.ranks if role == "rank" else self.hosts)[ident].stopped = words
        self.coordinator.record("limit", detail={"message": f"stopped at {words}"})
        self._tell_leader({"type": "kill"})

    def kill_by_pid(self) -> None:
        """The leader did not finish: SIGKILL it and every unit it left alive."""
        log.error("world %s: leader did not finish; killing by pid", self.spec.world_id)
        pids = [self.leader_pid] + [u.pid for u in (*self.ranks.values(), *self.hosts.values())
                                    if u.status is None]
        for pid in pids:
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
