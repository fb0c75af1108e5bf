"""Campaigns beyond one machine: a campaign's cells on a Dask distributed cluster.

``harness run --cluster ADDRESS`` sends each cell to a worker of an existing Dask
scheduler (``tcp://host:port``), or of a ``LocalCluster`` of N worker processes
started here (``local:N``: a laptop, CI). Dask, not Ray: it is pure Python and small,
its workers are ordinary processes in which the harness's fork server can fork rank
processes, and its ``LocalCluster`` needs no daemon.

What crosses the wire, and why:

- to a worker: the cell's plan (the scenario and target, our own objects) and the
  target's ``Discovery`` as a dict, learned once on this machine (``run_matrix``);
- back: the cell as JSON text (``Cell.to_dict``), parsed here. Nothing a target
  produced is ever unpickled on the machine that started the campaign.

A worker that dies while it holds a cell loses nothing: the scheduler gives the cell
to another worker (up to ``distributed.scheduler.allowed-failures`` times). The
scheduler says so on its ``all`` event topic (``remove-worker``, with the keys the
worker was processing); this module listens there, logs each retry naming the cell,
the worker and the attempt, and the report lists them (``campaign.retried``).

Workers need the harness installed, and a target given as ``file.py:function`` at
the same path as here (start ``dask worker`` from the same checkout, or a shared
filesystem). ``dask worker --preload harness.runner.cluster`` makes a worker ignore
the terminal's Ctrl-C, as ``local:N`` workers do: the campaign's client cancels.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import signal
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from harness.runner.cells import Cell, Matrix
from harness.runner.discovery import Discovery
from harness.runner.run import CellPlan, run_cell, run_matrix
from harness.vocabulary import UsageError
from harness.world.world import ABORT

log = logging.getLogger(__name__)

#: What to install when Dask distributed is missing (the extra of pyproject.toml).
INSTALL = ("pip install 'distributed>=2024.1'  (the harness's extra 'cluster': "
           "pip install '.[cluster]' from a checkout)")
#: Seconds to wait for a scheduler to answer, and for it to have a worker.
CONNECT_TIMEOUT = float(os.environ.get("HARNESS_CLUSTER_TIMEOUT") or 10.0)
#: How often a wait looks at the Ctrl-C flag.
_POLL = 0.2
_LOCAL = re.compile(r"local:(\d+)")
_REMOTE = re.compile(r"(tcp|tls|ws|wss)://[^\s/:]+(:\d+)?|[^\s/:]+:\d+")


class ClusterError(UsageError):
    """A cluster that cannot be used (not installed, a bad address, no answer): the
    message says what to do; the command line makes it a usage error (exit 2)."""


class CellLost(Exception):
    """A task the cluster gave up on: every worker that held it died."""


def parse_address(address: str) -> tuple[str, Any]:
    """``("local", N)`` for ``local:N``, ``("remote", "tcp://host:port")`` for a scheduler."""
    address = address.strip()
    local = _LOCAL.fullmatch(address)
    if local:
        n = int(local.group(1))
        if n < 1:
            raise ClusterError(f"--cluster {address}: a local cluster needs at least 1 worker")
        return "local", n
    if _REMOTE.fullmatch(address):
        return "remote", address if "://" in address else f"tcp://{address}"
    raise ClusterError(f"--cluster {address!r}: not a cluster address: give a Dask scheduler as "
                       "tcp://HOST:PORT, or local:N for a local cluster of N worker processes")


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ClusterError(f"--cluster needs Dask distributed, which is not installed: {INSTALL}") \
            from None
    return distributed


@dataclass(frozen=True)
class Retried:
    """A task that a dead worker held, run again elsewhere."""

    label: dict[str, Any]  # a cell's {"scenario", "target", "seed"}; a map item's {"item": i}
    worker: str  # the worker that died
    attempt: int  # the attempt that follows (2: the second run)

    def to_dict(self) -> dict[str, Any]:
        return {**self.label, "worker": self.worker, "attempt": self.attempt}


def dask_setup(worker: Any) -> None:
    """A worker preload: the terminal's Ctrl-C reaches every process of its group, and a
    worker must not die of it (the client cancels its cells and ends their worlds)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _worker_facts() -> dict[str, str]:
    """What a cell's result depends on besides its plan: the harness, home and directory."""
    from harness import __version__

    return {"harness": __version__, "home": os.path.expanduser("~"), "cwd": os.getcwd()}


def _allowed_failures(dask_scheduler: Any) -> int:
    """On the scheduler: its ``distributed.scheduler.allowed-failures``."""
    return dask_scheduler.allowed_failures


def _abort_worlds() -> None:
    ABORT.set()


def _clear_abort() -> None:
    ABORT.clear()


def _json_call(fn: Callable[[Any], Any], item: Any) -> str:
    """On the worker: ``fn(item)`` as JSON text, so only plain data comes back."""
    return json.dumps(fn(item), allow_nan=True)


def _plain(value: Any) -> Any:
    """A cell's dict as JSON holds it: string keys, a repr for what JSON has no type for
    (as the JSON report writes it), so a cell read back renders as the one written."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _remote_cell(plan: CellPlan, known: frozenset[tuple[str, str]],
                 discovery: dict[str, Any] | None) -> str:
    """On the worker: one cell, returned as JSON text."""
    found = Discovery.from_dict(discovery) if discovery is not None else None
    return json.dumps(_plain(run_cell(plan, known, found).to_dict()))


class Cluster:
    """A connection to a Dask cluster that runs cells and plain functions, and notices
    when a worker dies under them. Use as a context manager (``local:N`` is closed with it)."""

    def __init__(self, address: str, timeout: float = CONNECT_TIMEOUT) -> None:
        kind, where = parse_address(address)
        distributed = _distributed()
        # the scheduler's and workers' comings and goings are not the campaign's news
        logging.getLogger("distributed").setLevel(max(logging.getLogger().getEffectiveLevel(),
                                                      logging.WARNING))
        self.address = address.strip()
        self._local: Any = None
        self._lock = threading.Lock()
        self._labels: dict[str, dict[str, Any]] = {}
        self._attempts: dict[str, int] = {}
        self._running: set[Any] = set()
        self.retried: list[Retried] = []
        self._aborted = False
        if kind == "local":
            import dask

            # one task per worker at a time: a dead worker held only what it was running
            try:
                with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}):
                    self._local = distributed.LocalCluster(
                        n_workers=where, threads_per_worker=1, processes=True,
                        dashboard_address=None, silence_logs=logging.CRITICAL,
                        preload=["harness.runner.cluster"],
                        # its HTTP routes on a free loopback port, never a fixed one another holds
                        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
            except Exception as exc:  # noqa: BLE001 - this machine cannot start one
                raise ClusterError(f"--cluster {self.address}: cannot start a local cluster: "
                                   f"{type(exc).__name__}: {exc}") from None
            where = self._local.scheduler_address
        try:
            self.client = distributed.Client(where, timeout=timeout, set_as_default=False)
        except Exception as exc:  # noqa: BLE001 - whatever the cause, the same usage error
            self._close_local()
            raise ClusterError(f"--cluster {self.address}: no Dask scheduler answered within "
                               f"{timeout:g} s ({type(exc).__name__}: {exc})") from None
        try:
            self.client.wait_for_workers(1, timeout=timeout)
        except Exception:  # noqa: BLE001 - a scheduler with no worker
            self.close()
            raise ClusterError(f"--cluster {self.address}: the scheduler answers but has no "
                               f"worker (waited {timeout:g} s)") from None
        #: how many dead workers a task survives before the scheduler gives up on it
        self.allowed_failures = int(self.client.run_on_scheduler(_allowed_failures))
        self.client.subscribe_topic("all", self._on_event)
        self.client.run(_clear_abort)  # a Ctrl-C of an earlier campaign left it set
        self._check_workers()

    def _check_workers(self) -> None:
        """Every worker must run this harness (another version judges cells otherwise); one
        with another home or directory is said, as its cells' paths would say it."""
        here = _worker_facts()
        for worker, facts in sorted(self.client.run(_worker_facts).items()):
            if facts["harness"] != here["harness"]:
                self.close()
                raise ClusterError(f"--cluster {self.address}: worker {worker} runs harness "
                                   f"{facts['harness']}, this machine {here['harness']}: install "
                                   "the same version on every worker")
            for what in ("home", "cwd"):
                if facts[what] != here[what]:
                    log.warning("worker %s has another %s (%s, here %s): a target given as a "
                                "file, and the paths in its cells' details, may differ from a "
                                "local run's", worker, what, facts[what], here[what])

    # -- the cluster's shape -------------------------------------------------------------

    @property
    def threads(self) -> int:
        """The cluster's threads: how many tasks it runs at once."""
        return max(1, sum(self.client.nthreads().values()))

    def campaign(self) -> dict[str, Any]:
        """The report's ``campaign`` field: where the cells ran, and which ran twice."""
        with self._lock:
            retried = [r.to_dict() for r in self.retried]
        return {"cluster": self.address, "workers": len(self.client.nthreads()),
                "threads": self.threads, "retried": retried}

    # -- a dead worker -----------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        """The scheduler's ``remove-worker``: each of our tasks that worker held runs again
        (a worker retired on purpose hands its tasks over: not a retry)."""
        _, msg = event
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker" or msg.get("expected"):
            return
        worker = str(msg.get("worker", "?"))
        for key in msg.get("processing-tasks", ()):
            with self._lock:
                label = self._labels.get(key)
                if label is None:
                    continue
                attempt = self._attempts[key] = self._attempts.get(key, 1) + 1
                if attempt > self.allowed_failures + 1:  # the scheduler gives up: CellLost
                    log.error("%s: worker %s died while it held it, the %d%s worker to: the "
                              "cluster gives up on it", _describe(label), worker, attempt - 1,
                              _nth(attempt - 1))
                    continue
                self.retried.append(Retried(label, worker, attempt))
            log.warning("%s: worker %s died while it held it; the cluster runs it again "
                        "elsewhere (attempt %d)", _describe(label), worker, attempt)

    # -- running -----------------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], *args: Any, label: dict[str, Any],
               name: str = "harness") -> Any:
        """``fn(*args)`` on the cluster, watched for dead workers; ``label`` names it in
        logs and in ``retried``."""
        key = f"{name}-{uuid.uuid4().hex}"
        with self._lock:
            self._labels[key] = dict(label)
        future = self.client.submit(fn, *args, key=key, pure=False)
        with self._lock:
            self._running.add(future)
        return future

    def _settled(self, future: Any) -> Any:
        """A finished task's result; a task the cluster gave up on is ``CellLost``."""
        with self._lock:
            self._running.discard(future)
            label = self._labels.get(future.key, {})
            tries = self._attempts.get(future.key, 1) - 1
        if future.status == "error":
            exc = future.exception()
            if type(exc).__name__ == "KilledWorker":
                raise CellLost(f"{_describe(label)}: lost: {tries} workers died while they held "
                               f"it (the scheduler's allowed-failures)")
            raise exc
        return future.result()

    def wait(self, future: Any) -> Any:
        """A task's result, waiting as long as it runs; on Ctrl-C (``ABORT``) the campaign's
        tasks are cancelled and the worlds they run end."""
        for done in self._as_completed([future]):
            return self._settled(done)
        raise AssertionError("unreachable: one future, one completion")

    def _as_completed(self, futures: list[Any]) -> Iterator[Any]:
        """Each future as it finishes (done, erred or cancelled), looking at ``ABORT``
        between: a Ctrl-C cancels the campaign's tasks and raises KeyboardInterrupt."""
        finished: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for future in futures:
            future.add_done_callback(finished.put)
        for _ in futures:
            while True:
                if ABORT.is_set():
                    self.abort()
                    raise KeyboardInterrupt
                try:
                    yield finished.get(timeout=_POLL)
                    break
                except queue.Empty:
                    continue

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        """``(item, fn(item))`` for each item, as each completes, each run on the cluster.

        ``fn`` is a top-level (picklable) function; items and results are plain data (a
        result crosses back as JSON: a tuple comes back a list). A worker that dies runs
        its item again elsewhere (``retried``); an item that raised raises here."""
        pending = {self.submit(_json_call, fn, item, label={"item": i}, name="harness-map"): item
                   for i, item in enumerate(items)}
        try:
            for future in self._as_completed(list(pending)):
                item = pending.pop(future)
                yield item, json.loads(self._settled(future))
        finally:
            if pending:  # the caller stopped early, raised, or a Ctrl-C: nothing left behind
                self.client.cancel(list(pending))

    def run_cell(self, plan: CellPlan, known: frozenset[tuple[str, str]] = frozenset(),
                 discovery: Discovery | None = None) -> Cell:
        """One cell on the cluster, as ``run_matrix``'s ``cell_runner``."""
        label = {"scenario": plan.scenario.name, "target": plan.target.name, "seed": plan.seed}
        future = self.submit(_remote_cell, plan, known,
                             discovery.to_dict() if discovery is not None else None,
                             label=label, name="harness-cell")
        return Cell.from_dict(json.loads(self.wait(future)))

    def run_matrix(self, plans: list[CellPlan], seed: int = 0,
                   known: frozenset[tuple[str, str]] = frozenset(),
                   on_cell: Callable[[Cell], None] | None = None, use_cache: bool = True) -> Matrix:
        """Every planned cell on the cluster, as many at once as it has threads; discovery
        runs here, once per target. The matrix says where it ran (``campaign``)."""
        matrix = run_matrix(plans, jobs=self.threads, seed=seed, known=known, on_cell=on_cell,
                            use_cache=use_cache, cell_runner=self.run_cell)
        matrix.campaign = self.campaign()
        return matrix

    def abort(self) -> None:
        """Cancel every task in flight and end the worlds the workers run (once)."""
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
            running = list(self._running)
        try:
            self.client.cancel(running)
            self.client.run(_abort_worlds)
        except Exception as exc:  # noqa: BLE001 - the campaign is ending either way
            log.warning("could not cancel the campaign's cells on %s: %s", self.address, exc)

    # -- the end -----------------------------------------------------------------------

    def _close_local(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None

    def close(self) -> None:
        """Disconnect; a local cluster's workers end."""
        client = getattr(self, "client", None)
        if client is not None:
            if "all" in client._event_handlers:  # the scheduler would tell a closed client
                client.unsubscribe_topic("all")
            client.close()
        self._close_local()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _nth(n: int) -> str:
    return {1: "st", 2: "nd", 3: "rd"}.get(n if n < 20 else n % 10, "th")


def _describe(label: dict[str, Any]) -> str:
    if "scenario" in label:
        return f"cell {label['scenario']}[{label['target']}] seed {label['seed']}"
    return f"task {label.get('item', '?')}"
