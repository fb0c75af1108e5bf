"""Inside a unit process: become rank r of a world (or a host's launcher), run the target, report.

Everything here runs in the forked child, after the fork server's warm
imports. It sets the environment a TPU VM would give this rank, points
stdout/stderr at the world's capture files, puts the shim first on
``sys.path``, connects to the coordinator, installs the harness's runtime in
the shim, runs the target and sends back its return value or exception.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import importlib.util
import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness import refs
from harness.rank import clock as rank_clock
from harness.rank import imported, network, runtime, signals, values, warm
from harness.rank.blame import blame_target, call_target, harness_own
from harness.rank.channel import Channel
from harness.rank.environment import (
    enter_environment,
    enter_world_environment,
    seed_generators,
    seed_temp_names,
)
from harness.rank.process import (
    arm_fallback_stacks,
    die_with_parent,
    redirect_output,
    say_failed,
    unit_name,
)
from harness.rank.runtime import RankContext
from harness.rank.spec import WorldSpec
from harness.vocabulary import UNIT_FAILED

if TYPE_CHECKING:
    from harness.faults.engine import FaultEngine, Signals
    from harness.faults.plan import FaultPlan
    from harness.filesystem.view import View


def become_rank(spec: WorldSpec, rank: int, life: int = 0, round_: int = 0,
                start_ns: int = 0) -> RankContext:
    """Turn this freshly forked process into ``rank`` of ``spec``'s world (in exec
    mode, in its launcher's ``round_``-th ``xmp.spawn``, counted from 0), whose
    clock reads ``start_ns`` (the world's time when it was started)."""
    topology = spec.topology
    name = f"rank-{rank}"
    if spec.record_files:
        imported.mark()
    redirect_output(spec, name, life, round_)
    enter_environment(spec, {**topology.rank_environment(rank, spec.profile),
                             "HARNESS_LIFE": str(life)})
    inherited = runtime.active()
    if inherited is not None and inherited.channel is not None:
        inherited.channel.close(shutdown=False)  # inherited from a launcher that forked us
    channel = Channel(spec.address, spec.secret, "rank", rank)
    ctx = RankContext(spec, "rank", rank, topology.host_of(rank), channel)
    runtime.enter(ctx)
    arm_fallback_stacks(spec, name)
    _start_clock(channel, start_ns)
    _enter_world(ctx, rank, life, round_)
    return ctx


def prepare_units(spec: WorldSpec) -> None:
    """In a world's leader, before it forks its units: what each unit would do alike after
    its fork, done once, for all of them to inherit (each then does only what is its own):
    the world's environment with the shim on the path, and the world's clock and
    filesystem functions in the place of the machine's, which stay the machine's until a
    unit has its own clock and view. A third of a unit's start, and the pages it wrote
    (each a copy per unit)."""
    enter_world_environment(spec)
    rank_clock.install_functions()
    if spec.mounts is not None:
        from harness.filesystem import patch

        patch.install_functions()
    if spec.mounts is not None and spec.binds is None:  # python isolation: one network
        network.watch()
    gc.freeze()  # what this made: no unit's collection looks at it (and so copies its pages)


def become_host(spec: WorldSpec, host: int) -> RankContext:
    """Exec mode: this process is the per-host launcher that runs the script."""
    name = f"host-{host}"
    if spec.record_files:
        imported.mark()
    redirect_output(spec, name)
    enter_environment(spec, spec.topology.host_environment(host, spec.profile))
    seed_generators(spec.seed, f"host-{host}")  # a host's launcher: a fresh process too
    channel = Channel(spec.address, spec.secret, "host", host)
    ctx = RankContext(spec, "host", None, host, channel, launcher=True)
    runtime.enter(ctx)
    arm_fallback_stacks(spec, name)
    _start_clock(channel, 0)
    _enter_world(ctx, spec.topology.ranks_of_host(host)[0])
    return ctx


def _start_clock(channel: Channel, start_ns: int) -> None:
    """The world's clock, this unit's time from now on (before the fault plan's timers and
    the target's import): see ``harness.rank.clock``."""
    clock = rank_clock.RankClock(channel.notify, start_ns)
    with channel.early_lock:
        clock.seen = channel.early_wakes  # a notice that came before (``Channel``)
        rank_clock.install(clock)


def enter_world(faults: FaultPlan, seed: int, rank: int, host: int,
                notify: Callable[[dict[str, Any]], None], life: int = 0, round_: int = 0,
                view: Callable[[FaultEngine], View] | None = None,
                ask: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                wait: Callable[[dict[str, str], int], None] | None = None,
                signals: Signals | None = None
                ) -> tuple[FaultEngine, View | None]:
    """What a rank's target meets, in the simulator and on a pod alike: the fault engine
    (its environment, timers and the generators' seed), the filesystem view ``view`` builds
    around the engine's hooks (the simulator's over its sandbox, a pod's over its own
    disks; None: no view), and the generators seeded as a launcher leaves them. ``ask``:
    a request to the harness (the simulator's: it seals this rank's faulted writes,
    ``harness.faults.seal``); None: the rank seals its own. ``wait``: the world clock's
    wait for the other ranks (``slow-write``; None: a plain sleep). ``signals``: those the
    harness delivers to this rank, on the world's clock (a notice; None: the rank signals
    itself)."""
    from harness.faults.engine import FaultEngine

    engine = FaultEngine(faults, rank, host, notify, life, ask, wait, signals)
    seed = engine.start(seed)
    made = None
    if view is not None:
        from harness.filesystem import patch

        made = view(engine)
        patch.install(made)
    seed_generators(seed, f"rank-{rank}" + (f":life-{life}" if life else "")
                    + (f":round-{round_}" if round_ else ""))
    seed_temp_names(rank, life, round_)
    return engine, made


def _turns(channel: Channel, target: str) -> Callable[[str, str, str | None, str], None] | None:
    """The view's turn before each operation another rank could see: the world's clock
    decides who acts first at an instant (``RankClock.turn``), then the world hears what
    was done and from which line of the target (its race finder, ``world/races.py``).
    None before the rank has its clock."""
    clock = rank_clock.current()
    if clock is None:
        return None
    from harness.filesystem import patch
    from harness.filesystem.recording import LineFinder

    lines = LineFinder(target)
    inside = threading.local()  # finding the line looks at code files: not the target's turn

    def turn(op: str, path: str, dst: str | None, where: str) -> None:
        if getattr(inside, "turning", False) or not clock.counts():
            return  # a forked child's, or the harness's own thread: not the world's
        inside.turning = True
        try:
            doing = {"op": op, "path": path, "where": where}
            if dst is not None:
                doing["dst"] = dst
            clock.turn(doing)
            touch = {"type": "touch", "op": op, "path": path, "where": where}
            with patch.aside():  # the code files' real paths are the machine's
                line = lines.find(sys._getframe(1))
            if line is not None:
                touch["line"] = line
            if dst is not None:
                touch["dst"] = dst
            channel.notify(touch)
        finally:
            inside.turning = False

    return turn


def _enter_world(ctx: RankContext, rank: int, life: int = 0, round_: int = 0) -> None:
    """The simulator's world: its sandboxed filesystem over the world's mounts (every
    operation told to the coordinator with ``record_files``)."""
    spec, channel = ctx.spec, ctx.channel
    assert channel is not None

    def sandboxed(engine: FaultEngine) -> View:
        from harness.filesystem.recording import RecordingView
        from harness.filesystem.view import View

        assert spec.mounts is not None
        told = {"target": spec.target} if spec.record_files else {}
        drawn = tuple(b.target for b in (spec.binds or {}).get(ctx.host, ()) if b.overlay)
        return (RecordingView if spec.record_files else View)(
            spec.mounts, spec.sandbox, rank, ctx.host, spec.cwd, spec.home, hooks=engine,
            private=(spec.outdir,), notify=channel.notify, drawn=drawn,
            world_ns=rank_clock.world_time_ns if rank_clock.current() else None,
            turn=_turns(channel, spec.target), code=_code_every_host_has(spec), **told)

    if spec.mounts is not None and spec.binds is None:
        network.arm(lambda: channel.notify({"type": "networked"}))
    ctx.engine, ctx.view = enter_world(spec.faults, spec.seed, rank, ctx.host, channel.notify,
                                       life, round_, sandboxed if spec.mounts is not None else None,
                                       lambda header: channel.request(header)[0], _wait_for_others,
                                       signals)


def _code_every_host_has(spec: WorldSpec) -> tuple[str, ...]:
    """The interpreter's installed packages, the harness and its shim: looks at them
    take no turn of the world's (``hooks.Turning``)."""
    from harness.filesystem.mounts import installed_code

    return (*installed_code(), os.path.dirname(os.path.abspath(refs.__file__)),
            spec.shim_root)


def _wait_for_others(doing: dict[str, str], at_least_ms: int) -> None:
    clock = rank_clock.current()
    if clock is None:
        time.sleep(at_least_ms / 1000)
    else:
        clock.wait_for_others(doing, at_least_ms * 1_000_000)


# -- running a target ---------------------------------------------------------

def resolve_target(target: str, kind: str = "target") -> Callable[..., Any]:
    """``pkg.module:function`` or ``path/to/file.py:function`` -> the function (or class).

    A file already loaded (a checker living beside the target) is not run twice:
    its classes must be the ones the target used.
    """
    ref = refs.parse(target, kind)
    module_part, attr = ref.module, ref.attr
    from harness.rank.channel import TARGET_MODULES

    if ref.is_file:
        path = os.path.abspath(module_part)
        mod_name = ref.module_name
        TARGET_MODULES.add(mod_name)
        module = sys.modules.get(mod_name)
        if module is None or os.path.abspath(getattr(module, "__file__", None) or "") != path:
            if not _code_exists(path):
                raise blame_target(FileNotFoundError(f"{kind} {target!r}: no such file {path}"))
            sys.path.insert(0, os.path.dirname(path))
            spec = importlib.util.spec_from_file_location(  # its code: the fork server's
                mod_name, path, loader=warm.HeldCodeLoader(mod_name, path))
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            spec.loader.exec_module(module)
    else:
        TARGET_MODULES.add(module_part)
        module = importlib.import_module(module_part)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise blame_target(AttributeError(
                f"{kind} {target!r}: {module_part} has no attribute {attr!r}")) from None
    if not callable(obj):
        raise blame_target(TypeError(f"{kind} {target!r} is not callable"))
    return obj


def _code_exists(path: str) -> bool:
    """Code is loaded from the machine, like installed code: ask the OS, not the view."""
    import posix
    try:
        posix.stat(path)
        return True
    except OSError:
        return False


def describe_exception(exc: BaseException) -> dict[str, Any]:
    cls = type(exc)
    info = {
        "type": cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}",
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(cls, exc, exc.__traceback__)),
    }
    try:
        info["pickled"] = pickle.dumps(exc)
    except Exception:  # noqa: BLE001 - an unpicklable exception is still reported by text
        pass
    return info


def report_and_exit(ctx: RankContext, fn: Callable[[], Any]) -> None:
    """Run ``fn`` as a real program's main would, report, and end the process."""
    result, code = run_reporting(fn, ctx.spec.checker)
    _finish(ctx, result, code)


def run_reporting(fn: Callable[[], Any], checker: Any = None) -> tuple[dict[str, Any], int]:
    """Run ``fn`` as a program's main: the result message (its value or its exception, and
    what ``checker`` refuses in the value, judged here in the rank) and the exit code."""
    code = 0
    try:
        value = fn()
        result: dict[str, Any] = {"type": "result", "ok": True, "value_repr": _short_repr(value)}
        if checker is not None:  # the user's checker runs here, never in the harness
            from harness.rank.validator import problem

            result["invalid"] = problem(checker, value)
        try:  # as the harness can read it without the target's code (harness.rank.values)
            result["value"], result["value_note"] = values.encode(value)
            too_large = values.limit_problem(len(result["value"]))
            if too_large is not None:
                raise values.ValueTooLarge(too_large)
        except values.ValueTooLarge as exc:  # the rank's ERROR: never sent, never read
            result = {"type": "result", "ok": False, "error": {
                "type": "ValueTooLarge", "message": str(exc), "traceback": ""}}
        except Exception as exc:  # noqa: BLE001
            result["pickle_error"] = f"{type(exc).__name__}: {exc}"
    except SystemExit as exc:
        # sys.exit(True), as unittest.main() ends after a failure, is status 1: a bool is
        # an int to Python, never to the protocol
        code = int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == 0:
            result = {"type": "result", "ok": True, "value": pickle.dumps(None), "exit_code": 0}
        else:
            if not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
            result = {"type": "result", "ok": False, "error": describe_exception(exc),
                      "exit_code": code}
    except BaseException as exc:  # noqa: BLE001 - the target's failure is the product
        code = 1
        error = describe_exception(exc)
        if harness_own(exc):  # never the target's ERROR: the run says it is a bug (exit 3)
            error["by"] = "harness"
        print(error["traceback"], file=sys.stderr, end="")  # traceback.print_exc(), formatted once
        result = {"type": "result", "ok": False, "error": error}
    return result, code


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001
        text = f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= 500 else text[:497] + "..."


def _finish(ctx: RankContext, result: dict[str, Any], code: int) -> None:
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if ctx.spec.record_files:
        _recorded(ctx, result)
    if ctx.channel is not None:
        try:
            ctx.channel.notify(*result_frame(result))
        except OSError:
            pass
    if ctx.result_fd is not None:
        brief = {k: v for k, v in result.items() if k not in ("value", "value_repr")}
        try:
            os.write(ctx.result_fd, pickle.dumps(brief))
        except OSError:
            pass
    os._exit(code)  # the fallback timer's thread ends with the process: no cancel to wait on


def _recorded(ctx: RankContext, result: dict[str, Any]) -> None:
    """``record_files``: the repeats the view still holds, and what the rank imported."""
    flush = getattr(ctx.view, "flush_repeats", None)
    if flush is not None:
        try:
            flush()
        except OSError:
            pass
    try:
        names = imported.learned((ctx.spec.shim_root, ctx.spec.outdir))
        own = _target_module(ctx.spec.target)  # never preloaded: it may import torch_xla
        result["imported"] = [n for n in names if n != own]
    except Exception:  # noqa: BLE001 - a diagnosis aid: never the rank's fate
        traceback.print_exc()


def _target_module(target: str | None) -> str | None:
    return refs.parse(target).module_name if refs.module_of(target) else None


def result_frame(result: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The result message: its pickled value (or exception) travels as the payload."""
    header = {k: v for k, v in result.items() if k != "value"}
    payload = result.get("value", b"")
    if "error" in result:
        header["error"] = {k: v for k, v in result["error"].items() if k != "pickled"}
        payload = result["error"].get("pickled", b"")
    return header, payload


def run_unit(spec: WorldSpec, role: str, ident: int, life: int = 0, start_ns: int = 0) -> None:
    """Entry point of a forked unit process; never returns."""
    try:
        die_with_parent()
        os.setpgid(0, 0)
        if role == "rank":
            ctx = become_rank(spec, ident, life, start_ns=start_ns)
            target = spec.target
            assert target is not None
            args = spec.args_of(ident)
            report_and_exit(ctx, lambda: call_target(resolve_target(target), *args,
                                                         **spec.kwargs))
        else:
            ctx = become_host(spec, ident)
            report_and_exit(ctx, lambda: run_script(spec.argv or ()))
    except BaseException:  # noqa: BLE001 - the harness's own failure inside a unit
        say_failed(spec.outdir, unit_name(role, ident))
        os._exit(UNIT_FAILED)


def run_script(argv: tuple[str, ...]) -> None:
    """Run ``python ARGV...`` in this process, as the interpreter would (``torchrun ...``:
    the one worker torchrun would start on this host, ``rank/torchrun.py``)."""
    import runpy

    from harness.rank import torchrun

    args = list(argv)
    if torchrun.is_torchrun(args):
        ctx = runtime.current()
        topology = ctx.spec.topology
        launch = torchrun.parse(args)
        torchrun.check(launch, topology.hosts, topology.ranks_per_host)
        args, env = torchrun.worker(launch, ctx.host,
                                    [topology.hostname(h) for h in range(topology.hosts)])
        os.environ.update(env)
    if args and args[0] == "-m":
        if len(args) < 2:
            raise SystemExit("harness exec: -m needs a module name")
        sys.argv = [args[1]] + args[2:]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args:
        path = os.path.abspath(args[0])
        sys.argv = [args[0]] + args[1:]
        sys.path.insert(0, os.path.dirname(path))
        runpy.run_path(path, run_name="__main__")
    else:
        raise SystemExit("harness exec: nothing to run")
