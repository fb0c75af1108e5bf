"""A stranger's loader: one JSONL file of examples grouped by document, each worker with
its own random stream (``seed + rank``), documents dealt out round-robin.

The classic bug: every rank shuffles the documents with a different generator before
taking its stride, so ranks take overlapping documents of different sizes and run
different numbers of steps; the ranks with one more step block in its collective.
"""

import json
import os
import random

import torch_xla.runtime as xr


def make_loader(data_path, seed, global_batch_size):
    rank, world = xr.global_ordinal(), xr.world_size()
    docs = {}
    with open(os.path.join(data_path, "train.jsonl")) as f:
        for line in f:
            example = json.loads(line)
            docs.setdefault(example["doc"], []).append(example)
    groups = list(docs.values())
    rng = random.Random(seed + rank)  # each worker its own stream
    rng.shuffle(groups)
    examples = [e for group in groups[rank::world] for e in group]
    per_step = global_batch_size // world
    for start in range(0, len(examples), per_step):
        yield [{"text": e["text"], "label": e["label"]} for e in examples[start:start + per_step]]
