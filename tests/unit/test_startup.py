"""Imports paid only when used: `harness --help` and the pytest plugin load nothing heavy.

What they cost is measured by ``benchmarks/bench_startup.py`` (a benchmark, never a timed
assertion); these tests keep the reason it is small: which modules a fresh interpreter has
imported after each entry point.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Modules whose import costs tens or hundreds of milliseconds, or starts the machinery.
HEAVY = ("torch", "numpy", "pydantic", "yaml", "rich", "hypothesis", "harness.world",
         "harness.runner", "harness.reports", "harness.scenarios", "harness.faults",
         "harness.workloads", "harness.filesystem", "harness.explore", "harness.pod")


def _loaded_after(code: str) -> list[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)  # the machine's time: a bound, so a stuck import fails
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]


@pytest.mark.parametrize("entry", [
    "import harness",
    "import harness.pytest_plugin",  # the pytest11 entry point, loaded by every pytest run
    "from harness.cli import cli",  # what `harness --help` reads: every command's options
])
def test_an_entry_point_imports_nothing_heavy(entry):
    assert _heavy(_loaded_after(entry)) == []


def test_help_lists_every_command_without_importing_what_they_run():
    code = ("from click.testing import CliRunner\nfrom harness.cli import cli\n"
            "out = CliRunner().invoke(cli, ['--help']).output\n"
            "assert all(c in out for c in ('run', 'replay', 'exec', 'list', 'report', 'diff', "
            "'explore', 'pod')), out")
    assert _heavy(_loaded_after(code)) == []


def test_the_public_api_is_still_there_once_asked_for():
    import harness

    assert harness.PASS == "PASS" and callable(harness.run_world) and callable(harness.describe)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        harness.nope  # noqa: B018
