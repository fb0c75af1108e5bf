"""Rank-side targets for tests/world/test_clock.py: what a rank's code does with time."""

import datetime
import os
import queue
import select
import socket
import subprocess
import threading
import time

import torch_xla.core.xla_model as xm


def sleeps(seconds):
    """time.time() across a sleep, as the rank saw it."""
    before = time.time()
    time.sleep(seconds)
    return time.time() - before


def event_wait_in_a_thread(seconds):
    """An Event nobody sets, waited on with a timeout in a thread; the thread joined."""
    out = {}

    def wait():
        before = time.monotonic()
        out["woke"] = threading.Event().wait(seconds)
        out["waited"] = time.monotonic() - before

    thread = threading.Thread(target=wait)
    thread.start()
    thread.join()
    return out


def every_wait(seconds):
    """Each of threading's and queue's timed waits, given nothing to wait for: how long each
    took on the clock the rank reads, and what it returned."""
    out = {}

    def timed(name, fn):
        before = time.monotonic()
        result = fn()
        out[name] = (round(time.monotonic() - before, 3), result)

    cond = threading.Condition()
    with cond:
        timed("condition", lambda: cond.wait(seconds))
    with cond:
        timed("wait_for", lambda: cond.wait_for(lambda: False, seconds))
    timed("semaphore", lambda: threading.Semaphore(0).acquire(timeout=seconds))
    held = threading.Lock()
    held.acquire()
    timed("lock", lambda: held.acquire(timeout=seconds))
    rlock = threading.RLock()
    owner = threading.Thread(target=rlock.acquire)  # held by a thread that has ended
    owner.start()
    owner.join()
    timed("rlock", lambda: rlock.acquire(timeout=seconds))
    barrier = threading.Barrier(2)

    def broken():
        try:
            barrier.wait(seconds)
            return "passed"
        except threading.BrokenBarrierError:
            return "broken"
    timed("barrier", broken)

    def empty(q):
        try:
            return q.get(timeout=seconds)
        except queue.Empty:
            return "empty"
    timed("queue", lambda: empty(queue.Queue()))
    timed("simple_queue", lambda: empty(queue.SimpleQueue()))
    full = queue.Queue(maxsize=1)
    full.put(1)

    def put():
        try:
            full.put(2, timeout=seconds)
            return "put"
        except queue.Full:
            return "full"
    timed("queue_put", put)
    sleeper = threading.Thread(target=time.sleep, args=(seconds * 10,), daemon=True)
    sleeper.start()
    timed("join", lambda: (sleeper.join(seconds), sleeper.is_alive())[1])
    timer_fired = threading.Event()
    timer = threading.Timer(seconds, timer_fired.set)
    timer.start()
    timed("timer", lambda: timer_fired.wait())
    return out


def wall_clocks():
    """What the rank's code reads of the date and time at its start."""
    return {"time": time.time(), "now": datetime.datetime.now().isoformat(),
            "utcnow": datetime.datetime.utcnow().isoformat(),
            "today": datetime.date.today().isoformat(),
            "aware": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "localtime": list(time.localtime()[:6]), "gmtime": list(time.gmtime()[:6]),
            "strftime": time.strftime("%Y-%m-%d"), "ctime": time.ctime(),
            "monotonic": time.monotonic(), "perf_counter": time.perf_counter(),
            "monotonic_ns": time.monotonic_ns(),
            "clock_gettime": time.clock_gettime(time.CLOCK_REALTIME)}


def busy_waits(seconds):
    """A busy-wait on time.monotonic(), no sleep: it ends, on the rank's own reading."""
    end = time.monotonic() + seconds
    spins = 0
    while time.monotonic() < end:
        spins += 1
    return spins


def computes_then_writes(cpu_seconds, path):
    """Rank 0 computes (no time call, no wait) for ``cpu_seconds`` of its CPU before it
    writes ``path``, standing in for heavy imports; the others poll for it for 5 s."""
    if xm.get_ordinal() == 0:
        spent = time.process_time() + cpu_seconds
        n = 0
        while time.process_time() < spent:  # the CPU's clock, not the world's
            n += sum(i * i for i in range(1000))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("ready")
        return "wrote"
    give_up = time.time() + 5
    while not os.path.exists(path):
        if time.time() > give_up:
            raise TimeoutError(f"{path} not there after 5 s")
        time.sleep(0.2)
    return "read"


def spins_forever():
    """An endless loop with no time call and no wait: it holds the world's clock."""
    n = 0
    while True:
        n += 1


def subprocess_then_write(seconds, path):
    """Rank 0 runs a real subprocess (``sleep``) with a timeout before it writes; the others
    poll for the file for 10 s of their time."""
    if xm.get_ordinal() == 0:
        subprocess.run(["sleep", str(seconds)], check=True, timeout=30)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("ready")
        return "wrote"
    give_up = time.time() + 10
    while not os.path.exists(path):
        if time.time() > give_up:
            raise TimeoutError(f"{path} not there after 10 s")
        time.sleep(0.05)
    return "read"


def waits_on_a_socket_while_the_other_sleeps(seconds):
    """Rank 0 waits on a socket nobody writes to (a wait the clock cannot see); rank 1
    sleeps ``seconds`` of world time and returns."""
    if xm.get_ordinal() == 0:
        ours, _theirs = socket.socketpair()
        ours.recv(1)
        return "never"
    time.sleep(seconds)
    return "slept"


def forks_a_child_that_sleeps(seconds):
    """A child process the rank forks waits on the machine's time, off the world."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        before = time.monotonic()
        time.sleep(seconds)
        os.write(write, f"{time.monotonic() - before:.3f}".encode())
        os._exit(0)
    os.close(write)
    readable, _, _ = select.select([read], [], [], 60)
    data = os.read(read, 64).decode() if readable else ""
    os.waitpid(pid, 0)
    return float(data) if data else None


def polls_with_timeouts(inputs):
    """A stranger's config sync that sleeps, polls and waits on threads with timeouts: rank 0
    builds its config for 1.5 s (a sleep) and hands it over in a file with a flag; the others
    poll the flag every 0.1 s for 20 s, a heartbeat thread ticking beside them all."""
    import json

    rank = xm.get_ordinal()
    path = "/tmp/clockwork/config.json"
    beats = queue.Queue()
    stop = threading.Event()

    def heartbeat():
        while not stop.wait(0.25):
            beats.put(time.monotonic())

    thread = threading.Thread(target=heartbeat, daemon=True)
    thread.start()
    try:
        if rank == 0:
            time.sleep(1.5)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w") as f:
                json.dump(inputs["config"], f)
            os.replace(path + ".tmp", path)
            open(path + ".ok", "w").close()
        else:
            give_up = time.monotonic() + 20
            while not os.path.exists(path + ".ok"):
                if time.monotonic() > give_up:
                    raise TimeoutError("no config flag after 20 s")
                time.sleep(0.1)
        with open(path) as f:
            config = json.load(f)
    finally:
        stop.set()
        thread.join(5)
    beats.get(timeout=5)  # at least one beat: the heartbeat thread ran on the world's clock
    xm.rendezvous("done")
    return config


def file_ages():
    """How old the files the rank writes look to it (``now - getmtime``), through each way a
    file is written and touched, after sleeps on the world's clock."""
    os.makedirs("/tmp/ages", exist_ok=True)
    time.sleep(100)
    with open("/tmp/ages/opened", "w") as f:
        f.write("x")
    fd = os.open("/tmp/ages/raw", os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"y")
    os.close(fd)
    open("/tmp/ages/touched", "w").close()
    time.sleep(50)
    os.utime("/tmp/ages/touched")
    open("/tmp/ages/set", "w").close()
    os.utime("/tmp/ages/set", (5, 5))
    now = time.time()
    ages = {e.name: round(now - e.stat().st_mtime, 2) for e in os.scandir("/tmp/ages")}
    return {"ages": ages, "path_age": round(now - os.path.getmtime("/tmp/ages/opened"), 2),
            "xattrs": os.listxattr("/tmp/ages/opened"),
            "machine_file_years": (now - os.path.getmtime("/etc/hostname")) / (365 * 86400)}


def logs():
    """A log record's times, from a logger the rank configures."""
    import io
    import logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(relativeCreated)d %(message)s"))
    log = logging.getLogger("clock-test")
    log.addHandler(handler)
    log.warning("first")
    time.sleep(2)
    log.warning("second")
    return stream.getvalue().splitlines()


def asyncio_waits():
    """An asyncio loop's waits, as a rank's own bootstrap code makes them: a 20 s
    ``asyncio.sleep``, a ``wait_for`` that times out after 9 s, a thread pool's work (a
    thread that sleeps 5 s) awaited with a deadline, a future another thread sets after an
    Event's 2 s timeout; how long each took on the clock the rank reads."""
    import asyncio

    async def main():
        loop = asyncio.get_running_loop()
        took = {}
        start = time.monotonic()
        await asyncio.sleep(20)
        took["sleep"] = time.monotonic() - start
        start = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.Event().wait(), timeout=9)
        except asyncio.TimeoutError:
            took["timed out"] = time.monotonic() - start
        start = time.monotonic()
        took["pool"] = await asyncio.wait_for(loop.run_in_executor(None, time.sleep, 5), 60)
        took["pooled"] = time.monotonic() - start
        future = loop.create_future()

        def later():
            threading.Event().wait(2)
            loop.call_soon_threadsafe(future.set_result, "set")

        threading.Thread(target=later).start()
        start = time.monotonic()
        took["future"] = await asyncio.wait_for(future, 30)
        took["awaited"] = time.monotonic() - start
        return took

    return {k: round(v, 2) if isinstance(v, float) else v for k, v in asyncio.run(main()).items()}


def asyncio_on_a_real_socket():
    """A loop that serves and reads a TCP connection of its own: a socket the world's clock
    cannot see into, so its wait is the machine's, and the echo still arrives."""
    import asyncio

    async def main():
        async def echo(reader, writer):
            writer.write(await reader.read(100))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.sockets[0].getsockname()[1])
        writer.write(b"ping")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(100), timeout=10)
        writer.close()
        server.close()
        return data.decode()

    return asyncio.run(main())


def asyncio_waits_forever():
    """A loop awaiting an Event nobody sets, with no timeout."""
    import asyncio

    async def main():
        await asyncio.Event().wait()

    asyncio.run(main())


def pipe_shared_with_a_child():
    """A duplex ``multiprocessing.Pipe`` (a socketpair the rank made) whose other end a
    forked child writes after 0.3 s of the machine's time: the rank's wait on it, with a
    timeout of 5 s, is the machine's (the child is outside the world), so it gets the
    message rather than timing out at once on the world's clock."""
    import multiprocessing

    ours, theirs = multiprocessing.get_context("fork").Pipe()
    child = multiprocessing.get_context("fork").Process(target=_write_later, args=(theirs,))
    child.start()
    got = ours.recv() if ours.poll(5) else "timed out"
    child.join()
    return got


def _write_later(end):
    time.sleep(0.3)
    end.send("from the child")


def nan_timeouts():
    """Every wait given a NaN timeout, and what each did: the world's must be the machine's
    (Condition.wait does not wait, the lock's acquire and sleep refuse the value)."""
    def condition():
        c = threading.Condition()
        with c:
            return c.wait(float("nan"))

    def join():
        t = threading.Thread(target=lambda: None)
        t.start()
        return t.join(float("nan"))

    calls = {"event": lambda: threading.Event().wait(float("nan")), "condition": condition,
             "lock": lambda: threading.Lock().acquire(True, float("nan")),
             "rlock": lambda: threading.RLock().acquire(True, float("nan")),
             "sleep": lambda: time.sleep(float("nan")), "join": join}
    out = {}
    for name, call in calls.items():
        try:
            out[name] = f"returned {call()!r}"
        except Exception as exc:  # noqa: BLE001 - what it raised is the answer
            out[name] = f"{type(exc).__name__}: {exc}"
    return out
