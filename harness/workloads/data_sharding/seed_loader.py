"""seed-loader: data sharding as the seed's code does it, assumptions included.

Seed 000 (docs/seeds.md), Finding 3 ("Data Distribution is Done Right")::

    dataset = PuzzleDataset(
        dataset_paths=config.data_paths,    # All workers read SAME files
        rank=rank,                           # Each worker reads DIFFERENT subset
        num_replicas=world_size              # Coordinated sharding
    )

"All workers access same files (shared filesystem) / NumPy memory-maps
efficiently / Each worker queries different indices (no conflicts) / No
synchronization needed." Where that text leaves a gap, this module follows the
``puzzle_dataset.py`` the seed names as "Data distribution (works correctly)"
(its public TinyRecursiveModels version) and the seed's ``create_dataloader``,
reduced to one dataset path and groups of one puzzle:

- every rank ``np.load(..., mmap_mode="r")`` the same ``inputs``/``labels``
  files of ``config.data_paths`` (``puzzle_indices`` is read in full), after
  reading the ``dataset.json`` metadata; nothing checks that the files exist
  everywhere or are the same on every host ("no synchronization needed");
- the global order of the puzzles comes from
  ``np.random.Generator(np.random.Philox(seed=config.seed + iters))``: the
  config's seed plus the loader's own iteration counter, the same on every
  rank;
- a global batch is packed from whole puzzles in that order; *which examples
  of a puzzle, in which order*, is drawn from NumPy's global generator
  (``np.random.choice``): the rank's own random state. With one example per
  puzzle (sudoku-like data) that draw has nothing to choose; with several
  (ARC-like data) it decides which rank gets which example;
- each rank takes its slice ``[rank * local_bs, (rank + 1) * local_bs)`` of
  every global batch;
- last partial batch: **dropped**, as the seed's training iterator does
  ("Drop last batch": when the packed global batch is smaller than
  ``global_batch_size`` the epoch ends). Every rank computes the same global
  batches, so every rank drops the same one: the last ``N mod
  global_batch_size`` samples of the epoch's order are not read this epoch.
  (A puzzle that does not fit in what is left of a batch would also lose its
  overflow examples for the epoch; with ``global_batch_size`` a multiple of
  the puzzle size that never happens, and the scenarios keep it so.)

Per global batch the "training step" all-reduces a loss-like tensor, as the
seed's ``train_batch`` all-reduces its metrics with
``xm.all_reduce(xm.REDUCE_SUM, [metric_values])[0]``: a rank that runs out of
batches early leaves the others blocked in that collective.

Deliberately not reproduced: the DataLoader worker process
(``num_workers=1``) and ``torch.manual_seed(config.seed + rank)``. In the real
script the worker reseeds NumPy from torch's per-rank generator, so the
"rank's own random state" above differs between ranks even without any fault;
here each rank starts with fresh entropy of its own, as a new process does
(``harness.rank.environment``), and ``divergent-seed`` makes its generators differ
on top of that.

The second pass ``run`` returns (the "restart") is a fresh ``PuzzleDataset``
built from the same config in the same process: the Philox order repeats,
NumPy's global state has moved on, so with several examples per puzzle the
second pass differs from the first.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.workloads.data_sharding.dataset import data_dir

# The seed's module imports torch_xla in a try block and records whether it worked.
try:
    import torch_xla.core.xla_model as xm

    TPU_AVAILABLE = True
except ImportError:
    TPU_AVAILABLE = False


@dataclass
class PuzzleDatasetConfig:
    seed: int
    dataset_paths: list[str]
    global_batch_size: int
    rank: int
    num_replicas: int
    epochs_per_iter: int = 1


def _sample_batch(puzzle_order: np.ndarray, puzzle_indices: np.ndarray, start_index: int,
                  global_batch_size: int) -> tuple[int, np.ndarray]:
    """Pack whole puzzles, in order, into one global batch (a smaller one at the end)."""
    batch = []
    current_size = 0
    while start_index < puzzle_order.size and current_size < global_batch_size:
        puzzle_id = puzzle_order[start_index]
        start_index += 1
        puzzle_start = int(puzzle_indices[puzzle_id])
        puzzle_size = int(puzzle_indices[puzzle_id + 1]) - puzzle_start
        append_size = min(puzzle_size, global_batch_size - current_size)
        # Which examples, in which order: NumPy's global generator, as the seed's code does.
        batch.append(puzzle_start + np.random.choice(puzzle_size, append_size, replace=False))
        current_size += append_size
    return start_index, np.concatenate(batch)


class PuzzleDataset:
    def __init__(self, config: PuzzleDatasetConfig, split: str = "train") -> None:
        self.config = config
        self.split = split
        self.metadata = self._load_metadata(config.dataset_paths[0])
        assert config.global_batch_size % config.num_replicas == 0, (
            f"Global batch size {config.global_batch_size} must be multiples of nodes "
            f"{config.num_replicas}.")
        self.local_batch_size = config.global_batch_size // config.num_replicas
        self._data: dict[str, np.ndarray] | None = None
        self._iters = 0

    def _load_metadata(self, dataset_path: str) -> dict[str, Any]:
        with open(os.path.join(dataset_path, "dataset.json")) as f:
            return json.load(f)

    def _lazy_load_dataset(self) -> None:
        if self._data is not None:
            return
        field_mmap_modes = {"inputs": "r", "labels": "r", "puzzle_indices": None}
        path = self.config.dataset_paths[0]
        self._data = {name: np.load(os.path.join(path, f"{name}.npy"), mmap_mode=mode)
                      for name, mode in field_mmap_modes.items()}

    def _iter_train(self):  # noqa: ANN202 - a generator of (batch, global effective size)
        assert self._data is not None
        dataset = self._data
        self._iters += 1
        rng = np.random.Generator(np.random.Philox(seed=self.config.seed + self._iters))
        total_puzzles = dataset["puzzle_indices"].size - 1
        puzzle_order = np.concatenate([rng.permutation(total_puzzles)
                                       for _ in range(self.config.epochs_per_iter)])
        start_index = 0
        while start_index < puzzle_order.size:
            start_index, batch_indices = _sample_batch(
                puzzle_order, dataset["puzzle_indices"], start_index, self.config.global_batch_size)
            global_effective_batch_size = batch_indices.size
            # Drop last batch
            if global_effective_batch_size < self.config.global_batch_size:
                break
            lo = self.config.rank * self.local_batch_size
            local = batch_indices[lo:lo + self.local_batch_size]
            yield {"inputs": dataset["inputs"][local], "labels": dataset["labels"][local]}, \
                global_effective_batch_size

    def __iter__(self):  # noqa: ANN204
        self._lazy_load_dataset()
        yield from self._iter_train()


def train_batch(batch: dict[str, np.ndarray], world_size: int) -> float:
    """A stand-in for the forward/backward pass: a loss from the batch, all-reduced."""
    tokens = np.asarray(batch["inputs"][:, 1:], dtype=np.float32)
    metric_values = torch.tensor([float(tokens.mean()), float(len(tokens))])
    if world_size > 1 and TPU_AVAILABLE:
        metric_values = xm.all_reduce(xm.REDUCE_SUM, [metric_values])[0]
    return float(metric_values[0])


def train_epoch(dataset: PuzzleDataset, world_size: int) -> list[list[int]]:
    """One pass over the loader; the sample ids of every batch this rank trained on."""
    ids = []
    for batch, _global_batch_size in dataset:
        ids.append([int(i) for i in batch["inputs"][:, 0]])
        train_batch(batch, world_size)
    return ids


def run(inputs: dict[str, Any]) -> dict[str, Any]:
    """The harness's calling convention (see the package docstring) around the seed's loader."""
    rank, world_size = xm.get_ordinal(), xm.xrt_world_size()  # the seed's get_rank_and_world_size
    config = PuzzleDatasetConfig(seed=int(inputs.get("seed", 0)), dataset_paths=[data_dir(inputs)],
                                 global_batch_size=int(inputs["global_batch_size"]), rank=rank,
                                 num_replicas=world_size)
    first = train_epoch(PuzzleDataset(config, split="train"), world_size)
    # A restart: a fresh loader built from the same config, in the same process.
    again = train_epoch(PuzzleDataset(config, split="train"), world_size)
    return {"batches": first, "restart": again}
