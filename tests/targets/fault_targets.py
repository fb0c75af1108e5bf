"""Rank-side targets for tests/world/test_faults.py: plain Python file code (open, os,
yaml, json) that reports exactly what it saw, so the tests can compare it with
what a real system gives."""

import os
import random
import stat
import time

import torch_xla.core.xla_model as xm
import yaml


def seen(exc):
    """An exception as the target saw it: class, errno, filename and text."""
    return {"type": type(exc).__name__, "errno": getattr(exc, "errno", None),
            "strerror": getattr(exc, "strerror", None),
            "filename": getattr(exc, "filename", None), "str": str(exc)}


def attempt(fn):
    try:
        return {"ok": fn()}
    except OSError as exc:
        return seen(exc)


def _read_text(path):
    with open(path) as f:
        return f.read()


def _read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def _write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


# -- transient errors, ENOSPC, EACCES, EROFS -------------------------------------

def reads_n_times(path, content, n):
    """The first rank of each host writes ``path``; then every rank opens it ``n`` times."""
    if xm.get_local_ordinal() == 0:
        _write_text(path, content)
    xm.rendezvous("written")
    results = [attempt(lambda: _read_text(path)) for _ in range(n)]
    xm.rendezvous("read")
    return results


def one_of_each(path):
    """open for write, write, fsync, open for read, read: where does each error surface?"""
    out = {}
    out["open-write"] = attempt(lambda: open(path, "w").close())
    out["write"] = attempt(lambda: _write_text(path, "a: 1\n"))

    def fsync():
        with open(path, "w") as f:
            f.write("a: 2\n")
            f.flush()
            os.fsync(f.fileno())
    out["fsync"] = attempt(fsync)
    out["open-read"] = attempt(lambda: open(path).close())

    def read():
        with open(path) as f:
            return f.read()
    out["read"] = attempt(read)
    out["final"] = attempt(lambda: _read_text(path))
    return out


def fills_disk(path, data):
    """A buffered text write, then what landed."""
    outcome = attempt(lambda: _write_text(path, data))
    return outcome, _read_text(path)


def fills_disk_unbuffered(path, data):
    """os-level semantics: a short write first, then ENOSPC on the next write."""
    out = []
    with open(path, "wb", buffering=0) as f:
        out.append(attempt(lambda: f.write(data)))
        out.append(attempt(lambda: f.write(data)))
    return out, _read_bytes(path)


def foreign_file(path):
    st = os.stat(path)
    return {
        "mode": st.st_mode, "uid": st.st_uid, "my_uid": os.getuid(), "size": st.st_size,
        "read": attempt(lambda: _read_text(path)),
        "write": attempt(lambda: _write_text(path, "b: 2\n")),
        "append": attempt(lambda: open(path, "a").close()),
        "access_r": os.access(path, os.R_OK),
        "yaml": attempt(lambda: yaml.safe_load(open(path))),
    }


def foreign_dir(path):
    st = os.stat(path)
    inside = os.path.join(path, "c.yaml")
    return {
        "is_dir": stat.S_ISDIR(st.st_mode), "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid,
        "create": attempt(lambda: _write_text(inside, "a: 1\n")),
        "listdir": attempt(lambda: os.listdir(path)),
        "mkdir": attempt(lambda: os.mkdir(os.path.join(path, "sub"))),
    }


def read_only(directory):
    leftover = os.path.join(directory, "c.yaml")
    new = os.path.join(directory, "new.yaml")
    return {
        "read": attempt(lambda: _read_text(leftover)),
        "create": attempt(lambda: _write_text(new, "a: 1\n")),
        "overwrite": attempt(lambda: _write_text(leftover, "a: 1\n")),
        "mkdir": attempt(lambda: os.mkdir(os.path.join(directory, "sub"))),
        "remove": attempt(lambda: os.remove(leftover)),
        "rename": attempt(lambda: os.rename(leftover, new)),
        "exists_after": os.path.exists(leftover),
    }


# -- what readers see of rank 0's write ------------------------------------------------

def config_sync(path, content):
    """Rank 0 writes, a barrier, everyone reads; a second barrier, everyone reads again."""
    if xm.get_ordinal() == 0:
        _write_text(path, content)
    xm.rendezvous("config_save")
    first = attempt(lambda: _read_bytes(path))
    parsed = None
    if "ok" in first:
        try:
            parsed = {"yaml": yaml.safe_load(first["ok"])}
        except yaml.YAMLError as exc:
            parsed = {"error": type(exc).__name__}
    xm.rendezvous("again")
    second = attempt(lambda: _read_bytes(path))
    return {"first": first, "parsed": parsed, "second": second}


def writer_waits_for_own_write(path, content, reader_delay):
    """Rank 0 writes and waits to see its write; the others look once, later, and leave."""
    if xm.get_ordinal() == 0:
        _write_text(path, content)
        wrote = time.monotonic()
        end = wrote + 10
        while time.monotonic() < end:
            got = attempt(lambda: _read_text(path))
            if got.get("ok") == content:
                return {"visible_after_s": time.monotonic() - wrote}
            time.sleep(0.01)
        return {"never_visible": got}
    time.sleep(reader_delay)
    return attempt(lambda: _read_text(path))


def timed_ops(path, content):
    t0 = time.monotonic()
    _write_text(path, content)
    t1 = time.monotonic()
    os.stat(path)
    t2 = time.monotonic()
    _read_text(path)
    t3 = time.monotonic()
    return {"write_s": t1 - t0, "stat_s": t2 - t1, "open_s": t3 - t2}


# -- process faults ------------------------------------------------------------------------

def writes_lines_unbuffered(path, lines):
    """Rank 0 writes ``lines`` one write(2) each; rank 1 waits for rank 0 to be gone and
    reads what landed."""
    pid_file = "/tmp/rank0.pid"
    if xm.get_ordinal() == 0:
        _write_text(pid_file, str(os.getpid()))
    xm.rendezvous("pid")
    if xm.get_ordinal() == 0:
        with open(path, "wb", buffering=0) as f:
            for line in lines:
                f.write(line)
        return "survived"
    pid = int(_read_text(pid_file))
    end = time.monotonic() + 8
    while time.monotonic() < end and _alive(pid):
        time.sleep(0.01)
    return attempt(lambda: _read_bytes(path))


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def two_rendezvous():
    xm.rendezvous("warmup")
    xm.rendezvous("config_save")
    return xm.get_ordinal()


def busy_for(seconds):
    """File operations in a loop: a timed kill must not fire at the first of them."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        os.path.exists("/tmp/nothing-here")
        n += 1
        time.sleep(0.01)
    return n


def opens_for_write(path):
    _write_text(path, "a: 1\n")
    return "wrote"


def all_reduce_once():
    import torch
    return xm.all_reduce("sum", torch.ones(1)).item()


def random_draws():
    """One draw from each generator a loader may use unseeded: random, numpy's global one,
    torch's default one and an unseeded ``numpy.random.default_rng()``."""
    import numpy
    import torch
    return (random.random(), float(numpy.random.rand()), float(torch.rand(1).item()),
            float(numpy.random.default_rng().random()))


def env_of(*names):
    return {n: os.environ.get(n) for n in names}


# -- several faults at once: what a scenario does ------------------------------------------

def robust_sync(path, content):
    """Rank 0 writes; everyone retries its read on OSError, then parses."""
    if xm.get_ordinal() == 0:
        _write_text(path, content)
    xm.rendezvous("config_save")
    tries = []
    data = None
    for _ in range(4):
        got = attempt(lambda: _read_bytes(path))
        tries.append(got.get("type", "ok"))
        if "ok" in got:
            data = got["ok"]
            break
    try:
        parsed = yaml.safe_load(data) if data is not None else None
    except yaml.YAMLError as exc:
        parsed = type(exc).__name__
    xm.rendezvous("done")
    return {"tries": tries, "data": data, "parsed": parsed}


def raw_fd_write(path, data):
    """os.open + os.write: the fd level, below any file object."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = attempt(lambda: os.write(fd, data))
    finally:
        os.close(fd)
    return written, _read_bytes(path)
