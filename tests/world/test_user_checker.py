"""A user's own checker: a pydantic model, a function or a JSON schema, read at the edge and
run inside every rank on the value the target returned.

The targets and checkers here are written to ``tmp_path`` as a user would keep them beside
their code; every checker is run for real, in the ranks of a real world.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel

from harness.pytest_plugin import catalog_cases
from harness.rank.validator import Validator, problem, validator
from harness.reports.diagnosis import describe
from harness.scenario_yaml import ScenarioError
from harness.scenarios import load_scenario
from harness.world.result import FAIL, PASS
from harness.world.world import run_world

from support import SCENARIO_HEAD, run_cli

# A config sync as a stranger writes it: rank 0 writes JSON, the others read it. Rank 3 of
# host 0 drops a key on its way out (a bug a schema should catch and agreement alone cannot:
# it is judged before any comparison).
TARGET = '''\
import json, os
import torch_xla.core.xla_model as xm

PATH = "/tmp/usercheck/config.json"

def sync(inputs):
    if xm.get_ordinal() == 0:
        os.makedirs(os.path.dirname(PATH), exist_ok=True)
        with open(PATH, "w") as f:
            json.dump(inputs["config"], f)
    xm.rendezvous("config")
    with open(PATH) as f:
        config = json.load(f)
    if xm.get_ordinal() == 3 and inputs.get("drop_on_rank3"):
        del config["lr"]
    return config
'''

CHECKS = '''\
from pydantic import BaseModel, Field

class Arch(BaseModel):
    name: str

class Config(BaseModel):
    lr: float = Field(gt=0, le=0.01)
    arch: Arch

def check(config):
    if "lr" not in config:
        return "lr is missing"
    return None

def explodes(config):
    raise KeyError("epochs")
'''


@pytest.fixture
def code(tmp_path: Path) -> Path:
    (tmp_path / "sync.py").write_text(TARGET)
    (tmp_path / "checks.py").write_text(CHECKS)
    (tmp_path / "schema.json").write_text(json.dumps(
        {"type": "object", "required": ["lr", "arch"],
         "properties": {"lr": {"type": "number", "maximum": 0.01},
                        "arch": {"type": "object", "required": ["name"]}}}))
    return tmp_path


def _world(code: Path, checker: object, **inputs: object) -> object:
    config = {"lr": 0.001, "arch": {"name": "tiny"}, **inputs.pop("config", {})}
    return run_world(f"{code}/sync.py:sync", topology="single-host-8", timeout=30,
                     args=({"config": config, **inputs},), checker=checker)


# -- in real worlds ---------------------------------------------------------------------

def test_a_pydantic_model_judges_every_rank_inside_the_rank(code):
    result = _world(code, f"{code}/checks.py:Config", drop_on_rank3=True)
    assert result.outcome == FAIL
    bad = [r for r in result.ranks if r.outcome != PASS]
    assert [r.rank for r in bad] == [3]
    assert bad[0].invalid == "lr: Field required"
    assert "rank 3 returned an invalid value: lr: Field required" in result.detail()
    assert "which the checker refuses: lr: Field required" in describe(result)


def test_a_function_and_a_json_schema_say_the_same_in_their_own_words(code):
    by_function = _world(code, f"{code}/checks.py:check", drop_on_rank3=True)
    assert [r.invalid for r in by_function.ranks if r.invalid] == ["lr is missing"]
    by_schema = _world(code, str(code / "schema.json"), config={"lr": 0.5})
    assert {r.invalid for r in by_schema.ranks} == {"lr: 0.5 is greater than the maximum of 0.01"}


def test_a_value_every_checker_accepts_passes(code):
    for checker in (f"{code}/checks.py:Config", f"{code}/checks.py:check", str(code / "schema.json")):
        result = _world(code, checker)
        assert result.outcome == PASS, (checker, result.detail())
        assert all(r.invalid is None for r in result.ranks)


def test_a_checker_that_raises_is_reported_as_the_checkers_failure(code):
    result = _world(code, f"{code}/checks.py:explodes")
    assert result.outcome == FAIL
    assert {r.invalid for r in result.ranks} == \
        {f"the checker {code}/checks.py:explodes failed: KeyError: 'epochs'"}


# -- at the edge: a bad checker is a clear error before any world starts ----------------

@pytest.mark.parametrize(("spec", "says"), [
    ("", "empty reference"),
    ("checks", "expected module.path:Name"),
    ("nowhere.py:Config", "cannot read"),
    ("checks.py:Missing", "defines no 'Missing'"),
    ("broken.json", "is not JSON"),
    ("list.json", "a JSON schema is an object, not list"),
    ("badschema.json", "not a valid JSON schema"),
])
def test_a_bad_checker_reference_names_what_is_wrong(code, spec, says):
    (code / "broken.json").write_text("{not json")
    (code / "list.json").write_text("[1]")
    (code / "badschema.json").write_text('{"type": 5}')
    with pytest.raises(ValueError, match="checker") as info:
        validator(spec, base=str(code))
    assert says in str(info.value)


def test_objects_become_references_a_rank_can_import():
    assert validator(Config).target == f"{__name__}:Config"
    assert validator({"type": "object"}).schema == {"type": "object"}
    with pytest.raises(ValueError, match="cannot be found by name in a rank process"):
        validator(lambda v: None)
    with pytest.raises(ValueError, match="expected a pydantic model"):
        validator(42)


class Config(BaseModel):
    lr: float


@dataclass
class Point:
    x: int


def lr_positive(value: dict) -> object:
    return value.get("lr", 0) > 0


@pytest.mark.parametrize(("checker", "value", "says"), [
    (Config, {"lr": 1}, None),
    (Config, {"lr": "fast", "extra": 1}, "lr: Input should be a valid number"),
    (Point, {"x": "no"}, "x: Input should be a valid integer"),
    (lr_positive, {"lr": 1}, None),
    (lr_positive, {"lr": -1}, "lr_positive returned False"),
])
def test_what_each_kind_of_checker_says(checker, value, says):
    said = problem(validator(checker), value)
    assert (said is None) if says is None else said.startswith(says), said


def test_a_function_returning_something_else_is_told_what_it_should_return():
    said = problem(Validator("x", target=f"{__name__}:_returns_a_number"), {})
    assert said == "the checker returned 3: expected None (valid) or a string (what is wrong)"


def _returns_a_number(value: object) -> int:
    return 3


# -- the scenario's checker, pytest's, and the command line's --------------------------

def test_a_scenario_names_its_checker_relative_to_its_own_file(code):
    path = code / "mine.yaml"
    path.write_text(SCENARIO_HEAD.format(name="mine") + "checker: checks.py:Config\n")
    assert load_scenario(path).validator.target == f"{code}/checks.py:Config"
    path.write_text(SCENARIO_HEAD.format(name="mine") + "checker: checks.py:Nope\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert (info.value.line, info.value.field) == (7, "checker")
    assert "defines no 'Nope'" in str(info.value)


def test_catalog_cases_carry_the_checker_into_every_cell(code):
    cases = catalog_cases(f"{code}/sync.py:sync", ["baseline", "corrupt-file"], checker=Config)
    assert {case.values[0].target.checker.target for case in cases} == {f"{__name__}:Config"}


def test_the_command_line_runs_the_checker_and_its_replay_command_keeps_it(code, tmp_path):
    scenario = code / "lr-too-high.yaml"
    head = SCENARIO_HEAD.format(name="lr-too-high").replace("v4-64", "single-host-8")
    scenario.write_text(head + "inputs:\n  config:\n    lr: 0.5\n    arch: {name: tiny}\n")
    done = run_cli("run", "-T", "sync.py:sync", "-c", "checks.py:Config", "-s", str(scenario),
                   "--report-dir", str(tmp_path / "reports"), "--format", "json", cwd=code)
    assert done.returncode == 1, done.stdout + done.stderr
    cell = json.loads((tmp_path / "reports" / "latest" / "matrix.json").read_text())["cells"][0]
    assert cell["outcome"] == FAIL and cell["checker"] == "checks.py:Config"
    assert "returned an invalid value: lr: Input should be less than or equal to 0.01" in cell["detail"]
    replay = shlex.split(cell["replay"])
    assert replay[replay.index("--checker") + 1] == "checks.py:Config"
    again = run_cli(*replay[1:], cwd=code)
    assert again.returncode == 1 and "less than or equal to 0.01" in again.stdout


@pytest.mark.parametrize(("args", "says"), [
    (("-c", "checks.py:Config"), "--checker judges your own target"),
    (("-c", "checks.py:Config", "-T", "naive-sync"), "naive-sync is a built-in target"),
    (("-c", "checks.py:Nope", "-T", "sync.py:sync"), "defines no 'Nope'"),
])
def test_a_checker_the_command_line_cannot_use_exits_2_before_any_world(code, args, says):
    done = run_cli("run", "-s", "baseline", *args, cwd=code)
    assert done.returncode == 2
    assert says in " ".join(done.stderr.split())


def test_the_checker_runs_nowhere_near_the_harness(code, tmp_path):
    """A checker is the user's code: the harness process never imports it (a checker
    module that writes a marker when imported leaves it only in the ranks' sandbox)."""
    marker = tmp_path / "imported-here"
    (code / "loud.py").write_text(textwrap.dedent(f'''\
        import os
        if not os.environ.get("HARNESS_SEED"):
            open({str(marker)!r}, "w").close()
        def check(value):
            return None
        '''))
    result = _world(code, f"{code}/loud.py:check")
    assert result.outcome == PASS
    assert not marker.exists()
