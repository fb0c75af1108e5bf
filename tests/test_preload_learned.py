"""``record_files`` also learns what the target imported after the fork: a later
world of the same target preloads it."""

from __future__ import annotations

import logging
from pathlib import Path

from harness import PASS, run_world

TARGETS = Path(__file__).parent / "targets" / "recording_targets.py"


def test_a_module_imported_inside_the_function_is_learned():
    result = run_world(f"{TARGETS}:lazy_import", topology="v4-8", timeout=20, record_files=True)
    assert result.outcome == PASS, result.describe()
    assert "lazy_dep" in result.imported
    assert "recording_targets" not in result.imported, "the target module is never preloaded"
    assert not any(n == "harness" or n.startswith(("harness.", "torch_xla")) for n in result.imported)
    assert "json" not in result.imported


def test_nothing_is_learned_when_not_recording():
    result = run_world(f"{TARGETS}:lazy_import", topology="v4-8", timeout=20)
    assert result.outcome == PASS, result.describe()
    assert result.imported == []


def test_a_preload_that_cannot_be_imported_is_skipped_not_fatal(caplog):
    with caplog.at_level(logging.WARNING):
        result = run_world(f"{TARGETS}:lazy_import", topology="v4-8", timeout=20,
                           preload=("json", "no_such_module_anywhere_xyz"))
    assert result.outcome == PASS, result.describe()
