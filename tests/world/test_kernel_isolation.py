"""Kernel isolation (``harness.world.isolation``, ``harness.rank.namespaces``): each host of
a world is a mount namespace whose ``/tmp`` and ``/dev/shm`` are its own, so subprocesses,
C code and the import system meet the walls Python code meets. Python isolation's holes
2, 3 and 4 (and 1, for a host's fresh directories) are closed here; they stay documented,
and pinned by ``test_hole_*`` in ``test_filesystem.py``, for Python isolation.

Skipped where the machine refuses a mount namespace (the fallback is tested below)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import PASS, run_world
from harness.rank import namespaces

from support import REPO, TARGETS_DIR

pytestmark = pytest.mark.skipif(bool(namespaces.unavailable()),
                                reason=f"no mount namespace here: {namespaces.unavailable()}")
TARGET = f"{TARGETS_DIR / 'kernel_targets.py'}:outside_python"
MACHINE = ("/tmp/from-sh", "/tmp/db.sqlite", "/tmp/model.pt", "/tmp/fileio.txt",
           "/tmp/written_module.py")


def test_what_only_the_kernel_sees_stays_on_its_host_and_off_the_machine(tmp_path: Path) -> None:
    """In a v4-64 world (8 hosts of 4): rank 0's subprocess, sqlite3, torch.jit.save and
    io.FileIO under /tmp are seen by the ranks of host 0 only, never by the machine's /tmp;
    a module rank 0 wrote there is what its import finds."""
    assert not any(os.path.exists(p) for p in MACHINE)
    result = run_world(TARGET, topology="v4-64", timeout=120, isolation="kernel",
                       cwd=str(tmp_path))
    assert result.outcome == PASS, result.detail()
    assert (result.isolation, result.isolation_note) == ("kernel", "")
    everything = {"from-sh": True, "db.sqlite": True, "model.pt": True, "fileio.txt": True,
                  "sh sees from-sh": True}
    for rank in result.ranks:
        if rank.host == 0:
            assert rank.value == {**everything, **({"imported": 42} if rank.rank == 0 else {})}
        else:
            assert rank.value == dict.fromkeys(everything, False), (rank.rank, rank.value)
    assert [p for p in MACHINE if os.path.exists(p)] == []


def test_python_isolation_keeps_its_holes_for_the_same_code(tmp_path: Path) -> None:
    """The same target under Python isolation: the subprocess and C code write the machine's
    /tmp (which is why kernel isolation exists); the test cleans up after it."""
    try:
        result = run_world(TARGET, topology="2x1", timeout=120, isolation="python",
                           cwd=str(tmp_path))
        assert result.isolation == "python"
        assert os.path.exists("/tmp/from-sh") and os.path.exists("/tmp/db.sqlite")
    finally:
        for path in MACHINE:
            if os.path.exists(path):
                os.remove(path)


def test_without_a_sandbox_a_world_has_no_walls_to_draw() -> None:
    result = run_world(f"{TARGETS_DIR / 'plain_sync.py'}:sync", topology="2x1", timeout=30,
                       isolation="kernel", sandbox=False)
    assert (result.isolation, result.isolation_note) == ("python", "")


def test_where_the_kernel_refuses_the_world_falls_back_and_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The default (kernel) on a machine that forbids user namespaces: python isolation,
    with the kernel's reason in the result (and so in every report's cell)."""
    monkeypatch.delenv("HARNESS_ISOLATION", raising=False)
    monkeypatch.setattr(namespaces, "_available", "unshare(CLONE_NEWUSER): Operation not "
                                                  "permitted")
    result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:hello", topology="2x1",
                       timeout=30)
    assert result.outcome == PASS, result.detail()
    assert result.isolation == "python"
    assert result.isolation_note == ("this machine refuses a world its namespaces "
                                     "(unshare(CLONE_NEWUSER): Operation not permitted)")


def test_a_kernel_isolated_worlds_directory_is_never_under_what_a_host_covers() -> None:
    from harness.world.isolation import KERNEL_BASE, world_base

    assert world_base("kernel") == KERNEL_BASE and not KERNEL_BASE.startswith(("/tmp", "/dev"))


#: How the test makes a mount namespace of its own: as root, else in a user namespace of
#: its own (where the harness's kernel isolation then overlays / directory by directory)
AS_ROOT = ["unshare", "--mount", "--propagation", "private"]
IN_A_USER_NAMESPACE = ["unshare", "--user", "--map-root-user", "--mount"]


def _in_a_mount_namespace_of_its_own(tmp_path: Path, setup: str, target: str,
                                     env: dict[str, str] | None = None,
                                     look: str = "/",
                                     ways: tuple[list[str], ...] = (AS_ROOT, IN_A_USER_NAMESPACE)
                                     ) -> tuple:
    """A 2x1 kernel-isolated world of ``target``, run in a mount namespace of the test's own
    (``unshare``) after the shell's ``setup`` (a tmpfs mounted over one of the machine's
    directories), so the machine itself is untouched; its outcome, isolation, note, the
    ranks' values, its detail, and what the machine's ``look`` then holds. Skips where no
    such namespace can be made."""
    script = ("import json, os; from harness import run_world; "
              f"r = run_world({target!r}, topology='2x1', timeout=60, isolation='kernel'); "
              "print(json.dumps([r.outcome, r.isolation, r.isolation_note, "
              f"[x.value for x in r.ranks], r.detail(), sorted(os.listdir({look!r}))]))")
    shell = f"{setup} && exec \"$0\" -c \"$1\""
    for unshare in ways:
        done = subprocess.run([*unshare, "sh", "-c", shell, sys.executable, script],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
        if "mount" not in done.stderr or done.returncode == 0:
            break
    if done.returncode != 0 and "mount" in done.stderr and not done.stdout:
        pytest.skip(f"no private mount namespace with a tmpfs here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stdout + done.stderr
    return tuple(json.loads(done.stdout.splitlines()[-1]))


def test_a_worlds_directory_on_a_mount_of_its_own_stays_writable(tmp_path: Path) -> None:
    """A /var/tmp that is a mount of its own (a tmpfs, or the partition hardened servers
    give it): the world's directory under it was bound into each host's new root read-only
    with that mount, and every rank of every cell CRASHed with EROFS opening its output."""
    outcome, isolation, note, values, detail, _ = _in_a_mount_namespace_of_its_own(
        tmp_path, "mount -t tmpfs -o size=64m tmpfs /var/tmp",
        f"{TARGETS_DIR / 'kernel_targets.py'}:hello")
    assert (outcome, isolation, note) == (PASS, "kernel", ""), detail
    assert values == ["rank 0", "rank 1"]


@pytest.mark.parametrize("way", [AS_ROOT, IN_A_USER_NAMESPACE], ids=["root", "user-namespace"])
def test_a_home_on_a_mount_of_its_own_is_each_hosts_own_copy(tmp_path: Path, way: list[str]
                                                             ) -> None:
    """A /home that is a mount of its own (a partition, as installers offer): the overlay of
    / does not reach it, and it was bound read-only, so a cache under ~ met EROFS even from
    Python, where a pod writes it. Each host now has its own copy of it, as of /: Python and
    a subprocess write it, the host's ranks see their own writes and the machine's file
    through it, other hosts and the machine never see them."""
    home = "/home/harness-test"
    setup = (f"mount -t tmpfs -o size=64m tmpfs /home && mkdir -p {home} "
             f"&& echo machine > {home}/kept.txt")
    outcome, isolation, note, values, detail, machine = _in_a_mount_namespace_of_its_own(
        tmp_path, setup, f"{TARGETS_DIR / 'kernel_targets.py'}:writes_home", {"HOME": home},
        look=home, ways=(way,))
    assert (outcome, isolation, note) == (PASS, "kernel", ""), detail
    assert values == [{"seen": ["py-0", "sh-0"], "kept": "machine"},
                      {"seen": ["py-1", "sh-1"], "kept": "machine"}]
    assert machine == ["kept.txt"]


def test_a_hosts_binds_cover_its_fresh_directories_and_bring_back_what_lies_under_them(
        tmp_path: Path) -> None:
    """Pure: what each host of a 2x1 world binds. /tmp and /dev/shm are the host's own; the
    machine's / and the working directory under /tmp are the kernel's overlays, writes
    landing in the host's copy in the sandbox (each host its own); without overlays the
    working directory comes back at its own path, read-only (once, with what is under it),
    and a fresh mount whose mount point the machine lacks is left to the view (with them,
    its mount point is made in the host's copy)."""
    from harness.filesystem.mounts import Mount, default_table
    from harness.topology import get_topology
    from harness.world.isolation import binds_for

    cwd = tmp_path / "checkout"
    (cwd / "src").mkdir(parents=True)
    table = default_table(get_topology("2x1"), os.path.expanduser("~"), str(cwd)).with_mount(
        Mount("/mnt/no-such-dir-here", scope="shared", base="fresh"))
    for overlays in (namespaces.WHOLE, ""):
        binds = binds_for(table, get_topology("2x1"), str(tmp_path), "/sb",
                          [str(cwd), str(cwd / "src")], overlays=overlays)
        assert sorted(binds) == [0, 1]
        for host, host_binds in binds.items():
            targets = {b.target: b for b in host_binds}
            assert targets["/tmp"].source.startswith("/sb/") and f"host-{host}" in targets["/tmp"].source
            assert targets["/dev/shm"].source.startswith("/sb/") and not targets["/tmp"].machine
            assert str(cwd / "src") not in targets
            # a mount point the machine lacks: made in the host's copy, else left to the view
            assert ("/mnt/no-such-dir-here" in targets) == bool(overlays)
            here = targets[str(cwd)]
            if overlays:
                upper, work = here.overlay
                assert upper.startswith("/sb/mounts/") and f"/host-{host}" in upper
                assert work == upper.rstrip("/") + ".work/" and not here.machine
                assert targets["/"].overlay[0] == f"/sb/mounts/%root/host-{host}/"
            else:
                assert here.machine and here.readonly and here.source == str(cwd)
                assert "/" not in targets and here.overlay is None
            # the world's own directory stays writable, bound on itself
            world = targets[str(tmp_path)]
            assert world.source == str(tmp_path) and not world.machine and not world.readonly
        assert binds[0][0].source != binds[1][0].source  # each host its own /tmp


def test_a_scenarios_mount_the_machine_lacks_is_the_same_for_python_and_a_subprocess(
        tmp_path: Path) -> None:
    """A scenario's shared mount in the checkout whose directory the machine does not have
    (the target makes it): its mount point is made in each host's copy, so what Python
    writes there a subprocess reads and the other way round, on every host (a new user's
    shell step met "Directory nonexistent" where Python had just made it)."""
    from harness.filesystem.mounts import Mount

    cwd = tmp_path / "checkout"
    cwd.mkdir()
    result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:shares_through_a_mount",
                       topology="2x1", timeout=60, isolation="kernel", cwd=str(cwd),
                       mounts=[Mount(f"{cwd}/run_cfg", scope="shared")])
    assert result.outcome == PASS, result.detail()
    for rank in result.ranks:
        assert rank.value == {"sh reads python's": "from python\n",
                              "python reads sh's": "from sh\n"}, rank.value
    assert list(cwd.iterdir()) == []


#: A machine's mounts as /proc/self/mountinfo gives them (point, own options, filesystem):
#: a /home and a /usr/local of their own, a FAT disk, a read-only one, a /var/tmp of its
#: own (where worlds live), the kernel's trees
MACHINE_MOUNTS = [("/", ["rw"], "ext4"), ("/home", ["rw", "nosuid"], "ext4"),
                  ("/usr/local", ["rw"], "xfs"), ("/opt", ["rw"], "vfat"),
                  ("/srv", ["ro"], "ext4"), ("/var/tmp", ["rw"], "tmpfs"),
                  ("/proc", ["rw"], "proc"), ("/sys", ["rw"], "sysfs"),
                  ("/sys/fs/cgroup", ["rw"], "tmpfs"), ("/dev", ["rw"], "devtmpfs"),
                  ("/dev/shm", ["rw"], "tmpfs")]


def test_what_the_kernel_overlays_for_a_host_of_the_machines_directories_and_mounts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pure, on a machine of many mounts (``MACHINE_MOUNTS``). As root (``whole``): / and the
    checkout, and each writable mount of a filesystem the overlay takes (/home, /usr/local),
    which the overlay of / does not reach; never a FAT or read-only one, the kernel's trees
    or the mount holding the worlds' directories. In a user namespace (the kernel will not
    take / as a layer: the mounts below it are locked to it) / is drawn directory by
    directory, each one with no mount of the machine's below it, or itself such a mount."""
    from harness.filesystem.mounts import default_table
    from harness.topology import get_topology
    from harness.world.isolation import drawn

    monkeypatch.setattr(namespaces, "_mountinfo", lambda: MACHINE_MOUNTS)
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    table = default_table(get_topology("2x1"), os.path.expanduser("~"), str(cwd))
    # every host copy of an overlay: /, the checkout, and an interpreter under /tmp (CI's)
    own = {m.path for m in table.mounts if m.base == "overlay" and m.scope == "host"}
    assert {"/", str(cwd)} <= own
    assert set(drawn(table)) == own | {"/home", "/usr/local"}
    each = drawn(table, whole=False)
    assert str(cwd) in each and "/" not in each and {"/home", "/usr/local", "/etc"} <= set(each)
    for path in ("/proc", "/sys", "/dev", "/tmp", "/usr", "/opt", "/srv", "/var", "/var/tmp"):
        assert path not in each, path


def _named(comm: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == comm:
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_world_is_a_pid_namespace_no_rank_can_see_out_of_and_nothing_outlives() -> None:
    """The hostile probe's SIGSTOP to the harness (it froze a run for 10 minutes): a rank
    of a kernel-isolated world cannot find or signal it, sees only its world's processes,
    each under the pid the world gives it, and a daemon it leaves ignoring SIGTERM is gone
    when the world is. The harness knows each rank by its pid on the machine."""
    daemon = f"hd-{os.getpid() % 100000}"
    # a stand-in for the harness, so that a rank that can reach it stops this, not pytest
    harness = subprocess.Popen(["sleep", "600"])
    try:
        result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:reach_the_harness",
                           topology="2x2", timeout=60, isolation="kernel",
                           args=({"harness": harness.pid, "daemon": daemon},))
        with open(f"/proc/{harness.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "S"  # never stopped (T)
    finally:
        harness.kill()
        harness.wait()
    assert result.outcome == PASS, result.detail()
    values = [r.value for r in result.ranks]
    assert {v["sigstop"] for v in values} == {"ProcessLookupError"}
    assert not any(v["sees harness"] for v in values)
    inner = sorted(v["pid"] for v in values)
    for v in values:
        assert v["ppid"] == 0  # the leader is outside the world
        assert v["self"] == str(v["pid"])  # /proc is the world's own
        assert set(inner) <= set(v["procs"]) and max(v["procs"]) < 50, v["procs"]
        assert 1 in v["procs"]  # the world's init
    # the rows name machine pids, each a different process than any pid the world gave
    assert all(r.pid is not None and r.pid > 0 for r in result.ranks)
    assert sorted(r.pid for r in result.ranks) != inner
    assert _named(daemon) == []


@pytest.mark.parametrize("how", [namespaces.WHOLE, namespaces.DIRECTORIES])
def test_what_the_view_does_not_see_writes_the_hosts_copy_never_the_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Kernel isolation: the machine's / and the working directory are the kernel's
    overlays, so a subprocess or C code writes, appends to and deletes files of the host's
    copy as Python code does, never the machine's: host 0 (rank 0's) sees every change
    through Python and through a subprocess alike, host 1 sees none, and the machine's files
    are as they were, byte for byte. A root-only setting in /proc/sys is still refused. The
    same where / is overlaid directory by directory (as in a user namespace)."""
    if how == namespaces.WHOLE and namespaces.overlays("/var/tmp")[0] != how:
        pytest.skip("the kernel overlays / directory by directory here (in the world's user "
                    "namespace, the machine's mounts below / are locked to it)")
    monkeypatch.setattr(namespaces, "_overlays", (how, ""))
    cwd, machine = tmp_path / "checkout", Path("/var/tmp") / f"machine-{os.getpid()}"
    cwd.mkdir()
    (cwd / "kept.txt").write_text("original\n")
    (cwd / "gone.txt").write_text("a file rank 0's subprocess deletes\n")
    machine.mkdir(exist_ok=True)
    before = {p.name: p.read_bytes() for p in cwd.iterdir()}
    try:
        result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:writes_the_machine",
                           topology="2x1", timeout=60, isolation="kernel", cwd=str(cwd),
                           args=({"machine": str(machine)},), watch=[f"{cwd}/*"])
        assert result.outcome == PASS, result.detail()
        assert list(machine.iterdir()) == []
    finally:
        for leftover in machine.iterdir():
            leftover.unlink()
        machine.rmdir()
    assert {p.name: p.read_bytes() for p in cwd.iterdir()} == before
    host0, host1 = (r.value for r in sorted(result.ranks, key=lambda r: r.rank))
    assert {k: v for k, v in host0.items() if " sees" not in k and "reads" not in k} == {
        "sh into cwd": "written", "sh into the machine": "written", "sh appends": "written",
        "sh deletes": "written", "sqlite3 into cwd": "written", "io.FileIO into cwd": "written",
        "/proc/sys": "CalledProcessError",
        "machine dir": ["from-sh.txt"]}
    changed = ["db.sqlite", "fileio.txt", "from-sh.txt", "kept.txt", "through-the-view.txt"]
    assert host0["python sees"] == host0["sh sees"] == changed
    assert host0["python reads kept.txt"] == "original\nmore\n"
    assert host0["sh reads python's"] == "py"
    assert host1 == {"python sees": ["gone.txt", "kept.txt"], "sh sees": ["gone.txt", "kept.txt"],
                     "python reads kept.txt": "original\n", "sh reads python's": "",
                     "machine dir": []}
    # what the world left, as the harness reads it back: host 0's copy, its deletion kept
    assert sorted(result.files[0]) == [f"{cwd}/{name}" for name in changed]
    assert result.files[0][f"{cwd}/kept.txt"] == "original\nmore\n"
    assert result.files[1] == {}


def test_a_read_only_tmp_over_a_working_directory_under_it(tmp_path: Path) -> None:
    """A scenario's read-only /tmp (read-only-fs) while the working directory lies under
    the machine's /tmp, as a CI checkout does: the ranks start (the checkout is bound back
    before /tmp turns read-only), and Python and a subprocess both meet EROFS there."""
    from harness.filesystem.mounts import Mount

    result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:writes_tmp", topology="2x1",
                       timeout=60, isolation="kernel", cwd=str(tmp_path),
                       mounts=[Mount("/tmp", scope="host", mode="ro")])
    assert result.outcome == PASS, result.detail()
    assert [r.value for r in result.ranks] == [{"python": "OSError", "sh": "refused"}] * 2


def test_a_write_the_read_only_machine_refused_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the machine refuses the kernel's overlays (a container's own overlay under the
    world's directory, say), the machine is read-only to what the view does not see: rank
    0's subprocess writing the checkout (fine on a pod) meets EROFS, and the world's one
    line says why, not only what the rank raised. Where it allows them the same write
    lands in the host's copy. An EROFS a scenario's read-only mount explains says nothing
    more."""
    from harness.filesystem.mounts import Mount
    from harness.world.fates import READ_ONLY_MACHINE

    target = f"{TARGETS_DIR / 'kernel_targets.py'}:subprocess_writes_cwd"
    plain = run_world(target, topology="2x1", timeout=30, isolation="kernel", cwd=str(tmp_path))
    assert plain.outcome == PASS, plain.detail()
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(namespaces, "_overlays", ("", "refused here, for this test"))
    refused = run_world(target, topology="2x1", timeout=30, isolation="kernel",
                        cwd=str(tmp_path))
    assert refused.outcome == "ERROR"
    assert refused.detail().startswith("rank 0 raised subprocess.CalledProcessError")
    assert refused.detail().endswith(f"({READ_ONLY_MACHINE})")
    scenario_ro = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:writes_tmp", topology="2x1",
                            timeout=30, isolation="kernel", cwd=str(tmp_path),
                            mounts=[Mount("/tmp", scope="host", mode="ro")])
    assert READ_ONLY_MACHINE not in scenario_ro.detail()


def test_a_rename_between_the_overlaid_checkout_and_tmp_and_an_rmtree_work(
        tmp_path: Path) -> None:
    """A checkout under /tmp (as a CI clone is) is an overlay of its own, /tmp the host's
    fresh directory: the kernel calls a rename between them cross-device (EXDEV), which a
    pod's one disk does not; the view moves the file then, as ``mv`` does, and removes a
    tree of the checkout by the machine's own calls (shutil's, through the view, recursed
    without end)."""
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:moves_between_mounts",
                       topology="1x1", timeout=60, isolation="kernel", cwd=str(cwd))
    assert result.outcome == PASS, result.detail()
    value = result.ranks[0].value
    assert (value["cwd"], value["back"], value["moved"]) == (["back.txt"], "a", "b")
    assert "tree" in value["tmp"] and "a.txt" not in value["tmp"]
    assert list(cwd.iterdir()) == []


def test_a_held_write_in_the_checkout_is_published_through_the_hosts_overlay(
        tmp_path: Path) -> None:
    """hold-write on a file of the checkout: the harness publishes it, in its own process,
    once every other rank has looked, through the host's own root (a file placed below a
    mounted overlay the overlay may never show), so the readers then find it through
    Python and through a subprocess alike, and the machine's checkout is untouched."""
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:held_then_read", topology="1x4",
                       timeout=60, isolation="kernel", cwd=str(cwd),
                       faults=[{"kind": "hold-write", "path": f"{cwd}/cfg/*"}])
    assert result.outcome == PASS, result.detail()
    assert [e.kind for e in result.history if e.kind in ("fault", "publish")] == \
        ["fault", "publish"]  # held, then published
    for rank in result.ranks[1:]:
        assert rank.value == {"python": "v1", "sh": "v1", "looked before": True}, rank.value
    assert list(cwd.iterdir()) == []


def test_a_worlds_dev_holds_no_device_of_the_machines_but_the_harmless_ones(tmp_path: Path):
    """Kernel isolation: a rank (and its subprocess) sees a /dev of the world's own, as
    bubblewrap's --dev makes it: null, zero, full, random, urandom, tty, its pts and its
    host's shm; no disk, loop device or kmsg of the machine's to write."""
    result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:devices", topology="2x1",
                       timeout=60, isolation="kernel", cwd=str(tmp_path))
    assert result.outcome == PASS, result.detail()
    own = ["fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout",
           "tty", "urandom", "zero"]
    for rank in result.ranks:
        assert rank.value["dev"] == own
        assert not any(rank.value[d] for d in ("/dev/loop0", "/dev/vda", "/dev/sda",
                                               "/dev/kmsg"))
        assert rank.value["urandom"] == 8 and rank.value["sh"] == [*own, "3"]
    assert os.path.exists("/dev/null") and os.listdir("/dev") != own  # the machine's, as it was


@pytest.mark.parametrize("isolation", ["kernel", "python"])
def test_each_host_has_its_own_name_as_a_tpu_vm_does(isolation: str, tmp_path: Path) -> None:
    """socket.gethostname(), os.uname(), platform.node() say the host's name (what HOSTNAME
    and TPU_WORKER_HOSTNAMES say), not the machine's; under kernel isolation a subprocess's
    `hostname` does too (under python isolation it is the machine's: a hole it keeps)."""
    result = run_world(f"{TARGETS_DIR / 'kernel_targets.py'}:hostnames", topology="2x2",
                       timeout=60, isolation=isolation, cwd=str(tmp_path))
    assert result.outcome == PASS, result.detail()
    machine = subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()
    for rank in result.ranks:
        name = f"t1v-n-harness-w-{rank.host}"
        said = dict(rank.value)
        assert said.pop("subprocess") == (name if isolation == "kernel" else machine)
        assert said == {"socket": name, "uname": name, "platform": name}, rank.value
