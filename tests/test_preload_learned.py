"""``record_files`` also learns what the target imported after the fork: a later
world of the same target preloads it."""

from __future__ import annotations

import logging
from pathlib import Path

from harness import PASS, run_world

TARGETS = Path(__file__).parent / "targets" / "recording_targets.py"


def test_an_installed_module_imported_inside_the_function_is_learned_the_users_own_is_not():
    result = run_world(f"{TARGETS}:lazy_import", topology="v4-8", timeout=20, record_files=True)
    assert result.outcome == PASS, result.describe()
    assert "iniconfig" in result.imported
    assert "lazy_dep" not in result.imported, "the user's own code is imported in its sandbox"
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


def test_a_rank_still_importing_at_the_deadline_is_named_so_not_as_a_hang_in_the_code():
    result = run_world(f"{TARGETS}:slow_import", topology="v4-8", timeout=2)
    assert result.outcome == "HANG", result.describe()
    report = result.hang_report or ""
    assert "still importing `slow_import_dep`" in report, report
    assert "raise the deadline or preload it" in report, report
    assert "outside any collective" not in report, report


def test_importing_reads_the_module_from_a_stack():
    from harness.world.watchdog import importing

    stack = ('Thread MainThread:\n'
             '  File "/w/train.py", line 3, in main\n'
             '    from models.trm import Net\n'
             '  File "<frozen importlib._bootstrap>", line 1176, in _find_and_load\n'
             '  File "<frozen importlib._bootstrap_external>", line 940, in exec_module\n'
             '  File "/w/models/trm.py", line 2, in <module>\n'
             '    import torch\n')
    assert importing(stack) == "models.trm"
    dump = ('(from faulthandler: the rank did not answer)\n'
            'Current thread 0x1 (most recent call first):\n'
            '  File "/w/models/trm.py", line 5 in <module>\n'
            '  File "<frozen importlib._bootstrap>", line 241 in _call_with_frames_removed\n'
            '  File "/w/train.py", line 3 in main\n')
    assert importing(dump) == "trm"
    assert importing('Thread MainThread:\n  File "/w/train.py", line 3, in main\n    x()\n') is None


def test_a_users_module_with_import_time_effects_is_never_preloaded_outside_the_sandbox(
        tmp_path, monkeypatch):
    """A module of the user's that writes a file when imported, importable by the fork
    server (on PYTHONPATH): its import must still happen in each rank, inside the
    sandbox, or its write lands on the machine's /tmp."""
    import os
    import uuid

    from harness.runner.run import plan_cells, run_cell
    from harness.scenarios import find
    from harness.workloads.registry import target

    marker = f"/tmp/harness-import-marker-{uuid.uuid4().hex}"
    (tmp_path / "sidecar_effects.py").write_text(
        f"open({marker!r}, 'w').write('imported')\nVALUE = 1\n")
    (tmp_path / "sync_with_sidecar.py").write_text(
        "import torch_xla.core.xla_model as xm\n"
        "def sync(inputs):\n"
        "    import sidecar_effects\n"
        "    xm.rendezvous('config')\n"
        "    return dict(inputs['config'])\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    plan = plan_cells([find("missing-file")], [target(f"{tmp_path}/sync_with_sidecar.py:sync")],
                      seed=0)[0]
    try:
        cell = run_cell(plan)
        assert cell.outcome in ("PASS", "NOT-EXERCISED"), cell.detail
        assert not os.path.exists(marker), "a user's module was imported outside the sandbox"
    finally:
        if os.path.exists(marker):
            os.unlink(marker)
