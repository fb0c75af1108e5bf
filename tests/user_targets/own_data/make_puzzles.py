"""Writes the stranger's puzzle dataset: ``python make_puzzles.py DIR``: 24 groups of 3
puzzles, each puzzle 2 examples of 9 tokens."""

import json
import sys

import numpy as np


def write(root: str, groups: int = 24, per_group: int = 3, examples: int = 2, seq: int = 9) -> None:
    rng = np.random.default_rng(11)
    puzzles = groups * per_group
    n = puzzles * examples
    arrays = {
        "inputs": rng.integers(1, 10, size=(n, seq), dtype=np.int32),
        "labels": rng.integers(1, 10, size=(n, seq), dtype=np.int32),
        "puzzle_identifiers": np.arange(1, puzzles + 1, dtype=np.int32),
        "puzzle_indices": np.arange(puzzles + 1, dtype=np.int32) * examples,
        "group_indices": np.arange(groups + 1, dtype=np.int32) * per_group,
    }
    for name, array in arrays.items():
        np.save(f"{root}/all__{name}.npy", array)
    with open(f"{root}/dataset.json", "w") as f:
        json.dump({"seq_len": seq, "vocab_size": 10, "total_groups": groups,
                   "total_puzzles": puzzles, "sets": ["all"]}, f)


if __name__ == "__main__":
    write(sys.argv[1])
