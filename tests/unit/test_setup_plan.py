"""What ``harness pod setup`` asks every worker for: the plan, the user's requirements, the
answers read back. The script itself runs in tests/pod/test_pod_setup.py."""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

import pytest

from harness.pod import setup
from harness.pod.setup import Outcome, SetupError, SetupPlan, failure_of, read_requirements

from support import tomllib

REPO = Path(__file__).resolve().parents[2]


def test_a_worker_gets_every_dependency_the_package_declares_but_the_controllers_own():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    # explore draws its plans on the controller; only the controller reads a pyproject.toml
    controller_only = {"hypothesis>=6.80", "tomli>=1.1; python_version < '3.11'"}
    assert set(setup.HARNESS_REQUIREMENTS) == set(declared) - controller_only


def test_a_tpu_plan_pins_one_release_of_torch_and_torch_xla_and_finds_libtpu():
    plan = setup.for_tpu("2.9.0", ("hydra-core==1.3.2",))
    lines = plan.text.splitlines()
    assert lines[:3] == ["--find-links https://storage.googleapis.com/libtpu-releases/index.html",
                         "torch==2.9.0", "torch_xla[tpu]==2.9.0"]
    assert lines[-1] == "hydra-core==1.3.2" and "--no-index" not in lines
    assert plan.tries == 3  # the network fails now and then
    assert "import torch_xla, torch_xla.runtime" in plan.command("python3")
    assert "PJRT_DEVICE" in plan.command("python3")


def test_the_key_changes_with_what_the_environment_holds_and_only_with_that():
    a, b = setup.for_tpu("2.9.0"), setup.for_tpu("2.9.0")
    assert a.key == b.key and a.requirements_path == b.requirements_path
    assert setup.for_tpu("2.8.0").key != a.key
    assert setup.for_tpu("2.9.0", ("einops",)).key != a.key
    assert SetupPlan(a.requirements, a.find_links, tpu=False).key != a.key  # another check
    assert SetupPlan(a.requirements, a.find_links, retry_s=1).key == a.key  # how, not what


def test_a_wheelhouse_plan_installs_this_machines_torch_with_no_network(tmp_path: Path):
    # the installed distribution's version: torch.__version__ adds a local tag (+cu128)
    plan = setup.for_wheelhouse(tmp_path)
    assert plan.text.splitlines()[:3] == ["--no-index", f"--find-links {tmp_path}",
                                          f"torch=={metadata.version('torch')}"]
    assert plan.tries == 1 and not plan.tpu  # a file on disk is not a flaky network


def test_the_command_quotes_what_it_passes(tmp_path: Path):
    command = setup.for_tpu().command("/opt/my python/bin/python3")
    assert command.startswith("cd ~ && HARNESS_SETUP_PY='/opt/my python/bin/python3' ")
    assert command.endswith("sh .harness-pod/setup/setup.sh")


def test_requirements_are_packages_only_and_a_pip_option_is_named_by_line(tmp_path: Path):
    good = tmp_path / "requirements.txt"
    good.write_text("# ours\nhydra-core==1.3.2\n\neinops  # for the model\n")
    assert read_requirements(good) == ("hydra-core==1.3.2", "einops")
    bad = tmp_path / "bad.txt"
    bad.write_text("einops\n-r other.txt\n")
    with pytest.raises(SetupError, match=r"bad.txt, line 2: '-r other.txt' is a pip option"):
        read_requirements(bad)
    with pytest.raises(SetupError, match="absent.txt: cannot read a requirements file: No such"):
        read_requirements(tmp_path / "absent.txt")


def test_a_pyproject_gives_its_project_dependencies(tmp_path: Path):
    project = tmp_path / "pyproject.toml"
    project.write_text('[project]\nname = "x"\ndependencies = ["hydra-core>=1.3", "einops"]\n')
    assert read_requirements(project) == ("hydra-core>=1.3", "einops")
    project.write_text('[project]\nname = "x"\n')
    with pytest.raises(SetupError, match="has no \\[project\\] dependencies"):
        read_requirements(project)
    project.write_text('[project\n')
    with pytest.raises(SetupError, match="pyproject.toml: "):
        read_requirements(project)


def test_a_workers_answer_is_read_from_its_last_line_and_a_failure_from_its_reason():
    out = 'pip says things\nHARNESS-SETUP {"state": "installed", "key": "k-py3.10.12", ' \
          '"seconds": 41, "waited_s": 95}\n'
    outcome = Outcome.parse(out)
    assert outcome == Outcome("installed", "k-py3.10.12", 41.0, 95.0)
    assert outcome.describe() == ("set up (k-py3.10.12) in 41 s, after 95 s waiting for "
                                  "apt/dpkg")
    assert Outcome("unchanged", "k", 2).describe() == "already set up, nothing changed (k) in 2 s"
    assert Outcome.parse("HARNESS-SETUP {not json\n") is None
    assert Outcome.parse("nothing\n") is None
    assert failure_of("a\nHARNESS-SETUP-FAILED pip failed 3 times; it said: ERROR: x\n", "") == \
        "pip failed 3 times; it said: ERROR: x"
    assert failure_of("", "sh: 1: cannot open setup.sh\n") == \
        "the setup script failed: sh: 1: cannot open setup.sh"


def test_a_house_packed_from_the_workers_python_installs_its_own_torch(tmp_path: Path):
    """A bare pod on another Python (``--python``) is set up from that Python's own house:
    its torch, not this controller's, and a house apart per Python (cp310 is not cp311)."""
    from harness.pod import wheelhouse

    house = tmp_path / "house"
    house.mkdir()
    (house / ".complete").write_text("numpy==2.2.6\ntorch==2.9.0\n")
    assert "torch==2.9.0" in setup.for_wheelhouse(house).text.splitlines()
    assert wheelhouse.version_in(house, "Torch") == "2.9.0"
    assert wheelhouse.version_in(house, "jax") is None and wheelhouse.version_in(tmp_path, "torch") is None
    assert wheelhouse.default_dir((3, 10)).name == "py3.10"
    assert wheelhouse.default_dir((3, 10)).parent == wheelhouse.default_dir().parent
