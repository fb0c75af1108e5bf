"""Workloads register themselves, and a scenario's inputs are validated at load.

The registry finds workloads through the ``harness.workloads`` entry points (the
built-ins too, even without package metadata); the loader validates ``inputs:``
against the scenario's workload's model, and a bad value is ``file:line``, exit 2.
"""

from __future__ import annotations

import logging
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from harness.checkers.common import Judgement, end_of_world
from harness.runner.cells import OK
from harness.runner.run import plan_cells, run_cell
from harness.scenarios import CATALOG_ORDER, ScenarioError, catalog, load_scenario
from harness.workloads import registry
from harness.workloads.base import Workload, WorkloadInputs
from harness.world.result import PASS, WorldResult

from support import REPO, tomllib

HERE = Path(__file__).resolve()


# -- a workload of a user's own, as its package would define it -----------------------------

class EchoInputs(WorkloadInputs):
    greeting: str = Field(default="hello", max_length=64)
    times: int = Field(default=1, ge=1, le=10)


def _echo_check(result: WorldResult) -> Judgement:
    ended = end_of_world(result)
    if ended is not None:
        return ended
    values = {r.value for r in result.ranks}
    return Judgement(PASS, f"every rank said {values}") if len(values) == 1 else \
        Judgement("FAIL", f"ranks disagree: {sorted(values)}")


def echo(inputs: dict[str, Any]) -> str:
    """A target of the echo workload: run inside every rank."""
    return inputs["greeting"] * inputs["times"]


ECHO = Workload("echo", EchoInputs, _echo_check, targets={"echo-target": f"{HERE}:echo"},
                catalog_order=("echo-twice",))


class _EntryPoint:
    """What ``importlib.metadata.entry_points`` yields, for a package that is not installed."""

    def __init__(self, name: str, value: str, loaded: Any = None, error: Exception | None = None):
        self.name, self.value, self._loaded, self._error = name, value, loaded, error

    def load(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._loaded


def _with_entry_points(monkeypatch, *eps: _EntryPoint) -> None:
    monkeypatch.setattr(registry.metadata, "entry_points",
                        lambda group: list(eps) if group == registry.GROUP else [])


# -- the registry ---------------------------------------------------------------------------

def test_the_built_in_entry_points_are_the_ones_pyproject_declares():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[registry.GROUP] == registry.BUILTIN_ENTRY_POINTS


def test_the_installed_metadata_names_the_built_ins_through_the_entry_point_group():
    try:
        metadata.distribution("harness")
    except metadata.PackageNotFoundError:
        pytest.skip("running from a checkout without package metadata")
    found = {ep.name: ep.value for ep in metadata.entry_points(group=registry.GROUP)}
    assert registry.BUILTIN_ENTRY_POINTS.items() <= found.items()


def test_without_package_metadata_the_built_ins_are_still_found(monkeypatch):
    _with_entry_points(monkeypatch)  # a checkout on PYTHONPATH: the group is empty
    found = registry.discover()
    assert list(found) == ["config-sync", "data-sharding", "checkpoint-resume", "trainer",
                           "spmd-trainer"]
    assert found == registry.WORKLOADS


def test_the_built_in_targets_keep_their_names_preloads_and_known_failures():
    targets = registry.BUILTIN_TARGETS
    assert list(targets) == ["naive-sync", "seed-fix-sync", "robust-sync", "seed-loader",
                             "robust-loader", "naive-worker", "robust-worker", "naive-trainer",
                             "robust-trainer", "naive-spmd-trainer", "managed-trainer"]
    assert all(t.builtin and t.preload == registry.WORKLOADS[t.workload].preload
               for t in targets.values())
    config_sync = set(CATALOG_ORDER[:19])
    assert targets["seed-fix-sync"].known_failures == config_sync
    assert targets["naive-sync"].known_failures == config_sync - {
        "baseline", "divergent-slugs", "divergent-input", "slow-writer"}
    assert targets["seed-loader"].known_failures == {
        "missing-data-on-host", "divergent-dataset", "corrupt-npy", "divergent-seed",
        "uneven-groups", "truncated-data-on-host"}
    assert targets["naive-worker"].known_failures == {
        "preempt-mid-shard", "preempt-mid-checkpoint", "preempt-storm", "upload-failure",
        "duplicate-worker-id"}
    assert targets["naive-trainer"].known_failures == {
        "preempt-notice-one-host", "preempt-save-outlasts-grace", "preempt-no-notice"}
    assert targets["robust-trainer"].known_failures == frozenset()
    assert targets["naive-spmd-trainer"].known_failures == {
        "checkpoint-host-local", "spmd-notice-one-host", "async-save-pending",
        "gcsfuse-checkpoint"}
    assert targets["managed-trainer"].known_failures == frozenset()
    assert all(not targets[name].known_failures
               for name in ("robust-sync", "robust-loader", "robust-worker"))


def test_the_catalog_order_is_each_workloads_in_turn_and_names_every_catalog_file():
    assert CATALOG_ORDER[:3] == ("baseline", "missing-file", "partial-write")
    assert CATALOG_ORDER[19:21] == ("uneven-shards", "missing-data-on-host")
    assert CATALOG_ORDER[-14:-12] == ("stream-missing", "baseline-resume")
    assert CATALOG_ORDER[-8:-6] == ("preempt-during-warmup", "baseline-train")
    assert CATALOG_ORDER[-6:] == ("checkpoint-host-local", "spmd-notice-one-host",
                                  "async-save-pending", "gcsfuse-checkpoint",
                                  "checkpoint-disk-full", "baseline-spmd-train")
    assert CATALOG_ORDER[27] == "baseline-sharding"
    assert [s.name for s in catalog()] == list(CATALOG_ORDER)


def test_a_third_party_workload_registers_after_the_built_ins(monkeypatch):
    _with_entry_points(monkeypatch, _EntryPoint("echo", "tests.test_workloads:ECHO", ECHO))
    found = registry.discover()
    assert list(found)[-1] == "echo" and found["echo"] is ECHO
    assert "echo-target" in registry._targets(found)


@pytest.mark.parametrize("entry,warning", [
    (_EntryPoint("broken", "nowhere:W", error=ImportError("No module named 'nowhere'")),
     "does not load: No module named 'nowhere'"),
    (_EntryPoint("not-one", "x:y", loaded=object()), "is not a harness Workload"),
    (_EntryPoint("again", "x:z", loaded=registry.WORKLOADS["config-sync"]),
     "'config-sync' is already registered"),
])
def test_a_bad_third_party_entry_point_is_skipped_with_a_warning(monkeypatch, caplog, entry,
                                                                  warning):
    _with_entry_points(monkeypatch, entry)
    with caplog.at_level(logging.WARNING, logger=registry.__name__):
        found = registry.discover()
    assert list(found) == list(registry.WORKLOADS)
    assert found["config-sync"] is registry.WORKLOADS["config-sync"]
    assert warning in caplog.text


ECHO_SCENARIO = """\
name: echo-twice
workload: echo
description: every rank says the same greeting
finding: "none: a user's workload"
topology: 1x2
expect: pass
timeout: 20
inputs:
  greeting: hi
  times: 2
"""


def test_a_users_workload_runs_without_editing_the_harness(monkeypatch, tmp_path):
    monkeypatch.setitem(registry.WORKLOADS, "echo", ECHO)
    path = tmp_path / "echo-twice.yaml"
    path.write_text(ECHO_SCENARIO)
    scenario = load_scenario(path)
    assert scenario.workload_inputs == EchoInputs(greeting="hi", times=2)
    (target,) = ECHO.reference_targets()
    (plan,) = plan_cells([scenario], [target], seed=0)
    done = run_cell(plan)
    assert (done.outcome, done.verdict) == (PASS, OK), done.detail
    assert "hihi" in done.detail


def test_an_unknown_workload_names_the_registered_ones(tmp_path):
    path = tmp_path / "echo-twice.yaml"
    path.write_text(ECHO_SCENARIO)
    with pytest.raises(ScenarioError) as refused:
        load_scenario(path)
    assert str(refused.value) == (
        f"{path}:2: unknown workload 'echo': use one of config-sync, data-sharding, "
        "checkpoint-resume, trainer, spmd-trainer (field 'workload')")


# -- inputs, validated at load --------------------------------------------------------------

SHARDING = """\
name: mine
workload: data-sharding
description: a test scenario
finding: "seed 000"
topology: 4x1
expect: pass
inputs:
  global_batch_size: 8
  {line}
"""
RESUME = SHARDING.replace("data-sharding", "checkpoint-resume").replace(
    "global_batch_size: 8", "shard_size: 4")
SYNC = SHARDING.replace("data-sharding", "config-sync").replace(
    "global_batch_size: 8", "sync_dir: /tmp/sync")


def _refused(tmp_path: Path, template: str, line: str) -> ScenarioError:
    path = tmp_path / "mine.yaml"
    path.write_text(template.format(line=line))
    with pytest.raises(ScenarioError) as refused:
        load_scenario(path)
    err = refused.value
    assert err.line == 9 and str(err).startswith(f"{path}:9: "), str(err)
    return err


@pytest.mark.parametrize("template,line,field", [
    (SHARDING, "num_samples: -5", "inputs.num_samples"),
    (SHARDING, "num_samples: 0", "inputs.num_samples"),
    (SHARDING, "seq_len: 0", "inputs.seq_len"),
    (SHARDING, "corrupt_rows: -1", "inputs.corrupt_rows"),
    (SHARDING, "seed: -1", "inputs.seed"),
    (RESUME, "total_samples: 0", "inputs.total_samples"),
    (RESUME, "upload_attempts: -3", "inputs.upload_attempts"),
    (SYNC, "sync_timeout_s: 0", "inputs.sync_timeout_s"),
])
def test_negative_and_zero_sizes_are_refused_at_load(tmp_path, template, line, field):
    err = _refused(tmp_path, template, line)
    assert err.field == field and "greater than" in err.message


@pytest.mark.parametrize("template,line,field,message", [
    (SHARDING, "num_samples: '96'", "inputs.num_samples", "valid integer"),
    (SHARDING, "num_samples: 9.5", "inputs.num_samples", "valid integer"),
    (SHARDING, "num_samples: true", "inputs.num_samples", "valid integer"),
    (SHARDING, "missing_on_hosts: [one]", "inputs.missing_on_hosts.0", "valid integer"),
    (SHARDING, "corrupt_where: middle", "inputs.corrupt_where", "'data' or 'header'"),
    (SHARDING, "data_dir: relative/path", "inputs.data_dir", "should match pattern"),
    (RESUME, "bucket: 5", "inputs.bucket", "valid string"),
    (SYNC, "config: [a, b]", "inputs.config", "valid dictionary"),
    (SYNC, "sync_timeout_s: .inf", "inputs.sync_timeout_s", "finite number"),
    (SYNC, "sync_timeout_s: soon", "inputs.sync_timeout_s", "valid number"),
])
def test_wrong_types_are_refused_at_load(tmp_path, template, line, field, message):
    err = _refused(tmp_path, template, line)
    assert err.field == field and message in err.message, str(err)


@pytest.mark.parametrize("template,line,field", [
    (SHARDING, "num_sample: 12", "inputs.num_sample"),
    (RESUME, "missing_stream: [3]", "inputs.missing_stream"),
    (SYNC, "lr: 0.5", "inputs.lr"),
])
def test_unknown_input_keys_are_refused_at_load_with_the_workloads_keys(tmp_path, template, line,
                                                                         field):
    err = _refused(tmp_path, template, line)
    assert err.field == field and err.message.startswith("unknown input of workload")
    assert "its inputs are" in err.message


@pytest.mark.parametrize("template,line,field,message", [
    (SHARDING, "num_samples: 10000000", "inputs.num_samples", "less than or equal to"),
    (SHARDING, "num_samples: 100000", "inputs.num_samples", "too large a dataset to build"),
    (SHARDING, "seq_len: 5000", "inputs.seq_len", "less than or equal to 4096"),
    (SHARDING, "seed: 1099511627776", "inputs.seed", "less than"),  # past 2**63 the reader refuses it
    (SHARDING, "missing_on_hosts: [9999]", "inputs.missing_on_hosts.0", "less than"),
    (RESUME, "total_samples: 1000000000", "inputs.total_samples", "less than or equal to"),
    (SYNC, "sync_timeout_s: 1.0e+300", "inputs.sync_timeout_s", "less than or equal to"),
])
def test_huge_values_that_would_allocate_too_much_are_refused_at_load(tmp_path, template, line,
                                                                      field, message):
    err = _refused(tmp_path, template, line)
    assert err.field == field and message in err.message, str(err)


@pytest.mark.parametrize("template,line,field,message", [
    (SHARDING, "missing_on_hosts: [4]", "inputs.missing_on_hosts", "4 is not a host of 4x1"),
    (RESUME, "missing_streams: 7", "inputs.missing_streams", "7 is not a host of 4x1"),
])
def test_hosts_outside_the_scenarios_topology_are_refused_at_load(tmp_path, template, line, field,
                                                                  message):
    err = _refused(tmp_path, template, line)
    assert err.field == field and message in err.message, str(err)


def test_sizes_that_do_not_fit_each_other_are_refused_at_the_inputs_line(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(SHARDING.format(line="examples_per_puzzle: 5"))
    with pytest.raises(ScenarioError) as refused:
        load_scenario(path)
    assert str(refused.value) == (f"{path}:8: 96 is not a multiple of examples_per_puzzle 5 "
                                  "(field 'inputs.num_samples')")  # a default: the inputs mapping


def test_good_inputs_are_merged_over_the_defaults_and_typed(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(SHARDING.format(line="missing_on_hosts: 3"))
    inputs = load_scenario(path).workload_inputs
    assert (inputs.missing_on_hosts, inputs.num_samples, inputs.global_batch_size) == ([3], 96, 8)
    assert inputs.for_target()["data_dir"] == "/mnt/data/puzzles"


def test_the_cli_refuses_bad_inputs_with_exit_2_before_any_world(tmp_path, cli):
    path = tmp_path / "mine.yaml"
    path.write_text(SHARDING.format(line="num_samples: -5"))
    done = cli("run", "--scenario", str(path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{path}:9: Input should be greater than or equal to 1 (field 'inputs.num_samples')" \
        in done.stderr
    assert "Traceback" not in done.stderr


def test_a_topology_override_checks_the_inputs_naming_hosts(tmp_path):
    scenario = next(s for s in catalog() if s.name == "missing-data-on-host")
    with pytest.raises(ScenarioError) as refused:
        plan_cells([scenario], [registry.BUILTIN_TARGETS["robust-loader"]], seed=0,
                   topology="2x1")
    assert refused.value.field == "inputs.missing_on_hosts"
    assert "does not fit topology 2x1: 3 is not a host of 2x1 (hosts 0-1)" in str(refused.value)
