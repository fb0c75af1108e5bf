"""``harness exec`` on test files written as strangers write them (issue 27): a file that
skipped itself tested nothing (NOT-EXERCISED, never PASS); one whose ranks raise what it
expects passes, as the file itself reports; one that did not expect it is the ERROR."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support import USER_TARGETS_DIR, run_cli

FILES = USER_TARGETS_DIR / "test_files"


def _exec(tmp_path: Path, name: str, *command: str, options: tuple[str, ...] = ()):
    shutil.copy(FILES / name, tmp_path / name)  # its own directory: no pytest config above it
    return run_cli("exec", "-t", "1x2", *options, "--", *command, name, cwd=tmp_path)


def test_a_test_file_that_skipped_itself_tested_nothing(tmp_path: Path) -> None:
    done = _exec(tmp_path, "skips_itself.py", "python")
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "NOT-EXERCISED: no rank started: launcher 0 ran the script to its end (exit 0) " \
           "without xmp.spawn or the XLA runtime (unittest: ran 1, OK (skipped=1)): nothing " \
           "of the world was tested" in said, said
    assert "PASS:" not in said  # the launcher's own row says it returned; the verdict does not
    required = _exec(tmp_path, "skips_itself.py", "python", options=("--require-exercised",))
    assert required.returncode == 1


@pytest.mark.parametrize("name, command, runner", [
    ("expects_a_raise.py", ("python",), "unittest: ran 1, OK"),
    ("pytest_expects_a_raise.py", ("python", "-m", "pytest", "-q", "-p", "no:cacheprovider"),
     "pytest: 1 passed"),
])
def test_ranks_that_raise_what_the_test_expects_pass(tmp_path: Path, name: str,
                                                    command: tuple[str, ...], runner: str) -> None:
    done = _exec(tmp_path, name, *command)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert f"PASS: the test file reported its own run passed ({runner}" in said, said
    assert "ended ERROR as it expected" in said


def test_a_test_file_that_did_not_expect_the_raise_is_the_error(tmp_path: Path) -> None:
    done = _exec(tmp_path, "does_not_expect_it.py", "python")
    assert done.returncode == 1
    said = " ".join(done.stdout.split())
    assert "ERROR: rank 1 raised ValueError: bad shard on rank 1" in said, said


def test_launchers_stuck_importing_are_named_with_the_module(tmp_path: Path) -> None:
    """Before their xmp.spawn, the launchers import a module that never finishes: the
    HANG says which module, not only that the ranks never started."""
    from harness import HANG, run_world

    (tmp_path / "slowmod.py").write_text("import time\ntime.sleep(100000)\n")
    (tmp_path / "train.py").write_text(
        "import slowmod\nimport torch_xla.distributed.xla_multiprocessing as xmp\n\n"
        "def _fn(i):\n    pass\n\nif __name__ == '__main__':\n    xmp.spawn(_fn, args=())\n")
    result = run_world(argv=(str(tmp_path / "train.py"),), topology="2x2", timeout=30,
                       cwd=str(tmp_path))
    assert result.outcome == HANG
    assert result.detail() == ("launchers 0-1 were still importing `slowmod` before starting "
                               "their ranks; ranks 0-3 never started; deadline 30 s"), \
        result.detail()
