"""Scenario files: the catalog loads, and a bad file names its file, line and field."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from harness.scenarios import CATALOG_ORDER, ScenarioError, catalog, catalog_dir, find, load_scenario

from support import SCENARIO_HEAD

GOOD = SCENARIO_HEAD + """\
timeout: 3
faults:
  - kind: torn-write
    rank: 0
    path: /tmp/x.yaml
"""


def write(tmp_path: Path, text: str, name: str = "mine") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_catalog_has_every_config_sync_scenario_of_the_design_in_order():
    names = [s.name for s in catalog() if s.workload == "config-sync"]
    assert names == [n for n in CATALOG_ORDER if n in names]
    assert len(names) == 19
    assert all(s.finding and s.description for s in catalog())
    assert {s.expect for s in catalog() if s.name in ("writer-killed", "rank0-raises")} == \
        {"fail-loudly"}


def test_every_catalog_file_names_the_finding_it_tests():
    """``finding`` documents the catalog: optional in a user's file, never missing here."""
    for path in sorted(catalog_dir().glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        assert isinstance(data.get("finding"), str) and data["finding"].strip(), path.name


def test_a_users_file_needs_no_finding(tmp_path):
    path = write(tmp_path, SCENARIO_HEAD.format(name="mine").replace('finding: "seed 000"\n', ""))
    assert "finding" not in path.read_text()
    scenario = load_scenario(path)
    assert scenario.name == "mine" and scenario.finding == ""


@pytest.mark.parametrize("field", ["name", "workload", "description", "topology", "expect"])
def test_the_other_head_fields_are_required(tmp_path, field):
    text = "".join(line + "\n" for line in SCENARIO_HEAD.format(name="mine").splitlines()
                   if not line.startswith(f"{field}:"))
    with pytest.raises(ScenarioError, match="required field is missing"):
        load_scenario(write(tmp_path, text))


def test_a_good_file_loads(tmp_path):
    scenario = load_scenario(write(tmp_path, GOOD.format(name="mine")))
    assert scenario.topology == "v4-64" and scenario.faults[0].kind == "torn-write"
    assert find(str(tmp_path / "mine.yaml")).name == "mine"


@pytest.mark.parametrize("text,line,field,message", [
    (GOOD.format(name="mine") + "colour: blue\n", 12, "colour", "unknown key"),
    (GOOD.format(name="mine").replace("timeout: 3", "timeout: soon"), 7, "timeout",
     "valid number"),
    (GOOD.format(name="mine").replace("kind: torn-write", "kind: meteor-strike"), 9,
     "faults.0.kind", "unknown fault 'meteor-strike'"),
    (GOOD.format(name="mine").replace("topology: v4-64", "topology: v5-9000"), 5, "topology",
     "unknown topology 'v5-9000'"),
    (GOOD.format(name="mine").replace("rank: 0", "rank: 8"), 10, "faults.0.rank",
     "rank 8 is outside a world of 8 ranks"),
    (GOOD.format(name="mine").replace("expect: pass\n", ""), 1, "expect",
     "required field is missing"),
    (GOOD.format(name="other"), 1, "name", "must match the file name"),
    (GOOD.format(name="mine").replace("expect: pass", "expect: [pass"), 7, None,
     "not valid YAML"),
])
def test_a_bad_file_names_the_file_line_and_field(tmp_path, text, line, field, message):
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert err.file == str(path) and err.line == line and err.field == field, str(err)
    assert message in str(err)
    assert str(err).startswith(f"{path}:{line}: ")


def test_an_unknown_catalog_name_lists_the_catalog():
    with pytest.raises(ScenarioError, match="unknown scenario .no-such-scenario.; the catalog has: baseline"):
        find("no-such-scenario")


def test_the_cli_refuses_a_bad_scenario_with_exit_2_and_no_traceback(tmp_path):
    path = write(tmp_path, GOOD.format(name="mine").replace("kind: torn-write", "kind: nope"))
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--scenario", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{path}:9: unknown fault 'nope'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_topology_override_that_a_scenario_cannot_fit_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--scenario", "divergent-input",
                           "--topology", "v4-8", "--report-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    # divergent-input hands host 1 its own inputs: no host 1 on a one-host slice
    assert "does not fit topology v4-8: 1 is not a host of v4-8" in done.stderr
    assert "host_inputs.1" in done.stderr
    assert "Traceback" not in done.stderr
