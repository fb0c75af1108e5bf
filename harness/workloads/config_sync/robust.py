"""robust-sync: the config sync we recommend. Copy ``sync_config`` and its two helpers.

The recipe, and why each step is there:

1. Only rank 0 builds the config. It travels over the collective
   (``xm.rendezvous`` payloads: rank 0 sends it, the others send ``b''``), never
   through a file: no shared directory to assume (a v4-64 is 8 hosts with 8
   ``/tmp``), no torn, stale, empty or late file, no ENOSPC/EIO/EACCES/EROFS.
2. The run name is derived from the composed config (a hash), not random: the
   same config always gets the same name, and no rank's random state matters.
3. If rank 0 cannot build the config (validation fails...), it sends the error
   instead, and every rank raises the same ``ConfigSyncError`` naming it, at
   once, instead of leaving the others blocked in a barrier rank 0 never reaches.
4. Every rank sends the digest of the config it ended with in a second
   rendezvous, and every rank raises the same error if they differ (or if a
   rank could not parse it): a divergence is loud, never silent.
5. A real rendezvous never times out: if a rank dies, the others wait forever.
   So each rendezvous runs in a daemon thread and the caller gives up after
   ``timeout_s`` with a ``TimeoutError`` naming the tag and the deadline.

Only ``xm.rendezvous`` and ``torch_xla.runtime``'s ``global_ordinal()`` /
``world_size()`` are used: they exist in the legacy API and in torch_xla 2.7+
(where ``xm.get_ordinal`` / ``xm.xrt_world_size`` are gone). No filesystem at all.
torch_xla is imported where it is used only so that this module imports anywhere
(the harness lists its targets outside a world); in your code, import it at the top.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from typing import Any

from harness.workloads.config_sync.model import PretrainConfig, hydra_config_of


class ConfigSyncError(RuntimeError):
    """The ranks could not agree on one config; every rank raises the same one."""


def _canonical(data: dict[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def guarded_rendezvous(tag: str, payload: bytes, timeout_s: float,
                       what: str = "config sync") -> list[bytes]:
    """``xm.rendezvous`` that gives up after ``timeout_s``.

    A real rendezvous has no timeout: if a rank died, the others would block
    forever. So the call runs in a thread and the caller stops waiting, loudly.
    """
    import torch_xla.core.xla_model as xm

    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = xm.rendezvous(tag, payload)
        except BaseException as exc:  # re-raised in the caller below
            box["error"] = exc

    # A daemon thread: if the rendezvous never returns, it must not keep the process alive.
    thread = threading.Thread(target=call, name=f"rendezvous-{tag}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"{what}: rendezvous {tag!r} did not complete within {timeout_s:g} s "
                           "(a rank died or never arrived)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _finalize(config: PretrainConfig) -> PretrainConfig:
    """Fill in the names rank 0 derives, from the config itself (no randomness)."""
    tag = hashlib.sha256(_canonical(config.model_dump())).hexdigest()[:8]
    project = config.project_name or f"{os.path.basename(config.data_paths[0]).capitalize()}-TRM-TPU"
    run = config.run_name or f"{config.arch.name.split('@')[-1]}_{tag}"
    return config.model_copy(update={
        "project_name": project, "run_name": run,
        "checkpoint_path": config.checkpoint_path or os.path.join("checkpoints", project, run)})


def sync_config(hydra_config: dict[str, Any], timeout_s: float = 300.0) -> PretrainConfig:
    """Rank 0's config on every rank, or the same clear error on every rank."""
    import torch_xla.runtime as xr

    rank = xr.global_ordinal()
    payload = b""
    if rank == 0:
        try:
            payload = b"ok:" + _canonical(_finalize(PretrainConfig(**hydra_config)).model_dump())
        except Exception as exc:  # every rank must learn of it
            payload = b"error:" + f"{type(exc).__name__}: {exc}".encode()
    status, _, body = guarded_rendezvous("config_save", payload, timeout_s)[0].partition(b":")
    if status == b"error":
        raise ConfigSyncError(f"rank 0 could not build the config: {body.decode()}")
    if status != b"ok":
        raise ConfigSyncError("rendezvous 'config_save' brought no config from rank 0")
    try:
        config = PretrainConfig(**json.loads(body))
        mine = b"ok:" + hashlib.sha256(_canonical(config.model_dump())).hexdigest().encode()
    except Exception as exc:  # reported to every rank below
        mine = b"error:" + f"{type(exc).__name__}: {exc}".encode()
    replies = guarded_rendezvous("config_digest", mine, timeout_s)
    if any(r != replies[0] for r in replies) or not replies[0].startswith(b"ok:"):
        groups: dict[bytes, list[int]] = {}
        for r, reply in enumerate(replies):
            groups.setdefault(reply, []).append(r)
        seen = "; ".join(f"rank{'s' * (len(rs) > 1)} {','.join(map(str, rs))}: "
                         f"{reply.decode()[:80]}" for reply, rs in groups.items())
        raise ConfigSyncError(f"ranks do not hold the same config: {seen}")
    return config


def run(inputs: dict[str, Any]) -> dict[str, Any]:
    """The harness's calling convention (see the package docstring)."""
    config = sync_config(hydra_config_of(inputs), float(inputs.get("sync_timeout_s", 300.0)))
    return config.model_dump()
