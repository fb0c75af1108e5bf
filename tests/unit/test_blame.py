"""Whose an exception in a rank is (``harness.rank.blame``): only one that passed through no
frame but the harness's own is a bug of the harness's; everything the target did, and the
call of the target itself, is the target's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import refs
from harness.rank import blame, channel
from harness.rank.bootstrap import resolve_target
from harness.workloads.data_sharding import adapter


def _raised(fn: Any, *args: Any) -> BaseException:
    """What ``fn(*args)`` raised, its traceback starting below this frame (in a rank, the
    bootstrap's frame catches it: harness code)."""
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001
        assert exc.__traceback__ is not None
        return exc.with_traceback(exc.__traceback__.tb_next)
    raise AssertionError(f"{fn} did not raise")


def test_an_exception_raised_by_harness_code_alone_is_the_harnesss(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert blame.harness_own(_raised(refs.parse, ""))
    # A rank's target module is code under test (a built-in reference target's, in the
    # harness's tree); the adapter is the rank's target too, yet says it is the harness's.
    monkeypatch.setattr(channel, "TARGET_MODULES", {refs.__name__, adapter.__name__})
    assert not blame.harness_own(_raised(refs.parse, ""))
    assert blame.harness_own(_raised(adapter.dropped_ids, 5))


def test_a_frame_of_the_targets_on_the_way_makes_it_the_targets() -> None:
    def loader() -> None:  # this test's file is outside the harness: the target's code
        refs.parse("")
    assert not blame.harness_own(_raised(loader))

    class Dataset:
        def __len__(self) -> int:
            raise ValueError("the loader's own")
    assert not blame.harness_own(_raised(lambda: list(adapter.batches_of(Dataset(), 2))))


def test_calling_a_target_that_does_not_take_its_arguments_is_the_targets() -> None:
    def sync(config: dict, rank: int) -> dict:  # the harness hands one argument
        return config
    exc = _raised(blame.call_target, sync, {"a": 1})
    assert isinstance(exc, TypeError) and not blame.harness_own(exc)

    class Dataset:
        def __getitem__(self, i: int) -> int:
            return i

        def __len__(self) -> str:  # type: ignore[override]
            return "ten"
    exc = _raised(lambda: list(adapter.batches_of(Dataset(), 2)))
    assert isinstance(exc, TypeError) and not blame.harness_own(exc), \
        "len() of the target's object raised in the adapter's frame, for the target's __len__"


def test_a_target_ref_that_names_nothing_is_the_targets(tmp_path: Path) -> None:
    exc = _raised(resolve_target, f"{tmp_path}/absent.py:fn")
    assert isinstance(exc, FileNotFoundError) and not blame.harness_own(exc)
    (tmp_path / "t.py").write_text("x = 1\n")
    for ref in (f"{tmp_path}/t.py:absent", f"{tmp_path}/t.py:x"):
        assert not blame.harness_own(_raised(resolve_target, ref)), ref
