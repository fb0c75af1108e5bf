"""A pod's own mounts (``--mount PATH=KIND``): which scenario mounts each stands for, where a
scenario is aimed on the pod, and what a read-only disk must already hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.filesystem.sandbox import Leftover
from harness.filesystem.snapshot import snapshot_real
from harness.pod.matrix import aimed, off_pod, plan_pod
from harness.pod.mounts import Held, PodMount, held_problems, look_answer, parse_all, split
from harness.scenarios import MountSpec, catalog, load_scenario
from harness.workloads.registry import target


def test_a_mount_is_path_equals_kind_and_a_bad_one_says_what_is_wrong():
    assert PodMount.parse("/mnt/data/=ro") == PodMount("/mnt/data", "ro")
    for text, said in (("/mnt/data", "is not PATH=KIND"), ("/mnt/data=nfs", "'nfs' is not a kind"),
                       ("mnt/data=ro", "must be absolute"), ("/=ro", "not /"),
                       ("/mnt/../etc=ro", "without '..'")):
        with pytest.raises(ValueError, match=said):
            PodMount.parse(text)
    with pytest.raises(ValueError, match="/mnt/data is given twice"):
        parse_all(["/mnt/data=ro", "/mnt/data/=shared"])


def test_each_kind_stands_for_the_scenario_mounts_that_mean_it():
    data_ro = MountSpec(path="/mnt/data", scope="shared", mode="ro")
    host_ro = MountSpec(path="/mnt/data/puzzles", scope="host", mode="ro")  # ro: unobservable
    bucket = MountSpec(path="/mnt/bucket", scope="shared", consistency="object")
    nfs = MountSpec(path="/mnt/nfs", scope="shared", consistency="close-to-open")
    fresh = MountSpec(path="/mnt/data", scope="host")  # each host's own empty directory
    role = MountSpec(role="handoff-dir", scope="shared")
    ro, fuse = PodMount("/mnt/data", "ro"), PodMount("/mnt/bucket", "gcsfuse")
    shared = PodMount("/mnt/nfs", "shared")
    assert ro.provides(data_ro) and ro.provides(host_ro) and not ro.provides(fresh)
    assert fuse.provides(bucket) and not fuse.provides(nfs) and not shared.provides(bucket)
    assert shared.provides(nfs) and not shared.provides(data_ro)
    assert not any(p.provides(role) for p in (ro, fuse, shared))
    assert not PodMount("/mnt/data/puzzles", "ro").provides(data_ro)  # the disk is inside it


def _scenario(name: str):
    return next(s for s in catalog() if s.name == name)


def test_a_scenario_runs_on_a_pod_that_has_its_mounts_and_says_what_to_give_otherwise():
    assert off_pod(_scenario("readonly-data-mount")) == (
        "it mounts /mnt/data with the simulator's filesystems; a pod's filesystems are its "
        "own: if this pod has it, say so (--mount /mnt/data=ro)")
    assert off_pod(_scenario("readonly-data-mount"), (PodMount("/mnt/data", "ro"),)) is None
    assert off_pod(_scenario("stream-missing"), (PodMount("/mnt/data", "ro"),)) == (
        "it mounts /mnt/bucket with the simulator's filesystems; a pod's filesystems are its "
        "own: if this pod has it, say so (--mount /mnt/bucket=gcsfuse)")
    # a pre-emption still needs the simulator's restarts, whatever the pod mounts
    assert "fault preempt" in off_pod(_scenario("preempt-mid-checkpoint"),
                                      (PodMount("/mnt/bucket", "gcsfuse"),))


def test_a_bucket_elsewhere_takes_the_scenario_and_its_inputs_into_the_runs_own_directory():
    pod = (PodMount("/mnt/checkpoints", "gcsfuse"),)
    moved = aimed(_scenario("stream-missing"), pod, "harness-pod-r1")
    assert [m.path for m in moved.mounts] == ["/mnt/checkpoints/harness-pod-r1"]
    assert moved.workload_inputs.bucket == "/mnt/checkpoints/harness-pod-r1"  # a default, moved
    assert moved.inputs["missing_streams"] == [3]  # the rest as it was
    assert off_pod(moved, pod) is None
    # a mount the pod has at its own path still goes into the run's directory (writable)
    same = aimed(_scenario("stream-missing"), (PodMount("/mnt/bucket", "gcsfuse"),), "h")
    assert same.workload_inputs.bucket == "/mnt/bucket/h"
    # read-only: nothing is written, so the scenario stays where the disk is
    ro = aimed(_scenario("readonly-data-mount"), (PodMount("/mnt/data", "ro"),), "h")
    assert ro.workload_inputs.data_dir == "/mnt/data/puzzles"
    # two candidates: nothing is guessed
    two = (PodMount("/a", "gcsfuse"), PodMount("/b", "gcsfuse"))
    assert aimed(_scenario("stream-missing"), two, "h").workload_inputs.bucket == "/mnt/bucket"


def test_plan_pod_runs_the_scenarios_the_mounts_allow_and_lists_the_others():
    scenarios = [_scenario(n) for n in ("baseline", "readonly-data-mount", "stream-missing")]
    plans, not_run = plan_pod(scenarios, [target("naive-sync"), target("naive-worker")], 0,
                              "v4-64", None,
                              (PodMount("/mnt/checkpoints", "gcsfuse"),), "harness-pod-x")
    assert {p.scenario.name for p in plans} == {"baseline", "stream-missing"}
    assert list(not_run) == ["readonly-data-mount"]


def _held(path: str, content: bytes, hosts: tuple[int, ...] | None = None) -> Leftover:
    return Leftover(path, content, hosts=hosts)


def test_files_under_a_read_only_disk_are_held_not_placed():
    files = [_held("/mnt/data/a.npy", b"aa"), _held("/tmp/cfg.yaml", b"x"),
             _held("/mnt/data/b.npy", b"bb", hosts=(0, 1))]
    placed, held = split(files, (PodMount("/mnt/data", "ro"), PodMount("/tmp", "shared")))
    assert [f.path for f in placed] == ["/tmp/cfg.yaml"]
    assert [(h.path, h.size, h.hosts) for h in held] == [("/mnt/data/a.npy", 2, None),
                                                        ("/mnt/data/b.npy", 2, (0, 1))]


def test_what_a_hosts_disk_must_hold_and_each_way_it_can_differ():
    import hashlib

    def digest(data: bytes) -> tuple[str, int]:
        return hashlib.sha256(data).hexdigest(), len(data)

    _, held = split([_held("/d/a", b"aa"), _held("/d/b", b"bb", hosts=(0,)),
                     Leftover("/d/sub", is_dir=True)], (PodMount("/d", "ro"),))
    good = {"/d/a": digest(b"aa"), "/d/b": digest(b"bb"), "/d/sub": "dir"}
    assert held_problems(held, 0, good) == []
    assert held_problems(held, 1, {**good, "/d/b": None}) == []  # host 1 must lack it
    assert held_problems(held, 1, good) == ["host 1's /d/b must be absent, and the disk has it"]
    bad = {"/d/a": digest(b"ab"), "/d/b": None, "/d/sub": digest(b"")}
    said = held_problems(held, 0, bad)
    assert said[0].startswith("host 0's /d/a must hold other bytes (2, sha256 ")
    assert said[1:] == ["host 0's /d/b must hold 2 bytes, and the disk has none",
                        "host 0's /d/sub must be a directory, and the disk has a file"]
    assert isinstance(held[0], Held)


def test_a_workers_answers_are_read_as_plain_data_only():
    assert look_answer('x\nHARNESS-HELD {"/d/a": ["ab", 2], "/d/s": "dir", "/d/n": null}\n') == \
        {"/d/a": ("ab", 2), "/d/s": "dir", "/d/n": None}
    assert look_answer("HARNESS-HELD [1, 2]\n") is None
    assert look_answer("nothing\n") is None


def test_a_real_snapshot_records_files_by_glob_under_the_controllers_home(tmp_path: Path):
    home = tmp_path / "home"
    (home / "out").mkdir(parents=True)
    (home / "out" / "a.jsonl").write_text('{"id": 1}\n')
    (home / "out" / "b.bin").write_bytes(b"\x00\xff")
    (home / "out" / "skip.txt").write_text("no")
    os.symlink("/etc/passwd", home / "out" / "link.jsonl")
    seen = snapshot_real(["~/out/*.jsonl", "~/out/*.bin"], str(home), "/ctl/home")
    assert seen == {"/ctl/home/out/a.jsonl": '{"id": 1}\n',
                    "/ctl/home/out/b.bin": "base64:AP8=",
                    "/ctl/home/out/link.jsonl": "not read: symlink -> /etc/passwd"}
    assert snapshot_real([str(tmp_path / "none" / "*")], str(home)) == {}


def test_moving_a_scenario_moves_what_the_file_and_the_defaults_say(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload: checkpoint-resume\ndescription: d\nfinding: f\n"
                    "topology: 2x1\nexpect: pass\nmounts:\n"
                    "  - {path: /mnt/bucket/run, scope: shared, consistency: object}\n")
    moved = load_scenario(path).moved("/mnt/bucket", "/mnt/ckpt/h")
    assert [m.path for m in moved.mounts] == ["/mnt/ckpt/h/run"]
    assert moved.workload_inputs.bucket == "/mnt/ckpt/h"
    assert load_scenario(path).moved("/elsewhere", "/x").workload_inputs.bucket == "/mnt/bucket"


def test_a_pods_shape_is_named_by_a_per_chip_topology_never_an_spmd_one():
    from harness.pod.matrix import topology_name

    assert topology_name(8, 1) == "v4-64"
    assert topology_name(2, 1) == "2x1"  # v4-16-spmd has this shape, but runs SPMD
    assert topology_name(3, 2) == "3x2"
