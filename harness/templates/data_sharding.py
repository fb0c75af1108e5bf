"""Your data loader, as the harness calls it. `harness init` wrote this file: edit it.

The harness builds a dataset on every host of a simulated TPU pod, calls this on every
rank with the parameters it names, iterates what it returns (one item per training step),
and checks that the ranks' batches cover the epoch once, with no sample on two ranks:

    harness run --target {target} --workload data-sharding

Parameters, by name: data_dir (or root, data_path), rank, num_replicas (or world_size),
seed, global_batch_size. Your own dataset instead of the harness's: add --data DIR.
"""

import os

import numpy as np
import torch


class ShardedLoader:
    # EDIT: return your own loader for this rank instead, e.g. make this file
    #     from mytrain.data import ShardedDataset as ShardedLoader
    # This stand-in reads the harness's dataset (inputs.npy: one sample a row, its id in
    # column 0), shuffles it with the config's seed (the same order on every rank), and
    # drops the last partial global batch, saying which samples it drops. It does not check
    # its data: missing-data-on-host, divergent-dataset, corrupt-npy and
    # truncated-data-on-host fail until a loader checks the dataset on every host (see
    # harness/workloads/data_sharding/robust.py, which does).
    def __init__(self, data_dir, rank, num_replicas, seed=0, global_batch_size=8):
        self.rows = np.load(os.path.join(data_dir, "inputs.npy"), mmap_mode="r")
        order = np.random.default_rng(seed).permutation(len(self.rows))
        whole = len(order) - len(order) % global_batch_size
        self.order, self.dropped_ids = order[:whole], [int(self.rows[i, 0]) for i in order[whole:]]
        self.per_rank, self.rank, self.step = global_batch_size // num_replicas, rank, global_batch_size

    def __iter__(self):
        for start in range(0, len(self.order), self.step):
            mine = self.order[start + self.rank * self.per_rank:][:self.per_rank]
            yield torch.from_numpy(np.array(self.rows[mine]))
