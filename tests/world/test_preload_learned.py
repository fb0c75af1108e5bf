"""``record_files`` also learns what the target imported after the fork: a later
world of the same target preloads it."""

from __future__ import annotations

import logging

from harness import PASS, run_world
from harness.reports.diagnosis import describe

from support import TARGETS_DIR

TARGETS = TARGETS_DIR / "recording_targets.py"


def test_an_installed_module_imported_inside_the_function_is_learned_the_users_own_is_not():
    result = run_world(f"{TARGETS}:lazy_import", topology="v4-8", timeout=20, record_files=True)
    assert result.outcome == PASS, describe(result)
    assert "iniconfig" in result.imported
    assert "lazy_dep" not in result.imported, "the user's own code is imported in its sandbox"
    assert "recording_targets" not in result.imported, "the target module is never preloaded"
    assert not any(n == "harness" or n.startswith(("harness.", "torch_xla")) for n in result.imported)
    assert "json" not in result.imported


def test_nothing_is_learned_when_not_recording():
    result = run_world(f"{TARGETS}:lazy_import", topology="v4-8", timeout=20)
    assert result.outcome == PASS, describe(result)
    assert result.imported == []


def test_a_preload_that_cannot_be_imported_is_skipped_not_fatal(caplog):
    with caplog.at_level(logging.WARNING):
        result = run_world(f"{TARGETS}:lazy_import", topology="v4-8", timeout=20,
                           preload=("json", "no_such_module_anywhere_xyz"))
    assert result.outcome == PASS, describe(result)


def test_a_rank_still_importing_at_the_deadline_is_named_so_not_as_a_hang_in_the_code():
    result = run_world(f"{TARGETS}:slow_import", topology="v4-8", timeout=2)
    assert result.outcome == "HANG", describe(result)
    report = result.hang_report or ""
    assert "still importing `slow_import_dep`" in report, report
    assert "preload it (or give its import longer)" in report, report
    assert "outside any collective" not in report, report


def test_a_package_still_importing_is_named_by_its_dotted_path_never_init():
    result = run_world(f"{TARGETS}:slow_package_import", topology="v4-8", timeout=2)
    assert result.outcome == "HANG", describe(result)
    report = result.hang_report or ""
    assert "still importing `slow_pkg (in slow_pkg.heavy)`" in report, report
    assert "__init__" not in report, report


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


# -- the learning run (harness.runner.discovery) ------------------------------------------

def _cached(tmp_path) -> list:
    return sorted((tmp_path / "discovery").glob("*.json"))


def test_the_learning_run_honours_the_runs_deadline_and_keeps_no_failed_learning(
        tmp_path, monkeypatch):
    from harness.runner.discovery import discover
    from harness.workloads.registry import WORKLOADS, target

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    slow = target(f"{TARGETS}:slow_to_sync")
    failed = discover(slow, WORKLOADS["config-sync"], timeout=1)
    assert failed.outcome == "HANG", failed.detail
    assert "deadline 1 s" in failed.detail, failed.detail
    assert _cached(tmp_path) == [], "a failed learning is never kept"
    learned = discover(slow, WORKLOADS["config-sync"], timeout=20)
    assert learned.outcome == "PASS", learned.detail
    assert len(_cached(tmp_path)) == 1
    assert discover(slow, WORKLOADS["config-sync"], timeout=1).outcome == "PASS", \
        "a learning that passed is kept: the next run reads it, whatever its deadline"


def test_a_run_with_a_timeout_gives_its_learning_run_that_deadline(tmp_path, monkeypatch):
    """``harness run --timeout 20`` on a target whose fault-free run needs more than the
    learning run's own deadline would give it... and less than 20 s: it learns."""
    from harness.runner import discovery
    from harness.runner.run import discover_targets, plan_cells
    from harness.scenarios import find
    from harness.workloads.registry import target

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(discovery, "DISCOVERY_TIMEOUT", 1.0)
    slow = target(f"{TARGETS}:slow_to_sync")
    plans = plan_cells([find("baseline")], [slow], seed=0, timeout=20)
    assert discover_targets(plans)[(slow.name, "")].outcome == "PASS"
    plans = plan_cells([find("baseline")], [slow], seed=0)  # the scenario's own: the default
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "fresh"))
    found = discover_targets(plans)[(slow.name, "")]
    assert found.outcome == "HANG" and "deadline 1 s" in found.detail, found.detail


def test_a_data_sharding_loader_s_imports_are_learned_like_any_workload_s(tmp_path, monkeypatch):
    from harness.runner.run import discover_targets, plan_cells
    from harness.scenarios import find
    from harness.workloads.registry import target

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    loader = target(f"{TARGETS}:loader_importing_inside", workload="data-sharding")
    plans = plan_cells([find("uneven-shards")], [loader], seed=0)  # a scenario without roles
    found = discover_targets(plans)[(loader.name, "")]
    assert found.outcome == "PASS", found.detail
    assert "iniconfig" in found.imported


def test_a_harness_module_that_reaches_torch_xla_is_never_preloaded():
    """A user's target that wraps a reference target's module (imported in the fork server,
    where the shim is not on the path, that module would keep a failed torch_xla import for
    every later world of every target)."""
    from harness.world.pool import preload_for

    wrapper = TARGETS_DIR / "wraps_naive.py"
    assert preload_for(f"{wrapper}:sync", None, str(wrapper.parent)) == ()
    assert preload_for("harness.workloads.config_sync.robust:run", None, ".") == \
        ("harness.workloads.config_sync.model",)
