"""A ``WorldResult`` from what the lifecycle knows of every unit and what the
coordinator recorded, with the tail of each unit's captured output."""

from __future__ import annotations

import os

from harness.history import in_world_order
from harness.rank.process import failure_of, unit_name
from harness.rank.values import UnreadableValue, ValueTooLarge, limit_problem
from harness.vocabulary import CRASH, ERROR, FAIL, HANG, LEADER, PASS, UNIT_FAILED
from harness.world.coordinator import Coordinator
from harness.world.fates import HARNESS_FAILED, NEVER_STARTED, NO_PROCESS, STOPPED
from harness.world.lifecycle import Lifecycle, Unit
from harness.world.result import RankResult, WorldResult, decode_status, world_outcome

_OUTPUT_LIMIT = 1 << 20
_NO_ERROR = {"type": "Error", "message": "the rank reported a failure without saying which",
             "traceback": ""}


def world_result(life: Lifecycle, coordinator: Coordinator, duration: float,
                 world_time: float = 0.0) -> WorldResult:
    spec, topology = life.spec, life.topology
    launcher_of = {rank: host for host, rank in life.promoted.items()}
    _, failed = failure_of(spec.outdir, LEADER) if life.leader_lost else ("", "")
    never = f"its world's leader failed first ({failed})" if failed else NO_PROCESS
    ranks = [unit_result(spec.outdir, r, topology.host_of(r), life.reported(r),
                         unit_name("host", launcher_of[r]) if r in launcher_of
                         else unit_name("rank", r), never)
             for r in life.ranks]
    hosts = [unit_result(spec.outdir, h, h, u, unit_name("host", h), never)
             for h, u in life.hosts.items()]
    if hosts:
        for r in ranks:
            host = hosts[r.host]
            if r.pid is None and r.outcome == CRASH and host.outcome != PASS:
                # the launcher's fate is the world's word for a rank it never started; its
                # error and traceback stay the launcher's own, shown once, as the launcher's
                r.outcome, r.error = host.outcome, _never_started(
                    f"launcher {host.rank} {host.summary()} before starting it")
            elif r.pid is None and host.outcome == PASS:
                r.error = _never_started(
                    f"launcher {host.rank} exited {host.exit_code} without starting it")
        if all(r.pid is None for r in ranks) and all(h.outcome == PASS for h in hosts):
            ranks = []  # the script ran to its end on every host and started no rank: none failed
    return WorldResult(
        world_id=spec.world_id, topology=topology.name, profile=spec.profile,
        seed=spec.seed, outcome=world_outcome(ranks + hosts), ranks=ranks,
        history=in_world_order(coordinator.history),
        dropped=coordinator.history.dropped if coordinator.history.dropped.count else None,
        mismatches=coordinator.mismatches + coordinator.findings(),
        hang_report=life.hang_report, duration_s=round(duration, 4),
        world_time_s=round(world_time, 6), hosts=hosts,
        leftovers=life.leftovers, single_hosts=sorted(life.single),
        imported=sorted({name for u in (*life.ranks.values(), *life.hosts.values())
                         if u.result is not None for name in u.result.imported or ()}),
        files={r: life.files_of(r) for r in life.ranks} if life.watch and spec.mounts
        is not None else {})


def _never_started(message: str) -> dict[str, str]:
    return {"type": NEVER_STARTED, "message": message, "traceback": ""}


def unit_result(outdir: str, ident: int, host: int, unit: Unit, name: str,
                never: str = NO_PROCESS) -> RankResult:
    """One unit's fate: how it ended, what it returned or raised, its output."""
    code, sig = decode_status(unit.status) if unit.status is not None else (None, None)
    res = unit.result
    out = RankResult(rank=ident, host=host, outcome=CRASH, pid=unit.pid, exit_code=code,
                     signal=sig, stack=unit.stack)
    stdout_path, stderr_path = (os.path.join(outdir, f"{name}.{s}") for s in ("stdout", "stderr"))
    out.stdout, out.stderr = _read_tail(stdout_path), _read_tail(stderr_path)
    # (a pre-emption's notice dooms a life that may still return within its grace)
    out.killed_by_fault = unit.doomed_by is not None and unit.status is not None \
        and not unit.returned
    out.restarts = unit.life
    if unit.stopped is not None:  # killed at a limit of the world's, whatever it was doing
        out.outcome = CRASH
        out.error = {"type": STOPPED, "message": f"stopped at {unit.stopped}", "traceback": ""}
    elif unit.alive_at_deadline:
        out.outcome = HANG
    elif res is not None and res.ok:
        out.outcome, out.returned = (FAIL if res.invalid else PASS), True
        out.value_pickle = bytes(res.payload) if res.payload else None
        out.value_repr, out.invalid, out.value_note = res.value_repr, res.invalid, res.value_note
        try:
            out.value  # noqa: B018 - read now, as plain data: a forged payload is this rank's error
        except UnreadableValue as exc:
            out.outcome, out.value_pickle = ERROR, None
            out.error = {"type": type(exc).__name__, "traceback": "",
                         "message": str(exc) if isinstance(exc, ValueTooLarge)
                         else f"returned a value that cannot be read: {exc}"}
    elif res is not None and (res.error or {}).get("by") == "harness":
        out.outcome, out.error = CRASH, harness_failed(res.error["traceback"] or "",
                                                       f"{res.error['type']}: {res.error['message']}")
    elif res is not None:
        out.outcome, out.error = ERROR, dict(res.error or _NO_ERROR)
        if res.payload and limit_problem(len(res.payload)) is None:  # else its text is enough
            out.error["pickled"] = bytes(res.payload)
    elif unit.refused is not None:
        out.outcome = ERROR
        out.error = {"type": "ProtocolError", "message": unit.refused, "traceback": ""}
    if unit.pid is None and unit.status is None:  # a HANG too, if the deadline came first
        out.error = _never_started(never)
    # The harness's own failure inside the unit, as it said beside its output (a target's
    # own os._exit(70) leaves no such file)
    failed, last = failure_of(outdir, name) if code == UNIT_FAILED and res is None else ("", "")
    if failed:
        out.outcome, out.error = CRASH, harness_failed(failed, last)
    return out


def harness_failed(traceback: str, last: str) -> dict[str, str]:
    """The error of a unit the harness's own code failed in (``last``: the exception)."""
    return {"type": HARNESS_FAILED, "traceback": traceback,
            "message": f"was ended by a failure of the harness's own ({last}): a bug of the "
                       "harness's, not the target's"}


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
