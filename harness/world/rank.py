"""Inside a rank process: become rank r of a world, run the target, report.

Everything here runs in the forked child, after the fork server's warm
imports. It sets the environment a TPU VM would give this rank, points
stdout/stderr at the world's capture files, puts the shim first on
``sys.path``, connects to the coordinator, runs the target and sends back its
return value or exception. The shim finds the world through ``current()``.
"""

from __future__ import annotations

import atexit
import faulthandler
import importlib
import importlib.util
import os
import pickle
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.world import wire
from harness.world.spec import WorldSpec

_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class RankContext:
    """What the shim needs to know about the process it runs in."""

    spec: WorldSpec
    role: str  # "rank" or "host" (an exec-mode launcher before xmp.spawn)
    rank: int | None
    host: int
    channel: Channel | None
    engine: Any = None  # the fault engine, when the world has a sandbox
    runtime_used: bool = False
    result_fd: int | None = None  # exec mode: the launcher that forked us reads our fate here

    @property
    def world_size(self) -> int:
        return self.spec.topology.world_size

    @property
    def local_rank(self) -> int:
        return 0 if self.rank is None else self.spec.topology.local_rank(self.rank)


_context: RankContext | None = None


def current() -> RankContext:
    if _context is None:
        raise RuntimeError(
            "the harness torch_xla shim was imported outside a harness world; "
            "run the code with `harness exec` or `harness.run_world`")
    return _context


class CollectiveError(Exception):
    """Raised in a rank when the coordinator refuses a collective."""


class Channel:
    """The rank's two connections to the coordinator.

    ``call`` carries collectives and results, always on the calling thread;
    ``control`` is served by a daemon thread so the watchdog can ask for the
    Python stacks of a rank whose main thread is blocked anywhere.
    """

    def __init__(self, address: str, role: str, ident: int) -> None:
        self._lock = threading.Lock()  # one request (send + its reply) at a time
        self._send_lock = threading.Lock()  # one frame at a time on the wire
        self.call = wire.connect(address)
        wire.send_frame(self.call, {"type": "hello", "role": role, "id": ident,
                                    "pid": os.getpid(), "channel": "call"})
        self.control = wire.connect(address)
        wire.send_frame(self.control, {"type": "hello", "role": role, "id": ident,
                                       "pid": os.getpid(), "channel": "control"})
        thread = threading.Thread(target=self._serve_control, name="harness-control", daemon=True)
        thread.start()

    def request(self, header: dict, payload: bytes | memoryview = b"") -> tuple[dict, bytearray]:
        with self._lock:
            with self._send_lock:
                wire.send_frame(self.call, header, payload)
            reply, data = wire.recv_frame(self.call)
        if "error" in reply:
            exc_type = {"TypeError": TypeError, "ValueError": ValueError,
                        "RuntimeError": RuntimeError}.get(reply["error"], CollectiveError)
            raise exc_type(reply["message"])
        return reply, data

    def notify(self, header: dict, payload: bytes = b"") -> None:
        """A one-way message (no reply), safe from any thread, even mid-request."""
        with self._send_lock:
            wire.send_frame(self.call, header, payload)

    def _serve_control(self) -> None:
        try:
            while True:
                header, _ = wire.recv_frame(self.control)
                if header.get("type") == "stacks":
                    wire.send_frame(self.control, {"type": "stacks", "stacks": format_stacks()})
        except (OSError, EOFError):
            return

    def close(self, shutdown: bool = True) -> None:
        """Close; a forked child passes ``shutdown=False`` so its parent's link survives."""
        for sock in (self.call, self.control):
            if shutdown:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            sock.close()


def format_stacks() -> str:
    """Every thread's Python stack, the harness's own frames left out."""
    frames = sys._current_frames()
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    out = []
    for ident, frame in frames.items():
        if ident == me:
            continue
        stack = [f for f in traceback.extract_stack(frame) if not _is_harness_frame(f.filename)]
        if not stack:
            continue
        out.append(f"Thread {names.get(ident, ident)}:\n" + "".join(traceback.format_list(stack)))
    return "\n".join(out)


# The machinery whose frames a user never needs to see. The reference targets
# (harness/workloads) are code under test: their frames stay.
_MACHINERY = tuple(os.path.join(_HARNESS_DIR, d) + os.sep
                   for d in ("world", "filesystem", "faults", "_shims")) + (
    os.path.join(os.path.dirname(_HARNESS_DIR), "shims") + os.sep,)


def _is_harness_frame(filename: str) -> bool:
    """The harness's and the shim's own frames, and the fork server's ``-c``."""
    return filename.startswith(_MACHINERY) or filename == "<string>"


# -- becoming a rank --------------------------------------------------------

_libc = None


def _prctl(option: int, arg: int) -> None:
    global _libc
    if sys.platform != "linux":
        return
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
    _libc.prctl(option, arg, 0, 0, 0)


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def die_with_parent() -> None:
    """SIGKILL this process when its parent goes away, whatever happens."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def become_subreaper() -> None:
    """Adopt every orphaned descendant, so none can escape the world."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def after_fork() -> None:
    """Forget what the parent registered: its atexit hooks, its signal handlers."""
    atexit._clear()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass


def output_paths(spec: WorldSpec, name: str) -> tuple[str, str]:
    return (os.path.join(spec.outdir, f"{name}.stdout"),
            os.path.join(spec.outdir, f"{name}.stderr"))


def _redirect_output(spec: WorldSpec, name: str, life: int = 0) -> None:
    """Point fds 1 and 2 at the capture files; a restarted rank appends to its own."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if life else os.O_TRUNC)
    for fd, path in zip((1, 2), output_paths(spec, name)):
        target = os.open(path, flags, 0o644)
        if life:
            os.write(target, f"--- restarted after pre-emption (life {life}) ---\n".encode())
        os.dup2(target, fd)
        os.close(target)


def _enter_environment(spec: WorldSpec, env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(spec.base_env)
    os.environ.update(env)
    os.environ["HARNESS_PROFILE"] = spec.profile
    os.environ["HARNESS_WORLD_ID"] = spec.world_id
    import posix
    posix.chdir(spec.cwd)  # the real one: a launcher forking us may have a view installed
    if spec.shim_root not in sys.path[:1]:
        sys.path.insert(0, spec.shim_root)
    # A target's earlier import of torch_xla (never expected, but cheap to rule out).
    for name in [m for m in sys.modules if m == "torch_xla" or m.startswith("torch_xla.")]:
        del sys.modules[name]


_fallback_fd: int | None = None


def _arm_fallback_stacks(spec: WorldSpec, name: str) -> None:
    # A C-level thread that dumps every stack at the deadline even if the rank
    # holds the GIL or blocks every signal; used when the control thread is mute.
    global _fallback_fd
    path = os.path.join(spec.outdir, f"{name}.faulthandler")
    _fallback_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    _rearm_fallback(spec)


def _rearm_fallback(spec: WorldSpec) -> None:
    delay = max(spec.deadline - time.time() - 0.05, 0.01)
    faulthandler.dump_traceback_later(delay, exit=False, file=_fallback_fd)


def fork() -> int:
    """``os.fork`` for a process that may hold the fallback timer.

    faulthandler's timer thread does not survive a fork, and re-arming it in
    the child would wait forever on that thread: disarm around the fork.
    """
    faulthandler.cancel_dump_traceback_later()
    pid = os.fork()
    if pid != 0 and _context is not None and _fallback_fd is not None:
        _rearm_fallback(_context.spec)
    return pid


def become_rank(spec: WorldSpec, rank: int, life: int = 0) -> RankContext:
    """Turn this freshly forked process into ``rank`` of ``spec``'s world."""
    global _context
    topology = spec.topology
    name = f"rank-{rank}"
    _redirect_output(spec, name, life)
    _enter_environment(spec, {**topology.rank_environment(rank, spec.profile),
                              "HARNESS_LIFE": str(life)})
    if _context is not None and _context.channel is not None:
        _context.channel.close(shutdown=False)  # inherited from a launcher that forked us
    channel = Channel(spec.address, "rank", rank)
    _context = RankContext(spec, "rank", rank, topology.host_of(rank), channel)
    _arm_fallback_stacks(spec, name)
    _enter_world(_context, rank, life)
    return _context


def become_host(spec: WorldSpec, host: int) -> RankContext:
    """Exec mode: this process is the per-host launcher that runs the script."""
    global _context
    name = f"host-{host}"
    _redirect_output(spec, name)
    _enter_environment(spec, spec.topology.host_environment(host, spec.profile))
    channel = Channel(spec.address, "host", host)
    _context = RankContext(spec, "host", None, host, channel)
    _arm_fallback_stacks(spec, name)
    _enter_world(_context, spec.topology.ranks_of_host(host)[0])
    return _context


def _enter_world(ctx: RankContext, rank: int, life: int = 0) -> None:
    """The sandboxed filesystem, the fault engine and the seeded generators."""
    from harness.faults.engine import FaultEngine

    spec = ctx.spec
    assert ctx.channel is not None
    engine = FaultEngine(spec.faults, rank, ctx.host, ctx.channel.notify, life)
    ctx.engine = engine
    for fault in engine.faults:
        if fault.kind == "env-skew":  # this host composes its config from other values
            extra = {str(k): str(v) for k, v in fault.params["env"].items()}
            os.environ.update(extra)
            engine.report(fault, "start", None,
                          message=f"host {ctx.host} sets " + ", ".join(
                              f"{k}={v}" for k, v in sorted(extra.items())))
    if spec.mounts is not None:
        from harness.filesystem import patch
        from harness.filesystem.view import View

        view = View(spec.mounts, spec.sandbox, rank, ctx.host, spec.cwd, spec.home,
                    hooks=engine, private=(spec.outdir,), notify=ctx.channel.notify)
        patch.install(view)
    seed = spec.seed
    if any(f.kind == "divergent-rng" for f in engine.faults):
        seed = (spec.seed * 1_000_003 + 7919 * (rank + 1)) % (2**32)
        engine.report(next(f for f in engine.faults if f.kind == "divergent-rng"), "start", None,
                      message=f"rank {rank} seeds its generators with {seed}")
    seed_generators(seed)
    engine.on_start()


def seed_generators(seed: int) -> None:
    """random, numpy and torch seeded alike on every rank, as a fork would leave them.

    Real ranks of one launcher share the launcher's state only by luck; the
    harness makes it a fact so that the same seed gives the same run, and
    leaves divergence to the ``divergent-rng`` fault.
    """
    import random

    from harness.imports import when_imported

    random.seed(seed)
    when_imported("numpy", lambda np: np.random.seed(seed))
    when_imported("torch", lambda torch: torch.manual_seed(seed))


def guarded() -> bool:
    """Could anything in this process act while this thread blocks in a collective?

    True unless the call is on the main thread, no other Python thread of the
    target runs and no timer (``signal.alarm``/``setitimer``) is armed: only
    then can a world whose ranks are all blocked be proven deadlocked early.
    """
    me = threading.current_thread()
    if me is not threading.main_thread():
        return True
    if any(t is not me and not t.name.startswith("harness-") for t in threading.enumerate()):
        return True
    return signal.getitimer(signal.ITIMER_REAL)[0] > 0


def before_collective(op: str, tag: str | None) -> None:
    """The shim calls this on entering every collective (the fault plan's hook)."""
    ctx = _context
    if ctx is not None and ctx.engine is not None:
        ctx.engine.before_collective(op, tag)


def promote_host_to_rank() -> RankContext:
    """A launcher that uses the runtime without xmp.spawn is the host's only rank."""
    ctx = current()
    topology = ctx.spec.topology
    if topology.ranks_per_host != 1:
        raise RuntimeError(
            f"harness exec: this script uses the XLA runtime without xmp.spawn on a host "
            f"of {topology.ranks_per_host} ranks; call xmp.spawn(fn) as PJRT code does, "
            f"or run on a topology with one rank per host (e.g. {topology.hosts}x1)")
    rank = ctx.host
    os.environ.update(topology.rank_environment(rank, ctx.spec.profile))
    assert ctx.channel is not None
    ctx.channel.notify({"type": "promote", "rank": rank})
    ctx.role, ctx.rank = "rank", rank
    return ctx


# -- running a target ---------------------------------------------------------

def resolve_target(target: str) -> Callable[..., Any]:
    """``pkg.module:function`` or ``path/to/file.py:function`` -> the function."""
    module_part, sep, attr = target.rpartition(":")
    if not sep or not module_part or not attr:
        raise ValueError(f"target {target!r}: expected 'module.path:function' or 'file.py:function'")
    if module_part.endswith(".py") or os.sep in module_part:
        path = os.path.abspath(module_part)
        if not _code_exists(path):
            raise FileNotFoundError(f"target {target!r}: no such file {path}")
        mod_name = os.path.splitext(os.path.basename(path))[0]
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(mod_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_part)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(f"target {target!r}: {module_part} has no attribute {attr!r}") from None
    if not callable(obj):
        raise TypeError(f"target {target!r} is not callable")
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
    code = 0
    try:
        value = fn()
        result: dict[str, Any] = {"type": "result", "ok": True, "value_repr": _short_repr(value)}
        try:
            result["value"] = pickle.dumps(value)
        except Exception as exc:  # noqa: BLE001
            result["pickle_error"] = f"{type(exc).__name__}: {exc}"
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == 0:
            result = {"type": "result", "ok": True, "value": pickle.dumps(None), "exit_code": 0}
        else:
            if not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
            result = {"type": "result", "ok": False, "error": describe_exception(exc),
                      "exit_code": code}
    except BaseException as exc:  # noqa: BLE001 - the target's failure is the product
        code = 1
        traceback.print_exc()
        result = {"type": "result", "ok": False, "error": describe_exception(exc)}
    _finish(ctx, result, code)


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
    if ctx.channel is not None:
        try:
            ctx.channel.notify(result)
        except OSError:
            pass
    if ctx.result_fd is not None:
        brief = {k: v for k, v in result.items() if k not in ("value", "value_repr")}
        try:
            os.write(ctx.result_fd, pickle.dumps(brief))
        except OSError:
            pass
    faulthandler.cancel_dump_traceback_later()
    os._exit(code)


def run_unit(spec: WorldSpec, role: str, ident: int, life: int = 0) -> None:
    """Entry point of a forked unit process; never returns."""
    try:
        die_with_parent()
        os.setpgid(0, 0)
        if role == "rank":
            ctx = become_rank(spec, ident, life)
            target = spec.target
            assert target is not None
            report_and_exit(ctx, lambda: resolve_target(target)(*spec.args, **spec.kwargs))
        else:
            ctx = become_host(spec, ident)
            report_and_exit(ctx, lambda: run_script(spec.argv or ()))
    except BaseException:  # noqa: BLE001 - the harness's own failure inside a unit
        traceback.print_exc()
        os._exit(70)


def run_script(argv: tuple[str, ...]) -> None:
    """Run ``python ARGV...`` in this process, as the interpreter would."""
    import runpy

    args = list(argv)
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
