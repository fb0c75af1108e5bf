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
