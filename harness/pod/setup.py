"""``harness pod setup``: the stack a cell needs, installed on a bare worker, once per version set.

A TPU VM made minutes ago has a Python and nothing else (seed 002: "Your VMs are empty").
Every worker runs the same script at once. It waits for the apt/dpkg lock a fresh VM's
automatic updates hold, makes a virtualenv under ``~/.harness-pod/venvs/KEY`` (KEY: a digest
of what it holds and the worker's Python version), installs into it with pip (three tries),
checks that it imports, and points ``~/.harness-pod/env`` at it. A worker that already has
that environment changes nothing: the script only checks it, in seconds. ``harness pod run``
then runs its cells with ``~/.harness-pod/env/bin/python`` when every worker has one.

What goes in: a matching ``torch`` and ``torch_xla[tpu]`` (libtpu from the index Google
documents for TPU VMs) on a TPU pod, or the controller's own wheels (``wheelhouse``, no
network) on a local pod; the harness's dependencies; the user's requirements. Pure but for
building the plan's text: the controller sends the requirements and runs the script.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.inputs import InputError, read_text
from harness.pod.spec import REMOTE_ROOT
from harness.pod.stack import LIBTPU_INDEX, NEEDED
from harness.vocabulary import UsageError

#: The torch / torch_xla release a TPU pod gets unless told (the one the shim follows).
TORCH_XLA_VERSION = "2.9.0"
#: What a worker's Python needs beside torch to run a cell: pyproject's dependencies but
#: hypothesis (explore draws its plans on the controller). Tested against pyproject.toml.
HARNESS_REQUIREMENTS = ("numpy>=1.24", "click>=8.1", "rich>=13", "pyyaml>=6", "pydantic>=2.5",
                        "coolname>=2")
#: Where the environment a setup made is found on a worker (relative to its home).
ENV_DIR = posixpath.join(REMOTE_ROOT, "env")
SET_UP_PYTHON = posixpath.join(ENV_DIR, "bin", "python")
#: A fresh VM's automatic updates can hold apt's lock for many minutes.
LOCK_WAIT_S = 1200
PIP_TRIES = 3
#: The names of the processes that hold apt's and dpkg's locks.
APT_HOLDERS = "apt|apt-get|aptitude|dpkg|unattended-upgr|apt.systemd.dai|packagekitd"
MAX_REQUIREMENTS_BYTES = 1 << 20


class SetupError(UsageError, ValueError):
    """A setup that cannot be asked for as given; the message names the file and line."""


@dataclass(frozen=True)
class SetupPlan:
    """What every worker's environment holds and where pip finds it."""

    requirements: tuple[str, ...]
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    tpu: bool = True  # check that the real torch_xla imports with PJRT_DEVICE=TPU
    imports: tuple[str, ...] = NEEDED  # what must import once it is installed
    lock_wait_s: int = LOCK_WAIT_S
    apt_holders: str = APT_HOLDERS  # pgrep -x pattern: the processes that hold apt's lock
    retry_s: int = 15  # the wait before pip's second try (twice that before the third)

    @property
    def tries(self) -> int:
        """pip's tries: a network fails now and then, a wheelhouse on disk does not."""
        return 1 if self.no_index else PIP_TRIES

    @property
    def text(self) -> str:
        """The requirements file every worker installs from."""
        head = [f"--find-links {link}" for link in self.find_links]
        return "\n".join([*(["--no-index"] if self.no_index else []), *head,
                          *self.requirements]) + "\n"

    @property
    def key(self) -> str:
        """A digest of what the environment holds (the worker adds its Python's version)."""
        check = _check_code(self.tpu, self.imports)
        return hashlib.sha256(f"{self.text}\n{check}".encode()).hexdigest()[:12]

    @property
    def requirements_path(self) -> str:
        """Where the controller puts ``text`` on each worker (relative to its home)."""
        return posixpath.join(REMOTE_ROOT, "setup", f"{self.key}.txt")

    @property
    def script_path(self) -> str:
        """Where the controller puts ``setup.sh`` on each worker (relative to its home)."""
        return posixpath.join(REMOTE_ROOT, "setup", "setup.sh")

    def command(self, python: str) -> str:
        """What every worker runs: ``setup.sh`` with this plan in its environment. Its last
        line is ``HARNESS-SETUP {...}``, or ``HARNESS-SETUP-FAILED why``."""
        env = {"PY": python, "KEY": self.key, "ROOT": REMOTE_ROOT,
               "REQUIREMENTS": self.requirements_path, "LOCK_WAIT": str(int(self.lock_wait_s)),
               "APT": self.apt_holders, "TRIES": str(self.tries), "RETRY": str(int(self.retry_s)),
               "CHECK": _check_code(self.tpu, self.imports)}
        assigned = " ".join(f"HARNESS_SETUP_{k}={shlex.quote(v)}" for k, v in env.items())
        return f"cd ~ && {assigned} sh {shlex.quote(self.script_path)}"


def script() -> bytes:
    """The worker's side of a setup (``setup.sh``, POSIX sh: a TPU VM's /bin/sh is dash)."""
    return (Path(__file__).with_name("setup.sh")).read_bytes()


def _check_code(tpu: bool, imports: tuple[str, ...]) -> str:
    code = f"import {', '.join(imports)}"
    if tpu:
        code = ("import os; os.environ.setdefault('PJRT_DEVICE', 'TPU'); " + code +
                "; import torch_xla, torch_xla.runtime")
    return code


def for_tpu(torch_version: str = TORCH_XLA_VERSION, user: Iterable[str] = ()) -> SetupPlan:
    """A TPU pod's plan: torch and torch_xla[tpu] of one release, libtpu from Google's index."""
    return SetupPlan((f"torch=={torch_version}", f"torch_xla[tpu]=={torch_version}",
                      *HARNESS_REQUIREMENTS, *user), find_links=(LIBTPU_INDEX,), tpu=True)


def for_wheelhouse(house: Path, user: Iterable[str] = ()) -> SetupPlan:
    """A local pod's plan: the torch and packages of the environment the house was packed
    from (this machine's, or the workers' own Python's), from its wheels only."""
    import importlib.metadata as metadata

    from harness.pod.wheelhouse import version_in

    torch = version_in(house, "torch") or metadata.version("torch")
    return SetupPlan((f"torch=={torch}", *HARNESS_REQUIREMENTS, *user),
                     find_links=(str(house),), no_index=True, tpu=False)


# -- the user's requirements ----------------------------------------------------------

def read_requirements(path: str | Path) -> tuple[str, ...]:
    """The user's packages: a pip requirements file, one per line, or a ``pyproject.toml``'s
    ``[project] dependencies``.

    Options (``-r``, ``-e``, ``--index-url``) are refused with the line that has one: the
    setup decides where pip looks, and a worker has no copy of a file another one names."""
    if Path(path).name == "pyproject.toml":
        return _project_requirements(Path(path))
    try:
        text = read_text(path, MAX_REQUIREMENTS_BYTES, "a requirements file")
    except InputError as exc:
        raise SetupError(str(exc)) from None
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith("-"):
            raise SetupError(f"{path}, line {lineno}: {line!r} is a pip option; a setup's "
                             "requirements are packages only (one per line, e.g. 'hydra-core"
                             "==1.3.2'): the setup decides where pip finds them")
        out.append(line)
    return tuple(out)


def _project_requirements(path: Path) -> tuple[str, ...]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the same parser, from PyPI (a dependency of the harness there)
        import tomli as tomllib
    try:
        data = tomllib.loads(read_text(path, MAX_REQUIREMENTS_BYTES, "a pyproject.toml"))
    except (InputError, tomllib.TOMLDecodeError) as exc:
        raise SetupError(f"{path}: {exc}") from None
    deps = (data.get("project") or {}).get("dependencies")
    if deps is None:
        raise SetupError(f"{path} has no [project] dependencies to install")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise SetupError(f"{path}: [project] dependencies is not a list of strings")
    return tuple(deps)


# -- what a worker answered -----------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """One worker's setup: ``unchanged`` (it had the environment) or ``installed``."""

    state: str
    key: str
    seconds: float
    waited_s: float = 0.0

    @classmethod
    def parse(cls, stdout: str) -> Outcome | None:
        for line in reversed(stdout.splitlines()):
            if line.startswith("HARNESS-SETUP "):
                try:
                    d = json.loads(line[len("HARNESS-SETUP "):])
                    return cls(str(d["state"]), str(d["key"]), float(d["seconds"]),
                               float(d.get("waited_s", 0)))
                except (ValueError, KeyError, TypeError):
                    return None
        return None

    def describe(self) -> str:
        waited = f", after {self.waited_s:g} s waiting for apt/dpkg" if self.waited_s else ""
        what = "already set up, nothing changed" if self.state == "unchanged" else "set up"
        return f"{what} ({self.key}) in {self.seconds:g} s{waited}"


def failure_of(stdout: str, stderr: str) -> str:
    """Why a worker's setup failed: its ``HARNESS-SETUP-FAILED`` line, else its last words."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("HARNESS-SETUP-FAILED "):
            return line[len("HARNESS-SETUP-FAILED "):]
    tail = " ".join((stderr or stdout).split())[-300:]
    return f"the setup script failed: {tail or 'no output'}"
