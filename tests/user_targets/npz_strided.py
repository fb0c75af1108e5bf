"""A stranger's correct loader over its own .npz shards: every sample of every shard in one
seeded order, each rank a stride of it, the remainder left out and named (``dropped_ids``:
the shards' own string ids)."""

import glob
import os

import numpy as np
import torch
from torch.utils.data import Dataset


class Sharded(Dataset):
    def __init__(self, data_dir, rank, world_size, seed=0):
        xs, ids = [], []
        for path in sorted(glob.glob(os.path.join(data_dir, "*.npz"))):
            with np.load(path) as shard:
                xs.append(shard["x"])
                ids += [f"{os.path.basename(path)}#{i}" for i in range(len(shard["x"]))]
        self.x = np.concatenate(xs)
        order = np.random.default_rng(seed).permutation(len(self.x))
        usable = len(order) // world_size * world_size
        self.idx = order[:usable][rank::world_size]
        self.dropped_ids = [ids[j] for j in order[usable:]]

    def __len__(self):
        return len(self.idx)

    def __getitem__(self, i):
        return torch.from_numpy(self.x[self.idx[i]])
