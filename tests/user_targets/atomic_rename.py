"""A careful file sync: tmp + fsync + os.replace, a checksum beside it, readers retry."""

import hashlib
import json
import os
import time

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

SYNC_DIR = "/tmp/atomic_cfg"
CFG = os.path.join(SYNC_DIR, "config.json")
SUM = CFG + ".sha256"


def _write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sync(inputs: dict) -> dict:
    rank = xr.global_ordinal()
    if rank == 0:
        body = json.dumps(inputs["config"], sort_keys=True).encode()
        os.makedirs(SYNC_DIR, exist_ok=True)
        _write_atomic(CFG, body)
        _write_atomic(SUM, hashlib.sha256(body).hexdigest().encode())
        dfd = os.open(SYNC_DIR, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    xm.rendezvous("atomic_cfg")
    if rank == 0:
        return inputs["config"]

    deadline = time.monotonic() + inputs["sync_timeout_s"]
    last = None
    while True:
        try:
            with open(SUM, "rb") as f:
                want = f.read().decode().strip()
            with open(CFG, "rb") as f:
                body = f.read()
            if hashlib.sha256(body).hexdigest() == want:
                return json.loads(body)
            last = f"checksum mismatch (want {want[:12]})"
        except (OSError, ValueError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: no valid config in {CFG} after "
                               f"{inputs['sync_timeout_s']} s: {last}")
        time.sleep(0.05)
