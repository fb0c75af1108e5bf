"""What a plain `pip install .` must carry: every package, the shim, the catalog."""

from __future__ import annotations

from pathlib import Path

from harness.rank.environment import shim_root
from harness.scenarios import catalog_dir

from support import REPO, tomllib


def test_every_package_under_harness_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "harness").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found - listed == set(), "add these to [tool.setuptools] packages"


def test_the_shim_and_the_catalog_are_found():
    assert (Path(shim_root()) / "torch_xla" / "core" / "xla_model.py").is_file()
    names = {p.stem for p in catalog_dir().glob("*.yaml")}
    assert {"baseline", "isolated-tmp", "writer-killed", "api-drift"} <= names
