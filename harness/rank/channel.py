"""A rank's two connections to the coordinator, and its stacks on request."""

from __future__ import annotations

import _thread
import os
import socket
import sys
import threading
import traceback
from typing import Any

from harness.rank import clock as rank_clock
from harness.rank import signals, wire
from harness.rank.guard import Guard

_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CollectiveError(Exception):
    """Raised in a rank when the coordinator refuses a collective."""


class Channel:
    """The rank's two connections to the coordinator.

    ``call`` carries collectives and results, always on the calling thread;
    ``control`` is served by a daemon thread so the watchdog can ask for the
    Python stacks of a rank whose main thread is blocked anywhere, and the
    world clock can wake the unit's waits that are due (a ``time`` frame).
    """

    def __init__(self, address: str, secret: str, role: str, ident: int) -> None:
        # The machine's locks (the unit's world functions may be in place, inherited from its
        # leader, before its clock is): the harness's own, never a wait of the world's.
        # Requests of several threads at once (a save's thread beside the training loop): each
        # carries its number and its reply the same; whichever thread reads a reply hands it on.
        self._mux = _thread.allocate_lock()  # the numbers, the replies read, who reads
        self._next_req = 0
        self._replies: dict[int, tuple[dict, bytearray]] = {}
        self._parked: list[Any] = []  # locks of the threads waiting for a reply another reads
        self._reading = False
        self._send_lock = Guard()  # one frame at a time on the wire (guard.py)
        self.call = wire.connect(address)
        wire.send_frame(self.call, {"type": "hello", "role": role, "id": ident,
                                    "pid": os.getpid(), "channel": "call", "secret": secret})
        #: signals the harness sent before this unit had its clock: wakes its clock has taken
        self.early_wakes = 0
        self.early_lock = _thread.allocate_lock()
        self.control = wire.connect(address)
        wire.send_frame(self.control, {"type": "hello", "role": role, "id": ident,
                                       "pid": os.getpid(), "channel": "control",
                                       "secret": secret})
        thread = threading.Thread(target=self._serve_control, name="harness-control", daemon=True)
        thread._harness_uncounted = True  # type: ignore[attr-defined] - not the target's
        thread.start()

    def request(self, header: dict, payload: bytes | memoryview = b"") -> tuple[dict, bytearray]:
        """Send a request and wait for its reply: a wait the world clock knows. The
        target's signal handlers wait for the reply, as they wait for a collective in C++
        on a pod (Python runs a handler only when the call returns)."""
        clock = rank_clock.current()
        deferred = signals.deferring()
        try:
            with self._mux:
                self._next_req += 1
                header = {**header, "req": self._next_req}
            if clock is None:
                with self._send_lock:
                    wire.send_frame(self.call, header, payload)
            else:
                def send(idle: dict | None) -> None:
                    with self._send_lock:
                        wire.send_frame(self.call, header if idle is None else
                                        {**header, "idle": idle}, payload)
                clock.request(send)
            reply, data = self._reply_to(header["req"])
            if clock is not None:
                clock.replied(reply.get("t", 0))
        finally:
            signals.undefer(deferred)  # a handler now due runs here, counted: the thread runs
        if "error" in reply:
            exc_type = {"TypeError": TypeError, "ValueError": ValueError,
                        "RuntimeError": RuntimeError}.get(reply["error"], CollectiveError)
            raise exc_type(reply["message"])
        return reply, data

    def _reply_to(self, req: int) -> tuple[dict, bytearray]:
        """Wait for request ``req``'s reply: read the socket if no other thread does (and
        keep what is another's), else wait until one hands it over or stops reading. The
        thread already counts as waiting for the world clock (``RankClock.request``)."""
        while True:
            with self._mux:
                got = self._replies.pop(req, None)
                if got is not None:
                    return got
                park = None
                if self._reading:
                    park = _thread.allocate_lock()
                    park.acquire()
                    self._parked.append(park)
                else:
                    self._reading = True
            if park is not None:
                park.acquire()  # a reply was read, or the reader stopped: look again
                continue
            try:
                reply, data = wire.recv_frame(self.call)
            except BaseException:
                self._stop_reading()
                raise
            mine = reply.get("req", req)
            self._stop_reading(None if mine == req else (mine, (reply, data)))
            if mine == req:
                return reply, data

    def _stop_reading(self, kept: tuple[int, tuple[dict, bytearray]] | None = None) -> None:
        """The reader is done: keep what it read for another thread (``kept``), then let
        every parked thread look again (one of them reads next)."""
        with self._mux:
            if kept is not None:
                self._replies[kept[0]] = kept[1]
            self._reading = False
            parked, self._parked = self._parked, []
        for other in parked:
            other.release()


    def notify(self, header: dict, payload: bytes = b"") -> None:
        """A one-way message (no reply), safe from any thread, even mid-request."""
        with self._send_lock:
            wire.send_frame(self.call, header, payload)

    def _serve_control(self) -> None:
        try:
            while True:
                header, _ = wire.recv_frame(self.control)
                kind = header.get("type")
                clock = rank_clock.current()
                if kind == "time" and clock is not None:
                    alone = header.get("alone")
                    clock.on_time(int(header["t"]), alone if type(alone) is int else None,
                                  header.get("looks") is True)
                elif kind == "signal" and type(header.get("signum")) is int:
                    with self.early_lock:  # a clock installed meanwhile counts it (seen)
                        if rank_clock.current() is None:
                            self.early_wakes += 1
                    t = header.get("t")
                    signals.deliver(header["signum"], told=t if type(t) is int else 0)
                elif kind == "stacks":
                    wire.send_frame(self.control, {"type": "stacks", "stacks": format_stacks(),
                                                   "importing": importing_now()})
        except (OSError, EOFError, wire.FrameError):
            pass
        except Exception:  # noqa: BLE001 - the harness's own bug: said, and the unit runs on
            sys.stderr.write("harness: this unit's control thread failed; its clock runs on the "
                             "machine's time from here:\n" + traceback.format_exc())
        clock = rank_clock.current()
        if clock is not None:  # no time will come again: its waits for one end now
            clock.cut_off()

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
        out.append(f"Thread {names.get(ident, ident)}:\n" + "".join(traceback.format_list(stack))
                   + _awaiting(ident))
    return "\n".join(out)


def _awaiting(ident: int) -> str:
    """Where the asyncio tasks of the loop running in thread ``ident`` wait, after its own
    stack (which ends in the loop's ``select``): the target's ``await`` lines, innermost
    last, so that a hang names the line the target waits on."""
    tasks_module = sys.modules.get("asyncio.tasks")
    if tasks_module is None:
        return ""
    out = []
    try:
        for task in list(getattr(tasks_module, "_all_tasks", ())):
            if task.done() or getattr(task.get_loop(), "_thread_id", None) != ident:
                continue
            frames = [(f, f.f_lineno) for f in task.get_stack()]
            stack = [f for f in traceback.StackSummary.extract(frames)
                     if not _is_harness_frame(f.filename)]
            if stack:
                out.append(f"  (task {task.get_name()} awaits)\n"
                           + "".join(traceback.format_list(stack)))
    except Exception:  # noqa: BLE001 - a diagnosis aid read from another thread: never the rank's fate
        return ""
    return "".join(out)


def importing_now() -> str | None:
    """The module the main thread is importing, by its dotted name (``torch``, or
    ``torch (in torch.utils._debug_mode)`` when it is deep inside), or None.

    Read from the frames' own ``__name__``: a package's body is ``torch.utils``,
    never its file's ``__init__``. The module a target is defined in (the harness
    imports it to find the function) is the rank's code, not an import it waits on."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    names: list[str] = []
    while frame is not None:
        caller = frame.f_back
        if frame.f_code.co_name == "<module>" and caller is not None \
                and caller.f_code.co_filename.startswith("<frozen importlib"):
            name = frame.f_globals.get("__name__")
            if isinstance(name, str):
                names.append(name)
        frame = caller
    names = [n for n in reversed(names)  # outermost first
             if not any(t == n or t.startswith(n + ".") for t in TARGET_MODULES)]
    if not names:
        return None
    return names[0] if len(names) == 1 else f"{names[0]} (in {names[-1]})"


#: The modules a unit's target is defined in (and their packages), which the bootstrap
#: imports to find the function: the code under test, never an import it waits on.
TARGET_MODULES: set[str] = set()


# The machinery whose frames a user never needs to see. The reference targets
# (harness/workloads) are code under test: their frames stay.
_MACHINERY = tuple(os.path.join(_HARNESS_DIR, d) + os.sep
                   for d in ("world", "rank", "filesystem", "faults", "_shims")) + (
    os.path.join(os.path.dirname(_HARNESS_DIR), "shims") + os.sep,)


def _is_harness_frame(filename: str) -> bool:
    """The harness's and the shim's own frames, and the fork server's ``-c``."""
    return filename.startswith(_MACHINERY) or filename == "<string>"
