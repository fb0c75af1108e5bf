"""A stranger's puzzle dataset, in the style of a hierarchical-reasoning repo's
``PuzzleDataset``: ``all__inputs.npy``, ``all__labels.npy``, ``all__puzzle_identifiers.npy``,
``all__puzzle_indices.npy``, ``all__group_indices.npy`` and ``dataset.json``.

Each epoch: the groups in an order drawn from the config's seed (the same on every
rank); from each group one puzzle, and its examples in a random order, until the global
batch is full; each rank takes its slice of the global batch. The puzzle and the order of
its examples come from NumPy's global generator, never seeded: in fresh processes every
rank builds a different global batch.
"""

import json
import os

import numpy as np
import torch


class PuzzleDataset(torch.utils.data.IterableDataset):
    def __init__(self, dataset_path, seed, global_batch_size, rank, num_replicas):
        self.path, self.seed = dataset_path, seed
        self.global_batch_size = global_batch_size
        self.rank, self.num_replicas = rank, num_replicas
        self.local_batch_size = global_batch_size // num_replicas
        with open(os.path.join(dataset_path, "dataset.json")) as f:
            self.metadata = json.load(f)

    def _load(self):
        return {name: np.load(os.path.join(self.path, f"all__{name}.npy"), mmap_mode="r")
                for name in ("inputs", "labels", "puzzle_identifiers", "puzzle_indices",
                             "group_indices")}

    def __iter__(self):
        data = self._load()
        groups = data["group_indices"]
        order = np.random.default_rng(self.seed).permutation(groups.size - 1)
        batch, puzzles = [], []
        for g in order:
            puzzle = np.random.randint(groups[g], groups[g + 1])  # unseeded
            start, end = data["puzzle_indices"][puzzle], data["puzzle_indices"][puzzle + 1]
            for example in np.random.permutation(np.arange(start, end)):
                batch.append(example)
                puzzles.append(puzzle)
            if len(batch) >= self.global_batch_size:
                mine = slice(self.rank * self.local_batch_size, (self.rank + 1) * self.local_batch_size)
                rows = np.asarray(batch[:self.global_batch_size])[mine]
                yield "train", {
                    "inputs": torch.from_numpy(np.asarray(data["inputs"][rows])),
                    "labels": torch.from_numpy(np.asarray(data["labels"][rows])),
                    "puzzle_identifiers": torch.from_numpy(
                        np.asarray(data["puzzle_identifiers"][np.asarray(puzzles[:self.global_batch_size])[mine]])),
                }, self.global_batch_size
                batch, puzzles = batch[self.global_batch_size:], puzzles[self.global_batch_size:]
