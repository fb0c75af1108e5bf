"""Config-sync targets that fight the harness, for ``soak.py``. Each is
``kind(inputs) -> dict``; ``$SOAK_TOKEN`` names the round, so that whatever a target
leaves behind can be found by name."""

from __future__ import annotations

import os
import signal
import time

import torch_xla.core.xla_model as xm


def _token(inputs: dict) -> str:
    return os.environ.get("SOAK_TOKEN", "soak")


def polite(inputs: dict) -> dict:
    xm.rendezvous("config")
    return dict(inputs["config"])


def blocks_signals(inputs: dict) -> dict:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    time.sleep(600)
    return {}


def forks_daemons(inputs: dict) -> dict:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(600)
            os._exit(0)
        os._exit(0)
    os.wait()
    xm.rendezvous("config")
    return dict(inputs["config"])


def forks_many(inputs: dict) -> dict:
    """A fork bomb, capped: 40 children per rank that sleep."""
    for _ in range(40):
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
    return dict(inputs["config"])


def kills_the_fork_server(inputs: dict) -> dict:
    if xm.get_ordinal() == 0:
        with open(f"/proc/{os.getppid()}/stat") as f:
            server = int(f.read().rsplit(")", 1)[1].split()[1])
        os.kill(server, signal.SIGKILL)
    forks_daemons(inputs)
    return dict(inputs["config"])


def kills_its_parent(inputs: dict) -> dict:
    os.kill(os.getppid(), signal.SIGKILL)
    return dict(inputs["config"])


def leaves_a_fifo(inputs: dict) -> dict:
    os.makedirs("/tmp/soak", exist_ok=True)
    os.mkfifo(f"/tmp/soak/{_token(inputs)}.fifo")
    return dict(inputs["config"])


def huge_value(inputs: dict) -> dict:
    return {**inputs["config"], "blob": b"x" * (64 << 20)}


def unreadable_values(inputs: dict) -> dict:
    return {**inputs["config"], 1: "mixed keys", "big": 10 ** 5000}


class _Shell:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch /tmp/{self.marker}-reduce",))


def reduce_runs_a_command(inputs: dict) -> dict:
    return {**inputs["config"], "value": _Shell(_token(inputs))}


def forges_a_frame(inputs: dict) -> dict:
    from harness.rank import runtime

    sock = runtime.active().channel.call  # type: ignore[union-attr]
    sock.sendall((2 ** 31).to_bytes(4, "big") + (2 ** 62).to_bytes(8, "big") + b"[1]")
    time.sleep(2)
    return dict(inputs["config"])


def writes_out(inputs: dict) -> dict:
    token = _token(inputs)
    for path in (f"/proc/self/root/tmp/{token}-root", f"/dev/shm/{token}-shm",
                 f"/proc/self/cwd/{token}-cwd", f"/tmp/{token}-tmp"):
        try:
            with open(path, "w") as f:
                f.write("escaped?")
        except OSError:
            pass
    return dict(inputs["config"])


def hangs(inputs: dict) -> dict:
    if xm.get_ordinal() != 0:
        xm.rendezvous("never")
    time.sleep(600)
    return {}


def raises(inputs: dict) -> dict:
    raise RuntimeError("the config did not arrive")


def through_proc_root(inputs: dict) -> dict:
    """A symlink into /proc/self/root, then a file written through it into the machine's
    working directory (the view's, if the sandbox holds)."""
    link = f"/tmp/{_token(inputs)}-link"
    os.symlink(f"/proc/self/root{os.getcwd()}", link)
    with open(f"{link}/{_token(inputs)}-through-proc", "w") as f:
        f.write("escaped")
    xm.rendezvous("config")
    return dict(inputs["config"])


def reopens_a_machine_file(inputs: dict) -> dict:
    """The round's own target file, opened to be read, then reopened for writing through
    its descriptor, an F_DUPFD copy and a mapping (soak checks it is unchanged)."""
    import fcntl
    import mmap

    fd = os.open("target.py", os.O_RDONLY)
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD, 300)
    mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    with open("/proc/self/maps") as f:
        ranges = [ln.split()[0] for ln in f if ln.rstrip().endswith("/target.py")]
    for path in [f"/dev/fd/{fd}", f"/proc/self/fd/{copy}",
                 *(f"/proc/self/map_files/{r}" for r in ranges)]:
        try:
            with open(path, "a") as f:
                f.write(f"# {_token(inputs)} escaped\n")
        except OSError:
            pass
    mapped.close()
    xm.rendezvous("config")
    return dict(inputs["config"])


def leaves_shared_memory(inputs: dict) -> dict:
    """A shared memory segment made and never unlinked."""
    from multiprocessing import shared_memory

    segment = shared_memory.SharedMemory(name=f"{_token(inputs)}-r{xm.get_ordinal()}",
                                         create=True, size=1 << 16)
    segment.close()
    xm.rendezvous("config")
    return dict(inputs["config"])


def prints_without_end(inputs: dict) -> dict:
    """1 GB printed by every rank (the world's output limit stops it)."""
    line = "x" * (1 << 20)
    for _ in range(1024):
        print(line)
    return dict(inputs["config"])


def subprocess_writes_tmp(inputs: dict) -> dict:
    """A subprocess writes the host's /tmp: contained by kernel isolation only (Python
    isolation's hole 2), so soak runs it with --isolation kernel alone."""
    import subprocess

    subprocess.run(["sh", "-c", f"echo x > /tmp/{_token(inputs)}-from-sh"], check=True)
    xm.rendezvous("config")
    return dict(inputs["config"])


def stops_the_harness(inputs: dict) -> dict:
    """SIGSTOP to the harness (its pid leads its run token, in every rank's environment):
    it froze a run for 10 minutes. Kernel isolation's PID namespace keeps it out of reach;
    Python isolation cannot, so soak runs it with --isolation kernel alone."""
    harness = int(os.environ["HARNESS_RUN"].split("-")[0])
    try:
        os.kill(harness, signal.SIGSTOP)
    except ProcessLookupError:
        pass
    xm.rendezvous("config")
    return dict(inputs["config"])


_ROOTS_POWERS = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
token = sys.argv[1]
libc.mount(token.encode(), b".", b"tmpfs", 0, None)  # over the working directory
disk = os.stat("/").st_dev
for path, kind, device in ((f"/tmp/{token}-disk", 0o060000, disk),
                           (f"/dev/{token}-null", 0o020000, os.makedev(1, 3))):
    try:
        os.mknod(path, 0o600 | kind, device)
    except OSError:
        pass
try:
    with open("/proc/sys/kernel/domainname", "w") as f:
        f.write(token)
except OSError:
    pass
"""


def uses_roots_powers(inputs: dict) -> dict:
    """What the machine's root could do, from a fresh process (an ``exec`` gives root's
    capabilities back unless they are gone for good): mount a tmpfs (named by the round's
    token) over the working directory, ``mknod`` the machine's disk in /tmp and a device in /dev, set the
    machine's domain name. Each is named after the round's token for soak to find."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", _ROOTS_POWERS, _token(inputs)], check=False)
    xm.rendezvous("config")
    return dict(inputs["config"])


def holds_a_memfd(inputs: dict) -> dict:
    """1.5 GiB in a ``memfd`` (no mapping: the memory a process's own figures leave out),
    over soak's 1 GiB memory limit (under its 2 GiB written limit, which holds every file,
    a memfd too): the world is stopped naming the memory limit."""
    if xm.get_ordinal() == 0:
        fd = os.memfd_create(_token(inputs))
        os.posix_fallocate(fd, 0, 3 << 29)
    xm.rendezvous("config")
    time.sleep(30)
    return dict(inputs["config"])


def allocates_the_disk(inputs: dict) -> dict:
    """One ``fallocate`` of 3 GiB in /tmp, over soak's 2 GiB disk limit: the world is
    stopped naming it (the kernel refuses the call: no file grows past the limit)."""
    if xm.get_ordinal() == 0:
        fd = os.open(f"/tmp/{_token(inputs)}-big", os.O_CREAT | os.O_WRONLY, 0o600)
        os.posix_fallocate(fd, 0, 3 << 30)
    xm.rendezvous("config")
    time.sleep(30)
    return dict(inputs["config"])


def leaves_a_sysv_segment(inputs: dict) -> dict:
    """A SysV shared memory segment (64 MiB, touched) made and never removed, keyed by
    ``$SOAK_SYSV_KEY`` (rank r's: that + r): it must not outlive the world."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    key = int(os.environ.get("SOAK_SYSV_KEY", "4242")) + xm.get_ordinal()
    ident = libc.shmget(key, 1 << 26, 0o1600)
    if ident >= 0:
        address = libc.shmat(ident, None, 0)
        if address not in (None, ctypes.c_void_p(-1).value):
            ctypes.memset(address, 1, 1 << 26)
    xm.rendezvous("config")
    return dict(inputs["config"])

