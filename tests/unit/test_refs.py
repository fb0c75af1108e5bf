"""References to a user's code read one way, whichever face took them."""

from __future__ import annotations

import pytest

from harness import refs


@pytest.mark.parametrize("text, module, attr, is_file, name", [
    ("pkg.mod:fn", "pkg.mod", "fn", False, "pkg.mod"),
    ("sync.py:load_config", "sync.py", "load_config", True, "sync"),
    ("src/sync:Cls.method", "src/sync", "Cls.method", True, "sync"),
    ("C:/x.py:fn", "C:/x.py", "fn", True, "x"),  # the last colon separates
])
def test_a_reference_is_read_the_same_by_every_face(text, module, attr, is_file, name):
    ref = refs.parse(text)
    assert (ref.module, ref.attr, ref.is_file, ref.module_name) == (module, attr, is_file, name)
    assert str(ref) == text and refs.module_of(text) == module


@pytest.mark.parametrize("text", ["sync.py", ":fn", "mod:", ""])
def test_a_reference_without_its_two_halves_says_how_one_is_written(text):
    with pytest.raises(ValueError, match=r"checker .*: expected module.path:function or "
                                         r"path/to/file.py:function"):
        refs.parse(text, "checker")


def _module_level() -> None:
    pass


def test_a_function_is_named_as_a_rank_can_find_it():
    assert refs.name_of(_module_level) == f"{__name__}:_module_level"
    assert refs.name_of("a.b:c") == "a.b:c"
    with pytest.raises(ValueError, match="cannot be found by name in a rank process"):
        refs.name_of(lambda: None)


def test_a_file_targets_replay_names_it_absolutely_and_still_names_the_reports_cell(
        tmp_path, monkeypatch):
    from harness.refs import absolute, same_target

    monkeypatch.chdir(tmp_path)
    assert absolute("src/sync.py:load") == f"{tmp_path}/src/sync.py:load"
    for unchanged in ("naive-sync", "mypkg.sync:load", "/abs/sync.py:load"):
        assert absolute(unchanged) == unchanged
    assert same_target(f"{tmp_path}/src/sync.py:load", "src/sync.py:load")
    assert not same_target(f"{tmp_path}/src/other.py:load", "src/sync.py:load")
    assert not same_target(f"{tmp_path}/src/sync.py:save", "src/sync.py:load")
    assert not same_target("/elsewhere/naive-sync", "naive-sync")
