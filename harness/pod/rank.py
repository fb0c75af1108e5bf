"""Inside one rank on a pod: the fault engine, the history recorder, the target, its result.

There is no coordinator on a pod: the rank keeps its own history, one JSON
line per event written straight to its file (a rank killed the next instant
loses nothing it recorded), and calls the fault plan's hooks itself around
the torch_xla collectives it makes (``recorder``). Its result is the same
message a simulator rank sends (``bootstrap.run_reporting``), written to a file.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import functools
import itertools
import json
import os
import signal
import sys
import time
from typing import Any

from harness.faults.plan import FaultPlan
from harness.faults.trigger import Trigger
from harness.pod.spec import PodCellSpec, rank_file
from harness.rank import bootstrap, wire
from harness.rank.blame import call_target


class RankLog:
    """This rank's history, as JSON lines the controller reads back as events."""

    def __init__(self, path: str, rank: int, start: float) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.rank, self.start = rank, start

    def event(self, kind: str, **fields: Any) -> None:
        line = {"t": round(time.time() - self.start, 6), "kind": kind, "rank": self.rank,
                **{k: v for k, v in fields.items() if v is not None}}
        os.write(self.fd, (json.dumps(line, default=repr) + "\n").encode())

    def notify(self, message: dict[str, Any]) -> None:
        """The fault engine's messages: a fault fired (what a pod can record of it)."""
        if message.get("type") == "fault":
            self.event("fault", op=message["fault"],
                       detail={"op": message.get("op"), "path": message.get("path"),
                               "index": message.get("index"), **message.get("detail", {})})


def run(spec: PodCellSpec, rank: int, home: str) -> int:
    """Be ``rank`` of ``spec``'s world: run the target and write what became of it.

    Returns the exit code a program would end with (the result file says why)."""
    from harness.pod import recorder

    workdir = os.path.join(home, spec.workdir)
    path = lambda what: rank_file(workdir, rank, what)  # noqa: E731
    _redirect(path("stdout"), path("stderr"))
    with open(path("pid"), "w") as f:
        f.write(str(os.getpid()))
    stacks = open(path("stack"), "w")  # noqa: SIM115 - faulthandler writes it on SIGUSR1
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)

    log = RankLog(path("events"), rank, spec.start)
    plan = rehomed(spec, home)
    host = rank // spec.ranks_per_host
    code_dir = os.path.join(home, spec.code_dir)
    on_disk = functools.partial(_view, workdir=workdir, rank=rank, host=host, cwd=code_dir,
                                home=home, log=log)
    engine, _ = bootstrap.enter_world(
        plan, spec.seed, rank, host, log.notify,
        view=on_disk if any(f.spec.at_files() for f in plan.faults) else None)
    steps = itertools.count()

    def on_call(op: str, tag: str | None, site: str | None, detail: dict[str, Any]) -> None:
        # as in the simulator: the plan's hook first (never at a send or recv: the
        # simulator's hook does not see them either), then the call is recorded
        if op not in recorder.POINT_TO_POINT:
            engine.before_collective(op, tag)
        log.event("call", op=op, tag=tag, step=next(steps), site=site, detail=detail or None)

    def on_return(op: str, tag: str | None) -> None:
        log.event("return", op=op, tag=tag)

    recorder.install(on_call, on_return)
    os.chdir(code_dir)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    result, code = bootstrap.run_reporting(
        lambda: call_target(bootstrap.resolve_target(spec.target), *spec.args_of(rank),
                            **spec.kwargs),
        spec.checker)
    write_result(path("result"), result)
    log.event("exit", detail={"code": code})
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def rehomed(spec: PodCellSpec, home: str) -> FaultPlan:
    """The plan with its paths under the controller's home moved under this worker's."""
    def trigger(t: Trigger) -> Trigger:
        return dataclasses.replace(
            t, path=spec.rehome(t.path, home) if t.path else t.path,
            paths=tuple(spec.rehome(p, home) for p in t.paths) if t.paths else t.paths)

    faults = tuple(dataclasses.replace(f, trigger=trigger(f.trigger)) for f in spec.faults.faults)
    return dataclasses.replace(spec.faults, faults=faults)


def _view(engine: Any, workdir: str, rank: int, host: int, cwd: str, home: str,
          log: RankLog) -> Any:
    """The simulator's filesystem view over the pod's own files: every file operation meets
    the fault engine's hooks, and lands where the target meant it (the pod's disks)."""
    from harness.filesystem.mounts import KERNEL_TREES, Mount, MountTable
    from harness.filesystem.view import View

    table = MountTable((Mount("/", scope="host", base="real"),
                        *(Mount(p, scope="shared", base="passthrough") for p in KERNEL_TREES)))
    sandbox = os.path.join(workdir, f"rank-{rank}.fs")
    os.makedirs(sandbox, exist_ok=True)
    return View(table, sandbox, rank, host, cwd, home, hooks=engine,
                private=(workdir,), notify=log.notify)


def write_result(path: str, result: dict[str, Any]) -> None:
    """The result message as a frame in a file (written whole, then renamed into place)."""
    header, payload = bootstrap.result_frame(result)
    head = wire.encode(header)
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(len(head).to_bytes(4, "big") + head + bytes(payload))
    os.replace(tmp, path)


def read_result(data: bytes) -> tuple[bytes, bytes]:
    """(header bytes, payload) of a result file, for ``protocol.decode``."""
    n = int.from_bytes(data[:4], "big")
    return data[4:4 + n], data[4 + n:]


def _redirect(stdout: str, stderr: str) -> None:
    for fd, name in ((1, stdout), (2, stderr)):
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
