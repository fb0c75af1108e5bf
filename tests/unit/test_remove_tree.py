"""A world's directory is removed whole by a harness that is not root: the kernel overlay's
own work directories (``work/work``) are made mode 000, which its owner may not list until
it gives itself the right (``reaper.remove_tree``). The soak as an unprivileged user found
every kernel-isolated world's directory left behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from harness.world.reaper import remove_tree

NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="makes the tree another user's (as root)")
def test_a_tree_with_a_mode_000_directory_is_removed_by_its_owner() -> None:
    tmp_path = Path(tempfile.mkdtemp())  # in /tmp: pytest's own is root's alone to enter
    try:
        _removed_as_nobody(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _removed_as_nobody(tmp_path: Path) -> None:
    tree = tmp_path / "ended-harness-1-0" / "fs" / "host-0.work"
    (tree / "work" / "inner").mkdir(parents=True)
    (tree / "work" / "inner" / "file").write_text("x")
    for root, dirs, files in os.walk(tmp_path):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), NOBODY, NOBODY)
    os.chmod(tree / "work", 0)
    os.chmod(tmp_path, 0o777)
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            remove_tree(str(tmp_path / "ended-harness-1-0"))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert not (tmp_path / "ended-harness-1-0").exists()
