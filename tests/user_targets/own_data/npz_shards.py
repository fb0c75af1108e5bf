"""A stranger's loader: token shards in .npz files, a seeded DistributedSampler-style split.

Written as a team would for their own data (no harness names): ``shard-00000.npz`` ...
each holding ``tokens`` (N, seq) and ``labels`` (N,); every rank reads every shard's
index, draws one permutation from the config's seed, pads the order to a multiple of
the world size (as torch's DistributedSampler does), and takes its stride.
"""

import glob
import os

import numpy as np
import torch
import torch_xla.runtime as xr


class ShardedTokens(torch.utils.data.IterableDataset):
    def __init__(self, root, seed=0, global_batch_size=8):
        self.files = sorted(glob.glob(os.path.join(root, "shard-*.npz")))
        if not self.files:
            raise FileNotFoundError(f"no shard-*.npz under {root}")
        self.seed = seed
        self.local_batch = global_batch_size // xr.world_size()

    def _examples(self):
        tokens, labels = [], []
        for path in self.files:
            with np.load(path) as shard:
                tokens.append(shard["tokens"])
                labels.append(shard["labels"])
        return np.concatenate(tokens), np.concatenate(labels)

    def __iter__(self):
        tokens, labels = self._examples()
        order = np.random.default_rng(self.seed).permutation(len(tokens))
        world, rank = xr.world_size(), xr.global_ordinal()
        per_rank = -(-len(order) // world)
        order = np.concatenate([order, order[: per_rank * world - len(order)]])  # pad: repeat
        mine = order[rank::world]
        for start in range(0, len(mine) - self.local_batch + 1, self.local_batch):
            idx = mine[start:start + self.local_batch]
            yield {"tokens": torch.from_numpy(tokens[idx]), "labels": torch.from_numpy(labels[idx])}
