"""Rank-side targets for tests/world/test_filesystem.py: plain Python file code, run
inside a world's sandboxed view. Each target reports what it saw; the test
checks the view from the inside and the machine from the outside."""

import io
import json
import os
import pathlib
import shutil
import stat
import tempfile

import numpy as np
import torch
import torch_xla.core.xla_model as xm
import yaml


def failure(fn, *args, **kwargs):
    """None if ``fn`` succeeds, else what it raised (type, errno, message, filename)."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - what the target would see is the point
        return {"type": type(exc).__name__, "errno": getattr(exc, "errno", None),
                "message": str(exc), "filename": getattr(exc, "filename", None)}
    return None


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def write(path, data, mode="w"):
    with open(path, mode) as f:
        f.write(data)


# -- 1. containment -------------------------------------------------------------

def write_everywhere(token, realdir, repo_file, outside):
    """Write everywhere a target can, by every route; check each write reads back.

    ``realdir`` is a real directory under an overlay mount (its files are the
    machine's); ``repo_file`` a real file of the repository (under "/");
    ``outside`` a real path no mount of the view maps (a symlink is aimed at it).
    """
    checks, created = {}, []

    def made(path):
        created.append(os.path.abspath(os.path.expanduser(str(path))))
        return path

    # absolute /tmp, relative, ~, the current directory
    write(made(f"/tmp/{token}-abs.txt"), "abs")
    checks["abs"] = read(f"/tmp/{token}-abs.txt") == "abs"
    write(made(f"{token}-rel.txt"), "rel")
    checks["rel"] = read(os.path.join(os.getcwd(), f"{token}-rel.txt")) == "rel"
    write(made(f"~/{token}-home.txt"), "home")
    checks["home"] = read(os.path.expanduser(f"~/{token}-home.txt")) == "home"
    write(made(os.path.join(os.getcwd(), f"{token}-cwd.txt")), "cwd")
    checks["cwd"] = read(f"./{token}-cwd.txt") == "cwd"

    # new trees
    os.makedirs(made(f"{token}-tree/a/b/c"))
    write(made(f"{token}-tree/a/b/c/leaf.txt"), "leaf")
    checks["makedirs"] = read(f"{token}-tree/a/b/c/leaf.txt") == "leaf"
    os.makedirs(made(os.path.expanduser(f"~/{token}-cache/x")))
    write(made(os.path.expanduser(f"~/{token}-cache/x/y.bin")), b"\0\1", "wb")
    checks["home_tree"] = read(os.path.expanduser(f"~/{token}-cache/x/y.bin"), "rb") == b"\0\1"

    # tempfile, every way
    fd, name = tempfile.mkstemp(prefix=f"{token}-")
    made(name)
    with os.fdopen(fd, "w") as f:
        f.write("mkstemp")
    fd2, name2 = tempfile.mkstemp()  # the default name and directory
    made(name2)
    os.write(fd2, b"mkstemp2")
    os.close(fd2)
    with tempfile.NamedTemporaryFile("w", prefix=f"{token}-", delete=False) as f:
        f.write("named")
    made(f.name)
    checks["named"] = read(f.name) == "named"
    with tempfile.TemporaryDirectory(prefix=f"{token}-") as d:
        made(d)
        write(os.path.join(d, "inside.txt"), "inside")
        checks["tempdir"] = os.listdir(d) == ["inside.txt"]
    checks["tempdir_cleaned"] = not os.path.exists(d)
    dtemp = made(tempfile.mkdtemp(prefix=f"{token}-"))
    write(os.path.join(dtemp, "x"), "x")
    with tempfile.TemporaryFile() as f:
        f.write(b"anon")
        f.seek(0)
        checks["tempfile"] = f.read() == b"anon"
    checks["mkstemp"] = read(name) == "mkstemp" and read(name2) == "mkstemp2"
    checks["tempdir_is_tmp"] = tempfile.gettempdir() == "/tmp"

    # pathlib
    p = pathlib.Path(made(f"{token}-pathlib.txt"))
    p.write_text("pathlib")
    checks["pathlib"] = p.read_text() == "pathlib" and p.exists()
    q = pathlib.Path.home() / f"{token}-pathlib-home"
    q.mkdir()
    made(q)
    (q / "f").write_bytes(b"ph")
    made(q / "f")
    checks["pathlib_home"] = [c.name for c in q.iterdir()] == ["f"]

    # shutil
    made(f"{token}-copy.txt")
    shutil.copy(repo_file, f"{token}-copy.txt")
    checks["shutil_copy"] = read(f"{token}-copy.txt") == read(repo_file)
    shutil.copy2(repo_file, made(f"/tmp/{token}-copy2.txt"))
    shutil.move(f"{token}-copy.txt", made(f"/tmp/{token}-moved.txt"))
    checks["shutil_move"] = (os.path.exists(f"/tmp/{token}-moved.txt")
                             and not os.path.exists(f"{token}-copy.txt"))
    shutil.copytree(realdir, made(f"{token}-copied-tree"))
    checks["copytree"] = sorted(os.listdir(f"{token}-copied-tree")) == sorted(os.listdir(realdir))

    # rename / replace, numpy, torch, yaml
    write(made(f"{token}-r1"), "r")
    os.rename(f"{token}-r1", made(f"{token}-r2"))
    os.replace(f"{token}-r2", made(f"/tmp/{token}-r3"))
    checks["rename"] = read(f"/tmp/{token}-r3") == "r" and not os.path.exists(f"{token}-r2")
    np.save(made(f"{token}.npy"), np.arange(5))
    checks["numpy"] = np.load(f"{token}.npy").tolist() == [0, 1, 2, 3, 4]
    torch.save({"w": torch.ones(3)}, made(os.path.expanduser(f"~/{token}.pt")))
    checks["torch"] = torch.load(os.path.expanduser(f"~/{token}.pt"))["w"].tolist() == [1.0] * 3
    with open(made(os.path.expanduser(f"~/{token}.yaml")), "w") as f:
        yaml.dump({"lr": 0.1, "token": token}, f)
    with open(os.path.expanduser(f"~/{token}.yaml")) as f:
        checks["yaml"] = yaml.safe_load(f) == {"lr": 0.1, "token": token}

    # the machine's own files, seen through the overlays
    real = lambda name: os.path.join(realdir, name)  # noqa: E731
    os.remove(real("delete-me.txt"))
    checks["deleted"] = not os.path.exists(real("delete-me.txt"))
    write(real("append-me.txt"), "+appended", "a")
    checks["appended"] = read(real("append-me.txt")) == "original\n+appended"
    write(real("overwrite-me.txt"), "overwritten")
    checks["overwritten"] = read(real("overwrite-me.txt")) == "overwritten"
    os.chmod(real("chmod-me.txt"), 0o600)
    checks["chmod"] = stat.S_IMODE(os.stat(real("chmod-me.txt")).st_mode) == 0o600
    # a chown to another user asks CAP_CHOWN, which no unit holds (rank/confine.py): the
    # kernel's refusal (EPERM; EINVAL in a unit's user namespace, where 4321 is no one)
    checks["chown refused"] = _refused(lambda: os.chown(real("chmod-me.txt"), 4321, 4321))
    fd = os.open(real("fchmod-me.txt"), os.O_RDONLY)  # the machine's file, read-only...
    os.fchmod(fd, 0o604)  # ...whose metadata the rank still changes: in its own copy
    checks["fchown refused"] = _refused(lambda: os.fchown(fd, 4321, 4321))
    os.utime(fd, (2, 2))
    os.setxattr(fd, "user.harness-probe", b"the rank's")
    os.close(fd)
    st = os.stat(real("fchmod-me.txt"))
    checks["fchmod"] = ((stat.S_IMODE(st.st_mode), st.st_mtime) == (0o604, 2)
                        and os.getxattr(real("fchmod-me.txt"), "user.harness-probe")
                        == b"the rank's")
    os.utime(real("chmod-me.txt"), (1, 1))
    checks["utime"] = os.stat(real("chmod-me.txt")).st_mtime == 1
    os.truncate(real("truncate-me.txt"), 2)
    checks["truncate"] = read(real("truncate-me.txt")) == "or"
    os.rename(real("rename-me.txt"), made(real("renamed.txt")))
    checks["renamed"] = (read(real("renamed.txt")) == "original\n"
                         and not os.path.exists(real("rename-me.txt")))
    os.replace(real("renamed.txt"), real("overwrite-me.txt"))
    checks["replaced_real"] = read(real("overwrite-me.txt")) == "original\n"
    shutil.rmtree(real("tree"))
    checks["rmtree_real"] = not os.path.exists(real("tree"))
    os.mkdir(real("tree"))
    checks["recreated_empty"] = os.listdir(real("tree")) == []
    os.link(real("link-me.txt"), made(real("hardlink.txt")))
    write(real("hardlink.txt"), "+via link", "a")
    checks["hardlink"] = read(real("hardlink.txt")) == "original\n+via link"
    os.mkfifo(made(real("fifo")))
    checks["mkfifo"] = stat.S_ISFIFO(os.stat(real("fifo")).st_mode)
    os.remove(repo_file)
    checks["repo_file_deleted"] = not os.path.exists(repo_file)

    # a symlink the target makes must not lead the kernel out of the sandbox
    os.makedirs(os.path.dirname(outside), exist_ok=True)  # in the view: /tmp is fresh
    os.symlink(outside, made(f"/tmp/{token}-link"))
    write(f"/tmp/{token}-link", "through the link")
    checks["symlink_readlink"] = os.readlink(f"/tmp/{token}-link") == outside
    checks["symlink_write"] = read(f"/tmp/{token}-link") == "through the link"
    os.symlink("/tmp", made(f"{token}-dirlink"))
    write(f"{token}-dirlink/{token}-via-dirlink.txt", "via")
    made(f"/tmp/{token}-via-dirlink.txt")
    checks["symlink_dir"] = read(f"/tmp/{token}-via-dirlink.txt") == "via"
    return {"checks": checks, "created": created}


# -- 2. every access path ---------------------------------------------------------

D = "/tmp/ap"


def _write_all():
    """Rank 0 writes through one API each; returns names other ranks need."""
    os.makedirs(D)
    with open(f"{D}/builtins.txt", "w") as f:
        f.write("via builtins.open")
    with io.open(f"{D}/io.bin", "wb") as f:  # noqa: UP020 - io.open is patched on its own
        f.write(b"via io.open")
    fd = os.open(f"{D}/os.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"via os.write")
    os.fsync(fd)
    os.close(fd)
    pathlib.Path(f"{D}/pathlib.txt").write_text("via pathlib")
    (pathlib.Path(D) / "pdir" / "nested").mkdir(parents=True)
    for name in ("one", "two"):
        (pathlib.Path(D) / "pdir" / name).write_bytes(name.encode())
    os.makedirs(f"{D}/tree/a/b")
    write(f"{D}/tree/a/b/leaf.txt", "leaf!")
    shutil.copyfile(f"{D}/builtins.txt", f"{D}/copyfile.txt")
    shutil.copytree(f"{D}/tree", f"{D}/tree2")
    write(f"{D}/tomove.txt", "moved")
    shutil.move(f"{D}/tomove.txt", f"{D}/moved.txt")
    write(f"{D}/r1", "renamed")
    os.rename(f"{D}/r1", f"{D}/r2")
    os.replace(f"{D}/r2", f"{D}/r3")
    pathlib.Path(f"{D}/p1").write_text("prenamed")
    pathlib.Path(f"{D}/p1").rename(f"{D}/p2")
    write(f"{D}/gone1", "x")
    write(f"{D}/gone2", "x")
    os.remove(f"{D}/gone1")
    pathlib.Path(f"{D}/gone2").unlink()
    os.makedirs(f"{D}/rmtree/x/y")
    write(f"{D}/rmtree/x/y/z", "z")
    shutil.rmtree(f"{D}/rmtree")
    write(f"{D}/mode.txt", "m")
    os.chmod(f"{D}/mode.txt", 0o640)
    fd, mk = tempfile.mkstemp(dir=D, suffix=".mkstemp")
    with os.fdopen(fd, "w") as f:
        f.write("via mkstemp")
    with tempfile.NamedTemporaryFile("w", dir=D, suffix=".named", delete=False) as f:
        f.write("via NamedTemporaryFile")
    named = f.name
    dtemp = tempfile.mkdtemp(dir=D)
    write(f"{dtemp}/inside", "in mkdtemp")
    np.save(f"{D}/arr.npy", np.arange(6).reshape(2, 3))
    np.savez(f"{D}/arrs.npz", a=np.ones(2), b=np.zeros(3))
    mm = np.memmap(f"{D}/mm.bin", dtype=np.int16, mode="w+", shape=(4,))
    mm[:] = [4, 3, 2, 1]
    mm.flush()
    del mm
    np.arange(3, dtype=np.float32).tofile(f"{D}/tofile.bin")
    with open(f"{D}/conf.yaml", "w") as f:
        yaml.safe_dump({"model": "m", "lr": 0.5}, f)
    torch.save({"t": torch.arange(3)}, f"{D}/t.pt")
    with open(f"{D}/fsync.txt", "w") as f:
        f.write("synced")
        f.flush()
        os.fsync(f.fileno())
    return {"mkstemp": mk, "named": named, "mkdtemp": dtemp}


def _read_all(names):
    """A rank on the writer's host reads every file through another API."""
    seen = {}
    with io.open(f"{D}/builtins.txt", "rb") as f:  # noqa: UP020
        seen["builtins->io.open"] = f.read() == b"via builtins.open"
    fd = os.open(f"{D}/io.bin", os.O_RDONLY)
    seen["io.open->os.read"] = os.read(fd, 100) == b"via io.open"
    os.close(fd)
    seen["os.write->pathlib"] = pathlib.Path(f"{D}/os.bin").read_bytes() == b"via os.write"
    seen["pathlib->builtins"] = read(f"{D}/pathlib.txt") == "via pathlib"
    seen["listdir"] = sorted(os.listdir(f"{D}/pdir")) == ["nested", "one", "two"]
    with os.scandir(f"{D}/pdir") as it:
        seen["scandir"] = sorted((e.name, e.is_file(), e.is_dir()) for e in it) == [
            ("nested", False, True), ("one", True, False), ("two", True, False)]
    seen["iterdir"] = sorted(p.name for p in pathlib.Path(f"{D}/pdir").iterdir()) == [
        "nested", "one", "two"]
    seen["glob"] = sorted(p.name for p in pathlib.Path(D).glob("p*")) == ["p2", "pathlib.txt",
                                                                          "pdir"]
    seen["walk"] = [(os.path.relpath(r, D), sorted(ds), sorted(fs))
                    for r, ds, fs in os.walk(f"{D}/tree")] == [
        ("tree", ["a"], []), ("tree/a", ["b"], []), ("tree/a/b", [], ["leaf.txt"])]
    seen["os.path"] = (os.path.exists(f"{D}/tree/a") and os.path.isdir(f"{D}/tree/a")
                       and os.path.isfile(f"{D}/tree/a/b/leaf.txt")
                       and os.path.getsize(f"{D}/tree/a/b/leaf.txt") == 5
                       and not os.path.isfile(f"{D}/tree/a"))
    seen["stat"] = os.stat(f"{D}/tree/a/b/leaf.txt").st_size == 5
    seen["copyfile"] = read(f"{D}/copyfile.txt") == "via builtins.open"
    seen["copytree"] = read(f"{D}/tree2/a/b/leaf.txt") == "leaf!"
    seen["move"] = read(f"{D}/moved.txt") == "moved" and not os.path.exists(f"{D}/tomove.txt")
    seen["rename/replace"] = (read(f"{D}/r3") == "renamed"
                              and not any(os.path.exists(f"{D}/r{i}") for i in (1, 2)))
    seen["pathlib.rename"] = (pathlib.Path(f"{D}/p2").read_text() == "prenamed"
                              and not pathlib.Path(f"{D}/p1").exists())
    seen["remove/unlink"] = not os.path.exists(f"{D}/gone1") and not os.path.exists(f"{D}/gone2")
    seen["rmtree"] = not os.path.exists(f"{D}/rmtree")
    seen["chmod"] = stat.S_IMODE(os.stat(f"{D}/mode.txt").st_mode) == 0o640
    seen["mkstemp"] = read(names["mkstemp"]) == "via mkstemp"
    seen["NamedTemporaryFile"] = pathlib.Path(names["named"]).read_text() == "via NamedTemporaryFile"
    seen["mkdtemp"] = os.listdir(names["mkdtemp"]) == ["inside"]
    seen["numpy.load"] = np.load(f"{D}/arr.npy").tolist() == [[0, 1, 2], [3, 4, 5]]
    seen["numpy.load(mmap)"] = np.load(f"{D}/arr.npy", mmap_mode="r")[1].tolist() == [3, 4, 5]
    with np.load(f"{D}/arrs.npz") as z:
        seen["numpy.savez"] = z["a"].tolist() == [1.0, 1.0] and z["b"].shape == (3,)
    seen["numpy.memmap"] = np.memmap(f"{D}/mm.bin", dtype=np.int16, mode="r").tolist() == [
        4, 3, 2, 1]
    seen["numpy.fromfile"] = np.fromfile(f"{D}/tofile.bin", dtype=np.float32).tolist() == [
        0.0, 1.0, 2.0]
    with open(f"{D}/conf.yaml") as f:
        seen["yaml"] = yaml.safe_load(f) == {"model": "m", "lr": 0.5}
    seen["torch.load"] = torch.load(f"{D}/t.pt")["t"].tolist() == [0, 1, 2]
    seen["fsync"] = read(f"{D}/fsync.txt") == "synced"
    return seen


def _miss_all(names):
    """A rank on another host: every route must say the file is not there."""
    attempts = {
        "open": (open, f"{D}/builtins.txt"),
        "io.open": (io.open, f"{D}/io.bin", "rb"),
        "os.open": (os.open, f"{D}/os.bin", os.O_RDONLY),
        "os.stat": (os.stat, f"{D}/tree/a/b/leaf.txt"),
        "os.listdir": (os.listdir, f"{D}/pdir"),
        "os.scandir": (lambda p: list(os.scandir(p)), f"{D}/pdir"),
        "pathlib.read_text": (pathlib.Path.read_text, pathlib.Path(f"{D}/pathlib.txt")),
        "pathlib.iterdir": (lambda p: list(p.iterdir()), pathlib.Path(f"{D}/tree")),
        "os.path.getsize": (os.path.getsize, f"{D}/tree/a/b/leaf.txt"),
        "shutil.copyfile": (shutil.copyfile, f"{D}/copyfile.txt", "/tmp/copy-here"),
        "mkstemp name": (open, names["mkstemp"]),
        "numpy.load": (np.load, f"{D}/arr.npy"),
        "numpy.memmap": (np.memmap, f"{D}/mm.bin"),
        "numpy.fromfile": (np.fromfile, f"{D}/tofile.bin"),
        "torch.load": (torch.load, f"{D}/t.pt"),
        "os.remove": (os.remove, f"{D}/r3"),
        "os.rename": (os.rename, f"{D}/r3", "/tmp/r4"),
        "os.chmod": (os.chmod, f"{D}/mode.txt", 0o600),
    }
    out = {name: failure(fn, *args) for name, (fn, *args) in attempts.items()}
    out["paths"] = {name: args[0] for name, (fn, *args) in attempts.items()}
    out["exists"] = [os.path.exists(p) for p in (D, f"{D}/builtins.txt", names["mkdtemp"])]
    out["walk"] = list(os.walk(D))
    return out


def access_paths():
    """2x2: rank 0 writes, rank 1 (same host) reads, ranks 2-3 (other host) miss."""
    rank = xm.get_ordinal()
    names = _write_all() if rank == 0 else None
    shared = xm.rendezvous("written", json.dumps(names).encode() if rank == 0 else b"")
    names = json.loads(shared[0])
    if rank == 1:
        return _read_all(names)
    if rank in (2, 3):
        return _miss_all(names)
    return names


# -- 3. scopes and modes -------------------------------------------------------------

def scopes_and_modes():
    """2x2 with /tmp per rank, /mnt/host per host, /mnt/shared, /mnt/ro read-only."""
    rank = xm.get_ordinal()
    write("/tmp/mine.txt", f"rank {rank}")
    write(f"/mnt/host/r{rank}.txt", f"rank {rank}")
    write(f"/mnt/shared/r{rank}.txt", f"rank {rank}")
    xm.rendezvous("written")
    seen = {"tmp": sorted(os.listdir("/tmp")), "mine": read("/tmp/mine.txt"),
            "host": sorted(os.listdir("/mnt/host")), "shared": sorted(os.listdir("/mnt/shared")),
            "shared_content": [read(f"/mnt/shared/r{r}.txt") for r in range(4)]}
    ro = "/mnt/ro"
    seen["ro_read"] = read(f"{ro}/data.txt")
    seen["ro_list"] = sorted(os.listdir(ro))
    seen["ro_sub"] = os.listdir(f"{ro}/sub")
    seen["ro_access_w"] = os.access(f"{ro}/data.txt", os.W_OK)
    seen["ro_access_r"] = os.access(f"{ro}/data.txt", os.R_OK)
    seen["ro"] = {
        "open-w existing": failure(open, f"{ro}/data.txt", "w"),
        "open-a": failure(open, f"{ro}/data.txt", "a"),
        "open-r+": failure(open, f"{ro}/data.txt", "r+"),
        "open-w new": failure(open, f"{ro}/new.txt", "w"),
        "os.open creat": failure(os.open, f"{ro}/new2.txt", os.O_WRONLY | os.O_CREAT),
        "pathlib.write_text": failure(pathlib.Path(f"{ro}/new3.txt").write_text, "x"),
        "mkdir": failure(os.mkdir, f"{ro}/newdir"),
        "makedirs": failure(os.makedirs, f"{ro}/x/y"),
        "remove": failure(os.remove, f"{ro}/data.txt"),
        "unlink": failure(pathlib.Path(f"{ro}/data.txt").unlink),
        "rmdir": failure(os.rmdir, f"{ro}/sub/deeper"),
        "rmtree": failure(shutil.rmtree, f"{ro}/sub"),
        "rename": failure(os.rename, f"{ro}/data.txt", f"{ro}/moved.txt"),
        "replace": failure(os.replace, f"{ro}/sub/file.txt", f"{ro}/data.txt"),
        "chmod": failure(os.chmod, f"{ro}/data.txt", 0o600),
        "truncate": failure(os.truncate, f"{ro}/data.txt", 0),
        "np.save": failure(np.save, f"{ro}/a.npy", np.ones(1)),
        "torch.save": failure(torch.save, {}, f"{ro}/c.pt"),
    }
    seen["ro_after"] = (read(f"{ro}/data.txt"), sorted(os.listdir(ro)))
    return seen


# -- 4. the overlay --------------------------------------------------------------------

def overlay(realdir, repo_rel):
    """2x2 with ``realdir`` a host-scoped overlay of a real directory."""
    import json  # installed code still imports  # noqa: F401

    rank, host = xm.get_ordinal(), xm.get_ordinal() // 2
    real = lambda name: os.path.join(realdir, name)  # noqa: E731
    out = {"repo_file": read(repo_rel), "json": json.dumps({"a": 1})}
    if rank == 0:
        write(real("append.txt"), "more\n", "a")
        write(real("over.txt"), "new")
        os.remove(real("del.txt"))
        os.chmod(real("mode.txt"), 0o600)
        write(real("new0.txt"), "from rank 0")
        os.remove(real("sub/x.txt"))
        shutil.rmtree(real("tree"))
        os.mkdir(real("tree"))
        os.rename(real("mv"), real("mv2"))
        shutil.rmtree(real("repl"))
        os.makedirs(real("stage"))
        write(real("stage/n.txt"), "new")
        os.rename(real("stage"), real("repl"))
    if rank == 2:
        write(real("new2.txt"), "from rank 2")
        os.remove(real("mv/b.txt"))
        os.rename(real("mv"), real("mv3"))
    xm.rendezvous("changed")
    out.update(
        host=host,
        listing=sorted(os.listdir(realdir)),
        append=read(real("append.txt")),
        over=read(real("over.txt")),
        deleted=not os.path.exists(real("del.txt")),
        mode=stat.S_IMODE(os.stat(real("mode.txt")).st_mode),
        sub_isdir=os.path.isdir(real("sub")),
        sub=sorted(os.listdir(real("sub"))),
        tree=sorted(os.listdir(real("tree"))),
        tree_sub_visible=os.path.exists(real("tree/inner/deep.txt")),
        repl=sorted(os.listdir(real("repl"))),
        moved={d: sorted(os.listdir(real(d))) for d in ("mv", "mv2", "mv3")
               if os.path.isdir(real(d))},
        walk=sorted(os.path.relpath(os.path.join(r, f), realdir)
                    for r, _, fs in os.walk(realdir) for f in fs),
    )
    return out


# -- 5. consistency models ---------------------------------------------------------------

def consistency_local():
    """2x2, /mnt/local shared with local consistency: flushed bytes are seen at once."""
    rank = xm.get_ordinal()
    f = None
    if rank == 0:
        f = open("/mnt/local/log.txt", "w")
        f.write("flushed")
        f.flush()
    xm.rendezvous("flushed")
    seen = None if rank == 0 else read("/mnt/local/log.txt")
    xm.rendezvous("read")
    if f is not None:
        f.write(" and closed")
        f.close()
    xm.rendezvous("closed")
    return {"before_close": seen, "after_close": read("/mnt/local/log.txt")}


def consistency_close_to_open():
    """2x2, /mnt/nfs close-to-open: other hosts see a write after close and a fresh open."""
    rank = xm.get_ordinal()
    out = {}
    if rank == 0:
        write("/mnt/nfs/old.txt", "v1")
    xm.rendezvous("v1")
    held = open("/mnt/nfs/old.txt") if rank == 2 else None  # opened before the rewrite
    f = None
    if rank == 0:
        f = open("/mnt/nfs/new.txt", "w")
        f.write("partial")
        f.flush()
        g = open("/mnt/nfs/old.txt", "w")
        g.write("v2")
        g.flush()
    xm.rendezvous("written, not closed")
    if rank == 1:  # a reader on the writer's host; its close must publish nothing
        fd = os.open("/mnt/nfs/new.txt", os.O_RDONLY)
        out["same_host_os_read"] = os.read(fd, 100).decode()
        os.close(fd)
    xm.rendezvous("peeked")
    if rank != 0:
        out["before_close"] = failure(read, "/mnt/nfs/new.txt") or read("/mnt/nfs/new.txt")
        out["listing_before"] = sorted(os.listdir("/mnt/nfs"))
        out["old_before"] = read("/mnt/nfs/old.txt")
    xm.rendezvous("looked")
    if rank == 0:
        f.write("+rest")
        f.close()
        g.close()
        write("/mnt/nfs/tmp.part", "renamed into place")
        os.replace("/mnt/nfs/tmp.part", "/mnt/nfs/final.txt")
    xm.rendezvous("closed")
    if rank != 0:
        out["after_close"] = read("/mnt/nfs/new.txt")
        out["old_after"] = read("/mnt/nfs/old.txt")
        out["final"] = read("/mnt/nfs/final.txt")
        out["listing_after"] = sorted(os.listdir("/mnt/nfs"))
    if held is not None:
        out["held_fd_sees"] = held.read()
        held.close()
    return out


def consistency_delayed():
    """2x2, /mnt/slow delayed: other hosts see a closed write only after the delay."""
    import time

    rank = xm.get_ordinal()
    if rank == 0:
        write("/mnt/slow/ckpt.txt", "step 100")
    xm.rendezvous("closed")
    out = {"right_after_close": os.path.exists("/mnt/slow/ckpt.txt")}

    def poll(content):  # as a real reader would, bounded so a bug cannot hang the test
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            if (failure(read, "/mnt/slow/ckpt.txt") or read("/mnt/slow/ckpt.txt")) == content:
                break
            time.sleep(0.02)
        return read("/mnt/slow/ckpt.txt")

    out["eventually"] = poll("step 100")
    xm.rendezvous("seen")
    if rank == 2:  # now the other host writes: the first writer's host must see it too
        write("/mnt/slow/ckpt.txt", "step 200")
    xm.rendezvous("rewritten")
    out["rewritten_right_after"] = read("/mnt/slow/ckpt.txt")
    out["rewritten_eventually"] = poll("step 200")
    xm.rendezvous("done")
    return out


def consistency_object():
    """2x2, /mnt/obj object (gcsfuse): an object appears only when closed (or fsynced), whole."""
    rank = xm.get_ordinal()
    out = {}
    f = None
    if rank == 0:
        f = open("/mnt/obj/model.bin", "wb")
        f.write(b"part1")
        f.flush()
        out["writer_sees_own"] = read("/mnt/obj/model.bin", "rb")
    xm.rendezvous("partial")
    if rank != 0:
        out["partial"] = failure(read, "/mnt/obj/model.bin", "rb")
        out["partial_listing"] = os.listdir("/mnt/obj")
    xm.rendezvous("looked")
    if rank == 0:
        os.fsync(f.fileno())  # gcsfuse uploads the object as it is now
    xm.rendezvous("fsynced")
    if rank != 0:
        out["after_fsync"] = read("/mnt/obj/model.bin", "rb")
    xm.rendezvous("read fsynced")
    if rank == 0:
        f.write(b"+part2")
        f.flush()
    xm.rendezvous("more")
    if rank != 0:
        out["after_more"] = read("/mnt/obj/model.bin", "rb")
    xm.rendezvous("read more")
    if rank == 0:
        f.close()
    xm.rendezvous("closed")
    out["after_close"] = read("/mnt/obj/model.bin", "rb")
    return out


def object_dir_rename():
    """2x1, /mnt/obj object: a directory rename that fails part-way leaves both halves."""
    rank = xm.get_ordinal()
    out = {}
    if rank == 0:
        os.makedirs("/mnt/obj/ckpt-tmp")
        for i in range(5):
            write(f"/mnt/obj/ckpt-tmp/shard-{i}", f"shard {i}")
        out["rename"] = failure(os.rename, "/mnt/obj/ckpt-tmp", "/mnt/obj/ckpt")
    xm.rendezvous("renamed")
    out["src"] = sorted(os.listdir("/mnt/obj/ckpt-tmp"))
    out["dst"] = sorted(os.listdir("/mnt/obj/ckpt"))
    out["dst_content"] = [read(f"/mnt/obj/ckpt/{n}") for n in out["dst"]]
    return out


# -- 6. holes ------------------------------------------------------------------------

def holes(outside, realdir):
    """Routes the view does not intercept, each aimed at ``outside`` (a real
    directory the test owns, which no mount maps: /tmp is fresh in the view;
    the world's cwd). ``realdir`` is under an overlay and holds a real symlink
    to ``outside``/target.txt."""
    import posix
    import socket
    import sqlite3
    import subprocess

    out = {"outside_visible": os.path.exists(outside)}
    real = lambda name: os.path.join(outside, name)  # noqa: E731
    os.makedirs(outside)  # in the view only

    # 1. io.FileIO, _io.open: the C classes under open(), not patched
    with io.FileIO(real("fileio.txt"), "w") as f:
        f.write(b"FileIO")
    import _io
    with _io.open(real("_io_open.txt"), "w") as f:
        f.write("_io.open")
    os.chdir("/")  # the view's cwd; the process's own cwd stays where the world started
    with io.FileIO("relative-fileio.txt", "w") as f:
        f.write(b"relative")
    out["view_cwd"] = os.getcwd()

    # 2. subprocesses run on the machine's filesystem; a fork keeps the view
    subprocess.run(["sh", "-c", f"echo sub > {real('subprocess.txt')}"], check=True)
    out["os.system"] = os.system(f"echo sys > {real('system.txt')}")
    pid = os.fork()
    if pid == 0:
        try:
            write(real("forked.txt"), "forked")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    out["forked_in_view"] = read(real("forked.txt"))

    # 3. C/C++ code that opens paths itself
    con = sqlite3.connect(real("db.sqlite"))
    con.execute("create table t (x)")
    con.commit()
    con.close()
    torch.jit.save(torch.jit.script(torch.nn.Linear(1, 1)), real("jit.pt"))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(real("unix.sock"))
    sock.close()
    torch.save(torch.ones(2), "/tmp/only-in-view.pt")
    out["torch.load(mmap)"] = failure(torch.load, "/tmp/only-in-view.pt", mmap=True)
    out["torch.from_file"] = failure(torch.from_file, "/tmp/only-in-view.pt", size=1)
    out["torch.load"] = torch.load("/tmp/only-in-view.pt").tolist()

    # 4. the import system reads the machine, not the view
    os.makedirs("/tmp/mods")
    write("/tmp/mods/written_by_rank.py", "X = 1\n")
    import sys
    sys.path.insert(0, "/tmp/mods")
    out["import"] = failure(__import__, "written_by_rank")
    out["module_file_in_view"] = os.path.exists("/tmp/mods/written_by_rank.py")

    # 5. the posix module, and *at() calls on an fd the view did not open
    fd = posix.open(real("posix.txt"), os.O_WRONLY | os.O_CREAT, 0o644)
    posix.write(fd, b"posix")
    posix.close(fd)
    dfd = posix.open(outside, os.O_RDONLY)
    fd = os.open("dirfd.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd)
    os.close(fd)
    posix.close(dfd)
    out["dirfd_in_view"] = os.path.exists(real("dirfd.txt"))

    # 6. fd-level I/O reaches the sandbox file but not the fault engine
    fd = os.open("/tmp/raw.bin", os.O_WRONLY | os.O_CREAT)
    out["os.write"] = failure(os.write, fd, b"raw")
    os.close(fd)
    out["file.write"] = failure(write, "/tmp/buffered.bin", b"buffered", "wb")
    out["raw_in_view"] = read("/tmp/raw.bin", "rb")

    # 7. a symlink that is the machine's own, under an overlay: followed in the view
    out["real_link"] = failure(read, os.path.join(realdir, "link-to-outside"))
    out["write_through_real_link"] = failure(
        lambda: open(os.path.join(realdir, "link-to-outside"), "w").write("through the link"))
    out["link_target_in_view"] = os.path.exists(real("target.txt"))
    return out



def early_bound_writers(token):
    """Libraries that bound ``open`` or ``os.unlink`` before the view was installed
    (imported in the fork server): each writes under /tmp and reads back; the harness's
    test then checks that nothing named ``token`` exists on the machine."""
    import bz2
    import shutil
    import tarfile
    import tempfile

    import numpy as np

    done = {}
    with tempfile.NamedTemporaryFile("w", dir="/tmp", prefix=token) as f:  # delete=True
        f.write("x")
        f.flush()
        done["named_temporary_file"] = os.path.exists(f.name)
    done["named_temporary_file_deleted"] = not os.path.exists(f.name)
    with bz2.open(f"/tmp/{token}.bz2", "wb") as f:
        f.write(b"compressed")
    done["bz2"] = bz2.open(f"/tmp/{token}.bz2").read() == b"compressed"
    np.savetxt(f"/tmp/{token}.txt", np.arange(3))
    done["numpy_savetxt"] = np.loadtxt(f"/tmp/{token}.txt").tolist() == [0.0, 1.0, 2.0]
    os.makedirs(f"/tmp/{token}-dir")
    with open(f"/tmp/{token}-dir/a.txt", "w") as f:
        f.write("a")
    with tarfile.open(f"/tmp/{token}.tar", "w") as tar:
        tar.add(f"/tmp/{token}-dir/a.txt", arcname="a.txt")
    with tarfile.open(f"/tmp/{token}.tar") as tar:
        done["tarfile"] = tar.getnames() == ["a.txt"]
    archive = shutil.make_archive(f"/tmp/{token}-arch", "gztar", root_dir=f"/tmp/{token}-dir")
    done["make_archive"] = os.path.exists(archive)
    return done


def write_through_proc_and_dev(token):
    """Every route the kernel's own trees offer out of the view: each must land in the view
    (and read back there) or be refused; none may reach the machine."""
    out = {}

    def attempt(name, path, readback):
        try:
            with open(path, "w") as f:
                f.write(name)
            with open(readback) as f:
                out[name] = f.read() == name
        except OSError as exc:
            out[name] = type(exc).__name__

    attempt("proc_self_root", f"/proc/self/root/tmp/{token}-root", f"/tmp/{token}-root")
    attempt("proc_pid_root", f"/proc/{os.getpid()}/root/tmp/{token}-pid", f"/tmp/{token}-pid")
    attempt("proc_self_cwd", f"/proc/self/cwd/{token}-cwd", f"{token}-cwd")
    os.makedirs(f"/tmp/{token}-dir")
    fd = os.open(f"/tmp/{token}-dir", os.O_RDONLY)
    attempt("proc_self_fd", f"/proc/self/fd/{fd}/{token}-fd", f"/tmp/{token}-dir/{token}-fd")
    os.close(fd)
    attempt("dev_shm", f"/dev/shm/{token}-shm", f"/dev/shm/{token}-shm")
    attempt("sys", f"/sys/{token}-sys", f"/sys/{token}-sys")
    attempt("dev", f"/dev/{token}-dev", f"/dev/{token}-dev")
    attempt("proc_sys", f"/proc/sys/{token}-procsys", f"/proc/sys/{token}-procsys")
    with open("/dev/null", "w") as f:  # the sinks every program writes still work
        f.write("x")
    out["dev_null"] = True
    return out


def writes_through_a_duplicated_dir_fd(realdir, token):
    """A directory of the view (an overlay of a real one), its fd duplicated: files made,
    changed and removed through the copy stay in the view."""
    fd = os.open(realdir, os.O_RDONLY)
    copy, second = os.dup(fd), os.dup2(fd, 250)
    made = os.open(f"{token}.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=copy)
    os.write(made, b"x")
    os.close(made)
    os.mkdir(f"{token}-dir", dir_fd=second)
    os.chmod("keep.txt", 0o600, dir_fd=copy)
    os.unlink("delete-me.txt", dir_fd=second)
    for f in (fd, copy, second):
        os.close(f)
    return sorted(os.listdir(realdir))


def writes_into_its_world_directory():
    """The rank's captured stdout lives in the world's own directory, on the machine."""
    outdir = os.path.dirname(os.readlink("/proc/self/fd/1"))
    planted = os.path.join(outdir, "planted-by-the-target.txt")
    with open(planted, "w") as f:
        f.write("the target was here")
    return planted


def _refused(call) -> bool:
    """Did ``call`` meet the kernel's refusal of a capability the unit does not hold?"""
    import errno

    try:
        call()
    except OSError as exc:
        return exc.errno in (errno.EPERM, errno.EINVAL)
    return False
