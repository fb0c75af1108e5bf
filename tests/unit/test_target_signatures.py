"""A user's target is checked against its workload's call from its source, never run
(``harness.source.callee``, ``registry.check_call``): what the source cannot say is left
to the ranks, never guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import source
from harness.workloads.registry import target

FITS = """
import functools

def plain(inputs):
    return inputs

def defaults(inputs, retries=3, *, verbose=False):
    return inputs

def star(*args, **kwargs):
    return args

@functools.lru_cache
def decorated():
    return {}

assigned = plain

def make_loader(data_dir, rank, num_replicas, seed=0):
    return []

class Dataset:
    def __init__(self, dataset_paths, rank, num_replicas, split="train"):
        self.rank = rank

class Inherits(Dataset):
    pass

def declared(shuffle=True):  # by its parameters neither shape: its declaration decides
    return []

declared.harness_contract = "loader"
"""


@pytest.mark.parametrize("name, workload", [
    ("plain", "config-sync"), ("defaults", "config-sync"), ("star", "checkpoint-resume"),
    ("decorated", "config-sync"),  # its decorator may change how it is called: the ranks say
    ("assigned", "config-sync"), ("plain", "data-sharding"), ("make_loader", "data-sharding"),
    ("Dataset", "data-sharding"), ("Inherits", "data-sharding"), ("declared", "data-sharding"),
])
def test_what_fits_or_cannot_be_read_is_taken(tmp_path: Path, name: str, workload: str) -> None:
    path = tmp_path / "mine.py"
    path.write_text(FITS)
    assert target(f"{path}:{name}", workload).name == f"{path}:{name}"


def test_a_signature_read_from_source_is_the_one_python_would_give(tmp_path: Path) -> None:
    path = tmp_path / "mine.py"
    path.write_text(FITS)
    assert str(source.callee(str(path), "defaults").signature) == \
        "(inputs, retries=..., *, verbose=...)"
    dataset = source.callee(str(path), "Dataset")
    assert dataset.is_class and str(dataset.signature) == \
        "(dataset_paths, rank, num_replicas, split=...)"
    assert source.callee(str(path), "declared").declared == "loader"
    assert source.callee(str(path), "decorated") is None
    assert source.callee(str(path), "assigned") is None
    assert source.callee(str(path), "Inherits") is None
