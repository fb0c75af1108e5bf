"""The sandboxed filesystem view: containment, every access path, mount scopes
and modes, the overlay, the consistency models, and the holes that remain.

Targets live in tests/targets/fs_targets.py and run as real rank processes.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness import PASS, get_topology, run_world
from harness.filesystem.mounts import Mount, default_table
from harness.rank import namespaces
from harness.reports.diagnosis import describe

from support import REPO, TESTS

HERE = TESTS
TARGETS = HERE / "targets" / "fs_targets.py"


def target(name: str) -> str:
    return f"{TARGETS}:{name}"


def passed(result):
    assert result.outcome == PASS, describe(result)
    return [r.value for r in result.ranks]


def overlay_of(path: Path) -> Mount:
    """A real directory the test owns, seen by each host copy-on-write (as "/" is)."""
    return Mount(str(path), scope="host", base="overlay")


def no_sandbox_path(text: str) -> bool:
    return "harness-" not in text and "/fs/mounts/" not in text and "/fs/staging/" not in text


def assert_enoent(err: dict | None, path: str, what: str) -> None:
    assert err is not None, f"{what}: succeeded where {path} must be missing"
    assert err["type"] == "FileNotFoundError" and err["errno"] == errno.ENOENT, (what, err)
    assert str(path) in err["message"], (what, err)
    assert no_sandbox_path(err["message"]) and no_sandbox_path(str(err["filename"])), (what, err)


# -- snapshots of the machine -----------------------------------------------------

def snapshot(root: Path, recursive: bool, skip=lambda p: False) -> dict[str, tuple]:
    """(size, mtime, mode, uid, content, xattrs) of every entry under ``root``, by the
    machine's own calls (the xattrs: a rank's ``setxattr`` on a read-only descriptor of a
    machine file reached the machine, issue 47, and nothing here looked)."""
    out: dict[str, tuple] = {}

    def add(path: Path) -> None:
        st = path.lstat()
        digest = None
        if stat.S_ISREG(st.st_mode) and st.st_size < 1 << 20:
            digest = hashlib.sha1(path.read_bytes()).hexdigest()
        xattrs = None
        if not stat.S_ISLNK(st.st_mode):
            xattrs = sorted((name, os.getxattr(path, name)) for name in os.listxattr(path))
        out[str(path)] = (st.st_size, st.st_mtime_ns, st.st_mode, st.st_uid, digest, xattrs)

    def walk(directory: Path) -> None:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in entries:
            path = Path(entry.path)
            if skip(path):
                continue
            try:
                add(path)
            except OSError:
                continue  # gone meanwhile (another process's file)
            if recursive and entry.is_dir(follow_symlinks=False):
                walk(path)

    walk(root)
    return out


def diff(before: dict, after: dict) -> set[str]:
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def machine_snapshots() -> dict[str, dict]:
    """The real /tmp, home and repository, as the target could have changed them."""
    home = Path(os.path.expanduser("~"))
    repo_skip = {".git", "__pycache__", ".pytest_cache", ".ruff_cache", "node_modules"}
    return {
        "tmp": snapshot(Path("/tmp"), False,
                        lambda p: p.name.startswith(("harness-", "pytest-of-"))),
        "home": snapshot(home, False),
        "repo": snapshot(REPO, True, lambda p: p.name in repo_skip or p.name.endswith(".pyc")),
    }


# -- 1. containment ------------------------------------------------------------------

REAL_FILES = {
    "delete-me.txt": "original\n", "append-me.txt": "original\n",
    "overwrite-me.txt": "original\n", "chmod-me.txt": "original\n",
    "truncate-me.txt": "original\n", "rename-me.txt": "original\n", "link-me.txt": "original\n",
    "fchmod-me.txt": "original\n",
    "tree/inner/deep.txt": "deep\n", "tree/top.txt": "top\n",
}


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(0o644)
    return root


@pytest.mark.parametrize("isolation", [
    "python",
    pytest.param("kernel", marks=pytest.mark.skipif(bool(namespaces.unavailable()),
                                                    reason="no mount namespace here")),
])
def test_containment_a_target_that_writes_everywhere_changes_nothing_on_the_machine(
        tmp_path, isolation):
    """In both isolations: under the kernel's, the view's own escapes (a read-only
    descriptor's ``setxattr`` reached the machine in Python isolation, issue 47) are
    drawn over by the kernel's overlay, and the default isolation hid them here."""
    token = f"fscontain-{uuid.uuid4().hex[:10]}"
    realdir = make_tree(tmp_path / "real", REAL_FILES)
    victim = REPO / "tests" / "targets" / "__init__.py"  # deleted, in the view only
    victim_bytes, victim_stat = victim.read_bytes(), victim.stat()
    outside = tmp_path / "outside" / "link-target.txt"  # aimed at by a symlink
    outside.parent.mkdir()  # real, so that a kernel following the link would succeed
    real_before = snapshot(realdir, True)
    before = machine_snapshots()
    try:
        result = run_world(target("write_everywhere"), topology="1x1", timeout=15, cwd=str(REPO),
                           args=(token, str(realdir), str(victim), str(outside)),
                           mounts=[overlay_of(realdir)], isolation=isolation)
        after = machine_snapshots()
        real_after = snapshot(realdir, True)
    finally:
        if not victim.exists():  # only if containment failed: put the repository back
            victim.write_bytes(victim_bytes)
    # The machine first (whatever the world's outcome): the overlaid real directory is
    # byte-for-byte, mode-for-mode the same, and the symlink led nowhere real.
    assert real_after == real_before
    assert list(outside.parent.iterdir()) == []
    (value,) = passed(result)

    # Inside: every write read back, every route worked.
    failed = [name for name, ok in value["checks"].items() if ok is not True]
    assert failed == [], value["checks"]
    assert len(value["checks"]) == 40
    created = value["created"]
    assert any(p.startswith("/tmp/tmp") for p in created), "mkstemp's default name is reported"

    # Outside: what the target deleted, renamed or made in the real directory.
    assert (realdir / "delete-me.txt").read_text() == "original\n"
    assert not (realdir / "fifo").exists() and not (realdir / "renamed.txt").exists()
    # The repository file the target deleted is still there, untouched.
    assert victim.read_bytes() == victim_bytes
    assert victim.stat().st_mtime_ns == victim_stat.st_mtime_ns
    # Not one path the target made exists on the machine.
    leaked = [p for p in created if os.path.lexists(p)]
    assert leaked == []
    # /tmp, ~ and the repository: nothing the target could have named changed. (Other
    # processes share this machine, so only changes the target could have caused count:
    # names carrying its token, paths it reported, the repository file it deleted.)
    for where in ("tmp", "home", "repo"):
        changed = diff(before[where], after[where])
        ours = sorted(p for p in changed if token in p or p in created or p == str(victim))
        assert ours == [], f"{where}: the target changed {ours}"


# -- 2. every access path --------------------------------------------------------------

def test_every_access_path_sees_the_same_view_on_a_host_and_none_on_another():
    result = run_world(target("access_paths"), topology="2x2", timeout=15)
    names, same_host, *other_hosts = passed(result)
    assert set(names) == {"mkstemp", "named", "mkdtemp"}
    assert all(n.startswith("/tmp/ap/") for n in names.values())

    # Rank 1 shares rank 0's host: every file written through one API is read through another.
    assert [k for k, ok in same_host.items() if ok is not True] == [], same_host
    assert len(same_host) == 30

    # Ranks 2-3 are on another host with its own /tmp: ENOENT, naming the virtual path.
    for seen in other_hosts:
        paths = seen.pop("paths")
        assert seen.pop("exists") == [False, False, False]
        assert seen.pop("walk") == []
        assert len(seen) == 18
        for what, err in seen.items():
            assert_enoent(err, paths[what], what)


# -- 3. mount scopes and modes -----------------------------------------------------------

def test_rank_host_and_shared_scopes_and_a_read_only_mount():
    leftovers = [{"kind": "stale-leftover", "path": path, "content": content}
                 for path, content in (("/mnt/ro/data.txt", "ro-data"),
                                       ("/mnt/ro/sub/file.txt", "f"),
                                       ("/mnt/ro/sub/deeper/f", "g"))]
    result = run_world(target("scopes_and_modes"), topology="2x2", timeout=15, faults=leftovers,
                       mounts=[Mount("/tmp", scope="rank"), Mount("/mnt/host", scope="host"),
                               Mount("/mnt/shared", scope="shared"),
                               Mount("/mnt/ro", scope="shared", mode="ro")])
    values = passed(result)
    for rank, seen in enumerate(values):
        host = rank // 2
        # (A working directory under /tmp, as in a CI checkout, shows as a mount point.)
        own = [n for n in seen["tmp"] if not os.getcwd().startswith(f"/tmp/{n}")]
        assert own == ["mine.txt"] and seen["mine"] == f"rank {rank}", "a private /tmp"
        assert seen["host"] == [f"r{r}.txt" for r in (2 * host, 2 * host + 1)], "one per host"
        assert seen["shared"] == ["r0.txt", "r1.txt", "r2.txt", "r3.txt"], "one for all"
        assert seen["shared_content"] == [f"rank {r}" for r in range(4)]
        # Read-only: reads work, every write fails with the real EROFS and the virtual path.
        assert seen["ro_read"] == "ro-data"
        assert seen["ro_list"] == ["data.txt", "sub"]
        assert sorted(seen["ro_sub"]) == ["deeper", "file.txt"]
        assert seen["ro_access_r"] is True and seen["ro_access_w"] is False
        assert len(seen["ro"]) == 18
        for what, err in seen["ro"].items():
            assert err is not None, f"{what} succeeded on a read-only mount"
            assert err["type"] == "OSError" and err["errno"] == errno.EROFS == 30, (what, err)
            assert "[Errno 30] Read-only file system: '/mnt/ro/" in err["message"], (what, err)
            assert no_sandbox_path(err["message"]), (what, err)
        assert seen["ro_after"] == ("ro-data", ["data.txt", "sub"])


# -- 4. the overlay ----------------------------------------------------------------------

OVERLAY_FILES = {"append.txt": "base\n", "over.txt": "old", "del.txt": "d", "mode.txt": "m",
                 "sub/x.txt": "x", "sub/y.txt": "y", "tree/inner/deep.txt": "deep",
                 "tree/top.txt": "top", "mv/a.txt": "a", "mv/b.txt": "b", "repl/old.txt": "o"}


def test_the_overlay_reads_the_machine_and_keeps_each_hosts_writes_to_that_host(tmp_path):
    realdir = make_tree(tmp_path / "real", OVERLAY_FILES)
    before = snapshot(realdir, True)
    repo_rel = "tests/targets/fs_targets.py"
    result = run_world(target("overlay"), topology="2x2", timeout=15, cwd=str(REPO),
                       args=(str(realdir), repo_rel), mounts=[overlay_of(realdir)])
    values = passed(result)
    assert snapshot(realdir, True) == before, "the machine's directory is untouched"
    for seen in values:
        assert seen["repo_file"] == (REPO / repo_rel).read_text(), "installed files read through"
        assert seen["json"] == '{"a": 1}'
    # Host 0: rank 0 appended (copy-up keeps the content), overwrote, deleted, chmodded,
    # deleted one file of a real subdirectory, rmtree'd a real tree and made it anew (empty),
    # renamed a real directory, and renamed a new directory over a deleted real one.
    host0 = {"listing": ["append.txt", "mode.txt", "mv2", "new0.txt", "over.txt", "repl", "sub",
                         "tree"],
             "append": "base\nmore\n", "over": "new", "deleted": True, "mode": 0o600,
             "sub_isdir": True, "sub": ["y.txt"], "tree": [], "tree_sub_visible": False,
             "repl": ["n.txt"], "moved": {"mv2": ["a.txt", "b.txt"]},
             "walk": ["append.txt", "mode.txt", "mv2/a.txt", "mv2/b.txt", "new0.txt", "over.txt",
                      "repl/n.txt", "sub/y.txt"]}
    # Host 1 sees none of that: the machine's files, plus its own rank 2's changes.
    host1 = {"listing": ["append.txt", "del.txt", "mode.txt", "mv3", "new2.txt", "over.txt",
                         "repl", "sub", "tree"],
             "append": "base\n", "over": "old", "deleted": False, "mode": 0o644,
             "sub_isdir": True, "sub": ["x.txt", "y.txt"], "tree": ["inner", "top.txt"],
             "tree_sub_visible": True, "repl": ["old.txt"], "moved": {"mv3": ["a.txt"]},
             "walk": ["append.txt", "del.txt", "mode.txt", "mv3/a.txt", "new2.txt", "over.txt",
                      "repl/old.txt", "sub/x.txt", "sub/y.txt", "tree/inner/deep.txt",
                      "tree/top.txt"]}
    for rank, seen in enumerate(values):
        expected = host0 if rank < 2 else host1
        assert {k: seen[k] for k in expected} == expected, f"rank {rank}"


# -- 5. consistency models ------------------------------------------------------------------

def test_local_consistency_shows_flushed_bytes_to_other_hosts_before_close():
    result = run_world(target("consistency_local"), topology="2x2", timeout=15,
                       mounts=[Mount("/mnt/local", scope="shared")])
    values = passed(result)
    assert [v["before_close"] for v in values] == [None, "flushed", "flushed", "flushed"]
    assert {v["after_close"] for v in values} == {"flushed and closed"}


def test_close_to_open_shows_a_write_to_other_hosts_only_after_close_and_a_fresh_open():
    result = run_world(target("consistency_close_to_open"), topology="2x2", timeout=15,
                       mounts=[Mount("/mnt/nfs", scope="shared", consistency="close-to-open")])
    writer, same_host, *others = passed(result)
    # The writer's own host sees the unclosed write (its page cache)...
    assert same_host["same_host_os_read"] == "partial"
    assert same_host["before_close"] == "partial"
    assert same_host["listing_before"] == ["new.txt", "old.txt"]
    assert same_host["old_before"] == "v2"
    # ...other hosts do not, even after a reader on the writer's host opened and closed it.
    for seen in others:
        assert_enoent(seen["before_close"], "/mnt/nfs/new.txt", "open before close")
        assert seen["listing_before"] == ["old.txt"]
        assert seen["old_before"] == "v1"
    # After close, a fresh open sees it everywhere; a rename is visible at once.
    for seen in (same_host, *others):
        assert seen["after_close"] == "partial+rest"
        assert seen["old_after"] == "v2"
        assert seen["final"] == "renamed into place"
        assert seen["listing_after"] == ["final.txt", "new.txt", "old.txt"]
    # A file opened before the rewrite keeps reading what it opened (no fresh open).
    assert others[0]["held_fd_sees"] == "v1"


def test_delayed_consistency_publishes_to_other_hosts_after_the_delay():
    delay_ms = 600
    result = run_world(target("consistency_delayed"), topology="2x2", timeout=15,
                       mounts=[Mount("/mnt/slow", scope="shared", consistency="delayed",
                                     delay_ms=delay_ms)])
    values = passed(result)
    # The writer's host sees its write at once; the other host only after the delay.
    assert [v["right_after_close"] for v in values] == [True, True, False, False]
    assert {v["eventually"] for v in values} == {"step 100"}
    # Then host 1 writes: the first writer's host sees the new version after the delay too.
    assert [v["rewritten_right_after"] for v in values] == [
        "step 100", "step 100", "step 200", "step 200"]
    assert {v["rewritten_eventually"] for v in values} == {"step 200"}
    publishes = [e for e in result.history if e.kind == "publish"]
    assert [(e.rank, e.detail["path"]) for e in publishes] == [
        (0, "/mnt/slow/ckpt.txt"), (2, "/mnt/slow/ckpt.txt")], result.history
    assert all("visibility delay passed" in e.detail["message"] for e in publishes)
    for tag, publish in zip(("closed", "rewritten"), publishes):
        looked = next(e for e in result.history if e.kind == "complete" and e.tag == tag)
        assert publish.t > looked.t, f"published only after every rank passed {tag!r}"


def test_object_consistency_shows_an_object_only_when_closed_or_fsynced_and_whole():
    result = run_world(target("consistency_object"), topology="2x2", timeout=15,
                       mounts=[Mount("/mnt/obj", scope="shared", consistency="object")])
    writer, *others = passed(result)
    assert writer["writer_sees_own"] == b"part1"
    for seen in others:  # rank 1 shares the writer's host and still sees nothing
        assert_enoent(seen["partial"], "/mnt/obj/model.bin", "partial object")
        assert seen["partial_listing"] == []
        assert seen["after_fsync"] == b"part1", "fsync uploads the object as it is"
        assert seen["after_more"] == b"part1", "later writes wait for the next upload"
    assert {v["after_close"] for v in (writer, *others)} == {b"part1+part2"}


def test_object_directory_rename_is_not_atomic():
    fault = {"kind": "raise", "ranks": 0, "op": "rename", "path": "/mnt/obj/ckpt-tmp/*",
             "occurrence": 3, "exception": "OSError", "errno": 5}
    result = run_world(target("object_dir_rename"), topology="2x1", timeout=15, faults=[fault],
                       mounts=[Mount("/mnt/obj", scope="shared", consistency="object")])
    writer, other = passed(result)
    assert writer["rename"]["errno"] == 5 and "Input/output error" in writer["rename"]["message"]
    for seen in (writer, other):  # two objects moved, three left: both halves visible
        assert seen["dst"] == ["shard-0", "shard-1"]
        assert seen["src"] == ["shard-2", "shard-3", "shard-4"]
        assert seen["dst_content"] == ["shard 0", "shard 1"]
    fired = [e for e in result.history if e.kind == "fault"]
    assert [(e.rank, e.op, e.detail["path"]) for e in fired] == [
        (0, "raise", "/mnt/obj/ckpt-tmp/shard-2")]


# -- 6. holes: routes the view does not intercept (documented in the README) ---------------

@pytest.fixture(scope="module")
def holes(tmp_path_factory):
    """One world runs every hole; each test below pins one of them."""
    root = tmp_path_factory.mktemp("holes")
    outside = root / "outside"  # the world's cwd; under /tmp, which the view hides
    outside.mkdir()
    (outside / "target.txt").write_text("the machine's file")
    realdir = root / "real"
    realdir.mkdir()
    (realdir / "link-to-outside").symlink_to(outside / "target.txt")
    fault = {"kind": "eio", "op": "write", "path": "/tmp/*.bin", "count": 1}
    # The working directory is normally an overlay of the real one; this table
    # leaves it out (it lies under the fresh /tmp), so only the holes reach it.
    table = default_table(get_topology("1x1"), os.path.expanduser("~"), "/")
    # Python isolation: these are its holes (tests/world/test_kernel_isolation.py pins
    # those kernel isolation closes)
    result = run_world(target("holes"), topology="1x1", timeout=15, cwd=str(outside),
                       args=(str(outside), str(realdir)), faults=[fault],
                       mounts=table.with_mount(overlay_of(realdir)), isolation="python")
    (value,) = passed(result)
    assert value["outside_visible"] is False, "the test's directory is outside the view"
    return outside, value, result


def test_hole_io_fileio_and_underscore_io_open_write_the_machine(holes):
    """Known hole (containment escape): ``io.FileIO`` and ``_io.open`` (the C
    layer under ``open``) are not patched and open the machine's path; a relative
    path resolves against the process's real cwd, which ``os.chdir`` in the view
    never moves."""
    outside, value, _ = holes
    assert (outside / "fileio.txt").read_bytes() == b"FileIO"
    assert (outside / "_io_open.txt").read_text() == "_io.open"
    assert value["view_cwd"] == "/"
    assert (outside / "relative-fileio.txt").read_bytes() == b"relative"


def test_hole_subprocesses_use_the_machines_filesystem_but_a_fork_keeps_the_view(holes):
    """Known hole (containment escape): a subprocess (subprocess, os.system,
    os.exec*, os.posix_spawn, multiprocessing's spawn) runs without the view
    and writes the machine's paths. A plain os.fork keeps the patched view."""
    outside, value, _ = holes
    assert (outside / "subprocess.txt").read_text() == "sub\n"
    assert value["os.system"] == 0 and (outside / "system.txt").read_text() == "sys\n"
    assert value["forked_in_view"] == "forked"
    assert not (outside / "forked.txt").exists(), "the forked child's write stayed in the view"


def test_hole_c_extensions_open_paths_on_the_machine(holes):
    """Known hole: C/C++ code that opens a path itself bypasses the view.
    Writes escape (sqlite3.connect, torch.jit.save, binding an AF_UNIX socket);
    reads miss the view (torch.load(mmap=True) and torch.from_file look on the
    machine, so a file only in the sandbox is not found). numpy and plain
    torch.save/torch.load go through Python's open and are covered."""
    outside, value, _ = holes
    assert (outside / "db.sqlite").read_bytes().startswith(b"SQLite format 3")
    assert (outside / "jit.pt").stat().st_size > 0
    assert stat.S_ISSOCK((outside / "unix.sock").lstat().st_mode)
    for what in ("torch.load(mmap)", "torch.from_file"):
        err = value[what]
        assert err is not None and err["type"] == "RuntimeError", (what, err)
        assert "/tmp/only-in-view.pt" in err["message"] and "No such file" in err["message"]
    assert value["torch.load"] == [1.0, 1.0], "without mmap torch.load reads the view"


def test_hole_imports_read_the_machine_not_the_view(holes):
    """Known hole (missed view, read-only): the import system finds and reads
    modules with its own calls (posix.stat/listdir, io.open_code), so a module
    the target wrote into the sandbox cannot be imported. Bytecode caches
    (__pycache__) of the target's own modules are written to the machine as
    Python always does."""
    _, value, _ = holes
    assert value["module_file_in_view"] is True
    assert value["import"]["type"] == "ModuleNotFoundError"


def test_hole_posix_module_acts_on_the_machine_but_not_through_os_dir_fd(holes):
    """Known hole (containment escape): the ``posix`` module's functions (and any
    ``os`` function bound before the rank started, e.g. ``from os import remove``
    in a module the fork server preloaded) are the originals. Once, ``*at()`` calls
    with a ``dir_fd`` the view did not open (``posix.open``'s) acted on the machine
    too: now such a descriptor leads into the view, by its directory's name
    (tests/world/test_descriptors.py has every way of getting one)."""
    outside, value, _ = holes
    assert (outside / "posix.txt").read_bytes() == b"posix"
    assert not (outside / "dirfd.txt").exists()
    assert value["dirfd_in_view"] is True


def test_hole_fd_level_io_skips_the_fault_engine(holes):
    """Known hole (missed faults, contained): os.write/os.read (and mmap,
    os.sendfile, os.pwrite) on an fd from os.open reach the sandbox file but not
    the fault engine, so read/write faults (eio, enospc, kill/raise on write)
    fire only for file objects."""
    _, value, result = holes
    assert value["os.write"] is None and value["raw_in_view"] == b"raw"
    err = value["file.write"]
    assert err is not None and err["errno"] == errno.EIO, err
    fired = [e for e in result.history if e.kind == "fault"]
    assert [(e.op, e.detail["path"]) for e in fired] == [("eio", "/tmp/buffered.bin")]


def test_real_symlinks_under_an_overlay_are_followed_in_the_view(holes):
    """Once a hole: a symlink that exists on the machine under an overlay was followed by
    the kernel, on the machine (reads, and writes through it too). Now it is followed in
    the view, as the target's own links are: its target lies under /tmp, which the view
    (a fresh /tmp) does not contain, so the read finds nothing and the write lands in the
    view's /tmp (where the world's working directory exists), never in the machine's file."""
    outside, value, _ = holes
    assert value["real_link"]["type"] == "FileNotFoundError"
    assert value["real_link"]["filename"] == str(outside / "target.txt")
    assert value["write_through_real_link"] is None
    assert value["link_target_in_view"] is True  # what the write made, in the view
    assert (outside / "target.txt").read_text() == "the machine's file"


def test_libraries_that_bound_open_before_the_view_write_inside_it():
    """tempfile (its ``unlink=_os.unlink`` default), bz2, tarfile and numpy hold the real
    functions from before the fork: rebound in each rank, they act on the view, and
    nothing they wrote reaches the machine's /tmp."""
    token = f"earlybound-{uuid.uuid4().hex[:10]}"
    result = run_world(target("early_bound_writers"), topology="1x1", timeout=20, args=(token,),
                       preload=("numpy", "bz2", "tarfile", "tempfile"))
    leaked = [p for p in os.listdir("/tmp") if p.startswith(token)]
    for p in leaked:  # only if containment failed
        path = os.path.join("/tmp", p)
        shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    assert leaked == []
    (value,) = passed(result)
    assert value == {name: True for name in value} and len(value) == 6, value


def test_the_kernels_trees_lead_into_the_view_or_nowhere():
    """/proc/self/{root,cwd,fd/N} led to the machine's files, /dev/shm was the machine's, and
    /sys and /dev took writes: now the first lead into the view, /dev/shm is each host's own,
    and a write to the rest of the kernel's trees is refused (EACCES), /dev/null excepted."""
    token = f"procroute-{uuid.uuid4().hex[:10]}"
    result = run_world(target("write_through_proc_and_dev"), topology="1x1", timeout=20,
                       args=(token,), cwd=str(REPO))
    leaked = [os.path.join(d, p) for d in ("/tmp", "/dev/shm", str(REPO), "/dev")
              if os.path.isdir(d) for p in os.listdir(d) if p.startswith(token)]
    for p in leaked:  # only if containment failed
        shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
    assert leaked == []
    (value,) = passed(result)
    assert value == {"proc_self_root": True, "proc_pid_root": True, "proc_self_cwd": True,
                     "proc_self_fd": True, "dev_shm": True, "sys": "PermissionError",
                     "dev": "PermissionError", "proc_sys": "PermissionError", "dev_null": True}


def test_a_duplicated_dir_fd_stays_in_the_view(tmp_path):
    """os.dup / os.dup2 of a directory the view opened: before, the copy was an fd the view
    had never seen, and *at() calls through it created, chmod'ed and deleted real files."""
    token = f"dupfd-{uuid.uuid4().hex[:8]}"
    realdir = make_tree(tmp_path / "real", {"keep.txt": "k\n", "delete-me.txt": "d\n"})
    before = snapshot(realdir, True)
    result = run_world(target("writes_through_a_duplicated_dir_fd"), topology="1x1", timeout=20,
                       args=(str(realdir), token), mounts=[overlay_of(realdir)])
    assert snapshot(realdir, True) == before
    (value,) = passed(result)
    assert value == sorted(["keep.txt", f"{token}.txt", f"{token}-dir"])


def test_hole_the_worlds_own_directory_is_the_machines_to_the_target():
    """Known hole (README, hole 8): the world's directory (captured output, the sandbox's
    backing files) is reached through the machine by the harness's own code in the rank,
    so the target reaches it too. It is removed with the world; nothing else is."""
    result = run_world(target("writes_into_its_world_directory"), topology="1x1", timeout=20,
                       keep_output_dir=True)
    (planted,) = passed(result)
    try:
        with open(planted) as f:
            assert f.read() == "the target was here"
    finally:
        shutil.rmtree(os.path.dirname(planted), ignore_errors=True)


def test_a_new_harness_removes_the_world_directories_of_harness_processes_that_are_gone(
        tmp_path):
    """What a SIGKILLed harness whose reaper was killed too left behind."""
    from harness.world.reaper import remove_orphaned_dirs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"harness-{dead.pid}-0-ab12-xyz").mkdir()
    (tmp_path / f"harness-{os.getpid()}-0-cd34-xyz").mkdir()
    (tmp_path / "harness-notapid-x").mkdir()
    (tmp_path / f"ended-harness-{dead.pid}-1-ef56-xyz").mkdir()  # one it was removing
    assert remove_orphaned_dirs(str(tmp_path)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"harness-{os.getpid()}-0-cd34-xyz", "harness-notapid-x"]


def test_an_ended_worlds_directory_is_no_worlds_at_once_and_gone_soon_after(tmp_path):
    """A world's directory is removed beside the next world: renamed at once (no leak check
    or "is a world up" sees it), removed by a thread of the harness's."""
    from harness.world.reaper import ENDED, remove_later

    world = tmp_path / f"harness-{os.getpid()}-9-ab12-xyz"
    (world / "fs" / "deep").mkdir(parents=True)
    (world / "fs" / "deep" / "file").write_text("x")
    remove_later(str(world))
    assert not world.exists()
    deadline = time.monotonic() + 30  # the machine's time: bounds a removal that never ends
    while (tmp_path / (ENDED + world.name)).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(tmp_path.iterdir()) == []


def test_a_rank_lists_its_installed_packages_whatever_the_working_directory(tmp_path):
    """torch.compile lists torch/_dynamo/backends: with the venv under /tmp and the script
    elsewhere, the rank's fresh /tmp used to hide it (FileNotFoundError)."""
    script = tmp_path / "lists.py"
    script.write_text("import os, sysconfig\n"
                      "def run():\n"
                      "    return len(os.listdir(sysconfig.get_paths()['purelib'])) > 0\n")
    result = run_world(f"{script}:run", topology="1x2", timeout=15, cwd=str(tmp_path))
    assert result.outcome == PASS, describe(result)
    assert result.values == [True, True]


def test_publish_across_filesystems_copies_beside_then_renames(tmp_path) -> None:
    """A pod rank's staging area and the target's directory may be different filesystems
    (its home and its /tmp): the staged file still lands in one step, and nothing is left."""
    import os

    from harness.filesystem import machine

    if os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        import pytest

        pytest.skip("/dev/shm and the test's directory are one filesystem here")
    src = f"/dev/shm/harness-test-{os.getpid()}"
    with open(src, "wb") as f:
        f.write(b"staged")
    dst = tmp_path / "deep" / "cfg.yaml"
    machine.publish(src, str(dst))
    assert dst.read_bytes() == b"staged"
    assert not os.path.exists(src)
    assert os.listdir(dst.parent) == ["cfg.yaml"]


def test_a_failing_rank_that_ran_a_subprocess_under_python_isolation_is_told_why(tmp_path):
    """Python isolation: rank 0's subprocess copies a file its Python code staged in /tmp,
    and cannot find it (the subprocess sees the machine's /tmp): the world's line says the
    rank ran a subprocess, and what python isolation means for it (a new user's cells all
    HANGed on `cp: cannot stat` with no word of why)."""
    from harness.world.fates import SUBPROCESS_SEES

    result = run_world(f"{TESTS / 'targets' / 'kernel_targets.py'}:stages_then_copies",
                       topology="2x1", timeout=30, isolation="python", cwd=str(tmp_path))
    assert result.outcome == "ERROR", result.detail()
    assert result.detail().endswith(f"(rank 0 {SUBPROCESS_SEES})")
    assert not os.path.exists("/tmp/staged-by-python.json")
