"""``harness explore --crash-states``: the states a crash can leave on disk, each one tried.

ALICE and CrashMonkey's idea, on the harness's worlds:

1. **Record.** One fault-free world of the target, in its workload's usual setting
   (the topology, mounts and inputs of the workload's ``baseline`` scenario, else of
   its first catalog scenario), with every file operation told
   (``harness.filesystem.recording``): opens, writes with their offsets, fsyncs of
   files and directories, renames, unlinks, closes, each with the target's line.
   The same world is the baseline the crash states are judged against.
2. **Enumerate.** For each rank that changes the disk (ranks running the same code on
   files named alike count once), the distinct states a process crash or a host crash
   can leave at each crash point, per mount consistency (``crash_model``, whose
   docstring is the crash model).
3. **Materialise.** Each state is a world, with the real process really killed:
   - a workload whose ranks restart on their own (``Workload.restarts_alone``: the
     checkpoint workers) crashes the rank with ``preempt`` (a process crash; ``partial``
     tears the write in flight) or ``host-crash`` (its ``cut`` drops what was not
     durable), and the rank's restart IS the recovery;
   - any other workload is a job that is restarted whole: a first world SIGKILLs the
     rank (``kill``) and snapshots what it left, then the recovery is a fresh world of
     the job with those files in place (``stale-leftover`` with their content, on the
     crashed rank's host), the host crash's cut applied to them.
4. **Judge.** The workload's checker judges each recovery world; a state whose world
   ends worse than the fault-free run (it passed, this does not) is a vulnerability.
   States are grouped by the operation they depend on, with its file, occurrences,
   consistency model, the recovery's one-line detail and the target's source line;
   each carries the scenario (the faults) that replays it.

A target whose fault-free run does not pass cannot be judged worse than it: its
report says so, and lists what the crash model reads from its operations alone
(files written in place without fsync, renames before fsync) as unconfirmed.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import yaml

from harness.explore.crash_model import (
    HOST,
    CrashState,
    FileOp,
    Pattern,
    enumerate_states,
    ops_of,
    patterns,
    writers,
)
from harness.explore.crash_report import CrashReport, StateResult, Vulnerability
from harness.explore.found import slug
from harness.explore.space import Plan
from harness.filesystem.mounts import default_table
from harness.filesystem.snapshot import content_bytes
from harness.history import dropped_line
from harness.runner.cells import Cell
from harness.runner.replay import RUN, Replay
from harness.runner.run import CellPlan, run_cell
from harness.scenarios import Scenario, base_scenario, load_scenario
from harness.topology import get_topology
from harness.vocabulary import PASS, Expect, UsageError
from harness.workloads.base import Target
from harness.workloads.registry import WORKLOADS, check_workload
from harness.world.world import ABORT, run_world

log = logging.getLogger(__name__)

#: A traceback's frame line, to find where a fault-free run raised.
_TRACE = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')


class CrashError(UsageError, ValueError):
    """Bad input to the crash-state explorer: the message says what and where."""


# -- the scenarios ------------------------------------------------------------------

def _slug(name: str) -> str:
    return slug(name)[:40] or "target"


def _scenario_text(name: str, base: Scenario, faults: list[dict[str, Any]],
                   description: str) -> str:
    """A crash world's scenario: the workload's base with these faults, expected to pass
    (every state is one a correct recovery survives)."""
    data = Plan(base.topology, tuple(faults)).scenario(base, name, description)
    data["expect"] = Expect.PASS.value  # a plain string, for yaml.safe_dump
    return yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)


class _Worlds:
    """Runs scenarios of one target as cells; each scenario file lives in ``directory``."""

    def __init__(self, target: Target, workload: str, seed: int, base: Scenario,
                 directory: str) -> None:
        self.target, self.workload, self.seed = target, workload, seed
        self.base, self.directory = base, directory
        self.count = 0
        self._lock = threading.Lock()

    def scenario(self, name: str, faults: list[dict[str, Any]], description: str) -> tuple[Scenario, str]:
        text = _scenario_text(name, self.base, faults, description)
        return self.load(name, text), text

    def load(self, name: str, text: str) -> Scenario:
        """The scenario file ``text``, written as ``name`` and read back as a user's is."""
        path = os.path.join(self.directory, f"{name}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return load_scenario(path)

    def run(self, scenario: Scenario, *, record: bool = False,
            watch: list[str] | None = None, teardown: bool = False) -> Cell:
        def execute(ref: Any, **kwargs: Any) -> Any:
            if watch:
                kwargs["watch"] = list(kwargs.get("watch") or []) + watch
            return run_world(ref, record_files=record, teardown_on_failure=teardown, **kwargs)

        with self._lock:
            self.count += 1
        plan = CellPlan(scenario, self.target, self.seed, scenario.topology, scenario.timeout)
        return run_cell(plan, execute=execute)


# -- the explorer ---------------------------------------------------------------------

def explore_crash_states(target: Target, workload: str, *, seed: int = 0, jobs: int = 1,
                         on_state: Callable[[StateResult], None] | None = None) -> CrashReport:
    """Record ``target``'s fault-free run, enumerate its crash states, try each one in a
    world (``jobs`` at a time), and report the vulnerabilities (see the module docstring).
    ``on_state`` is called with each state once its world is judged (from a worker thread).
    Raises ``CrashError`` for a workload that is unknown or not the target's."""
    try:
        check_workload(workload)
    except ValueError as exc:
        raise CrashError(str(exc)) from None
    if target.workload not in (None, workload):
        raise CrashError(f"target {target.name} belongs to workload {target.workload}, "
                         f"not {workload}")
    start = time.monotonic()
    base = base_scenario(workload)  # where a plan search starts too
    report = CrashReport(target.name, workload, seed, topology=base.topology)
    with tempfile.TemporaryDirectory(prefix="harness-crash-") as directory:
        worlds = _Worlds(target, workload, seed, base, directory)
        _explore(report, worlds, jobs, on_state)
        report.worlds = worlds.count
    report.duration_s = time.monotonic() - start
    return report


def _explore(report: CrashReport, worlds: _Worlds, jobs: int,
             on_state: Callable[[StateResult], None] | None) -> None:
    stem = _slug(report.target)
    base, _ = worlds.scenario(f"crash-{stem}-baseline", [], "The fault-free run, recorded.")
    cell = worlds.run(base, record=True)
    report.baseline_outcome, report.baseline_detail = cell.outcome, cell.detail
    report.baseline_raised_at = _raised_at(cell)
    topology = get_topology(base.topology)
    history = cell.history
    dropped = next((e for e in history if e.get("kind") == "dropped"), None)
    if dropped is not None:  # a gap in the file events: occurrences after it cannot be counted
        gap = (dropped.get("detail") or {}).get("first_t")
        history = [e for e in history if gap is not None and e.get("t", 0) < gap]
        report.note = (f"the recording dropped events ({dropped_line(cell.history)}): only the "
                       "operations before the gap are enumerated. ")
    ops = {r: ops_of(history, r) for r in range(topology.world_size)}
    report.operations = sum(len(v) for v in ops.values())
    report.writers = writers(ops)
    if not report.writers:
        report.note += (f"nothing to crash: {report.target} changes no file in its fault-free run "
                       f"({report.operations} operations that change the disk, none a crash "
                       "point): no crash can leave a state its restart has not seen")
        return
    home = os.path.expanduser("~")
    table = default_table(topology, home, os.getcwd())
    for m in base.mount_list(home):
        table = table.with_mount(m)

    def consistency(path: str) -> str:
        try:
            return table.match(path).consistency
        except LookupError:
            return "local"

    # A directory another rank also makes (or looks for) is a race: a crash "before rank r's
    # mkdir" may never come, another rank having made it first. Such a state is not tried.
    seen_by: dict[str, set[int]] = {}
    for e in cell.history:
        if e.get("kind") == "file" and isinstance(e.get("detail", {}).get("path"), str):
            seen_by.setdefault(e["detail"]["path"], set()).add(e.get("rank"))
    states = [s for r in report.writers for s in enumerate_states(ops[r], r, consistency)
              if not (s.at.op in ("mkdir", "rmdir") and seen_by.get(s.at.path, set()) - {r})]
    scratch = {e["detail"].get("path") for e in cell.history
               if e.get("kind") == "file" and e.get("op") == "remove"}
    report.patterns = [p for r in report.writers
                       for p in patterns(ops[r], consistency, r, scratch - {None})]
    report.states = [StateResult(s, []) for s in states]
    if report.baseline_outcome != PASS:
        report.confirmed = False
        where = f"; the target raised at {report.baseline_raised_at}, and made no file " \
            "operation after it" if report.baseline_raised_at else ""
        report.note += (f"the fault-free run does not pass ({report.baseline_outcome}{where}): no "
                       f"crash state can be judged worse than it, so none of its {len(states)} "
                       "crash states was run. What its operations up to the failure show is listed "
                       "unconfirmed; whatever the code does after it (a flag file, a reader's "
                       "check) never ran, so no crash state of it can be enumerated")
        return
    in_world = WORKLOADS[report.workload].restarts_alone

    def one(index: int, result: StateResult) -> StateResult:
        name = f"crash-{stem}-{index + 1}"
        try:
            if in_world:
                _restart_in_world(worlds, name, result)
            else:
                _restart_job(worlds, name, result, topology.host_of(result.state.rank))
        except Exception as exc:  # noqa: BLE001 - one state, never the whole exploration
            log.exception("crash state %s failed", name)
            result.outcome, result.detail = "", f"could not be tried: {type(exc).__name__}: {exc}"
        if on_state is not None:
            on_state(result)
        return result

    _each(jobs, one, range(len(report.states)), report.states)
    report.vulnerabilities = _group(report.states, worlds, stem, report.patterns)
    for v in report.vulnerabilities:
        v.needs, v.ordering = _ordering(v.first, report.states, ops[v.first.state.rank])

    def again(v: Vulnerability) -> None:
        try:
            cell = worlds.run(worlds.load(v.scenario_name, v.scenario_yaml))
        except Exception as exc:  # noqa: BLE001 - one replay, never the whole exploration
            log.exception("replaying %s failed", v.scenario_name)
            v.again = ("", f"could not be run: {type(exc).__name__}: {exc}")
        else:
            v.again = (cell.outcome, cell.detail)

    _each(jobs, again, report.vulnerabilities)


def _each(jobs: int, fn: Callable[..., Any], *items: Any) -> None:
    """``fn`` over ``items``, ``jobs`` worlds at a time; Ctrl-C ends every world in flight."""
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="harness-crash")
    try:
        list(pool.map(fn, *items))
    except KeyboardInterrupt:
        ABORT.set()  # every world in flight ends now, as run_matrix does
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _trigger(state: CrashState) -> dict[str, Any]:
    at = state.at
    out: dict[str, Any] = {"rank": state.rank, "op": at.op, "path": at.path,
                           "occurrence": at.occurrence, "lives": [0]}
    if at.op == "write":
        out["partial"] = state.torn
    return out


def _restart_in_world(worlds: _Worlds, name: str, result: StateResult) -> None:
    state = result.state
    if state.crash == HOST:
        fault = {"kind": "host-crash", **_trigger(state), "cut": dict(state.cut)}
    else:
        fault = {"kind": "preempt", **_trigger(state)}
    result.faults = [fault]
    scenario, _ = worlds.scenario(name, result.faults, state.why)
    cell = worlds.run(scenario)
    result.outcome, result.detail, result.duration_s = cell.outcome, cell.detail, cell.duration_s
    result.worlds = 1


def _restart_job(worlds: _Worlds, name: str, result: StateResult, host: int) -> None:
    """Kill the rank at the crash point, then start the job afresh on what it left."""
    state = result.state
    kill = {"kind": "kill", **{k: v for k, v in _trigger(state).items() if k != "lives"}}
    scenario, _ = worlds.scenario(f"{name}-kill", [kill], f"{state.why} (the crash)")
    paths = list(state.files)
    # The job goes down with the killed rank (its peers may poll for it forever).
    crashed = worlds.run(scenario, watch=paths, teardown=True)
    left: dict[str, bytes] = {}
    for event in crashed.history:
        if event.get("kind") == "snapshot" and event.get("rank") == state.rank:
            for vpath, content in (event.get("detail") or {}).get("files", {}).items():
                data = content_bytes(content)
                if data is not None and vpath in paths:
                    left[vpath] = data
            break
    for vpath, keep in state.cut.items():
        if vpath in left:
            left[vpath] = left[vpath][:keep]
    result.worlds = 2
    faults = []
    for vpath, data in sorted(left.items()):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")  # placed as text: the torn bytes of a text file
        faults.append({"kind": "stale-leftover", "path": vpath, "content": text, "hosts": [host]})
    result.faults = faults
    if not faults:
        result.outcome, result.detail = PASS, "the crash left no file of the rank: a fresh start"
        return
    scenario, _ = worlds.scenario(name, faults, f"{state.why}; the job restarts on what it left")
    cell = worlds.run(scenario)
    result.outcome, result.detail = cell.outcome, cell.detail
    result.duration_s = crashed.duration_s + cell.duration_s


def _group(results: list[StateResult], worlds: _Worlds, stem: str,
           found: list[Pattern]) -> list[Vulnerability]:
    groups: dict[tuple[Any, ...], Vulnerability] = {}
    for result in results:
        if not result.vulnerable or result.state.depends is None:
            continue
        state = result.state
        op = state.depends
        key = (state.crash, state.torn, op.site)
        v = groups.get(key)
        if v is None:
            groups[key] = v = Vulnerability(op, state.crash, state.consistency, [])
        v.states.append(result)
    out = sorted(groups.values(), key=lambda v: (not v.first.state.torn, v.crash == HOST,
                                                 v.first.state.rank, v.depends.index))
    for i, v in enumerate(out, 1):
        damaged = v.first.state.damaged
        v.protocol = "" if damaged is None else next(
            (p.text for p in found if p.op.path == damaged or (p.op.dst == damaged)
             or p.op.site == v.depends.site), "")
        v.scenario_name = f"crash-{stem}-{v.crash}-{i}"
        model = "host crash (data since the last fsync lost)" if v.crash == HOST \
            else "process crash (the host survives)"
        v.scenario_yaml = _scenario_text(
            v.scenario_name, worlds.base, v.first.faults,
            f"{v.first.state.why} ({model}, {v.consistency} mount); found by harness explore "
            f"--crash-states; the recovery saw: {v.first.detail}")
        v.replay_of = Replay(f"{v.scenario_name}.yaml", worlds.target.name, command=RUN,
                             workload=None if worlds.target.builtin else worlds.workload)
        v.replay = str(v.replay_of)
    return out


def _ordering(failed: StateResult, results: list[StateResult],
              ops: list[FileOp]) -> tuple[list[FileOp], str]:
    """What a failing state needs besides its damage: the files created since the last
    earlier state of the same crash that left the same damage and passed. A restart that
    survives an empty config, and fails once a flag beside it exists, trusts the flag."""
    f = failed.state
    if f.damaged is None:
        return [], ""
    passed = [r.state for r in results if r.outcome == PASS and r.state.rank == f.rank
              and r.state.crash == f.crash and r.state.torn == f.torn
              and r.state.damaged == f.damaged and r.state.at.index < f.at.index
              and r.state.cut.get(f.damaged) == f.cut.get(f.damaged)]
    if not passed:
        return [], ""
    p = max(passed, key=lambda s: s.at.index)
    new = set(f.files) - set(p.files) - {f.damaged}
    needs = [op for op in ops if p.at.index <= op.index < f.at.index
             and ((op.op == "open-write" and op.path in new) or (op.op == "rename" and op.dst in new))]
    if not needs:
        return [], ""
    damaged = f"`{os.path.basename(f.damaged)}`"
    names = " and ".join(
        f"`{os.path.basename(op.dst if op.op == 'rename' and op.dst else op.path)}` "
        f"({'renamed into place' if op.op == 'rename' else 'created'} at "
        f"{op.line or 'an unknown line'})" for op in needs)
    how = "a torn" if f.torn else "an empty" if f.cut.get(f.damaged, 0) == 0 else "a cut-short"
    ready = "durable (fsync)" if f.crash == HOST else "complete"
    text = (f"the restart survives {how} {damaged} on its own and fails once {names} also "
            f"exists: {damaged} must be {ready} before it is created")
    return needs, text


def _raised_at(cell: Cell) -> str | None:
    """The target's line where the first rank that raised raised (its innermost frame
    outside the harness and the standard library)."""
    from harness.filesystem.recording import LineFinder

    finder = LineFinder(cell.target if ":" in cell.target else None)
    for rank in cell.ranks:
        if not rank.traceback:
            continue
        frames = list(_TRACE.finditer(rank.traceback))
        for m in reversed(frames):
            fake = _Frame(m["path"])
            if finder.users(fake):  # type: ignore[arg-type]
                return f"{os.path.basename(m['path'])}:{m['line']} in {m['fn']}"
    return None


class _Frame:
    """Enough of a frame for ``LineFinder.users``: its file and module globals."""

    def __init__(self, path: str) -> None:
        self.f_code = type("Code", (), {"co_filename": path})()
        self.f_globals: dict[str, Any] = {}
