"""Data sharding: every rank reads its shard of memory-mapped .npy files.

Two reference targets, each a module with a ``run`` function:

- ``seed-loader`` (``seed_loader.py``): the loader seed 000 (docs/seeds.md) calls "done right"
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

The contract a user's data-sharding target implements
-----------------------------------------------------

``harness run --target mypkg/data.py:NAME --workload data-sharding`` runs
``NAME`` on every rank of every data-sharding scenario. ``NAME`` has one of two
shapes.

**1. A loader (your own code as it is).** A class or function that takes some
of these parameters *by name* and returns this rank's loader:

- ``data_dir`` (or ``dataset_path``, ``data_path``, ``root``; ``dataset_paths``
  or ``data_paths`` get ``[data_dir]``): the dataset's directory;
- ``rank`` and ``num_replicas`` (or ``world_size``): this rank and the world
  size, from ``torch_xla.runtime``;
- ``seed``: the training config's seed (the same on every rank);
- ``global_batch_size``: samples per training step over all ranks.

A required parameter with another name is a contract violation (give it a
default); ``*args``/``**kwargs`` receive nothing. The loader it returns is
either

- *iterable*: ``IterableDataset``, ``DataLoader``, a generator, a list: each
  item is one training step's batch for this rank; or
- *map-style* (``__len__`` and ``__getitem__``, no ``__iter__``, as a
  ``torch.utils.data.Dataset``): this rank's samples. The harness reads items
  ``0 .. len - 1`` in order, in batches of ``global_batch_size // num_replicas``,
  keeping a last smaller batch, as ``DataLoader(ds, batch_size=...)`` does.

The harness finds the sample ids in what the loader yields: an array or tensor
whose rows have the sample id in column 0 (a 2-D batch, or one 1-D row for a
map-style item); a dict's ``sample_ids`` or ``ids`` entry (``sample_id`` or
``id`` for one item), else its ``inputs`` (``input``, ``x``, ``data``) entry
read as an array; a tuple or list's first element (``(inputs, labels)``).
A loader may list the samples it knowingly leaves out in a ``dropped_ids``
attribute (optional).

The harness's adapter (``adapter.py``, in the rank) builds the loader, runs one
training step per batch (an ``xm.all_reduce``, as a real step does: ranks with
unequal batch counts then hang, as on a pod), builds a fresh loader with the
same arguments and iterates it again (a restart), and hands the checker the
dict of shape 2.

**2. A run function** ``run(inputs: dict) -> dict`` that does all of that
itself (the reference targets' shape): ``inputs`` holds ``data_dir``,
``global_batch_size``, ``seed``, ``sync_timeout_s`` (a deadline for any wait
the loader guards) and the builder's keys (``num_samples``,
``missing_on_hosts``, ``corrupt_file``...: a loader must not read them; it has
to find out from the disk, as on a pod; defaults and bounds:
``workload.DataShardingInputs``). It returns::

    {"batches": [[sample ids of batch 0], [... batch 1], ...],   # this rank's epoch
     "restart": [[...], ...],   # the same epoch from a fresh loader with the same seed
     "dropped": [sample ids]}   # optional: what the loader knowingly left out

The sample ids are read from column 0 of the rows the rank trained on (never
row numbers; padding rows, if any, are not samples and are left out).

**Which shape.** A ``harness_contract`` attribute on the target (``"loader"`` or
``"run"``) decides. Without one: a class is a loader; a function whose only
parameter is none of the names above (``run(inputs)``) is a run function; a
function taking any of those names is a loader factory; anything else is a
contract violation. (The return type cannot decide: the call differs before
anything is returned.)

**Your own data** (``--data DIR[:PATH]``, or ``data:`` in a scenario file): DIR is
copied to PATH (``data_dir``; default DIR itself) on every host instead of the data below
(``own_data``), and a sample is known by its content rather than an id column: every
field of one row of a batch, digested and counted as a multiset, a row whose every field
repeats one value taken for padding (``content``), or the ids a ``harness_ids(batch)``
function beside the loader returns. The reference is the epoch a fault-free world of one
rank read with the same batch size and seed (``Workload.learning``); the invariants below
are judged against it, and a sample is named by its place in it and what it holds.

**The data.** ``data_dir`` (default ``/mnt/data/puzzles``) holds
``inputs.npy`` and ``labels.npy`` (int32, ``(N, 1 + seq_len)``, column 0 the
sample id, rows in no particular order), ``puzzle_indices.npy`` and the
``dataset.json`` manifest (version, shapes, dtypes and sha256 of every file;
see ``dataset.py``). It may be read-only.

**How it is judged** (``harness.checkers.sharding``, from the returned ids and
the builder's ground truth only): no id outside the dataset, the same number of
batches on every rank, no sample read twice (within a rank or across ranks),
every sample read except at most one global batch's remainder (``N mod
global_batch_size``; if ``dropped`` is given, exactly those), and ``restart``
equal to ``batches`` on every rank. A target that breaks the contract (a
parameter the harness cannot give, a batch without sample ids, a return value
that is not the dict) is a FAIL whose detail names the contract, never a
``KeyError``; a rank that raises is an ERROR, loud when every rank raised
clearly (what ``fail-loudly`` scenarios ask for).

``PRELOAD`` lists the modules these targets import: pass it as
``run_world(..., preload=PRELOAD)`` so that the warm fork server imports them
once.
"""

from __future__ import annotations

import inspect

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


#: parameter names a loader factory may take, and the input each one gets
ALIASES = {
    "data_dir": "data_dir", "dataset_path": "data_dir", "data_path": "data_dir", "root": "data_dir",
    "dataset_paths": "data_dirs", "data_paths": "data_dirs",
    "rank": "rank", "num_replicas": "world_size", "world_size": "world_size",
    "seed": "seed", "global_batch_size": "global_batch_size",
}


def shape(signature: inspect.Signature, is_class: bool, declared: object = None) -> str:
    """``"loader"`` or ``"run"``: the shape of a user's target from how it is called (and
    its ``harness_contract``, if it declares one); ``ValueError`` saying why when neither
    fits. The one rule, for the CLI reading the source and the adapter the live object."""
    if declared is not None:
        if declared not in ("loader", "run"):
            raise ValueError(f"harness_contract = {declared!r}: use 'loader' or 'run'")
        return str(declared)
    if is_class:
        return "loader"
    params = list(signature.parameters.values())
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if len(named) == 1 and named[0].name not in ALIASES and named[0].default is inspect.Parameter.empty:
        return "run"
    if any(p.name in ALIASES for p in named):
        return "loader"
    raise ValueError(
        f"its parameters ({', '.join(p.name for p in params) or 'none'}) are neither run(inputs) "
        f"nor a loader factory's ({', '.join(sorted(set(ALIASES)))})")


def call_error(signature: inspect.Signature, is_class: bool, declared: object = None) -> str | None:
    """Why a user's target cannot be a data-sharding target (None: it can): its shape, and
    for a loader factory, a required parameter the harness cannot give."""
    try:
        kind = shape(signature, is_class, declared)
    except ValueError as exc:
        return str(exc)
    if kind == "run":
        return None
    for p in signature.parameters.values():
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY) \
                and p.name not in ALIASES and p.default is p.empty:
            return (f"the loader factory requires {p.name!r}, which the harness does not give "
                    f"(it gives {', '.join(sorted(set(ALIASES)))})")
    return None


__all__ = ["TARGETS", "PRELOAD", "ADAPTER_PREFIX", "ALIASES", "user_ref", "shape", "call_error"]
