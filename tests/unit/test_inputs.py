"""The edge where input comes in: bounded reads of a user's files, text made printable, a
replay read back, values told apart by type and sign, ``latest`` checked to be ours."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.checkers.common import canonical
from harness.checkers.config_sync import check, digest
from harness.inputs import InputError, read_bytes, read_text
from harness.printable import printable, printable_data
from harness.reports.store import ReportDirError, check_latest, run_dir_name
from harness.runner.replay import REPLAY, RUN, Replay
from harness.vocabulary import FAIL, PASS

import support

# -- read_bytes ---------------------------------------------------------------------------------

def test_a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1024)
    assert read_bytes(path, 1024, "a file") == b"x" * 1024
    path.write_bytes(b"x" * 1025)
    with pytest.raises(InputError, match="1025 bytes long, larger than the 1 KiB"):
        read_bytes(path, 1024, "a file")


@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: p.mkdir(), "a directory"),
    (lambda p: p.symlink_to("/dev/null"), "a character device"),
])
def test_what_is_not_a_regular_file_is_refused_without_reading_it(tmp_path: Path, make,
                                                                  kind: str) -> None:
    path = tmp_path / "odd"
    make(path)
    with pytest.raises(InputError) as info:
        read_bytes(path, 1 << 20, "a report")
    assert str(info.value) == f"{path}: a report must be a regular file, and this is {kind}"


def test_a_missing_file_and_text_that_is_not_utf8_name_the_file_and_the_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nowhere: cannot read a report: No such file"):
        read_bytes(tmp_path / "nowhere", 10, "a report")
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: a\ndescription: caf\xe9\n")
    with pytest.raises(InputError) as info:
        read_text(path, 100, "a scenario file")
    assert info.value.line == 2 and "byte 0xe9" in str(info.value)


# -- printable ------------------------------------------------------------------------------

def test_printable_escapes_what_would_break_or_act_on_a_report_and_keeps_the_rest() -> None:
    assert printable("a\tb\nc ✓ é") == "a\tb\nc ✓ é"
    assert printable("\x1b[31mred\x07\r\x7f\x9b\u202e\udcff") == \
        "\\u001b[31mred\\u0007\\u000d\\u007f\\u009b\\u202e\\udcff"


@given(st.text(st.characters(codec=None, exclude_characters='"\\')))
def test_printable_text_in_a_json_string_is_the_original_text(text: str) -> None:
    """So a JSON report loses nothing: the escape is the character itself there."""
    assert json.loads(f'"{printable(text)}"'.replace("\n", "\\n").replace("\t", "\\t")) == text


def test_printable_data_reaches_keys_and_any_depth() -> None:
    deep: list = ["\x1b"]
    for _ in range(10_000):  # deeper than Python's recursion limit
        deep = [deep]
    out = printable_data({"k\x1b": deep, "n": 1.5, "t": ("\udcff",)})
    assert list(out) == ["k\\u001b", "n", "t"] and out["n"] == 1.5 and out["t"] == ["\\udcff"]
    inner = out["k\\u001b"]
    for _ in range(10_000):
        inner = inner[0]
    assert inner == ["\\u001b"]


# -- a replay read back -----------------------------------------------------------------------

WORDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), min_size=1,
                max_size=12)


@given(st.builds(Replay, WORDS, WORDS, seed=st.none() | st.integers(0, 2**32 - 1),
                 workload=st.none() | st.sampled_from(["data-sharding", "checkpoint-resume"]),
                 checker=st.none() | WORDS, topology=st.none() | WORDS,
                 timeout=st.none() | st.floats(0.001, 86400).map(lambda t: float(f"{t:g}")),
                 isolation=st.none() | st.just("python"),
                 command=st.sampled_from([REPLAY, RUN])))
def test_a_replay_parses_back_to_itself(replay: Replay) -> None:
    assert Replay.parse(str(replay)) == replay


@pytest.mark.parametrize("text, says", [
    (None, "not a command"),
    ("harness replay --scenario a --target b --seed x", "not a number"),
    ("harness replay --scenario a --target b --seed", "'--seed', which is not an option"),
    ("harness replay --scenario=a --target b", "'--scenario=a'"),
    ("harness replay --scenario a --target b $(reboot)", "'$(reboot)'"),
])
def test_a_text_that_is_not_a_replay_is_refused_saying_why(text, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")
                       .replace("$", r"\$")):
        Replay.parse(text)


# -- values told apart -------------------------------------------------------------------------

@pytest.mark.parametrize("a, b", [
    (0.0, -0.0), (1, True), (0, False), ((1, 2), [1, 2]), (1.0, np.float64(1.0)),
    ({"a": 1}, {"a": 1.0}), (np.zeros(5000), np.r_[np.zeros(4999), [1.0]]),
    (np.zeros(3, dtype=np.float32), np.zeros(3, dtype=np.float64)), ("1", 1),
    ({1: "a"}, {"1": "a"}), ({1, 2}, frozenset({1, 2})),
])
def test_values_python_calls_equal_or_prints_alike_are_told_apart(a, b) -> None:
    assert canonical(a) != canonical(b)
    assert digest({"k": a}) != digest({"k": b})


@pytest.mark.parametrize("a, b", [
    (float("nan"), float("nan")), ({"a": 1, "b": 2}, {"b": 2, "a": 1}), ({1, 2, 3}, {3, 2, 1}),
    (np.arange(4), np.arange(4)),
])
def test_the_same_values_are_the_same(a, b) -> None:
    assert canonical(a) == canonical(b)


def test_a_fail_between_values_that_print_alike_says_what_differs() -> None:
    """The reason is never empty: the types when they differ, else where two arrays do."""
    def world(*values):
        return support.world([support.rank(r, PASS, v) for r, v in enumerate(values)])

    judgement = check(world({"x": 1.0}, {"x": np.float64(1.0)}))
    assert judgement.outcome == FAIL
    assert "x 1.0 != np.float64(1.0)" in judgement.detail
    judgement = check(world({"w": np.zeros(4000)}, {"w": np.r_[np.zeros(3000), [2.0], np.zeros(999)]}))
    assert "element 3000 is np.float64(0.0) != np.float64(2.0)" in judgement.detail


# -- latest ------------------------------------------------------------------------------------

def test_latest_is_checked_to_be_the_harnesss_own(tmp_path: Path) -> None:
    assert check_latest(tmp_path) == tmp_path / "latest"  # absent: fine
    (tmp_path / "latest").symlink_to(run_dir_name())  # ours, even dangling
    check_latest(tmp_path)
    for other in ("/", "../x", f"{run_dir_name()}/..", "my-run"):
        (tmp_path / "latest").unlink()
        (tmp_path / "latest").symlink_to(other)
        with pytest.raises(ReportDirError, match=f"a symlink to {other}"):
            check_latest(tmp_path)
    (tmp_path / "latest").unlink()
    (tmp_path / "latest").mkdir()
    with pytest.raises(ReportDirError, match="not a symlink"):
        check_latest(tmp_path)
