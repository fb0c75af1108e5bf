"""A rank's value is read in the harness as plain data, never by running the target's code.

Before: ``pickle.loads`` in the harness ran a value's ``__reduce__`` (a command, a sleep) and
needed the target's own classes (the harness exited 3 on an instance of one).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import uuid
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from pydantic import BaseModel

from harness import ERROR, HANG, PASS, run_world
from harness.rank.values import UnreadableValue, ValueTooLarge, decode, encode
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


# -- bounded: a value never costs the harness more than a few times its limit -------------

def _bombs() -> list[bytes]:
    """Pickles that build far more than their bytes: a count, a lazy range, a shape."""
    from collections import deque

    class Expands:
        def __init__(self, reduce):
            self.reduce = reduce

        def __reduce__(self):
            return self.reduce

    return [pickle.dumps(Expands(r)) for r in (
        (bytearray, (10 ** 10,)), (bytes, (10 ** 10,)), (list, (range(10 ** 10),)),
        (deque, (range(10 ** 10),)), (frozenset, (range(10 ** 10),)),
        (np.ndarray, ((10 ** 5, 10 ** 4),)),  # 8 GB reserved, not yet touched
        (np.ndarray.__reduce__(np.zeros(1))[0], (np.ndarray, (10 ** 6, 10 ** 6), b"b")))]


def test_a_pickle_that_builds_more_than_it_holds_is_refused_before_it_is_built():
    for bomb in _bombs():
        assert len(bomb) < 200
        with pytest.raises(ValueTooLarge, match="returned a value (that grows as it is read|"
                                                "whose arrays span 7629.4 MiB)"):
            decode(bomb)
    deep: list = []
    for _ in range(300):  # what pickle itself can write; a forged one may nest far deeper
        deep = [deep]
    with pytest.raises(ValueTooLarge, match="nested more than 200 deep"):
        decode(pickle.dumps(deep))
    # what plain values use of the same constructors still reads
    from collections import Counter, OrderedDict, defaultdict, deque
    for value in (bytearray(b"ab"), deque([1, 2], maxlen=3), Counter("aab"),
                  OrderedDict(a=1), defaultdict(list, a=[1]), np.zeros((3, 2))):
        back = decode(pickle.dumps(value))
        assert type(back) is type(value) and str(back) == str(value)


def test_a_value_beyond_the_limit_is_not_read():
    payload = pickle.dumps(list(range(3 * 10 ** 6)))  # 15 MB
    with pytest.raises(ValueTooLarge, match=r"returned a value of 14\.\d MiB pickled: the "
                                            r"harness reads at most 8\.0 MiB"):
        decode(payload)


@pytest.mark.parametrize(("kind", "words"), [
    ("bomb", "returned a value that grows as it is read: it builds builtins.bytearray from int "
             "10000000000"),
    ("ten-million", "returned a value of 4"),
])
def test_a_rank_returning_a_bomb_or_a_huge_value_is_its_error_naming_the_limit(kind, words):
    result = run_world(f"{TARGETS}:returns", topology="1x2", timeout=30, args=(kind,))
    assert result.outcome == ERROR, describe(result)
    for rank in result.ranks:
        assert rank.error["type"] == "ValueTooLarge"
        assert rank.error["message"].startswith(words), rank.error["message"]
        assert rank.value_pickle is None
    assert f"ranks 0-1 {words}" in describe(result)


def test_eight_ranks_returning_ten_million_ints_cost_the_harness_little_memory(tmp_path):
    """Measured in a harness process of its own: its peak (not its ranks') stays far under
    the 4.4 GB such a world once cost it."""
    script = (
        "import resource, sys\n"
        "from harness import run_world\n"
        f"r = run_world({str(TARGETS)!r} + ':returns', topology='1x8', timeout=60,"
        " args=('ten-million',))\n"
        "print(r.outcome, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    outcome, peak_kib = done.stdout.split()
    assert outcome == "ERROR", done.stderr
    assert int(peak_kib) < 1 << 20, f"the harness peaked at {int(peak_kib) >> 10} MiB"
