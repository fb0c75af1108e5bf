"""Fixtures the test files share; plain helpers live in ``support.py``."""

from __future__ import annotations

import functools
import os

import pytest

from support import REPO, Cli, run_cli


@pytest.fixture(scope="session", autouse=True)
def discovery_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """What targets showed in their fault-free runs, kept for this session only: the
    suite learns once per target and leaves nothing in the checkout."""
    os.environ["HARNESS_CACHE_DIR"] = str(tmp_path_factory.mktemp("harness-cache"))


@pytest.fixture
def cli() -> Cli:
    """Run the ``harness`` command line in a subprocess."""
    return run_cli


@pytest.fixture(scope="session")
def without_pytest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment where ``import pytest`` fails, as after ``pip install .`` alone."""
    hidden = tmp_path_factory.mktemp("no-pytest")
    (hidden / "pytest.py").write_text("raise ImportError(\"No module named 'pytest'\")\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(hidden), str(REPO), env.get("PYTHONPATH", "")])
    return env


@pytest.fixture
def bare_cli(without_pytest: dict[str, str]) -> Cli:
    """The command line where pytest cannot be imported."""
    return functools.partial(run_cli, env=without_pytest)
