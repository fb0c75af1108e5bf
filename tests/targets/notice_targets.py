"""Targets that meet a pre-emption notice (SIGTERM, then a grace), each written the way a
team would: a flag set by a handler, a handler that raises, one that ignores or blocks
the signal, a subprocess that outlives its parent, a save from a thread."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import torch_xla.core.xla_model as xm


def _life() -> int:
    return int(os.environ.get("HARNESS_LIFE", "0"))


def _state(out: str) -> str:
    return os.path.join(out, f"state-{xm.get_ordinal()}.json")


def saves_at_step_boundary(out: str):
    """Train in 1 s steps; on SIGTERM finish the step, save for 5 s, exit 0. Started again,
    return what was saved."""
    if os.path.exists(_state(out)):
        with open(_state(out)) as f:
            return {"resumed": json.load(f), "life": _life(), "now": time.monotonic()}
    stop = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(time.monotonic()))
    step = 0
    while not stop:
        time.sleep(1.0)
        step += 1
    time.sleep(5.0)  # writing the checkpoint
    with open(_state(out), "w") as f:
        json.dump({"step": step, "noticed_at": stop[0]}, f)
    sys.exit(0)


def ignores_notice(out: str):
    if _life():
        return {"life": _life(), "now": time.monotonic()}
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1.0)


def blocks_notice(out: str):
    if _life():
        return {"life": _life(), "now": time.monotonic()}
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    while True:
        time.sleep(1.0)


def dies_of_notice(out: str):
    if _life():
        return {"life": _life(), "now": time.monotonic()}
    while True:
        time.sleep(1.0)


def handler_waits_for_collective(out: str):
    """Rank 0 waits in a rendezvous that rank 1 reaches at 20 s; the notice comes at 10.5 s:
    the handler runs when the collective returns, as a C++ collective's would."""
    seen = []
    signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(time.monotonic()))
    if xm.get_ordinal() == 1:
        time.sleep(20.0)
    xm.rendezvous("late")
    return {"handler_ran_at": seen}


def raises_in_handler(out: str):
    """``sys.exit`` in the handler; a ``finally`` writes what the loop reached."""
    if _life():
        with open(_state(out)) as f:
            return json.load(f)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    step = 0
    try:
        while True:
            time.sleep(1.0)
            step += 1
    finally:
        time.sleep(2.0)  # a save in ``finally`` takes world time too
        with open(_state(out), "w") as f:
            json.dump({"step": step, "finally_at": time.monotonic()}, f)


def child_ignores_notice(out: str):
    """Starts a subprocess that ignores SIGTERM and never ends, and leaves it behind when
    the notice makes it exit."""
    if _life():
        return {"life": _life()}
    child = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "time.sleep(3600)\n"])
    with open(os.path.join(out, f"child-{xm.get_ordinal()}"), "w") as f:
        f.write(str(child.pid))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    sys.exit(0)


def saves_from_a_thread(out: str):
    """The handler starts a thread that saves for 3 s; the main thread joins it and exits."""
    if _life():
        with open(_state(out)) as f:
            return json.load(f)
    saver: list[threading.Thread] = []

    def save() -> None:
        time.sleep(3.0)
        with open(_state(out), "w") as f:
            json.dump({"saved_at": time.monotonic()}, f)

    def on_term(signum, frame):
        thread = threading.Thread(target=save)
        thread.start()
        saver.append(thread)

    signal.signal(signal.SIGTERM, on_term)
    while not saver:
        time.sleep(1.0)
    saver[0].join()
    sys.exit(0)
