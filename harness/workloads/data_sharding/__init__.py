"""Data sharding: every rank reads its shard of memory-mapped .npy files.

Two reference targets, each a module with a ``run`` function:

- ``seed-loader`` (``seed_loader.py``): the loader seed 000 calls "done right"
  (Finding 3: ``PuzzleDataset(dataset_paths, rank, num_replicas)``, NumPy
  memory-maps, each worker its own indices, no synchronization), written as the
  seed's ``puzzle_dataset.py`` does it, assumptions included.
- ``robust-loader`` (``robust.py``): the recipe we recommend: the dataset is
  checked on every host and compared across hosts before the first step, the
  order comes from the config's seed alone, the last partial global batch is
  dropped explicitly, the data is opened read-only, and every failure is the
  same clear error on every rank.

The builder (``dataset.py``) writes the dataset each scenario starts with, and
its variants (a host without it, a host with another version, garbled bytes);
the checker is ``harness.checkers.sharding``.

The calling convention (the same for a user's data-sharding target)
--------------------------------------------------------------------
Every rank calls ``run(inputs: dict) -> dict``. The loader's own keys:

- ``data_dir``: the dataset's directory (default ``/mnt/data/puzzles``), holding
  ``inputs.npy`` and ``labels.npy`` (int32, ``(N, 1 + seq_len)``, column 0 the
  sample id), ``puzzle_indices.npy`` and the ``dataset.json`` manifest (see
  ``dataset.py``);
- ``global_batch_size``: samples per training step over all ranks;
- ``seed``: the training config's seed;
- ``sync_timeout_s`` (optional): a deadline for any wait the loader guards.

The other keys (``num_samples``, ``missing_on_hosts``, ``corrupt_file``...)
tell the builder what to put on disk; a loader must not read them: it has to
find out from the disk, as on a pod. Their defaults and bounds are
``workload.DataShardingInputs``.

``run`` loads one epoch, runs one training step per batch (something that
all-reduces, as a real step does: unequal batch counts then hang, as on a pod)
and returns::

    {"batches": [[sample ids of batch 0], [... batch 1], ...],   # this rank's epoch
     "restart": [[...], ...],   # the same epoch from a fresh loader with the same seed
     "dropped": [sample ids]}   # optional: what the loader knowingly left out

The sample ids are read from column 0 of the rows the rank trained on (never
row numbers; padding rows, if any, are not samples and are left out). The
checker then requires: no id outside the dataset, the same number of batches
on every rank, no sample read twice (within a rank or across ranks), every
sample read except at most one global batch's remainder (``N mod
global_batch_size``; if ``dropped`` is given, exactly those), and ``restart``
equal to ``batches`` on every rank.

``PRELOAD`` lists the modules these targets import: pass it as
``run_world(..., preload=PRELOAD)`` so that the warm fork server imports them
once.
"""

from __future__ import annotations

#: Built-in target name -> ``module:function``.
TARGETS = {
    "seed-loader": "harness.workloads.data_sharding.seed_loader:run",
    "robust-loader": "harness.workloads.data_sharding.robust:run",
}

#: Modules worth importing in the fork server before any rank starts (never the
#: target modules: they import torch_xla, which exists only in a rank).
PRELOAD = ("numpy", "torch", "harness.workloads.data_sharding.dataset")

#: The attribute of ``adapter`` that stands for a user's target (followed by its ref in hex).
ADAPTER_PREFIX = "user_"


def user_ref(spec: str) -> str:
    """The ref a rank runs for the user's target ``spec``: the adapter, which calls it in its
    shape (the workload's ``user_ref``; kept here, light, so that the CLI never imports torch)."""
    return f"harness.workloads.data_sharding.adapter:{ADAPTER_PREFIX}{spec.encode().hex()}"


__all__ = ["TARGETS", "PRELOAD", "ADAPTER_PREFIX", "user_ref"]
