"""Fixtures the test files share; plain helpers live in ``support.py``."""

from __future__ import annotations

import functools
import os

import pytest

from support import REPO, TESTS, Cli, local_shim, run_cli

# Some test modules are also their ranks' targets (``f"{__file__}:name"``): a rank imports such a
# file by path, in a fork server started as a fresh interpreter whose PYTHONPATH is the
# repository's and this one, so their module-level ``from support import ...`` needs tests/ here.
# Set at import, before any world starts a fork server.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)

#: The tiers, one directory each; a test is marked with its tier (``-m unit``, ``-m "not pod"``).
TIERS = ("unit", "world", "catalog", "cli", "pod")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = item.path.parent.name
        if tier in TIERS:
            item.add_marker(tier)


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
def shim(request: pytest.FixtureRequest):
    """A fresh import of the shim with a LocalRuntime of the requested profile installed
    (``@pytest.mark.parametrize("shim", [profile], indirect=True)`` chooses the profile)."""
    with local_shim(getattr(request, "param", "current")) as local:
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr

        yield torch_xla, xm, xr, local


@pytest.fixture
def bare_cli(without_pytest: dict[str, str]) -> Cli:
    """The command line where pytest cannot be imported."""
    return functools.partial(run_cli, env=without_pytest)
