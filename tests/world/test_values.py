"""A rank's value is read in the harness as plain data, never by running the target's code.

Before: ``pickle.loads`` in the harness ran a value's ``__reduce__`` (a command, a sleep) and
needed the target's own classes (the harness exited 3 on an instance of one).
"""

from __future__ import annotations

import os
import pickle
import uuid
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from pydantic import BaseModel

from harness import ERROR, HANG, PASS, run_world
from harness.rank.values import UnreadableValue, decode, encode
from harness.reports.diagnosis import describe
from harness.world.assemble import unit_result
from harness.world.lifecycle import Unit
from harness.world.protocol import Result

from support import TARGETS_DIR

TARGETS = TARGETS_DIR / "survival_targets.py"


class Command:
    def __reduce__(self):
        return (os.system, ("true",))


@dataclass
class Point:
    x: int
    y: list


class Config(BaseModel):
    lr: float


@pytest.mark.parametrize("value", [
    {"a": 1, "b": [1, (2, 3)], "c": {4}}, 10 ** 5000, np.arange(6).reshape(2, 3),
    np.float32(1.5), torch.arange(4), torch.tensor([[1.5]]), torch.float16, b"\x00\xff"],
    ids=["builtins", "huge-int", "ndarray", "np-scalar", "tensor", "float-tensor", "dtype", "bytes"])
def test_plain_data_numpy_and_torch_go_as_they_are(value):
    payload, note = encode(value)
    assert note is None
    back = decode(payload)
    assert type(back) is type(value)
    assert (back == value).all() if hasattr(back, "shape") and back.shape != () else back == value


def test_what_only_the_targets_code_can_build_is_refused():
    with pytest.raises(UnreadableValue, match="posix.system"):
        decode(pickle.dumps(Command()))
    with pytest.raises(UnreadableValue, match="truncated|EOF|pickle"):
        decode(pickle.dumps({"a": 1})[:-3])


@pytest.mark.parametrize(("value", "plain"), [
    (Point(1, [2]), {"x": 1, "y": [2]}),
    (Config(lr=0.5), {"lr": 0.5}),
    ({"outer": Point(3, [])}, {"outer": {"x": 3, "y": []}}),
])
def test_a_users_own_value_goes_as_its_plain_form_with_a_note(value, plain):
    payload, note = encode(value)
    assert decode(payload) == plain
    assert note.startswith("sent as plain data (it holds ")


def test_a_forged_payload_is_that_ranks_error_not_the_runs(tmp_path):
    unit = Unit(pid=123, status=0, result=Result(ok=True, value_repr="x",
                                                 payload=pickle.dumps(Command())))
    rank = unit_result(str(tmp_path), 3, 0, unit, "rank-3")
    assert rank.outcome == ERROR
    assert rank.error["type"] == "UnreadableValue"
    assert rank.error["message"].startswith("returned a value that cannot be read: it holds posix.system")


def test_a_value_whose_reduce_runs_a_command_never_runs_it_in_the_harness(tmp_path):
    marker = tmp_path / f"ran-{uuid.uuid4().hex}"
    result = run_world(f"{TARGETS}:returns", topology="1x1", timeout=20, args=("shell", str(marker)),
                       sandbox=False)
    assert not marker.exists()
    assert result.outcome == PASS, describe(result)
    (rank,) = result.ranks
    assert rank.value_note.startswith("sent as plain data (it holds posix.system")
    assert rank.value["config"].startswith("<")  # its repr: what the user would see


def test_a_value_of_the_targets_own_class_comes_back_as_its_repr():
    result = run_world(f"{TARGETS}:returns", topology="1x1", timeout=20, args=("mine",))
    assert result.outcome == PASS, describe(result)
    assert result.ranks[0].value == "Mine(lr=0.1)"
    assert "survival_targets.Mine" in result.ranks[0].value_note


def test_a_value_whose_pickling_sleeps_is_the_ranks_hang_under_its_deadline():
    result = run_world(f"{TARGETS}:returns", topology="1x1", timeout=3, args=("sleeper",))
    assert result.outcome == HANG
    assert "survival_targets.py:" in result.hang_report and "in __reduce__" in result.hang_report
