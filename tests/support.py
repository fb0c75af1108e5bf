"""What the test files share: the repository, the command line in a subprocess, and
world results built by hand for the pure parts (checkers, the diagnosis, reports).

A hand-built rank's returned value is pickled as a real rank's is, so a checker
reads it through ``RankResult.value`` exactly as it reads a live world's.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.world.result import PASS, RankResult, WorldResult, world_outcome

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (the harness depends on it there)
    import tomli as tomllib

__all__ = ["tomllib"]  # re-exported: the tests read pyproject.toml and the docs' blocks with it

#: tests/, wherever a test file lives below it (in its tier: unit, world, catalog, cli, pod)
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
#: the targets the tests run in worlds, and the strangers' targets written as users write them
TARGETS_DIR = TESTS / "targets"
USER_TARGETS_DIR = TESTS / "user_targets"

Cli = Callable[..., subprocess.CompletedProcess]

#: The six lines every test scenario starts with (a fault's or field's line numbers count
#: from here); add ``timeout:``, ``faults:`` and the rest after them.
SCENARIO_HEAD = """\
name: {name}
workload: config-sync
description: a test scenario
finding: "seed 000"
topology: v4-64
expect: pass
"""


def line_in(path: Path, function: str, text: str) -> int:
    """The line of ``text`` inside ``function`` in the Python file ``path`` (a targets file):
    what a report names, found as a reader finds it."""
    lines = path.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {function}("))
    return next(i for i in range(start, len(lines)) if text in lines[i]) + 1


def run_cli(*args: str, cwd: Path | str = REPO, env: dict[str, str] | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess:
    """``harness ARGS`` in a subprocess, as a user types it; output captured as text."""
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def run_cli_here(*args: str, cwd: Path | str | None = None) -> subprocess.CompletedProcess:
    """``harness ARGS`` run in this process (click's runner), from ``cwd``: for what the
    command line refuses before it starts anything, and for commands that only read and
    print (``diff``, ``report``), where a new interpreter per case is not the point. The same
    exit status and words as ``run_cli``; never for a command that starts a world."""
    from click.testing import CliRunner

    from harness.cli import cli

    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        done = CliRunner().invoke(cli, list(args), prog_name="harness")
    finally:
        os.chdir(before)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception  # a usage error is an exit, never an exception
    return subprocess.CompletedProcess(["harness", *args], done.exit_code, done.stdout,
                                       done.stderr)


def start_cli(*args: str, cwd: Path | str, env: dict[str, str] | None = None,
              sigint: Any = signal.SIG_DFL, group: bool = False) -> subprocess.Popen:
    """``harness ARGS`` started as at a terminal, to be interrupted (``sigint``: how it
    inherits SIGINT; a shell's background job, ``cmd &`` in a script, starts with it
    ignored); ``group``: in a process group of its own, as a job a CI runner signals whole."""
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
                            start_new_session=group)  # (process_group= is Python 3.11's)


def worlds_of(pid: int, ended: bool = False) -> list[str]:
    """The sandboxes of the worlds the harness process ``pid`` has up (in either isolation:
    a kernel-isolated world's is not in the temporary directory); with ``ended``, those of
    its ended worlds still to be removed too (what it leaves behind)."""
    from harness.world.reaper import ENDED, world_dirs

    return [p for base in world_dirs() for prefix in ("", *([ENDED] if ended else []))
            for p in glob.glob(os.path.join(base, f"{prefix}harness-{pid}-*"))]


def ctrl_c(proc: subprocess.Popen) -> tuple[str, str]:
    """Press Ctrl-C in ``proc``: its output once it has ended (killed if it will not)."""
    try:
        proc.send_signal(signal.SIGINT)
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        return proc.communicate(timeout=60)
    finally:
        proc.kill()


def rank(r: int, outcome: str = PASS, value: Any = None, *, host: int | None = None,
         **fields: Any) -> RankResult:
    """Rank ``r``'s fate; on host ``r`` unless told (a ``Nx1`` world)."""
    if outcome == PASS:
        fields.setdefault("returned", True)
        fields.setdefault("exit_code", 0)
        fields.setdefault("value_pickle", pickle.dumps(value))
        if "value_repr" not in fields:  # not setdefault: repr(10**5000) raises
            fields["value_repr"] = repr(value)
    return RankResult(rank=r, host=r if host is None else host, outcome=outcome, **fields)


def error(kind: str = "RuntimeError", message: str = "it failed") -> dict[str, str]:
    """A rank's error as the bootstrap reports it."""
    return {"type": kind, "message": message,
            "traceback": f'Traceback (most recent call last):\n  File "sync.py"\n{kind}: {message}\n'}


def world(ranks: list[RankResult], outcome: str | None = None, **fields: Any) -> WorldResult:
    """A world of ``ranks``; its outcome is the worst of theirs unless told."""
    base: dict[str, Any] = dict(
        world_id="synthetic", topology=f"{len(ranks)}x1", profile="legacy", seed=0,
        outcome=outcome or world_outcome(ranks), ranks=list(ranks), history=[], mismatches=[],
        hang_report=None, duration_s=0.1)
    base.update(fields)
    return WorldResult(**base)


def alive(pid: int) -> bool:
    """True if ``pid`` is a live process (a zombie counts as dead)."""
    from harness.rank.sweep import running

    return running(pid)


def processes_of_world(world_id: str) -> list[int]:
    """The live processes of a world, by the mark in their environment as /proc shows it
    (``harness.rank.sweep``): none may outlive it."""
    from harness.rank.sweep import of_world

    return [pid for pid in of_world(world_id) if alive(pid)]


SHIMS = str(REPO / "shims")


def purge_shim() -> None:
    """Forget every torch_xla module (the next import is a fresh one of whichever is first
    on sys.path)."""
    for name in [m for m in sys.modules if m == "torch_xla" or m.startswith("torch_xla.")]:
        del sys.modules[name]


@contextlib.contextmanager
def local_shim(profile: str = "current") -> Iterator[Any]:
    """A fresh import of the shim, in this process, with its one-rank ``LocalRuntime`` of
    ``profile`` installed (before the API modules: profile-dependent names are decided at
    import); yields the runtime. What the shim registers in torch.distributed, the finder
    it adds and its wrap of ``Tensor.to`` are undone afterwards."""
    import torch.distributed as dist

    rendezvous = sys.modules["torch.distributed.rendezvous"]  # the module; dist's is a function
    new_group, handlers = dist.new_group, dict(rendezvous._rendezvous_handlers)
    meta_path = list(sys.meta_path)
    sys.path.insert(0, SHIMS)
    purge_shim()
    try:
        from torch_xla._internal import runtime

        local = runtime.LocalRuntime(profile)
        runtime.install(local)
        yield local
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.new_group = new_group
        rendezvous._rendezvous_handlers.clear()
        rendezvous._rendezvous_handlers.update(handlers)
        if "torch_xla._internal.device" in sys.modules:
            sys.modules["torch_xla._internal.device"].uninstall()
        sys.meta_path[:] = meta_path
        purge_shim()
        sys.path.remove(SHIMS)


# -- collectives as a rank sends them, for the coordinator's tests -----------------------

def all_reduce(value: int, **extra: Any) -> Any:
    """An int32 sum of ``value``, as ``xm.all_reduce`` sends it."""
    import struct

    from harness.world.protocol import Collective

    return Collective(op="all_reduce", kind="reduce", tensors=[["int32", [1], 4]], reduce="sum",
                      payload=struct.pack("<i", value), **extra)


def rendezvous(tag: str, payload: bytes) -> Any:
    from harness.world.protocol import Collective

    return Collective(op="rendezvous", kind="gather_bytes", tag=tag, payload=payload)


def seed_fix_reaches_its_fsync() -> int:
    """A seed whose order lets seed-fix-sync's rank 0 through its sync directory's probe
    (every rank writes and removes one ``.test_write``: at most seeds another rank's remove
    beats rank 0's twice, and it raises before the config is written)."""
    for seed in range(30):
        from harness.explore.crash import explore_crash_states
        from harness.workloads.registry import target

        report = explore_crash_states(target("seed-fix-sync"), "config-sync", seed=seed)
        if (report.baseline_raised_at or "").endswith("in load_synced_config"):
            return seed
    raise AssertionError("no seed of 30 lets rank 0 through its probe")
