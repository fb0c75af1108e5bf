"""host_inputs: one host's ranks receive the workload inputs with that host's override merged."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import run_world
from harness.runner.run import plan_cells
from harness.scenarios import ScenarioError, load_scenario
from harness.workloads.base import Target

from support import SCENARIO_HEAD

HEAD = SCENARIO_HEAD.replace("topology: v4-64", "topology: 2x2")


def echo(inputs: dict) -> dict:
    """A small target: what this rank was handed."""
    return inputs


def write(tmp_path: Path, body: str, name: str = "mine") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(HEAD.format(name=name) + body)
    return path


def test_host_1_gets_the_merged_config_and_host_0_the_default(tmp_path):
    scenario = load_scenario(write(tmp_path, 'host_inputs:\n  "1":\n    config: {lr: 0.5}\n'))
    base = scenario.workload_inputs.for_target()
    by_host = {h: (i.for_target(),) for h, i in scenario.host_workload_inputs.items()}
    assert set(by_host) == {1}
    result = run_world(f"{Path(__file__)}:echo", topology="2x2", timeout=20,
                       args=(base,), args_by_host=by_host, sandbox=False)
    values = {r.rank: r.value for r in result.ranks}
    for rank in (0, 1):  # host 0: the default
        assert values[rank] == base
        assert values[rank]["config"]["lr"] == 1e-4
    for rank in (2, 3):  # host 1: lr replaced, every other key kept
        config = values[rank]["config"]
        assert config["lr"] == 0.5
        assert {k: v for k, v in config.items() if k != "lr"} == \
            {k: v for k, v in base["config"].items() if k != "lr"}
        assert values[rank]["sync_timeout_s"] == base["sync_timeout_s"]


def test_a_host_outside_the_topology_is_refused_at_load_with_its_line(tmp_path):
    path = write(tmp_path, 'host_inputs:\n  "5":\n    config: {lr: 0.5}\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}:8: "), str(info.value)
    assert "5 is not a host of 2x2" in str(info.value)
    assert info.value.field == "host_inputs.5"


def test_bad_inputs_under_a_host_are_refused_naming_them(tmp_path):
    # config's keys are free-form for the loader (the checker judges them); not a mapping is refused
    path = write(tmp_path, 'host_inputs:\n  "1":\n    config: [lr, 0.5]\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.field == "host_inputs.1.config", str(info.value)
    assert str(info.value).startswith(f"{path}:9: "), str(info.value)
    path = write(tmp_path, 'host_inputs:\n  "1":\n    sync_timeout_s: -1\n', name="other")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.field == "host_inputs.1.sync_timeout_s", str(info.value)
    assert str(info.value).startswith(f"{path}:9: "), str(info.value)


def test_a_cli_topology_is_checked_against_the_hosts(tmp_path):
    scenario = load_scenario(write(tmp_path, 'host_inputs:\n  "1":\n    config: {lr: 0.5}\n'))
    target = Target("echo", f"{Path(__file__)}:echo", "config-sync")
    with pytest.raises(ScenarioError) as info:
        plan_cells([scenario], [target], seed=0, topology="1x4")
    assert "host_inputs.1" in str(info.value)
