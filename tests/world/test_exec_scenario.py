"""``harness exec --scenario NAME``: a scenario's faults and mounts applied to a whole script.

A scenario aimed at a role (the file one rank writes and another reads) needs the script's
roles: a fault-free run of the script learns them first, as a target's discovery does.
The run passes when the script meets the scenario's expectation; a scenario whose faults
could not happen to the script says so (NOT-EXERCISED), and fails the run only with
``--require-exercised`` or when the script failed anyway.
"""

from __future__ import annotations

import textwrap

import pytest

from support import run_cli

FILE_SYNC = """
import json, os
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

CFG = "/tmp/run/cfg.json"

def _mp_fn(index):
    if xm.get_ordinal() == 0:
        os.makedirs(os.path.dirname(CFG), exist_ok=True)
        with open(CFG, "w") as f:
            json.dump({"lr": 0.1, "layers": list(range(40))}, f)
    xm.rendezvous("cfg")
    with open(CFG) as f:
        assert json.load(f)["lr"] == 0.1

if __name__ == "__main__":
    xmp.spawn(_mp_fn)
"""

NO_FILE = """
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index):
    xm.rendezvous("cfg")

if __name__ == "__main__":
    xmp.spawn(_mp_fn)
"""


@pytest.fixture
def script(tmp_path):
    def write(text: str) -> str:
        path = tmp_path / "train.py"
        path.write_text(textwrap.dedent(text))
        return str(path)
    return write


def test_a_scenario_tears_the_file_a_script_hands_over_and_says_the_script_did_not_survive(script):
    done = run_cli("exec", "--scenario", "partial-write", "--", "python", script(FILE_SYNC))
    assert done.returncode == 1, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "single-host-8" in out  # the scenario's topology
    assert "fault torn-write fired on rank 0" in out and "/tmp/run/cfg.json torn at byte" in out
    assert "JSONDecodeError" in out
    assert "scenario partial-write (expect pass): not met: the script ended ERROR" in out


def test_a_scenario_whose_faults_cannot_happen_to_the_script_says_so(script):
    path = script(NO_FILE)
    done = run_cli("exec", "--scenario", "partial-write", "--", "python", path)
    out = " ".join(done.stdout.split())
    assert done.returncode == 0, out
    assert "scenario partial-write (expect pass): not exercised: torn-write#0: role handoff " \
           "resolved to nothing" in out
    strict = run_cli("exec", "--scenario", "partial-write", "--require-exercised", "--",
                     "python", path)
    assert strict.returncode == 1


def test_a_scenario_that_acts_through_its_workloads_inputs_says_a_script_does_not_take_them(script):
    done = run_cli("exec", "--scenario", "missing-data-on-host", "--", "python", script(NO_FILE))
    out = " ".join(done.stdout.split())
    assert done.returncode == 0, out
    assert "scenario missing-data-on-host (expect fail-loudly): not exercised: it acts through " \
           "its workload's inputs (missing_on_hosts: the files the harness builds" in out


def test_an_unknown_scenario_is_a_usage_error_naming_it(script):
    done = run_cli("exec", "--scenario", "partial-wrte", "--", "python", script(NO_FILE))
    assert done.returncode == 2
    assert "partial-wrte" in done.stderr and "partial-write" in done.stderr  # did you mean
