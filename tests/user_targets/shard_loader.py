"""A team's own puzzle loader, as they wrote it (not the harness's code).

Run against the harness with:

    harness run --target tests/user_targets/shard_loader.py:ShardDataset --workload data-sharding
"""

import os

import numpy as np
import torch
from torch.utils.data import Dataset


class ShardDataset(Dataset):
    """The samples this rank trains on: a seeded shuffle of the whole set, every
    num_replicas-th sample from position `rank`."""

    def __init__(self, data_dir, rank, num_replicas, seed=0):
        self.inputs = np.load(os.path.join(data_dir, "inputs.npy"), mmap_mode="r")
        self.labels = np.load(os.path.join(data_dir, "labels.npy"), mmap_mode="r")
        order = np.random.default_rng(seed).permutation(len(self.inputs))
        self.indices = order[rank::num_replicas]

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        row = self.indices[i]
        return torch.from_numpy(np.array(self.inputs[row])), torch.from_numpy(np.array(self.labels[row]))


def make_loader(data_dir, rank, num_replicas, seed, global_batch_size):
    """The same shard, batched: what the training loop iterates."""
    dataset = ShardDataset(data_dir, rank, num_replicas, seed)
    return torch.utils.data.DataLoader(dataset, batch_size=global_batch_size // num_replicas,
                                       drop_last=True)
