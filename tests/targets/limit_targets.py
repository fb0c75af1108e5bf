"""Ranks that would harm the machine without the world's limits (``harness.world.limits``):
each goes far past its limit, and only rank ``HOG`` does; the others wait for it in a
rendezvous, as a pod's ranks wait for a peer the OOM killer took."""

from __future__ import annotations

import os
import sys
import time

import torch_xla.core.xla_model as xm

HOG = 3


def allocate_20_gb(inputs: dict | None = None) -> dict:
    if xm.get_ordinal() == HOG:
        held = [bytearray(64 << 20) for _ in range(20 * 16)]  # 20 GiB, every page touched
        del held
    xm.rendezvous("after")
    return {"ok": 1}


def print_1_gb(inputs: dict | None = None) -> dict:
    if xm.get_ordinal() == HOG:
        line = "x" * (1 << 20)
        for _ in range(1024):
            sys.stdout.write(line)
    xm.rendezvous("after")
    return {"ok": 1}


def write_5_gb(inputs: dict | None = None) -> dict:
    if xm.get_ordinal() == HOG:
        block = os.urandom(1 << 20) * 8  # not zeros: a filesystem cannot make them sparse
        with open("/tmp/big.bin", "wb") as f:
            for _ in range(5 * 1024 // 8):
                f.write(block)
    xm.rendezvous("after")
    return {"ok": 1}


def fork_200(inputs: dict | None = None) -> dict:
    if xm.get_ordinal() == HOG:
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(3600)
                os._exit(0)
    xm.rendezvous("after")
    return {"ok": 1}


# -- one call past a limit (issue 47): memory the meter did not see, a file made at once ------

def memfd_1_5_gb(inputs: dict | None = None) -> dict:
    if xm.get_ordinal() == HOG:
        fd = os.memfd_create("hog")
        os.posix_fallocate(fd, 0, 3 << 29)  # 1.5 GiB of memory, mapped by nobody
    xm.rendezvous("after")
    return {"ok": 1}


def _sysv(size: int, touch: bool) -> int:
    """A SysV segment of ``size`` bytes (``touch``: every page written, then detached)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(0, ctypes.c_size_t(size), 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    if touch:
        at = libc.shmat(shmid, None, 0)
        ctypes.memset(ctypes.c_void_p(at), 1, size)
        libc.shmdt(ctypes.c_void_p(at))
    return shmid


def sysv_1_gb(inputs: dict | None = None) -> dict:
    if xm.get_ordinal() == HOG:
        _sysv(1 << 30, touch=True)
    xm.rendezvous("after")
    return {"ok": 1}


def sysv_left(inputs: dict | None = None) -> dict:
    """A segment that nobody removes, and a world that ends well: it must not outlive it."""
    return {"shmid": _sysv(1 << 20, touch=True) if xm.get_ordinal() == 0 else -1}


def fallocate_1_5_gb(inputs: dict | None = None) -> dict:
    if xm.get_ordinal() == HOG:
        with open("/tmp/big.bin", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, 3 << 29)
    xm.rendezvous("after")
    return {"ok": 1}


def _spin(seconds: float) -> None:
    """Wait on the machine's clock (the world's may jump: for ranks that wait, no time)."""
    def uptime() -> float:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0])
    end = uptime() + seconds
    while uptime() < end:
        pass


def unlinked_200_mb(inputs: dict | None = None) -> dict:
    """Ten files of 20 MiB, each deleted while held open: no walk of the sandbox sees them."""
    held = []
    if xm.get_ordinal() == HOG:
        block = os.urandom(1 << 20) * 4
        for i in range(10):
            f = open(f"/tmp/gone-{i}.bin", "wb")  # noqa: SIM115 - held open past its unlink
            os.unlink(f"/tmp/gone-{i}.bin")
            for _ in range(5):
                f.write(block)
            f.flush()
            held.append(f)
        _spin(2.0)
    xm.rendezvous("after")
    return {"ok": len(held)}
