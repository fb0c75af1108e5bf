"""robust-loader: the data sharding we recommend. Copy ``open_verified``,
``ShardedLoader`` and their helpers.

The recipe, and why each step is there:

1. Open the data read-only: ``np.load(..., mmap_mode="r")``, never ``r+``, and
   nothing is written next to the data (no index or cache file): seed 004's
   (docs/seeds.md) data disk is mounted read-only on every host.
2. Before the first step, every rank checks its own copy (a read that fails with
   an error a flaky disk or network filesystem gives once, EIO and the like, is
   tried again, up to ``ATTEMPTS`` times: a read of read-only data is safe to
   repeat; a missing or garbled file is not retried): the ``dataset.json``
   manifest is there, every ``.npy`` file is there and parses, its shape and
   dtype are the manifest's, its sha256 is the manifest's (a garbled or partly
   copied file fails here, even when every host has the same bad copy), and
   the sample ids of ``inputs`` and ``labels`` agree and do not repeat.
3. Every rank sends the result over one rendezvous: its problem, or a digest
   of the dataset (version, shapes, dtypes and content hashes). If any rank
   has a problem, or the digests differ (one host has another version), every
   rank raises the same ``DatasetError`` naming the ranks, their worker and
   what they saw: one clear error everywhere, instead of some ranks dying and
   the others blocking forever in their first collective, or training on
   different data without a word.
4. The rendezvous runs in a daemon thread and the caller gives up after
   ``timeout_s`` with a ``TimeoutError``: a real rendezvous never times out.
5. The shuffle seed is the config's (``seed``), combined with the epoch, in a
   generator of its own (``np.random.default_rng([seed, epoch])``): never
   NumPy's, torch's or Python's global generator, whose state is the rank's own
   (and differs between ranks: each DataLoader worker reseeds it, a
   ``torch.manual_seed(seed + rank)`` changes it). Every rank computes the same
   global order; the same seed gives the same order after a restart.
6. Last partial global batch: **dropped, explicitly**. The epoch has
   ``N // global_batch_size`` global batches; each rank takes its slice
   ``[rank * local_bs, (rank + 1) * local_bs)`` of each, so every rank runs the
   same number of steps (an uneven count hangs the last step's collective).
   The ``N mod global_batch_size`` samples left at the end of the epoch's order
   are not read this epoch; ``ShardedLoader.dropped_ids`` names them, and a
   different epoch's order drops different ones.

For TB-sized files, hash a fixed sample of blocks (or trust a manifest hash
checked once when the disk image was made) instead of every byte: the
cross-host comparison is what catches a host with another version.
torch_xla is imported where it is used only so that this module imports
anywhere; in your code, import it at the top.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import numpy as np

from harness.workloads.config_sync.robust import guarded_rendezvous
from harness.workloads.data_sharding.dataset import data_dir

MANIFEST = "dataset.json"
ARRAYS = ("inputs.npy", "labels.npy")
#: what a flaky disk or network filesystem says once and not the next time
TRANSIENT = frozenset({errno.EIO, errno.EAGAIN, errno.EINTR, errno.ETIMEDOUT, errno.ESTALE})
ATTEMPTS = 3

T = TypeVar("T")


class DatasetError(RuntimeError):
    """The dataset is missing, corrupt or not the same on every host; every rank raises it."""


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read(path: str, read: Callable[[], T]) -> T:
    """``read()`` of ``path``, tried again (with a short backoff) while it fails
    transiently; ``DatasetError`` once every attempt has."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return read()
        except OSError as exc:
            if exc.errno not in TRANSIENT:
                raise
            if attempt == ATTEMPTS:
                raise DatasetError(f"cannot read {path} after {ATTEMPTS} attempts: "
                                   f"{type(exc).__name__}: {exc}") from None
            time.sleep(0.05 * 2 ** attempt)
    raise AssertionError("unreachable")


def _load_manifest(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def inspect_copy(root: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """This host's copy, checked against its manifest: (summary, memory-mapped arrays).

    Raises ``DatasetError`` with what is wrong.
    """
    manifest_path = os.path.join(root, MANIFEST)
    try:
        manifest = _read(manifest_path, partial(_load_manifest, manifest_path))
    except FileNotFoundError:
        raise DatasetError(f"missing {manifest_path}") from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read {manifest_path}: {type(exc).__name__}: {exc}") from None
    listed = manifest.get("files", {}) if isinstance(manifest, dict) else {}
    arrays: dict[str, np.ndarray] = {}
    files: dict[str, Any] = {}
    for name in ARRAYS:
        path = os.path.join(root, name)
        try:
            array = _read(path, partial(np.load, path, mmap_mode="r", allow_pickle=False))
            sha = _read(path, partial(_sha256, path))
        except FileNotFoundError:
            raise DatasetError(f"missing {path}") from None
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{path} is not a readable .npy file: "
                               f"{type(exc).__name__}: {exc}") from None
        want = listed.get(name, {})
        if "shape" in want and list(array.shape) != list(want["shape"]):
            raise DatasetError(f"{path} has shape {tuple(array.shape)}, the manifest says "
                               f"{tuple(want['shape'])}")
        if "dtype" in want and str(array.dtype) != want["dtype"]:
            raise DatasetError(f"{path} has dtype {array.dtype}, the manifest says {want['dtype']}")
        if "sha256" in want and sha != want["sha256"]:
            raise DatasetError(f"{path} is corrupt: sha256 {sha[:12]} != the manifest's "
                               f"{want['sha256'][:12]}")
        if array.ndim != 2 or array.shape[0] == 0:
            raise DatasetError(f"{path} has shape {tuple(array.shape)}: expected (samples, columns)")
        arrays[name.removesuffix(".npy")] = array
        files[name] = {"shape": list(array.shape), "dtype": str(array.dtype), "sha256": sha}
    ids, label_ids = np.asarray(arrays["inputs"][:, 0]), np.asarray(arrays["labels"][:, 0])
    if ids.shape != label_ids.shape or not np.array_equal(ids, label_ids):
        raise DatasetError(f"{root}: the sample ids of inputs.npy and labels.npy disagree")
    if np.unique(ids).size != ids.size:
        raise DatasetError(f"{root}: sample ids repeat in inputs.npy")
    summary = {"version": manifest.get("version"), "files": files}
    summary["digest"] = hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()
    return summary, arrays


def _who() -> str:
    worker = os.environ.get("TPU_WORKER_ID")
    return f"worker {worker}" if worker is not None else socket.gethostname()


def _ranks(ranks: list[int]) -> str:
    """``rank 3`` or ``ranks 0-3,6-7``."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    text = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)
    return f"rank{'s' if len(ranks) > 1 else ''} {text}"


def open_verified(root: str, timeout_s: float = 300.0) -> dict[str, np.ndarray]:
    """This rank's read-only view of the dataset, once every rank has the same, valid one."""
    try:
        summary, arrays = inspect_copy(root)
        mine = {"ok": True, "digest": summary["digest"], "version": summary["version"],
                "samples": summary["files"]["inputs.npy"]["shape"][0], "who": _who()}
    except DatasetError as exc:
        arrays, mine = {}, {"ok": False, "problem": str(exc), "who": _who()}
    except Exception as exc:  # anything else this rank hit: every rank must hear of it
        arrays, mine = {}, {"ok": False, "problem": f"{type(exc).__name__}: {exc}", "who": _who()}
    replies = [json.loads(r) for r in guarded_rendezvous(
        "dataset_check", json.dumps(mine, sort_keys=True).encode(), timeout_s, "dataset check")]
    problems: dict[str, list[int]] = {}
    for rank, reply in enumerate(replies):
        if not reply.get("ok"):
            problems.setdefault(reply.get("problem", "no reply"), []).append(rank)
    if problems:
        seen = "; ".join(f"{_ranks(rs)} ({', '.join(sorted({replies[r]['who'] for r in rs}))}): "
                         f"{problem}" for problem, rs in problems.items())
        raise DatasetError(f"dataset {root} is unusable: {seen}")
    digests: dict[str, list[int]] = {}
    for rank, reply in enumerate(replies):
        digests.setdefault(reply["digest"], []).append(rank)
    if len(digests) > 1:
        groups = sorted(digests.values(), key=lambda rs: (-len(rs), rs))
        seen = "; ".join(
            f"{_ranks(rs)} ({', '.join(sorted({replies[r]['who'] for r in rs}))}) "
            f"see{'s' if len(rs) == 1 else ''} version "
            f"{replies[rs[0]]['version']}, {replies[rs[0]]['samples']} samples, sha256 "
            f"{replies[rs[0]]['digest'][:12]}" for rs in groups)
        raise DatasetError(f"dataset {root} is not the same on every host: {seen}")
    return arrays


class ShardedLoader:
    """This rank's slice of every full global batch of one epoch, in a seeded order."""

    def __init__(self, data: dict[str, np.ndarray], *, seed: int, global_batch_size: int,
                 rank: int, world_size: int, epoch: int = 0) -> None:
        if global_batch_size % world_size:
            raise ValueError(f"global_batch_size {global_batch_size} is not a multiple of the "
                             f"world size {world_size}")
        self.data = data
        self.global_batch_size = global_batch_size
        self.local_batch_size = global_batch_size // world_size
        self.rank = rank
        samples = data["inputs"].shape[0]
        if samples < global_batch_size:
            raise DatasetError(f"the dataset has {samples} samples, fewer than one global batch "
                               f"({global_batch_size})")
        order = np.random.default_rng([seed, epoch]).permutation(samples)
        full = samples // global_batch_size * global_batch_size
        self.order, self.dropped = order[:full], order[full:]

    def __len__(self) -> int:
        return self.order.size // self.global_batch_size

    @property
    def dropped_ids(self) -> list[int]:
        return [int(i) for i in self.data["inputs"][np.sort(self.dropped), 0]]

    def __iter__(self):  # noqa: ANN204 - yields {"inputs": ..., "labels": ...}
        lo = self.rank * self.local_batch_size
        for step in range(len(self)):
            batch = self.order[step * self.global_batch_size:(step + 1) * self.global_batch_size]
            local = batch[lo:lo + self.local_batch_size]
            yield {"inputs": np.asarray(self.data["inputs"][local]),
                   "labels": np.asarray(self.data["labels"][local])}


def train_step(batch: dict[str, np.ndarray]) -> float:
    """A stand-in for the forward/backward pass: a loss from the batch, all-reduced."""
    import torch
    import torch_xla.core.xla_model as xm

    tokens = batch["inputs"][:, 1:].astype(np.float32)
    loss = xm.all_reduce(xm.REDUCE_SUM, torch.tensor([float(tokens.mean()), float(len(tokens))]))
    return float(loss[0])


def run(inputs: dict[str, Any]) -> dict[str, Any]:
    """The harness's calling convention (see the package docstring)."""
    import torch_xla.runtime as xr

    rank, world_size = xr.global_ordinal(), xr.world_size()
    seed, gbs = int(inputs.get("seed", 0)), int(inputs["global_batch_size"])
    data = open_verified(data_dir(inputs), float(inputs.get("sync_timeout_s", 300.0)))
    passes = []
    for _ in range(2):  # the epoch, then a fresh loader with the same seed (a restart)
        loader = ShardedLoader(data, seed=seed, global_batch_size=gbs, rank=rank,
                               world_size=world_size)
        batches = []
        for batch in loader:
            batches.append([int(i) for i in batch["inputs"][:, 0]])
            train_step(batch)
        passes.append(batches)
    return {"batches": passes[0], "restart": passes[1], "dropped": loader.dropped_ids}
