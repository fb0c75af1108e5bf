"""A target cannot forge its verdict by tampering with the harness from inside its process
(issue 24): the harness seals faulted writes itself, refuses a fault a rank says it
applied, and acts on a rank's paths only under the world's sandbox, never through a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import run_world
from harness.filesystem.beneath import Beneath, Outside
from harness.filesystem.publisher import Publisher

from support import TARGETS_DIR

TAMPER = TARGETS_DIR / "tamper_targets.py"
TEXT_SIZE = len("".join(f"line {i}: {'x' * 20}\n" for i in range(12)))  # the target's TEXT


def test_a_patched_fault_kind_changes_nothing_on_disk() -> None:
    """``TornWrite.at_close`` patched in the rank to keep every byte: the harness, which
    seals the write, tears it all the same, and the history's offset is what readers get."""
    result = run_world(f"{TAMPER}:keep_every_byte", topology="1x2", timeout=30,
                       faults=[{"kind": "torn-write", "path": "/tmp/tamper/*"}])
    assert result.outcome == "PASS", result.detail()
    [event] = [e for e in result.history if e.kind == "fault"]
    assert event.op == "torn-write" and event.detail["size"] == TEXT_SIZE
    assert event.detail["offset"] < TEXT_SIZE
    assert [r.value["size"] for r in result.ranks] == [event.detail["offset"]] * 2


def test_a_fault_the_rank_reports_itself_is_refused_as_tampering() -> None:
    result = run_world(f"{TAMPER}:forge_fault", topology="1x2", timeout=30,
                       faults=[{"kind": "torn-write", "path": "/elsewhere/*"}])
    assert result.outcome != "PASS"
    assert not [e for e in result.history if e.kind == "fault"], result.history
    [refused] = [e for e in result.history if e.kind == "protocol"]
    assert refused.rank == 0
    assert "a torn-write fault it says it applied itself" in refused.detail["message"]
    assert "changed the harness's fault engine" in result.detail()


@pytest.mark.parametrize("how", ["hold", "seal", "moved"])
def test_the_harness_never_moves_or_writes_a_machine_file_a_rank_names(
        tmp_path: Path, how: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the machine's own bytes\n")
    result = run_world(f"{TAMPER}:deputy", topology="1x2", timeout=30,
                       args=({"victim": str(victim), "how": how},),
                       faults=[{"kind": "torn-write", "path": "/elsewhere/*"}])
    assert victim.read_bytes() == b"the machine's own bytes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]
    [refused] = [e for e in result.history if e.kind == "protocol"]
    assert refused.rank == 0 and "not under the world's sandbox" in refused.detail["message"]
    assert result.outcome != "PASS"


# -- Beneath: the harness's own file operations on a rank's paths -------------------------

def test_beneath_refuses_paths_outside_and_links_anywhere(tmp_path: Path) -> None:
    root, outside = tmp_path / "fs", tmp_path / "machine"
    (root / "held").mkdir(parents=True)
    outside.mkdir()
    (outside / "f").write_bytes(b"machine")
    (root / "held" / "link").symlink_to(outside)
    (root / "held" / "file-link").symlink_to(outside / "f")
    beneath = Beneath(str(root))
    for path in (str(outside / "f"), f"{root}/../machine/f", "relative", f"{root}/held/./x",
                 str(root)):
        with pytest.raises(Outside):
            beneath.read(path)
    with pytest.raises(Outside, match="a link or a file where a directory was"):
        beneath.write(f"{root}/held/link/f", b"x")
    with pytest.raises(Outside, match="a link"):
        beneath.read(f"{root}/held/file-link")
    with pytest.raises(Outside, match="a link"):
        beneath.write(f"{root}/held/file-link", b"x")
    assert (outside / "f").read_bytes() == b"machine"
    beneath.write(f"{root}/held/a/b", b"data")  # directories made, under the root
    assert beneath.read(f"{root}/held/a/b") == b"data"
    beneath.replace(f"{root}/held/a/b", f"{root}/up/b")
    assert (root / "up" / "b").read_bytes() == b"data" and not beneath.exists(f"{root}/held/a/b")
    beneath.close()


def test_beneath_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    beneath = Beneath(str(tmp_path))
    with pytest.raises(Outside, match="not a regular file"):
        beneath.read(str(tmp_path / "fifo"))
    beneath.close()


def test_a_held_write_outside_the_sandbox_is_refused(tmp_path: Path) -> None:
    publisher = Publisher(2, str(tmp_path / "fs"))
    with pytest.raises(Outside):
        publisher.hold(0, {"src": "/etc/hostname", "dst": str(tmp_path / "fs/x"), "path": "/x",
                           "until": "time"}, 0.0)
    assert publisher.held == []


def test_a_held_write_renamed_out_of_the_sandbox_or_never_held_is_refused(tmp_path: Path) -> None:
    publisher = Publisher(2, str(tmp_path / "fs"))
    (tmp_path / "fs").mkdir()
    publisher.hold(0, {"src": str(tmp_path / "fs/held"), "dst": str(tmp_path / "fs/a.tmp"),
                       "path": "/a.tmp", "until": "read"}, 0.0)
    with pytest.raises(Outside):
        publisher.moved(0, "/a.tmp", "/a", "/etc/hostname")
    assert not publisher.moved(1, "/a.tmp", "/a", str(tmp_path / "fs/a"))  # not rank 1's
    assert publisher.moved(0, "/a.tmp", "/a", str(tmp_path / "fs/a"))
    [held] = publisher.held
    assert (held.path, held.dst) == ("/a", str(tmp_path / "fs/a"))
