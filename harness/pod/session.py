"""One SSH client per worker: connect to all at once, run a command on each, move files.

One connection per worker (never ``gcloud ... --worker=all``, which hides which
worker failed): every failure is a ``WorkerFailure`` naming the worker and what
happened, in words a person can act on. The asyncio loop runs in a thread of
its own so the runner, which is synchronous, can call in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from harness.pod.workers import Worker

log = logging.getLogger(__name__)
T = TypeVar("T")

#: What a line of a worker's output is handed to: (worker, stream name, line).
OnLine = Callable[[Worker, str, str], None]


class WorkerFailure(Exception):
    """A worker the pod run could not use: unreachable, key refused, stopped answering."""

    def __init__(self, worker: Worker, what: str) -> None:
        super().__init__(f"{worker.name}: {what}")
        self.worker, self.what = worker, what


@dataclass(frozen=True)
class Finished:
    """How a command ended on a worker."""

    worker: Worker
    exit_status: int | None
    signal: str | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def describe(self) -> str:
        if self.signal:
            return f"killed by SIG{self.signal}"
        return f"exited with code {self.exit_status}"


@dataclass(frozen=True)
class SshOptions:
    """How to reach every worker."""

    key: str | None = None  # a private key file; None: the agent and ~/.ssh's defaults
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts
    connect_timeout: float = 30.0
    # a worker that stops answering is declared lost after interval x count seconds
    keepalive_interval: float = 10.0
    keepalive_count: int = 3
    check_host_keys: bool = True  # False: trust whatever key a worker shows (new TPU VMs)


def explain(exc: BaseException) -> str:
    """An SSH or socket error as the one line a person reads."""
    import asyncssh

    if isinstance(exc, asyncssh.PermissionDenied):
        return "the SSH key was refused (permission denied)"
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return f"its host key is not trusted ({exc.reason}); add it to known_hosts"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens on its SSH port)"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "did not answer in time (connect timeout)"
    if isinstance(exc, asyncssh.ConnectionLost):
        return f"stopped answering (the SSH connection was lost: {exc.reason})"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected: {exc.reason}"
    if isinstance(exc, OSError):
        return f"cannot connect: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


class PodSession:
    """Connections to every worker, and the loop that drives them."""

    def __init__(self, workers: list[Worker], options: SshOptions | None = None) -> None:
        self.workers = workers
        self.options = options or SshOptions()
        self._conns: dict[int, Any] = {}
        self._procs: dict[int, Any] = {}  # the current run_all's commands, by worker
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="harness-pod-ssh")
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    # -- connecting ------------------------------------------------------------
    def connect(self) -> list[WorkerFailure]:
        """Connect to every worker at once; the failures, in worker order (none: all up)."""
        return self._call(self._connect_all())

    async def _connect_all(self) -> list[WorkerFailure]:
        results = await asyncio.gather(*(self._connect(w) for w in self.workers),
                                       return_exceptions=True)
        failures = []
        for w, r in zip(self.workers, results):
            if isinstance(r, BaseException):
                failures.append(r if isinstance(r, WorkerFailure) else WorkerFailure(w, explain(r)))
            else:
                self._conns[w.index] = r
        return failures

    async def _connect(self, w: Worker) -> Any:
        import asyncssh

        o = self.options
        kwargs: dict[str, Any] = {"username": w.user, "connect_timeout": o.connect_timeout,
                                  "keepalive_interval": o.keepalive_interval,
                                  "keepalive_count_max": o.keepalive_count}
        if o.key is not None:
            kwargs["client_keys"] = [o.key]
            kwargs["agent_path"] = None
        if not o.check_host_keys:
            kwargs["known_hosts"] = None
        elif o.known_hosts is not None:
            kwargs["known_hosts"] = o.known_hosts
        try:
            return await asyncio.wait_for(asyncssh.connect(w.host, w.port, **kwargs),
                                          timeout=o.connect_timeout + 5)
        except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
            raise WorkerFailure(w, explain(exc)) from None

    def connected(self, index: int) -> bool:
        return index in self._conns

    # -- commands ----------------------------------------------------------------
    def run(self, worker: Worker, command: str, timeout: float | None = None,
            on_line: OnLine | None = None, stdin: bytes | None = None) -> Finished:
        """Run ``command`` on one worker; WorkerFailure if the worker is lost meanwhile."""
        return self._call(self._run(worker, command, timeout, on_line, stdin))

    def run_all(self, command: Callable[[Worker], str], timeout: float | None = None,
                on_line: OnLine | None = None, stop: Callable[[Worker], str] | None = None,
                gate: str | None = None) -> dict[int, Finished | WorkerFailure]:
        """The same kind of command on every worker at once. When one worker is lost,
        ``stop(worker)`` runs on every other worker still running (a partial run is never
        left going) and their commands are waited for.

        ``gate``: each command prints this line when it is ready and then waits for a
        line on its stdin; every command gets ``go`` once all have printed it, so that
        what they start, they start together (not as each host finishes its imports)."""
        return self._call(self._run_all(command, timeout, on_line, stop, gate))

    async def _run_all(self, command: Callable[[Worker], str], timeout: float | None,
                       on_line: OnLine | None, stop: Callable[[Worker], str] | None,
                       gate: str | None = None) -> dict[int, Finished | WorkerFailure]:
        procs: dict[int, Any] = {}
        if gate is not None:
            self._procs = procs  # the commands a Ctrl-C's end_inputs releases
        ready: set[int] = set()

        def seen(w: Worker, stream: str, line: str) -> None:
            if gate is not None and stream == "stdout" and line == gate:
                ready.add(w.index)
                if len(ready) == len(self.workers):
                    for proc in procs.values():
                        with contextlib.suppress(Exception):
                            proc.stdin.write("go\n")
                            proc.stdin.write_eof()
                return
            if on_line is not None:
                on_line(w, stream, line)

        tasks = {w.index: asyncio.ensure_future(self._run(
                     w, command(w), timeout, seen, keep_stdin=gate is not None,
                     started=lambda p, i=w.index: procs.__setitem__(i, p)))
                 for w in self.workers}
        out: dict[int, Finished | WorkerFailure] = {}
        stopping = False
        pending = set(tasks.values())
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                index = next(i for i, t in tasks.items() if t is task)
                exc = task.exception()
                out[index] = exc if isinstance(exc, WorkerFailure) else (
                    WorkerFailure(self.workers[index], explain(exc)) if exc else task.result())
                if isinstance(out[index], WorkerFailure) and not stopping and stop is not None:
                    stopping = True
                    self._end_inputs(procs)  # a command still waiting at the gate goes now
                    others = [self.workers[i] for i, t in tasks.items() if t in pending]
                    await asyncio.gather(*(self._run(w, stop(w), 30.0, None) for w in others),
                                         return_exceptions=True)
        return out

    def end_inputs(self) -> None:
        """Close the stdin of every command of the current ``run_all`` (one waiting at the
        gate then ends without starting anything), from any thread."""
        self._loop.call_soon_threadsafe(self._end_inputs)

    def _end_inputs(self, procs: dict[int, Any] | None = None) -> None:
        for proc in (self._procs if procs is None else procs).values():
            with contextlib.suppress(Exception):
                proc.stdin.write_eof()

    async def _run(self, w: Worker, command: str, timeout: float | None, on_line: OnLine | None,
                   stdin: bytes | None = None, keep_stdin: bool = False,
                   started: Callable[[Any], None] | None = None) -> Finished:
        import asyncssh

        conn = self._conns.get(w.index)
        if conn is None:
            raise WorkerFailure(w, "not connected")
        try:
            proc = await conn.create_process(command, encoding="utf-8", errors="replace")
        except (OSError, asyncssh.Error) as exc:
            raise WorkerFailure(w, explain(exc)) from None
        out: dict[str, list[str]] = {"stdout": [], "stderr": []}

        async def pump(name: str, stream: Any) -> None:
            async for line in stream:
                if not line:
                    continue
                out[name].append(line)
                if on_line is not None:
                    on_line(w, name, line.rstrip("\n"))

        if started is not None:
            started(proc)
        try:
            if stdin is not None:
                proc.stdin.write(stdin.decode())
            if not keep_stdin:
                proc.stdin.write_eof()
            pumps = asyncio.gather(pump("stdout", proc.stdout), pump("stderr", proc.stderr))
            await asyncio.wait_for(asyncio.shield(pumps), timeout)
            await proc.wait_closed()
        except asyncio.TimeoutError:
            proc.close()
            raise WorkerFailure(w, f"the command did not end within {timeout:g} s: {command[:80]}")\
                from None
        except (OSError, asyncssh.Error) as exc:
            self._conns.pop(w.index, None)
            raise WorkerFailure(w, explain(exc)) from None
        if proc.exit_status is None and proc.exit_signal is None:
            # the channel closed with no exit status: the connection itself went
            self._conns.pop(w.index, None)
            raise WorkerFailure(w, "stopped answering (the SSH connection closed mid-command)")
        signal = proc.exit_signal[0] if proc.exit_signal else None
        status = proc.exit_status if proc.exit_status is not None and proc.exit_status >= 0 else None
        return Finished(w, status, signal, "".join(out["stdout"]), "".join(out["stderr"]))

    # -- files -----------------------------------------------------------------
    def put(self, worker: Worker, data: bytes, remote: str) -> None:
        """Write ``data`` to ``remote`` on a worker (SFTP), atomically (a tmp name, then rename)."""
        self._call(self._put(worker, data, remote))

    async def _put(self, w: Worker, data: bytes, remote: str) -> None:
        import asyncssh

        conn = self._conns.get(w.index)
        if conn is None:
            raise WorkerFailure(w, "not connected")
        try:
            async with conn.start_sftp_client() as sftp:
                parent = remote.rsplit("/", 1)[0]
                if parent:
                    await sftp.makedirs(parent, exist_ok=True)
                tmp = remote + ".part"
                async with sftp.open(tmp, "wb") as f:
                    await f.write(data)
                await sftp.posix_rename(tmp, remote)
        except (OSError, asyncssh.Error) as exc:
            raise WorkerFailure(w, f"cannot write {remote} (SFTP): {explain(exc)}") from None

    def put_all(self, data: bytes, remote: str,
                workers: list[Worker] | None = None) -> list[WorkerFailure]:
        """``put`` on every worker at once; the workers it failed on."""
        async def each() -> list[Any]:
            return await asyncio.gather(*(self._put(w, data, remote)
                                          for w in workers or self.workers),
                                        return_exceptions=True)

        return [r if isinstance(r, WorkerFailure) else WorkerFailure(w, explain(r))
                for w, r in zip(workers or self.workers, self._call(each()))
                if isinstance(r, BaseException)]

    def get_many(self, worker: Worker, remotes: list[str]) -> dict[str, bytes | None]:
        """Several files of one worker over one SFTP session (None: not there)."""
        return self._call(self._get_many(worker, remotes))

    async def _get_many(self, w: Worker, remotes: list[str]) -> dict[str, bytes | None]:
        import asyncssh

        conn = self._conns.get(w.index)
        if conn is None:
            raise WorkerFailure(w, "not connected")
        out: dict[str, bytes | None] = {}
        try:
            async with conn.start_sftp_client() as sftp:
                for remote in remotes:
                    try:
                        async with sftp.open(remote, "rb") as f:
                            out[remote] = await f.read()
                    except asyncssh.SFTPNoSuchFile:
                        out[remote] = None
        except (OSError, asyncssh.Error) as exc:
            raise WorkerFailure(w, f"cannot read its files (SFTP): {explain(exc)}") from None
        return out

    def get(self, worker: Worker, remote: str) -> bytes | None:
        """A file of a worker (SFTP), or None if it is not there."""
        return self.get_many(worker, [remote])[remote]

    # -- the end -----------------------------------------------------------------
    def close(self) -> None:
        async def close_all() -> None:
            for conn in self._conns.values():
                conn.close()
            for conn in self._conns.values():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.wait_closed(), 5)
            self._conns.clear()

        with contextlib.suppress(Exception):
            self._call(close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> PodSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def prefixed(log_dir: Path | None, echo: Callable[[str], None] | None) -> OnLine:
    """An ``OnLine`` that appends each worker's lines to ``log_dir/worker-N.log`` and hands
    ``[wN] line`` to ``echo``: one log file per worker, as TPU CI teams keep them."""
    lock = threading.Lock()

    def on_line(w: Worker, stream: str, line: str) -> None:
        with lock:
            if log_dir is not None:
                with open(log_dir / f"worker-{w.index}.log", "a", encoding="utf-8") as f:
                    f.write(f"{stream}: {line}\n")
            if echo is not None:
                echo(f"[w{w.index}] {line}")

    return on_line
