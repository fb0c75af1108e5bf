"""A descriptor the view did not open itself is the view's all the same (issue 47): one
received over a socket (``send_fds``/``recv_fds``, ``sendmsg`` with ``SCM_RIGHTS``) or copied
by ``socket.dup``, ``socket.fromfd`` (the copy it leaves when it refuses a file),
``posix.dup``, ``os.dup``/``dup2`` or ``fcntl``'s ``F_DUPFD``. With such a copy of a read-only
descriptor of the machine's directory (or file) a rank made, deleted, renamed, truncated and
chmod'ed the machine's files, and ``setxattr``/``removexattr`` on it changed the machine's
file. Now each call acts on the view (an overlay: the host's copy) or meets the real errno
(a read-only mount: EROFS), and the machine's files are the same byte for byte, mode for
mode, xattr for xattr (the containment tests' pictures did not look at xattrs: nothing
there caught the descriptor route of ``setxattr``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harness import run_world
from harness.filesystem.mounts import Mount

from support import TARGETS_DIR

ROUTES = ["send_fds", "sendmsg", "socket.dup", "fromfd", "posix.dup", "os.dup", "os.dup2",
          "F_DUPFD", "F_DUPFD_CLOEXEC"]
FILES = ("file.txt", "victim.txt", "rename.txt", "chmod.txt")
#: The calls that change something, as ``fd_targets.through`` names them.
CHANGES = ("open-create", "open-trunc", "mkdir", "rmdir", "unlink", "rename", "chmod-at",
           "chown-at", "utime-at", "symlink-at", "link-at", "mkfifo-at", "fchmod", "chmod-fd",
           "fchown", "utime-fd", "setxattr", "removexattr", "dir-fchmod", "dir-setxattr",
           "dir-removexattr")


def machine_dir(root: Path) -> Path:
    """A directory of the machine's: one subdirectory per route (and ``by-path``), each
    with its files, an empty directory, and an xattr on the file and on the directory."""
    for name in (*ROUTES, "by-path"):
        where = root / name
        (where / "emptydir").mkdir(parents=True)
        for file in FILES:
            (where / file).write_bytes(f"the machine's {file}\n".encode())
            (where / file).chmod(0o644)
        os.setxattr(where / "file.txt", "user.keep", b"the machine's")
        os.setxattr(where, "user.keep", b"the machine's")
    return root


def picture(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: its bytes, mode, owner, times and xattrs."""
    out = {}
    for path in sorted([root, *root.rglob("*")]):
        st = path.lstat()
        xattrs = {name: os.getxattr(path, name, follow_symlinks=False)
                  for name in os.listxattr(path, follow_symlinks=False)}
        content = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
        out[str(path.relative_to(root))] = (content, st.st_mode, st.st_uid, st.st_gid,
                                            st.st_mtime_ns, xattrs)
    return out


def test_a_laundered_descriptor_acts_on_the_view_or_meets_erofs_never_the_machine(
        tmp_path: Path) -> None:
    rw, ro = machine_dir(tmp_path / "rw"), machine_dir(tmp_path / "ro")
    before = picture(rw), picture(ro)
    result = run_world(f"{TARGETS_DIR / 'fd_targets.py'}:launder", topology="1x1", timeout=60,
                       args=(str(rw), str(ro), ROUTES), isolation="python",
                       mounts=[Mount(str(rw), scope="host", base="overlay"),
                               Mount(str(ro), scope="host", mode="ro", base="overlay")])
    after = picture(rw), picture(ro)
    changed = [(kind, name) for kind, was, now in zip(("rw", "ro"), before, after)
               for name in sorted(set(was) | set(now)) if was.get(name) != now.get(name)]
    assert changed == [], "the machine's files changed"
    assert result.outcome == "PASS", result.detail()
    value = result.ranks[0].value
    for route in ROUTES:
        # A read-only mount: every change is EROFS, as the kernel says it of a read-only
        # filesystem; truncating a descriptor opened to read is EINVAL, as it is anywhere.
        done = value[f"ro {route}"]
        assert {op: done[op] for op in CHANGES} == dict.fromkeys(CHANGES, "EROFS"), route
        assert (done["ftruncate"], done["truncate-fd"]) == ("EINVAL", "EINVAL"), route
        assert done["listxattr"] == ["user.keep"], route
        # An overlay: every change lands in the host's copy, which the rank then sees.
        done = value[f"rw {route}"]
        # (but a directory's own xattrs: the view's copy of it is made without them; and a
        # chown to another user asks CAP_CHOWN, which no unit holds, rank/confine.py)
        changes = [op for op in CHANGES if op != "dir-removexattr"]
        assert {op: done[op] for op in changes} == {
            op: "EPERM" if op in ("fchown", "chown-at") else "done" for op in changes}, (route, done)
        assert (done["ftruncate"], done["truncate-fd"]) == ("EINVAL", "EINVAL"), route
        assert done["getxattr"] == "laundered" and done["listxattr"] == ["user.probe"], route
        assert value[f"rw {route} seen"] == {
            "names": ["chmod.txt", "fifo", "file.txt", "hard.txt", "link", "new.txt", "newdir",
                      "proc.txt", "renamed.txt"],
            "file": "", "file_mode": "0o604", "file_xattrs": ["user.probe"],
            "chmod_mode": "0o600", "dir_mode": "0o700", "dir_xattrs": ["user.probe"],
        }, route
    assert value["rw by path"] == {"setxattr": "done", "removexattr": "done",
                                   "getxattr": "by path"}
    assert value["ro by path"] == {"setxattr": "EROFS", "removexattr": "EROFS",
                                   "getxattr": "ENODATA"}
