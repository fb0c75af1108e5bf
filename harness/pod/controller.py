"""A pod run: connect, sync, then each cell on every host at once, collected into a world's result.

``Pod.run_world`` takes what the runner gives the simulator's ``run_world``
and returns the same ``WorldResult``, so a pod cell is judged by the same
checker, verdict and report code as a simulator cell. What a rank wrote on
its worker (its result message, history lines, output, stacks) is read back
here as plain data: a result goes through ``protocol.decode`` and a value
through ``values.decode``, never an unpickler that could run the target's code.
A failure of the pod itself (a worker lost, a launcher that could not start)
is a ``PodFailure`` naming the workers, with what the other hosts returned.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import posixpath
import re
import shlex
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import refs
from harness.filesystem.mounts import is_under
from harness.history import Event
from harness.pod import mounts as pod_mounts
from harness.pod import setup, stack, sync
from harness.pod.fabric import FabricAddress, free_port
from harness.pod.host import RANKS_START_LIMIT_S, READY
from harness.pod.rank import read_result
from harness.pod.session import Finished, PodSession, SshOptions, WorkerFailure, prefixed
from harness.pod.spec import REMOTE_ROOT, PodCellSpec, host_file, rank_file, watched_file
from harness.pod.workers import Worker
from harness.topology import Topology
from harness.vocabulary import TRUTH_DIR, PodError
from harness.world import protocol
from harness.world.assemble import unit_result
from harness.world.lifecycle import Unit
from harness.world.result import RankResult, WorldResult, world_outcome

log = logging.getLogger(__name__)

#: What a launcher may take beyond the cell's deadline (stacks, the kill, its report).
LAUNCHER_GRACE_S = 30.0
#: What a launcher may take to be ready (imports, the target's module) before the cell starts.
READY_LIMIT_S = 120.0
_RANK_FILES = ("result", "events", "stdout", "stderr", "stack", "pid")


class NotPlaced(Exception):
    """A cell whose files a read-only disk of the pod does not hold as the scenario needs
    (``mounts.held_problems``): its fault cannot happen on this pod."""


class PodFailure(PodError):
    """The pod, not the target, failed this cell (or the whole run)."""

    def __init__(self, failures: list[WorkerFailure], partial: WorldResult | None = None,
                 stage: str = "", lost_hosts: set[int] | None = None) -> None:
        self.failures, self.partial, self.stage = failures, partial, stage
        self.lost_hosts = lost_hosts or set()
        super().__init__(self.describe())

    def describe(self) -> str:
        what = "; ".join(str(f) for f in self.failures)
        return f"{self.stage}: {what}" if self.stage else what

    def kept(self) -> str:
        """What the ranks had done when the pod failed: those that ended say how; the
        others were on a lost worker, or were stopped by the harness."""
        from harness.history import ranks_phrase
        from harness.world.fates import fates_phrase

        if self.partial is None:
            return ""
        ended = [r for r in self.partial.ranks if r.returned or r.error and not r.never_started]
        done = {r.rank for r in ended}
        lost = [r.rank for r in self.partial.ranks if r.rank not in done and r.host in self.lost_hosts]
        stopped = [r.rank for r in self.partial.ranks
                   if r.rank not in done and r.host not in self.lost_hosts]
        parts = ([(min(r.rank for r in ended), fates_phrase(ended))] if ended else []) + (
            [(min(lost), f"{ranks_phrase(lost)} unknown (on a lost worker)")] if lost else []) + (
            [(min(stopped), f"{ranks_phrase(stopped)} stopped by the harness")] if stopped else [])
        return "; ".join(phrase for _, phrase in sorted(parts))


@dataclass(frozen=True)
class PodInfo:
    """What a report says of the pod it ran on."""

    name: str
    accelerator: str
    workers: int
    chips_per_worker: int
    runtime: str = ""  # a Cloud TPU's software image (its runtime version), where known

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "accelerator": self.accelerator, "workers": self.workers,
                "chips_per_worker": self.chips_per_worker,
                **({"runtime": self.runtime} if self.runtime else {})}


class Pod:
    """Connected workers that run cells: ``prepare`` once, then ``run_world`` per cell."""

    def __init__(self, workers: list[Worker], info: PodInfo, ssh: SshOptions | None = None,
                 python: str | None = "python3", fabric_host: str | None = None,
                 log_dir: Path | None = None, echo: Callable[[str], None] | None = None,
                 mounts: tuple[pod_mounts.PodMount, ...] = (), scratch: str = "") -> None:
        self.workers, self.info = workers, info
        self.mounts = mounts  # what the pod's own filesystems are (``--mount``)
        #: the run's own directory on each writable pod mount (``PodMount.scratch``)
        self.scratch = [m.scratch(scratch) for m in mounts if m.writable] if scratch else []
        self.session = PodSession(workers, ssh)
        self.python = python  # None: the one `harness pod setup` made where every worker has it
        self.fabric_host = fabric_host  # a local pod: the shim's collectives over gloo
        self.run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.on_line = prefixed(log_dir, echo)
        self.lib = ""
        self.code: sync.CodeSource | None = None
        self.stacks: dict[int, stack.Stack | None] = {}  # by worker, once prepared
        self.set_up: dict[int, setup.Outcome] = {}  # by worker, once set up
        self._cells = 0

    # -- before the first cell ---------------------------------------------------
    def connect(self) -> None:
        """Connect to every worker (once); a PodFailure naming each that did not answer."""
        if all(self.session.connected(w.index) for w in self.workers):
            return
        failures = self.session.connect()
        self._log_each(failures, "connected")
        if failures:
            raise PodFailure(failures, stage="cannot connect to every worker "
                             f"({len(self.workers) - len(failures)} of {len(self.workers)} answered; "
                             "the pod run stops here, on every worker)")

    def setup(self, plan: setup.SetupPlan) -> dict[int, setup.Outcome]:
        """Install ``plan`` on every worker at once (``harness pod setup``); from then on the
        cells run with the environment it made. A PodFailure names each worker it failed on."""
        self.connect()
        base = self.python or "python3"
        for data, path in ((plan.text.encode(), plan.requirements_path),
                           (setup.script(), plan.script_path)):
            failures = self.session.put_all(data, path)
            if failures:
                raise PodFailure(failures, stage="cannot send the setup to every worker")
        results = self.session.run_all(lambda w: plan.command(base),
                                       timeout=plan.lock_wait_s + 3600, on_line=self.on_line)
        failures, outcomes = [], {}
        for w in self.workers:
            r = results[w.index]
            if isinstance(r, WorkerFailure):
                failures.append(r)
            elif (outcome := setup.Outcome.parse(r.stdout)) is None or not r.ok:
                failures.append(WorkerFailure(w, setup.failure_of(r.stdout, r.stderr)))
            else:
                outcomes[w.index] = outcome
        failed = {f.worker.index: f.what for f in failures}
        for w in self.workers:
            self.on_line(w, "harness", failed.get(w.index) or outcomes[w.index].describe())
        self.set_up = outcomes
        if failures:
            raise PodFailure(failures, stage="setting up the workers (harness pod setup)")
        self.python = setup.SET_UP_PYTHON
        return outcomes

    def prepare(self, code: sync.CodeSource | None) -> None:
        """Connect to every worker, check its Python, install this harness and the code.

        Any worker failing any step is a PodFailure naming it; nothing is left running."""
        self.connect()
        if self.python is None:
            self.python = self._set_up_python()
        self.check_stacks()
        if self.mounts:
            self._each("checking the pod's mounts (--mount)",
                       pod_mounts.check_command(self.python, self.mounts,
                                                fuse=self.fabric_host is None), _mount_problems)
        self._each("ending what an earlier pod run left running", _STALE, lambda f: None)
        key, archive = sync.harness_archive()
        self.lib = sync.lib_dir(key)
        failures = self.session.put_all(archive, self.lib + ".tgz")
        if failures:
            raise PodFailure(failures, stage="cannot install the harness on every worker")
        self._each("unpacking the harness", sync.unpack_command(self.lib + ".tgz", self.lib),
                   lambda f: None)
        if code is not None:
            self._sync_code(code)
        self.code = code

    def _set_up_python(self) -> str:
        """The environment ``harness pod setup`` made, where every worker has one; python3
        where none has; a PodFailure naming the workers that lack it where some have."""
        probe = f"cd ~ && [ -x {setup.SET_UP_PYTHON} ] && echo set-up || echo bare"
        results = self.session.run_all(lambda w: probe, timeout=60)
        bare = [w for w in self.workers if isinstance(r := results[w.index], WorkerFailure)
                or "set-up" not in r.stdout]
        if not bare:
            return setup.SET_UP_PYTHON
        if len(bare) == len(self.workers):
            return "python3"
        from harness.history import format_ranks

        have = [w.index for w in self.workers if w not in bare]
        raise PodFailure([WorkerFailure(w, f"it has no {setup.SET_UP_PYTHON} (workers "
                                           f"{format_ranks(have)} were set up): run harness "
                                           "pod setup on this pod") for w in bare],
                         stage="checking the workers' Python and packages")

    def report(self) -> dict[str, Any]:
        """What the pod report says of the pod: its shape, every worker's versions and how
        its setup went."""
        out = {**self.info.to_dict(), "python": self.python, "stacks": stack.as_report(self.stacks)}
        if self.mounts:
            out["mounts"] = {m.path: m.kind for m in self.mounts}
        if self.set_up:
            out["setup"] = {str(w): o.describe() for w, o in sorted(self.set_up.items())}
        return out

    def check_stacks(self) -> None:
        """Every worker's Python and packages (``stack``): kept for the report; a worker
        that lacks a module, cannot import the real torch_xla on a TPU pod, or runs another
        version than the others is a PodFailure naming it and the fix."""
        tpu = self.fabric_host is None  # a local pod runs the shim, a real one torch_xla
        results = self.session.run_all(lambda w: stack.probe_command(self.python, tpu),
                                       timeout=300)
        failures = [r for r in results.values() if isinstance(r, WorkerFailure)]
        failures += [WorkerFailure(w, f"its Python ({self.python}) did not run: {r.describe()}: "
                                      f"{_tail(r.stderr or r.stdout)}")
                     for w in self.workers if not isinstance(r := results[w.index], WorkerFailure)
                     and not r.ok]
        found = {w.index: stack.Stack.parse(r.stdout) for w in self.workers
                 if not isinstance(r := results[w.index], WorkerFailure) and r.ok}
        self.stacks = found
        why = stack.problems(found, self.python, tpu)
        failures += [WorkerFailure(w, why[w.index]) for w in self.workers if w.index in why]
        for w in self.workers:
            if (s := found.get(w.index)) is not None:
                self.on_line(w, "harness", f"{self.python}: {s.describe()}")
        self._log_each(failures, "its Python and packages will do")
        if failures:
            raise PodFailure(failures, stage="checking the workers' Python and packages")

    def _log_each(self, failures: list[WorkerFailure], done: str) -> None:
        """Each worker's log says how this stage went for it (a silent pod run still leaves
        one log per worker, as it announces)."""
        failed = {f.worker.index: f.what for f in failures}
        for w in self.workers:
            self.on_line(w, "harness", failed.get(w.index, done))

    def _each(self, stage: str, command: str, judge: Callable[[Finished], str | None],
              failed: Callable[[Finished], str] | None = None, timeout: float = 300) -> None:
        """``command`` on every worker; a PodFailure naming each worker it failed on (how:
        ``failed`` for a non-zero exit, ``judge`` for what a zero exit printed)."""
        results = self.session.run_all(lambda w: command, timeout=timeout)
        failures = []
        for w in self.workers:
            r = results[w.index]
            if isinstance(r, WorkerFailure):
                failures.append(r)
            elif not r.ok:
                failures.append(WorkerFailure(w, failed(r) if failed else
                                              f"{r.describe()}: {_tail(r.stderr or r.stdout)}"))
            elif (why := judge(r)) is not None:
                failures.append(WorkerFailure(w, why))
        if failures:
            raise PodFailure(failures, stage=stage)

    def _sync_code(self, code: sync.CodeSource) -> None:
        if code.mode == "fetch":
            self._each("cannot sync the code to every worker", sync.fetch_command(code),
                       lambda f: None, lambda f: sync.explain_fetch(f.stderr, code), timeout=600)
            return
        assert code.archive is not None
        tgz = code.remote_dir + ".tgz"
        failures = self.session.put_all(code.archive, tgz)
        if failures:
            raise PodFailure(failures, stage="cannot send the code to every worker")
        self._each("unpacking the code", sync.unpack_command(tgz, code.remote_dir), lambda f: None)

    def _check_held(self, held: tuple[pod_mounts.Held, ...]) -> None:
        """The files a cell would place on a read-only pod disk are there as it needs them, on
        every host; NotPlaced naming the first that is not."""
        results = self.session.run_all(lambda w: pod_mounts.look_command(self.python, held),
                                       timeout=300)
        problems, failures = [], []
        for w in self.workers:
            r = results[w.index]
            look = None if isinstance(r, WorkerFailure) or not r.ok else \
                pod_mounts.look_answer(r.stdout)
            if look is None:
                failures.append(r if isinstance(r, WorkerFailure) else WorkerFailure(
                    w, f"could not say what its read-only disk holds: {_tail(r.stderr)}"))
            else:
                problems += pod_mounts.held_problems(held, w.index, look)
        if failures:
            raise PodFailure(failures, stage="checking the files on the pod's read-only disks")
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise NotPlaced(f"this pod's read-only disk does not hold what the scenario places: "
                            f"{problems[0]}{more}")

    # -- one cell ------------------------------------------------------------------
    def run_world(self, target: str, *, topology: Topology, timeout: float, seed: int,
                  profile: str, args: tuple[Any, ...] = (), checker: Any = None,
                  faults: Any = None, files: Any = (), watch: Any = (),
                  args_by_host: dict[int, tuple[Any, ...]] | None = None,
                  clean: tuple[str, ...] = (), **_ignored: Any) -> WorldResult:
        """Run one world on the pod: the simulator's ``run_world``, on real hosts."""
        from harness.faults.plan import FaultPlan

        if topology.hosts != len(self.workers):
            raise ValueError(f"topology {topology.name} has {topology.hosts} hosts; this pod "
                             f"has {len(self.workers)} workers")
        target = self._remote_target(target)
        self._cells += 1
        fabric = FabricAddress(self.fabric_host, free_port(self.fabric_host)) \
            if self.fabric_host else None
        every = tuple(files or ()) + tuple((faults or FaultPlan()).leftovers)
        truth = {f.path: f.content for f in every if is_under(f.path, TRUTH_DIR)}
        files, held = pod_mounts.split([f for f in every if f.path not in truth], self.mounts)
        if held:
            self._check_held(held)
        if self.scratch:  # a shared mount: one worker empties it for every other
            dirs = " ".join(shlex.quote(d) for d in self.scratch)
            done = self.session.run(self.workers[0], f"rm -rf {dirs} && mkdir -p {dirs}", 120)
            if not done.ok:
                raise PodFailure([WorkerFailure(self.workers[0], f"cannot empty {dirs}: "
                                                f"{_tail(done.stderr)}")],
                                 stage="emptying the run's directory on the pod's mounts")
        start = time.time()
        spec = PodCellSpec(
            cell_id=f"cell-{self._cells}", run_id=self.run_id, target=target,
            hosts=topology.hosts, ranks_per_host=topology.ranks_per_host, profile=profile,
            seed=seed, timeout=timeout, start=start,
            code_dir=self.code.workdir if self.code is not None else REMOTE_ROOT,
            args=args, args_by_host=args_by_host, faults=faults or FaultPlan(), checker=checker,
            files=files,
            clean=tuple(clean), watch=tuple(watch or ()), fabric=fabric,
            confined=_LOCAL_ROOTS + tuple(self.scratch) if fabric else (),
            home=os.path.expanduser("~"))
        spec_path = posixpath.join(spec.workdir, "spec.pickle")
        failures = self.session.put_all(pickle.dumps(spec), spec_path)
        if failures:
            raise PodFailure(failures, stage="cannot send the cell to every worker")
        env = f"PYTHONPATH=\"$HOME/{self.lib}\" PYTHONDONTWRITEBYTECODE=1"

        def stop(w: Worker) -> str:
            return (f"cd ~ && {env} {shlex.quote(self.python)} -m harness.pod.host --stop "
                    f"{shlex.quote(spec.workdir)} {w.index}")

        def stop_all() -> None:
            self.session.end_inputs()  # a launcher still before the go ends without its ranks
            self.session.run_all(stop, timeout=60)

        watcher = _AbortWatch(stop_all)
        try:
            results = self.session.run_all(
                lambda w: f"cd ~ && {env} exec {shlex.quote(self.python)} -m harness.pod.host "
                          f"{shlex.quote(spec_path)} {w.index}",
                timeout=READY_LIMIT_S + RANKS_START_LIMIT_S + timeout + LAUNCHER_GRACE_S,
                on_line=self.on_line, gate=READY, stop=stop)
        finally:
            watcher.done()
        lost = [r for r in results.values() if isinstance(r, WorkerFailure)]
        # a launcher that failed by itself (not one the harness stopped for a lost worker)
        broken = [] if lost else [
            WorkerFailure(r.worker, f"its launcher {r.describe()}: {_tail(r.stderr or r.stdout)}")
            for r in results.values() if isinstance(r, Finished) and not r.ok]
        gone = {f.worker.index for f in lost}
        result = self._collect(spec, topology, time.time() - start, gone)
        _hand_truth(result, truth, spec.watch)
        if lost or broken:
            raise PodFailure(sorted(lost + broken, key=lambda f: f.worker.index), result,
                             stage="the pod failed during the cell (not the target); the other hosts "
                                   "were stopped",
                             lost_hosts=gone)
        return result

    def _remote_target(self, target: str) -> str:
        """``path/file.py:fn`` as the workers find it: relative to the synced code's working
        directory (a path of this machine means nothing on a worker)."""
        ref = refs.parse(target)
        if not ref.is_file:
            return target
        module, attr = ref.module, ref.attr
        path = Path(module).resolve()
        code = self.code
        if code is None or not path.is_relative_to(code.root):
            where = f"the synced code ({code.root})" if code is not None else "any synced code"
            raise ValueError(f"target {target!r}: {path} is not in {where}; run from the "
                             "repository that holds it")
        return f"{os.path.relpath(path, code.root / code.subdir)}:{attr}"

    # -- collecting ----------------------------------------------------------------
    def _collect(self, spec: PodCellSpec, topology: Topology, duration: float,
                 lost: set[int]) -> WorldResult:
        with tempfile.TemporaryDirectory(prefix="harness-pod-cell-") as outdir:
            return self._collect_into(outdir, spec, topology, duration, lost)

    def _collect_into(self, outdir: str, spec: PodCellSpec, topology: Topology, duration: float,
                      lost: set[int]) -> WorldResult:
        """Each rank's output lands in ``outdir`` only to be read as the simulator's is."""
        unread: list[WorkerFailure] = []
        ranks: list[RankResult] = []
        events: list[dict[str, Any]] = []
        hang_hosts: dict[int, list[int]] = {}
        watched: dict[int, dict[str, str]] = {}
        for w in self.workers:
            host_ranks = list(spec.ranks_of_host(w.index))
            files: dict[str, bytes | None] = {}
            if w.index not in lost and self.session.connected(w.index):
                try:
                    files = self.session.get_many(w, [
                        host_file(spec.workdir, w.index), watched_file(spec.workdir, w.index)] + [
                        rank_file(spec.workdir, r, what) for r in host_ranks for what in _RANK_FILES])
                except WorkerFailure as failure:
                    unread.append(failure)
            report = _json(files.get(host_file(spec.workdir, w.index))) or {}
            seen = _json(files.get(watched_file(spec.workdir, w.index))) or {}
            watched.update({r: {str(k): str(v) for k, v in seen.items()} for r in host_ranks})
            if report.get("ended") == "deadline":
                hang_hosts[w.index] = list(report.get("alive", []))
            for r in host_ranks:
                got = {what: files.get(rank_file(spec.workdir, r, what)) for what in _RANK_FILES}
                for what in ("stdout", "stderr"):
                    Path(outdir, f"rank-{r}.{what}").write_bytes(got[what] or b"")
                rank_events = _events(got["events"])
                events += rank_events
                unit = _unit(r, got, report, rank_events, spec, w.index in lost)
                ranks.append(unit_result(outdir, r, w.index, unit, f"rank-{r}"))
        history = _history(events, topology.world_size)
        hang = None
        if hang_hosts:
            stuck = sorted(r for rs in hang_hosts.values() for r in rs)
            hang = _hang_report(stuck, events, spec.timeout)
        result = WorldResult(world_id=f"{self.run_id}/{spec.cell_id}", topology=topology.name,
                             profile=spec.profile, seed=spec.seed, outcome=world_outcome(ranks),
                             ranks=ranks, history=history, mismatches=[], hang_report=hang,
                             duration_s=round(duration, 4), files=watched if spec.watch else {})
        if unread:
            raise PodFailure(unread, result, stage="cannot collect what every host's ranks left")
        return result

    def close(self) -> None:
        """The run's directories on the pod's mounts removed; every connection closed."""
        if self.scratch and self.session.connected(self.workers[0].index):
            dirs = " ".join(shlex.quote(d) for d in self.scratch)
            try:
                self.session.run(self.workers[0], f"rm -rf {dirs}", 120)
            except WorkerFailure as exc:
                log.warning("could not remove %s: %s", dirs, exc)
        self.session.close()


class _AbortWatch:
    """While a cell runs: the user's Ctrl-C (the runner's ``ABORT``) stops it on every host
    now, rather than at its deadline; the cell then ends as a stopped one."""

    def __init__(self, stop_all: Callable[[], object]) -> None:
        from harness.world.world import ABORT

        self._over = threading.Event()

        def watch() -> None:
            while not self._over.is_set():
                if ABORT.wait(0.2):
                    stop_all()
                    return

        self._thread = threading.Thread(target=watch, name="harness-pod-abort", daemon=True)
        self._thread.start()

    def done(self) -> None:
        self._over.set()
        self._thread.join(timeout=5)


#: Before a run: end the launchers and ranks an earlier pod run left (its sessions are
#: marked by the command line), and a stale libtpu lock no live process holds.
_STALE = ("pkill -KILL -f '[h]arness.pod.host ' 2>/dev/null; "
          "if [ -e /tmp/libtpu_lockfile ] && ! (ls /dev/accel* >/dev/null 2>&1 && "
          "command -v fuser >/dev/null && fuser -s /dev/accel* 2>/dev/null); then "
          "rm -f /tmp/libtpu_lockfile; fi; true")


def _unit(rank: int, got: dict[str, bytes | None], report: dict[str, Any], events: list[dict],
          spec: PodCellSpec, lost: bool) -> Unit:
    """What the launcher and the rank's files say of it, as the simulator's lifecycle would."""
    unit = Unit()
    try:
        unit.pid = int(got["pid"]) if got["pid"] else None
    except ValueError:
        unit.pid = None
    if got["result"]:
        try:
            head, payload = read_result(got["result"])
            message = protocol.decode(head, payload)
            if isinstance(message, protocol.Result):
                unit.result = message
        except (protocol.ProtocolError, ValueError) as exc:
            unit.refused = f"its result file is not a result: {exc}"
    fatal = [e for e in events if e.get("kind") == "fault" and _ends_life(spec, e)]
    if fatal:
        unit.doomed_by = fatal[-1].get("op")
    status = (report.get("statuses") or {}).get(str(rank))
    if isinstance(status, int):
        unit.status = status
    elif unit.result is not None:
        exits = [e for e in events if e.get("kind") == "exit"]
        code = (exits[-1].get("detail") or {}).get("code", 0) if exits else 0
        unit.status = (int(code) & 0xFF) << 8
    elif fatal:
        unit.status = 9  # SIGKILL, as the fault plan's kill does
    if report.get("ended") == "deadline" and rank in report.get("alive", []):
        unit.alive_at_deadline = True
        unit.status = None
        unit.stack = stack_text((got["stack"] or b"").decode("utf-8", "replace")) or None
    if lost and unit.pid is not None and unit.status is None and not unit.alive_at_deadline:
        unit.status = 9  # gone with its host
    return unit


_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):$")
_FH_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<name>.+)$')


def stack_text(dump: str) -> str:
    """faulthandler's dump (innermost first, every frame) as the simulator shows a stack:
    each thread outermost first in traceback form, the harness's own frames left out."""
    from harness.frames import own_frame

    threads: list[tuple[str, list[str]]] = []
    for line in dump.splitlines():
        if (m := _THREAD.match(line)) is not None:
            threads.append((f"Thread {m.group(2)}", []))
        elif (f := _FH_FRAME.match(line)) is not None and threads:
            if not own_frame(f["path"]):
                threads[-1][1].append(f'  File "{f["path"]}", line {f["line"]}, in {f["name"]}\n')
    return "\n".join(f"{name}:\n" + "".join(reversed(frames)) for name, frames in threads
                     if frames).strip()


def _ends_life(spec: PodCellSpec, event: dict[str, Any]) -> bool:
    index = (event.get("detail") or {}).get("index")
    faults = spec.faults.faults
    return isinstance(index, int) and 0 <= index < len(faults) and faults[index].spec.ends_life


def _events(data: bytes | None) -> list[dict[str, Any]]:
    out = []
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by the rank's death
        if isinstance(event, dict) and isinstance(event.get("t"), (int, float)):
            out.append(event)
    return out


def _history(events: list[dict[str, Any]], world_size: int) -> list[Event]:
    """The ranks' own records merged in time order, with a ``complete`` event for each step
    every rank returned from (as the simulator's coordinator records it)."""
    returns: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("kind") == "return":
            returns.setdefault(e["rank"], []).append(e)
    steps = min((len(v) for v in returns.values()), default=0) if len(returns) == world_size else 0
    out = [e for e in events if e.get("kind") != "return"]
    for step in range(steps):
        last = max((returns[r][step] for r in returns), key=lambda e: e["t"])
        out.append({"t": last["t"], "kind": "complete", "op": last.get("op"),
                    "tag": last.get("tag"), "step": step})
    out.sort(key=lambda e: (e["t"], -1 if e.get("rank") is None else e["rank"]))
    fields = ("t", "kind", "rank", "op", "tag", "step", "site", "detail")
    return [Event(**{k: e[k] for k in fields if k in e and e[k] is not None}) for e in out]


def _hang_report(stuck: list[int], events: list[dict[str, Any]], timeout: float) -> str:
    from harness.history import ranks_phrase

    where: dict[str, list[int]] = {}
    for r in stuck:
        calls = [e for e in events if e.get("rank") == r and e.get("kind") in ("call", "return")]
        last = calls[-1] if calls else None
        if last is None:
            what = "before any collective"
        elif last["kind"] == "call":
            what = f"in {last.get('op')}" + (f" {last['tag']!r}" if last.get("tag") else "")
        else:
            what = f"after {last.get('op')}"
        where.setdefault(what, []).append(r)
    parts = "; ".join(f"{ranks_phrase(rs)} {what}" for what, rs in where.items())
    return f"HANG at the deadline ({timeout:g} s): {parts}"


def _json(data: bytes | None) -> dict[str, Any] | None:
    try:
        value = json.loads(data) if data else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _tail(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat[-limit:] or "(no output)"


#: Where a local pod's worker has directories of its own (``local._namespaced``).
_LOCAL_ROOTS = ("~", "/tmp", "/dev/shm", *(("/srv",) if os.path.isdir("/srv") else ()))


def _mount_problems(finished: Finished) -> str | None:
    """A worker's ``--mount`` check in words (None: every mount is what the pod said)."""
    found = pod_mounts.check_answer(finished.stdout)
    if found is None:
        return f"it did not say what its mounts are: {_tail(finished.stderr or finished.stdout)}"
    return "; ".join(f"{path}: {why}" for path, why in sorted(found.items())) or None


def _hand_truth(result: WorldResult, truth: dict[str, bytes], watch: tuple[str, ...]) -> None:
    """What a workload keeps for its checker alone (``TRUTH_DIR``) never went to a worker:
    it is handed to the checker here, as every rank would have seen it."""
    import fnmatch

    seen = {p: c.decode("utf-8", "replace") for p, c in truth.items()
            if any(fnmatch.fnmatchcase(p, g) for g in watch)}
    if not seen:
        return
    for rank in result.ranks:
        result.files.setdefault(rank.rank, {}).update(seen)
