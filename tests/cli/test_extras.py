"""A command whose optional extra is not installed says which extra to install (exit 2),
never an internal error, and makes nothing first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.vocabulary import EXTRAS

from support import REPO, tomllib

#: ``harness ARGS`` with the import of ``module`` failing as it does where it is not installed.
WITHOUT = '''
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {module!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Missing())
import importlib.util
find = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] == {module!r} else find(name, *a)
from harness.cli import main
sys.argv = ["harness", *{args!r}]
main()
'''


@pytest.mark.parametrize("args", [
    ("pod", "run", "--local", "2", "-s", "isolated-tmp", "--target", "naive-sync"),
    ("pod", "setup", "--local", "2"),
])
def test_a_pod_command_without_the_pod_extra_names_it_and_makes_nothing(tmp_path: Path, args):
    reports = tmp_path / "reports"
    full = (*args, "--log-dir" if args[1] == "setup" else "--report-dir", str(reports))
    done = subprocess.run([sys.executable, "-c", WITHOUT.format(module="asyncssh", args=full)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "harness: this needs asyncssh, which is not installed: it comes with the harness's "
        "extra 'pod' (from a checkout: pip install '.[pod]', or '.[all]')")
    assert not reports.exists()


def test_every_extra_named_is_one_the_package_has_and_all_holds_them():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for module, extra in EXTRAS.items():
        names = [d.split(">")[0].split("=")[0].replace("-py", "").replace("_", "-").lower()
                 for d in extras[extra]]
        assert module.replace("_", "-") in names, (module, extra, names)
    everything = extras["all"][0]
    for extra in ("torch", "schema", "pod", "cluster"):
        assert extra in everything
