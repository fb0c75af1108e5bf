"""How a command is stopped from outside: Ctrl-C (SIGINT), a CI job's timeout (SIGTERM), a
closed terminal (SIGHUP).

Each stops a run the same way: every world in flight is told to end, the cells that
finished are reported, and the command exits with 128 plus the signal's number, as a shell
reports a command a signal ended (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP). A
SIGINT the harness inherited ignored (``cmd &`` in a script) still stops it: its ranks,
in its process group, get the same SIGINT, and the run must not report them as crashed.
A SIGHUP ignored by ``nohup`` stays ignored: the user asked the run to outlive the terminal.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from harness.vocabulary import ExitCode

#: The signals that stop a run, in the order a report names them.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []  # what stopped this process, latest last


def install() -> None:
    """The command line's handlers (its ``main``, in the main thread)."""
    for sig in SIGNALS:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue  # nohup
        signal.signal(sig, stopped)


def stopped(signum: int, frame: object) -> None:
    """Every world in flight is told to end (``ABORT``) before the KeyboardInterrupt is
    raised, so the run ends even where that exception is swallowed on its way (a garbage
    collector's callback running at that moment only prints it)."""
    _received.append(signum)
    # Not imported, or still being imported (the signal came in the middle of it): no
    # world to end yet.
    abort = getattr(sys.modules.get("harness.world.world"), "ABORT", None)
    if abort is not None:
        abort.set()
    raise KeyboardInterrupt


def came() -> bool:
    """Did a stop signal reach this process?"""
    return bool(_received)


def status() -> int:
    """The exit status of a stopped command: 128 + the signal that stopped it (130, Ctrl-C,
    when none was received: a KeyboardInterrupt raised some other way)."""
    return 128 + _received[-1] if _received else int(ExitCode.INTERRUPTED)


@contextlib.contextmanager
def held() -> Iterator[list[int]]:
    """A stop signal while a run's reports are written waits until they are: the run's
    results are never lost to it. Yields a list that holds the signal if one came (the
    command then exits with ``status()`` once the reports are out). In the main thread
    only, where signals arrive."""
    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return

    def hold(signum: int, frame: object) -> None:
        came.append(signum)
        _received.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in SIGNALS
                if signal.getsignal(sig) != signal.SIG_IGN or sig == signal.SIGINT}
    try:
        yield came
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
