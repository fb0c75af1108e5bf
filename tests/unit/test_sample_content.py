"""Identity by content: what one sample of a batch is, its digest, padding, and the checker's
multiset of the epoch a world of one rank read."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from harness.checkers.sharding import Epoch, check_values
from harness.vocabulary import FAIL, PASS
from harness.workloads.data_sharding import content
from harness.workloads.data_sharding.own_data import another_version, garbled


def test_a_puzzle_loaders_tuple_is_its_dict_rows_and_its_name_and_count_are_the_batchs():
    batch = ("train", {"inputs": torch.arange(12).reshape(3, 4),
                       "labels": np.arange(12).reshape(3, 4), "puzzle_identifiers": np.array([5, 6, 7])},
             3)
    rows = content.elements(batch)
    assert len(rows) == 3
    assert content.digest(rows[1]) == content.digest(
        {"inputs": np.arange(4, 8), "labels": np.arange(4, 8), "puzzle_identifiers": np.int64(6)})
    assert content.name(rows[0]) == "{inputs: [0 1 2 3], labels: [0 1 2 3], puzzle_identifiers: 5}"


@pytest.mark.parametrize("batch, n", [
    ((torch.zeros(8, 16), torch.arange(8)), 8),  # default_collate's (inputs, labels)
    ([torch.ones(3) * i for i in range(5)], 5),  # a list of samples, uncollated
    ([{"text": "a", "label": 1}, {"text": "b", "label": 2}], 2),
    (np.arange(6).reshape(3, 2), 3),
    (["x", "y"], 2),
])
def test_the_elements_of_each_batch_shape(batch, n):
    assert len(content.elements(batch)) == n


def test_a_bfloat16_batch_is_read_as_its_values():
    batch = torch.arange(6, dtype=torch.bfloat16).reshape(3, 2)
    rows = content.elements(batch)
    assert len(rows) == 3 and content.digest(rows[0]) != content.digest(rows[1])


def test_a_batch_whose_fields_disagree_on_rows_or_hold_none_is_refused_saying_why():
    with pytest.raises(content.ContentError, match="different numbers of rows"):
        content.elements({"a": np.zeros((3, 2)), "b": np.zeros((4, 2))})
    with pytest.raises(content.ContentError, match="no field with rows"):
        content.elements({"name": "train", "n": 3})


def test_the_digest_reads_type_shape_and_values_never_an_address():
    assert content.digest(np.array([1, 2], dtype=np.int32)) != content.digest(np.array([1, 2]))
    assert content.digest(np.array([1, 2])) != content.digest(np.array([[1, 2]]))
    assert content.digest(1) != content.digest(1.0)
    assert content.digest({"a": 1, "b": 2}) == content.digest({"b": 2, "a": 1})
    with pytest.raises(content.ContentError, match="harness_ids"):
        content.digest(object())


def test_padding_is_a_row_whose_every_field_repeats_one_value():
    assert content.is_padding({"inputs": np.zeros(9), "labels": np.full(9, -100), "id": 0})
    assert not content.is_padding({"inputs": np.arange(9), "labels": np.full(9, -100)})
    assert not content.is_padding({"label": 3})  # nothing with more than one value


def _epoch(values):
    return Epoch.from_reference({"batches": values, "names": {str(i): f"x{i}" for v in values
                                                                for i in v}}, 2, "/data")


def test_a_dataset_that_repeats_an_example_is_a_multiset():
    epoch = _epoch([[1, 1], [2, 3]])  # sample 1 twice in the data
    ok = {0: {"batches": [[1, 2]], "restart": [[1, 2]]}, 1: {"batches": [[1, 3]], "restart": [[1, 3]]}}
    assert check_values(ok, epoch).outcome == PASS
    thrice = {0: {"batches": [[1, 1]], "restart": [[1, 1]]}, 1: {"batches": [[1, 3]], "restart": [[1, 3]]}}
    judged = check_values(thrice, epoch)
    assert judged.outcome == FAIL
    assert "1 sample read more often than the data holds them" in judged.detail
    assert "sample #1 x1 in rank 0 batch 0" in judged.detail


def test_padding_rows_are_counted_apart_in_a_pass():
    epoch = _epoch([[1, 2], [3, 4]])
    values = {r: {"batches": [b], "restart": [b], "padding": 1} for r, b in enumerate([[1, 2], [3, 4]])}
    assert check_values(values, epoch).detail.endswith(
        "covering all 4 samples, and 2 padding rows; the same batches from a fresh loader with "
        "the same seed")


def test_another_version_keeps_shapes_and_changes_every_row():
    array = np.arange(20, dtype=np.int16).reshape(10, 2)
    buf = io.BytesIO()
    np.save(buf, array)
    other = np.load(io.BytesIO(another_version("a.npy", buf.getvalue(), 0)))
    assert other.shape == array.shape and other.dtype == array.dtype
    assert not {tuple(r) for r in other} & {tuple(r) for r in array}
    lines = b"".join(json.dumps({"i": i, "text": f"t{i}"}).encode() + b"\n" for i in range(5))
    other_lines = another_version("t.jsonl", lines, 0).splitlines()
    assert len(other_lines) == 5  # as many records: a count of samples cannot tell them apart
    revised = set(other_lines) - set(lines.splitlines())
    assert len(revised) == 1 and json.loads(revised.pop())["text"].startswith("revised: ")
    csv = b"".join(f"{i},{i * 10}\n".encode() for i in range(4))
    assert len(set(another_version("t.csv", csv, 0).splitlines()) - set(csv.splitlines())) == 1
    manifest = json.dumps({"n": 5}).encode()
    assert another_version("dataset.json", manifest, 0) == manifest


def test_garbling_changes_rows_behind_an_intact_npy_header():
    buf = io.BytesIO()
    np.save(buf, np.arange(40, dtype=np.int32).reshape(10, 4))
    bad = garbled("a.npy", buf.getvalue(), "data", 2, 0)
    loaded = np.load(io.BytesIO(bad))  # the header is intact: it loads
    assert (loaded != np.arange(40).reshape(10, 4)).any(axis=1).sum() == 2
    with pytest.raises(ValueError):
        np.load(io.BytesIO(garbled("a.npy", buf.getvalue(), "header", 2, 0)))


def test_a_loaders_own_ids_function_is_used_where_content_is_not_stable():
    from harness.workloads.data_sharding.adapter import Identity, ids_function

    def make_loader(data_dir):  # a loader with random augmentation, and its ids
        return []
    make_loader.harness_ids = lambda batch: batch["id"]
    identity = Identity(True, ids_function(make_loader))
    noisy = {"id": np.array([3, 4]), "x": np.random.default_rng().normal(size=(2, 5))}
    assert identity.of_batch(noisy) == [3, 4]
    assert identity.of_items([{"id": 7, "x": 0.5}]) == [7]
    assert not identity.by_content and identity.names == {}
