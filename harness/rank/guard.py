"""The locks a rank's harness code holds for moments, kept from the target's signal handlers.

Python runs a signal handler in the main thread between any two bytecodes, so a handler
of the target's can start while the main thread is inside the harness's own code, holding
one of its locks; the handler's way in and out of the world clock (``signals._wrap``)
takes the same locks, and the main thread would wait on itself forever (a notice
delivered at the wrong moment: the world's clock then followed the machine's until the
grace ran out). A ``Guard`` blocks, in the main thread, the signals the target handles in
Python while it is held: one that comes meanwhile stays pending, and its handler runs as
soon as the lock is released.
"""

from __future__ import annotations

import _thread
import signal
import threading
from typing import Any

#: the signals the target handles in Python (``signals.world_signal`` keeps it)
HANDLED: set[int] = set()


class Guard:
    """A machine lock for ``with``: held by the main thread, no Python handler runs."""

    __slots__ = ("_lock", "_mask")

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._mask: Any = None

    def __enter__(self) -> Guard:
        mask = None
        if HANDLED and _thread.get_ident() == threading.main_thread().ident:
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        self._lock.acquire()
        self._mask = mask
        return self

    def __exit__(self, *exc: object) -> None:
        mask, self._mask = self._mask, None
        self._lock.release()
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def locked(self) -> bool:
        return self._lock.locked()
