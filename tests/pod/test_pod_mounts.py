"""A pod's own mounts, for real: a local pod whose workers mount this machine's directory
read-only (a data disk) or shared (a bucket), a stranger's loader on its own data there, and
the check every worker runs of what ``--mount`` claims."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.pod.mounts import PodMount, check_answer, check_command

from support import REPO, run_cli, run_cli_here

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the local pod needs Linux namespaces")

OWN = REPO / "tests" / "user_targets" / "own_data"
#: The stranger's loader, but it leaves an index next to the data (as many loaders do).
CACHING = '''
import os
from npz_shards import ShardedTokens as _Base


class ShardedTokens(_Base):
    def __init__(self, root, **kw):
        with open(os.path.join(root, ".index"), "w") as f:
            f.write("shards\\n")
        super().__init__(root, **kw)
'''


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_read_only_data_disk_runs_your_loader_on_the_data_it_holds(tmp_path: Path) -> None:
    data, code = tmp_path / "data", tmp_path / "code"
    data.mkdir()
    code.mkdir()
    sys.path.insert(0, str(OWN))
    try:
        from make_npz import write
    finally:
        sys.path.remove(str(OWN))
    write(str(data))
    before = _tree(data)
    shutil.copy(OWN / "npz_shards.py", code)
    (code / "caching.py").write_text(CACHING)
    done = run_cli("pod", "run", "--local", "4", "--mount", f"{data}=ro", "--data", str(data),
                   "-s", "readonly-data-mount", "-s", "missing-data-on-host",
                   "--target", "npz_shards.py:ShardedTokens", "--target", "caching.py:ShardedTokens",
                   "--workload", "data-sharding", "--report-dir", str(tmp_path / "r"),
                   "--format", "json", cwd=code, timeout=600)
    report = json.loads((tmp_path / "r" / "latest" / "matrix.json").read_text())
    cells = {(c["scenario"], c["target"].split(".")[0]): c for c in report["cells"]}
    assert done.returncode == 1, done.stdout + done.stderr  # the caching loader's ERROR
    plain = cells["readonly-data-mount", "npz_shards"]
    assert (plain["outcome"], plain["verdict"]) == ("PASS", "ok"), plain["detail"]
    caching = cells["readonly-data-mount", "caching"]
    assert caching["outcome"] == "ERROR", (caching["detail"], [
        (r["rank"], r["outcome"], r["exit_code"], r["signal"], r["stderr"][-600:])
        for r in caching["ranks"]])
    assert f"[Errno 30] Read-only file system: '{data}/.index'" in caching["detail"]
    for loader in ("npz_shards", "caching"):  # the disk holds host 3's data: no fault happens
        missing = cells["missing-data-on-host", loader]
        assert (missing["outcome"], missing["verdict"]) == ("NOT-EXERCISED", "unexercised")
        assert missing["detail"] == (
            "this pod's read-only disk does not hold what the scenario places: host 3's "
            f"{data}/shard-00000.npz must be absent, and the disk has it (and 2 more)")
        assert f"--mount {data}=ro" in missing["replay"]
    assert report["pod"]["mounts"] == {str(data): "ro"}
    assert _tree(data) == before  # the machine's data, untouched by every worker


def test_a_bucket_gets_a_directory_of_the_runs_own_removed_after(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    (bucket / "theirs.txt").write_text("the team's own object\n")
    srv = _tree(Path("/srv")) if os.path.isdir("/srv") else {}
    done = run_cli("pod", "run", "--local", "4", "--mount", f"{bucket}=gcsfuse", "-s",
                   "stream-missing", "--target", "robust-worker", "--report-dir",
                   str(tmp_path / "r"), "--format", "json", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    cell = json.loads((tmp_path / "r" / "latest" / "matrix.json").read_text())["cells"][0]
    assert (cell["outcome"], cell["verdict"]) == ("ERROR", "ok")
    assert "rank 3 raised FileNotFoundError: [Errno 2] worker 3: its input stream does not " \
           "exist on t1v-n-harness-w-3" in cell["detail"]
    assert "ranks 0-2 returned" in cell["detail"]  # their streams were uploaded, exactly once
    assert sorted(os.listdir(bucket)) == ["theirs.txt"]  # the run's own directory is gone
    assert (bucket / "theirs.txt").read_text() == "the team's own object\n"
    # the workers' streams and checkpoints went to their own /srv, never this machine's
    assert (_tree(Path("/srv")) if os.path.isdir("/srv") else {}) == srv


def _check(mounts: tuple[PodMount, ...], fuse: bool = True) -> dict[str, str]:
    done = subprocess.run(["sh", "-c", check_command(sys.executable, mounts, fuse)],
                          capture_output=True, text=True, timeout=60)
    found = check_answer(done.stdout)
    assert found is not None, done.stderr
    return found


def test_each_worker_checks_that_its_mounts_are_what_the_pod_said(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    said = _check((PodMount(str(plain), "ro"), PodMount(str(tmp_path / "none"), "shared"),
                   PodMount(str(plain), "gcsfuse")))
    assert said == {str(plain): "it is not a FUSE mount (" + said[str(plain)].split("(")[1],
                    str(tmp_path / "none"): "it is not there (no such directory)"}
    assert _check((PodMount(str(plain), "ro"),)) == \
        {str(plain): "it takes writes: it is not a read-only disk"}
    assert _check((PodMount(str(plain), "shared"),)) == {}
    assert _check((PodMount(str(plain), "gcsfuse"),), fuse=False) == {}  # a local pod's stand-in


def test_a_mount_the_local_pod_cannot_make_is_a_usage_error(tmp_path: Path) -> None:
    for mount, said in ((f"{tmp_path}/none=ro", "there is no such directory"),
                        ("/mnt/data=disk", "'disk' is not a kind of pod mount")):
        done = run_cli_here("pod", "run", "--local", "2", "--mount", mount, "-s", "baseline",
                            "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
        assert done.returncode == 2 and said in " ".join(done.stderr.split()), done.stderr
