"""The harness side of the fork server: one warm server per harness process,
started on first use and shared by every world after it. A world that needs
modules the server has not imported yet has it import them first (outside the
world's time): a run of many targets starts one server, not one per target."""

from __future__ import annotations

import ast
import atexit
import importlib.machinery
import importlib.util
import logging
import os
import pickle
import socket
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from harness import refs, source
from harness.rank import sweep, wire
from harness.world import reaper

if TYPE_CHECKING:  # the spec's models (pydantic) would delay the server's start
    from harness.rank.spec import WorldSpec

log = logging.getLogger(__name__)

_HARNESS_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ForkServer:
    """A fork server process, started at once; its first use waits until it has imported
    its preloads (seconds: torch alone takes 2.5 s here), so the harness's own start-up
    goes on meanwhile (``start``). ``more``: it imports ``preload`` and then waits for the
    rest (``add``), which the harness knows only once it has read its targets."""

    def __init__(self, preload: tuple[str, ...], more: bool = False) -> None:
        self.preload = preload
        self.modules = set(preload)  # asked for so far (a module that failed to import too)
        self.awaiting = more
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env[sweep.SLOT_KEY] = sweep.EMPTY_SLOT  # each world's leader writes its id here
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_HARNESS_PARENT, env.get("PYTHONPATH", "")) if p)
        # Huge pages for the heap make each fork() copy far fewer page-table entries.
        env.setdefault("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from harness.rank.forkserver import main; main()",
             str(theirs.fileno()), *preload, *([wire.MORE_PRELOADS] if more else [])],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env, close_fds=True)
        theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.ready = False

    def add(self, modules: Iterable[str]) -> None:
        """The rest of a server's first preloads (``more``), sent without waiting; nothing
        once they were sent (``ensure`` imports what comes later)."""
        with self.lock:
            self._rest(modules)

    def _rest(self, modules: Iterable[str]) -> None:
        if self.awaiting:  # (under ``lock``)
            missing = sorted(set(modules) - self.modules)
            wire.send_frame(self.sock, {"type": "preload", "modules": missing})
            self.modules.update(missing)
            self.awaiting = False

    def _wait_ready(self) -> None:
        """Until the preloads are imported (under ``lock``): a world's deadline starts after."""
        if self.ready:
            return
        self._rest(())  # nobody said more: the server imports nothing else first
        self.sock.settimeout(300)
        header, _ = wire.recv_frame(self.sock)
        if header.get("type") != "ready":
            raise RuntimeError(f"fork server did not start: {header}")
        self.ready = True

    def alive(self) -> bool:
        return self.process.poll() is None

    def ensure(self, preload: tuple[str, ...]) -> None:
        """Have the server import what ``preload`` adds, before it forks the next world."""
        if self.ready and set(preload) <= self.modules:
            return
        with self.lock:
            self._rest(preload)  # the first world's modules are the rest of a begun server's
            self._wait_ready()
            missing = sorted(set(preload) - self.modules)
            if not missing:
                return
            self.sock.settimeout(300)
            wire.send_frame(self.sock, {"type": "preload", "modules": missing})
            header, _ = wire.recv_frame(self.sock)
            if header.get("type") != "ready":
                raise RuntimeError(f"fork server did not preload {missing}: {header}")
            self.modules.update(missing)

    def fork_world(self, spec: WorldSpec) -> int:
        """Ask for a leader for ``spec``; returns the leader's pid."""
        with self.lock:
            self._wait_ready()
            self.sock.settimeout(60)
            wire.send_frame(self.sock, {"type": "world", "target": spec.target, "cwd": spec.cwd},
                            pickle.dumps(spec))
            header, _ = wire.recv_frame(self.sock)
        return int(header["pid"])

    def close(self) -> None:
        if not self.ready:
            self.process.kill()  # still importing its preloads: nothing of a world's is there
        try:
            self.sock.close()
        finally:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_servers: list[ForkServer] = []  # the live one last; one a target killed stays to be closed
_servers_lock = threading.Lock()


def fork_server(preload: tuple[str, ...]) -> ForkServer:
    """The warm server, having imported ``preload``: started on first use, or again with
    everything its predecessor had imported if a target killed it."""
    server = _server(preload)
    server.ensure(preload)
    return server


def begin() -> None:
    """Start the fork server now, before the harness knows its targets, importing what every
    world of a PyTorch/XLA harness imports (torch: seconds), then waiting for the rest
    (``start``). Nothing if one is running."""
    _server(FIRST, more=True)


def start(modules: Iterable[str]) -> None:
    """Start the fork server now with ``modules`` (every target's of a run), without waiting
    for it: the first world waits, by then for less; a server ``begin`` started imports
    them next. Nothing else if one is running."""
    modules = tuple(sorted(set(modules)))
    _server(modules).add(modules)


def _first() -> tuple[str, ...]:
    try:
        return ("torch",) if importlib.util.find_spec("torch") is not None else ()
    except (ImportError, ValueError):
        return ()


#: What a server ``begin`` starts imports first: torch, which a rank's ``import torch_xla``
#: imports (on a pod too) and takes most of a server's start.
FIRST = _first()


def _server(preload: tuple[str, ...], more: bool = False) -> ForkServer:
    # First the run's token and its reaper: the server's environment, as it starts, marks
    # it and everything forked under it (a rank's daemons too) as this run's, for the
    # reaper to end whatever the harness leaves when it is killed.
    reaper.ensure()
    with _servers_lock:
        server = _servers[-1] if _servers else None
        if server is None or not server.alive():
            had = server.modules if server is not None else set()
            server = ForkServer(tuple(sorted(set(preload) | had)), more)
            _servers.append(server)
    return server


@atexit.register
def shutdown() -> None:
    """Stop every fork server (each takes its leaders and ranks with it)."""
    with _servers_lock:
        servers = list(_servers)
        _servers.clear()
    for server in servers:
        server.close()


# -- what to preload ------------------------------------------------------------

_INSTALLED_ROOTS = tuple(
    os.path.realpath(p) for p in {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})


def _is_installed(name: str) -> bool:
    """True for stdlib and site-packages modules: safe to import ahead of the sandbox."""
    if name in sys.builtin_module_names:
        return False
    try:
        spec = importlib.machinery.PathFinder.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    origin = spec.origin or (list(spec.submodule_search_locations or [""])[0])
    if not origin or origin in ("built-in", "frozen"):
        return False
    return os.path.realpath(origin).startswith(_INSTALLED_ROOTS)


def imports_of(path: str) -> set[str]:
    """The modules a Python file imports (absolute imports, full dotted names)."""
    try:
        tree = source.parse(path)
    except (OSError, SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def preload_for(target: str | None, argv: tuple[str, ...] | None, cwd: str) -> tuple[str, ...]:
    """The installed modules the target's own source imports.

    Read from the source, never by importing the target: its module-level code
    must first run inside its world.
    """
    path = None
    if target:
        ref = refs.parse(target)
        path = os.path.join(cwd, ref.module) if ref.is_file else \
            source.module_file(ref.module, [cwd, *sys.path])
    elif argv:
        if argv[0] == "-m" and len(argv) > 1:
            path = source.module_file(argv[1], [cwd, *sys.path])
        else:
            path = os.path.join(cwd, argv[0])
    if not path:
        return ()
    skip = {"torch_xla", "harness", "__future__"}
    names = imports_of(path)
    modules = set()
    for name in names:
        top = name.split(".")[0]
        if top in skip or top in sys.stdlib_module_names:
            continue  # the standard library is cheap to import; keep server keys few
        if _is_installed(top):
            modules.add(name)
    # The harness's own modules a target imports have no side effects, unless they reach
    # torch_xla (a reference target's module, imported by a user's wrapper of it): imported in
    # the fork server, where the shim is not on the path, it would be left without it for
    # every later world (a reference target itself is never preloaded either).
    modules |= {n for n in names if n.startswith("harness.") and not _reaches_torch_xla(n)}
    return tuple(sorted(modules))


def _reaches_torch_xla(module: str, seen: set[str] | None = None) -> bool:
    """Does the harness module ``module``, or a harness module it imports, import torch_xla?"""
    seen = set() if seen is None else seen
    if module in seen:
        return False
    seen.add(module)
    path = source.module_file(module, [_HARNESS_PARENT])
    if path is None:
        return False
    names = imports_of(path)
    return any(n.split(".")[0] == "torch_xla" for n in names) or any(
        _reaches_torch_xla(n, seen) for n in names if n.startswith("harness."))
