"""Writes the stranger's own small token dataset: ``python make_npz.py DIR``."""

import sys

import numpy as np


def write(root: str, shards: int = 3, per_shard: int = 32, seq: int = 12) -> None:
    rng = np.random.default_rng(2024)
    for k in range(shards):
        tokens = rng.integers(0, 5000, size=(per_shard, seq), dtype=np.int64)
        labels = rng.integers(0, 2, size=per_shard, dtype=np.int64)
        np.savez(f"{root}/shard-{k:05d}.npz", tokens=tokens, labels=labels)


if __name__ == "__main__":
    write(sys.argv[1])
