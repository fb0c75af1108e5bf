"""``harness pod setup``: the worker's script run for real (a home of its own, a wheelhouse of
this machine's wheels, processes that hold apt's lock, a Python that cannot make a
virtualenv), then a bare local pod set up and run from the command line."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.pod import setup, wheelhouse
from harness.pod.controller import Pod, PodFailure, PodInfo
from harness.pod.local import LocalPod
from harness.pod.session import SshOptions
from harness.pod.setup import Outcome, SetupPlan

from support import run_cli, run_cli_here

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the worker's side is POSIX sh")

#: The name a test's stand-in for apt carries (``pgrep -x`` sees 15 characters of it).
HOLDER = "hfakeapt"


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small distributions of this environment, packed back into wheels."""
    where = tmp_path_factory.mktemp("wheelhouse")
    for name in ("coolname", "mdurl"):
        wheelhouse.repack(metadata.distribution(name), where)
    return where


def _plan(house: Path, *packages: str, **kw: object) -> SetupPlan:
    return SetupPlan(packages or ("coolname",), find_links=(str(house),), no_index=True,
                     tpu=False, imports=tuple(p.split("=")[0] for p in packages or ("coolname",)),
                     apt_holders=HOLDER, **kw)  # type: ignore[arg-type]


def _setup(home: Path, plan: SetupPlan, python: str = sys.executable,
           env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The worker's side as a worker runs it: the controller's two files in place under its
    home, then its command."""
    for data, rel in ((plan.text.encode(), plan.requirements_path),
                      (setup.script(), plan.script_path)):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_bytes(data)
    full = {"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", **(env or {})}
    return subprocess.run(["sh", "-c", plan.command(python)], env=full, capture_output=True,
                          text=True, timeout=timeout)


def _holder(bin_dir: Path, seconds: float) -> tuple[subprocess.Popen[bytes], int]:
    """A process named like one that holds apt's lock, alive for ``seconds``, and its pid.
    A shell starts it and reaps it when it ends (a zombie would still carry its name)."""
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / HOLDER
    exe.write_text(f"#!/bin/sh\nsleep {seconds}\n")
    exe.chmod(0o755)
    parent = subprocess.Popen(["sh", "-c", f"{exe} & echo $!; wait"], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    return parent, int(parent.stdout.readline())


# -- the wheelhouse -------------------------------------------------------------------------

def test_a_repacked_wheel_holds_the_installed_files_with_a_record_pip_checks(house: Path) -> None:
    wheels = sorted(p.name for p in house.glob("*.whl"))
    assert wheels == [f"coolname-{metadata.version('coolname')}-py3-none-any.whl",
                      f"mdurl-{metadata.version('mdurl')}-py3-none-any.whl"]
    with zipfile.ZipFile(house / wheels[0]) as zf:
        names = zf.namelist()
        record = zf.read(f"coolname-{metadata.version('coolname')}.dist-info/RECORD").decode()
    assert "coolname/__init__.py" in names
    assert not any("__pycache__" in n or n.endswith(("INSTALLER", "direct_url.json"))
                   for n in names)
    import base64
    import hashlib

    with zipfile.ZipFile(house / wheels[0]) as zf:  # every hash is the bytes' own
        for line in record.splitlines():
            name, digest, size = line.rsplit(",", 2)
            if digest:
                data = zf.read(name)
                assert digest == "sha256=" + base64.urlsafe_b64encode(
                    hashlib.sha256(data).digest()).rstrip(b"=").decode() and int(size) == len(data)


def test_a_wheel_keeps_every_tag_its_distribution_was_built_for(tmp_path: Path) -> None:
    dist = metadata.distribution("sortedcontainers")  # built for py2 and py3
    assert wheelhouse.repack(dist, tmp_path).name.endswith("-py2.py3-none-any.whl")


# -- the worker's script --------------------------------------------------------------------

def test_a_setup_installs_once_and_a_second_changes_nothing(tmp_path: Path, house: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first = _setup(home, _plan(house))
    assert first.returncode == 0, first.stdout + first.stderr
    done = Outcome.parse(first.stdout)
    assert done is not None and done.state == "installed", first.stdout
    py = sys.version.split()[0]
    assert done.key == f"{_plan(house).key}-py{py}"
    env = home / setup.ENV_DIR
    assert os.readlink(env) == f"venvs/{done.key}"
    imported = subprocess.run([str(home / setup.SET_UP_PYTHON), "-c",
                               "import coolname, sys; print(sys.prefix)"],
                              capture_output=True, text=True)
    # the environment's own Python, through the link (pyvenv.cfg is found beside bin/)
    assert imported.returncode == 0 and imported.stdout.strip() == str(env)
    assert "Successfully installed coolname" in first.stdout  # pip's words, for the log

    again = _setup(home, _plan(house))
    assert again.returncode == 0 and Outcome.parse(again.stdout) == \
        Outcome("unchanged", done.key, Outcome.parse(again.stdout).seconds)
    assert "pip install" not in again.stdout

    # another set of packages is another environment, and the worker keeps only the new one
    other = _setup(home, _plan(house, "coolname", "mdurl"))
    moved = Outcome.parse(other.stdout)
    assert moved is not None and moved.state == "installed" and moved.key != done.key
    assert sorted(p.name for p in (home / ".harness-pod" / "venvs").iterdir()) == [moved.key]
    assert os.readlink(env) == f"venvs/{moved.key}"


def test_a_broken_environment_is_made_again(tmp_path: Path, house: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    key = Outcome.parse(_setup(home, _plan(house)).stdout).key
    venv = home / ".harness-pod" / "venvs" / key
    for site in venv.glob("lib/python*/site-packages/coolname"):
        subprocess.run(["rm", "-rf", str(site)], check=True)  # someone removed a package
    again = _setup(home, _plan(house))
    assert Outcome.parse(again.stdout).state == "installed", again.stdout


def test_it_waits_for_apt_then_tries_pip_three_times_and_says_what_pip_said(
        tmp_path: Path, house: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    holder, pid = _holder(tmp_path / "bin", 2)
    try:
        plan = SetupPlan(("harness-no-such-package==1.0",), tpu=False, imports=("coolname",),
                         apt_holders=HOLDER, retry_s=0)
        # pip looks nowhere: what fails is what fails on a pod whose index says no, thrice
        done = _setup(home, plan, env={"PIP_NO_INDEX": "1"})
    finally:
        subprocess.run(["pkill", "-x", HOLDER])
        holder.wait()
    assert done.returncode == 1
    assert f"harness setup: waiting for apt/dpkg to finish ({pid} {HOLDER} )" in done.stdout
    assert [n for n in (1, 2, 3) if f"(try {n} of 3)" in done.stdout] == [1, 2, 3]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("HARNESS-SETUP-FAILED pip failed 3 times; it said: ERROR: ")
    assert "harness-no-such-package==1.0" in last
    assert not (home / setup.ENV_DIR).exists()  # nothing half-made is pointed at


def test_apt_busy_past_the_wait_names_what_holds_it(tmp_path: Path, house: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    holder, pid = _holder(tmp_path / "bin", 60)
    try:
        done = _setup(home, _plan(house, lock_wait_s=1))
    finally:
        subprocess.run(["pkill", "-x", HOLDER])
        holder.wait()
    assert done.returncode == 1
    assert setup.failure_of(done.stdout, done.stderr) == (
        f"apt/dpkg still busy after 1 s ({pid} {HOLDER} ): a fresh VM's automatic "
        "updates; run harness pod setup again later")


def _fake(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


def test_a_python_without_ensurepip_and_no_sudo_names_the_package_to_install(
        tmp_path: Path, house: Path) -> None:
    bin_dir = tmp_path / "bin"
    # Ubuntu's python3 without python3-venv, and a sudo that wants a password
    python = _fake(bin_dir / "python3", (
        'if [ "$1" = -m ] && [ "$2" = venv ]; then echo "The virtual environment was not '
        'created successfully because ensurepip is not available." >&2; exit 1; fi\n'
        f'exec {sys.executable} "$@"\n'))
    _fake(bin_dir / "sudo", 'echo "sudo: a password is required" >&2; exit 1\n')
    home = tmp_path / "home"
    home.mkdir()
    done = _setup(home, _plan(house), python=str(python),
                  env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    major_minor = ".".join(sys.version.split()[0].split(".")[:2])
    assert setup.failure_of(done.stdout, done.stderr) == (
        f"{python} cannot make a virtualenv (ensurepip is missing) and sudo asks for a "
        f"password: run 'sudo apt-get install -y python{major_minor}-venv' on it")


def test_no_python_or_an_old_one_is_named(tmp_path: Path, house: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = _setup(home, _plan(house), python="/nowhere/python3")
    assert setup.failure_of(done.stdout, done.stderr) == (
        "there is no /nowhere/python3 on this worker: install Python 3.10 or newer (or pass "
        "--python)")
    old = _fake(tmp_path / "bin" / "python2", 'echo 2.7.18\n')
    done = _setup(home, _plan(house), python=str(old))
    assert setup.failure_of(done.stdout, done.stderr) == (
        f"{old} is Python 2.7.18; the harness needs 3.10 or newer (pass --python)")


# -- a pod ----------------------------------------------------------------------------------

def test_a_pod_half_set_up_names_the_workers_that_are_not(tmp_path: Path) -> None:
    with LocalPod(2, tmp_path / "pod") as local:
        env = local.local[0].disk / "home" / setup.ENV_DIR / "bin"
        env.mkdir(parents=True)
        (env / "python").symlink_to(sys.executable)
        pod = Pod(local.workers, PodInfo("test", "local", 2, 1),
                  SshOptions(key=str(local.client_key), known_hosts=str(local.known_hosts),
                             connect_timeout=10), python=None, fabric_host="127.0.0.1")
        try:
            with pytest.raises(PodFailure) as caught:
                pod.prepare(None)
        finally:
            pod.close()
    message = caught.value.describe()
    assert message.startswith("checking the workers' Python and packages: worker 1 (")
    assert message.endswith("it has no .harness-pod/env/bin/python (workers 0 were set up): "
                            "run harness pod setup on this pod")
    assert "worker 0" not in message


def test_setup_options_that_cannot_apply_are_usage_errors(tmp_path: Path) -> None:
    bad = tmp_path / "req.txt"
    bad.write_text("--index-url https://example.com\n")
    cases = [
        (("pod", "run", "--hosts", "h.txt", "--bare", "-s", "baseline"), "--bare is for a local pod"),
        (("pod", "run", "--local", "2", "--torch", "2.9.0", "-s", "baseline"),
         "--torch and --requirements say what --setup installs"),
        (("pod", "setup", "--local", "2", "--requirements", str(bad)),
         "req.txt, line 1: '--index-url https://example.com' is a pip option"),
        (("pod", "setup"), "say which pod"),
    ]
    for args, said in cases:
        done = run_cli_here(*args, "--log-dir" if args[1] == "setup" else "--report-dir",
                            str(tmp_path / "r"), cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert said in " ".join(done.stderr.split()), (args, done.stderr)


@pytest.mark.slow
def test_a_bare_local_pod_is_set_up_then_runs_as_the_simulator_and_a_second_setup_changes_nothing(
        tmp_path: Path) -> None:
    disks = tmp_path / "disks"
    bare = run_cli("pod", "run", "--local", "2", "--bare", "--disks", str(disks), "-s",
                   "isolated-tmp", "--target", "naive-sync", "--report-dir", str(tmp_path / "no"),
                   "--format", "json", cwd=tmp_path, timeout=300)
    assert bare.returncode == 4, bare.stdout + bare.stderr  # nothing installed: the pod failed
    assert "lacks yaml pydantic numpy click rich coolname torch: run harness pod setup" in \
        " ".join(bare.stderr.split())

    pod = run_cli("pod", "run", "--local", "2", "--bare", "--setup", "--disks", str(disks),
                  "-s", "isolated-tmp", "--target", "naive-sync", "--report-dir",
                  str(tmp_path / "pod"), "--format", "json", cwd=tmp_path, timeout=900)
    sim = run_cli("run", "-t", "2x1", "-s", "isolated-tmp", "--target", "naive-sync",
                  "--report-dir", str(tmp_path / "sim"), "--format", "json", cwd=tmp_path)
    assert pod.returncode == sim.returncode == 0, pod.stdout + pod.stderr
    report = json.loads((tmp_path / "pod" / "latest" / "matrix.json").read_text())
    simulated = json.loads((tmp_path / "sim" / "latest" / "matrix.json").read_text())
    cell, sim_cell = report["cells"][0], simulated["cells"][0]
    assert (cell["outcome"], cell["verdict"], cell["detail"]) == \
        (sim_cell["outcome"], sim_cell["verdict"], sim_cell["detail"])
    import torch

    assert report["pod"]["python"] == setup.SET_UP_PYTHON
    assert {w: s["torch"] for w, s in report["pod"]["stacks"].items()} == \
        {"0": torch.__version__, "1": torch.__version__}
    assert set(report["pod"]["setup"]) == {"0", "1"}
    assert all(v.startswith("set up (") for v in report["pod"]["setup"].values())
    log = (tmp_path / "pod" / "latest" / "worker-1.log").read_text()
    assert "harness setup: making .harness-pod/venvs/" in log and "Successfully installed" in log

    again = run_cli("pod", "setup", "--local", "2", "--bare", "--disks", str(disks),
                    "--log-dir", str(tmp_path / "setup"), cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    for w in (0, 1):
        assert f"worker {w} (" in again.stderr
    assert again.stderr.count("already set up, nothing changed") == 2
    assert again.stdout.count(f"torch {torch.__version__}") == 2
    assert (tmp_path / "setup" / "worker-0.log").exists()
