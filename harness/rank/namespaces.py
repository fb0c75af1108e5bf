"""Kernel isolation: each world a PID namespace, each of its hosts a mount namespace.

In Python isolation the view (``harness.filesystem``) draws the sandbox for the code that
goes through Python's file functions; a subprocess, or C code that opens paths itself
(``sqlite3``, ``torch.jit.save``), sees the machine. In kernel isolation the kernel draws
it too: each host's fresh directories (its ``/tmp``, its ``/dev/shm``, a scenario's fresh
mounts) are bind-mounted over the machine's in a mount namespace of that host's own, so
whatever a rank runs meets the same walls, and the ranks of a host share them; every other
mount of the machine's is read-only there. The view keeps doing what only it does (faults,
consistency between hosts, the history): its backing directories are the very directories
bound here, so both see the same files. The world's processes are a PID namespace whose
init takes them all with it (``world_pids``), and each host's ``/proc`` is that
namespace's: no rank sees or signals a process outside its world. Its ``/dev`` holds only
the harmless devices (``DEVICES``): no disk of the machine's is there to write.

How: the world's leader makes the PID namespace and its init first, then forks one
short-lived child (in that namespace), which unshares a mount namespace (inside a user
namespace when it may not otherwise), makes every mount private, makes what every host
shares (the read-only machine, the world's ``/proc``), and makes from it one namespace per
host with that host's directories bound, each held open by a descriptor of the leader's
before the child goes on to the next. Each unit of that host, right after its fork, joins
the namespace (``enter``). Paths of the machine's that lie under a bound directory (a
working directory under ``/tmp``, as a CI checkout often is) are bound back at their own
path, so code and data stay where they were. ``unavailable`` says once per harness process
whether this machine allows it all.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from dataclasses import dataclass

from harness.filesystem.mounts import is_under

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Bind:
    """``source`` (a directory of the machine's) seen at ``target`` in a host's namespace,
    writable there unless ``readonly``: every mount of the machine's that no bind covers
    is read-only in it."""

    source: str
    target: str
    readonly: bool = False
    #: the machine's own directory at its own path, held before the binds above it cover
    #: it and bound back then
    machine: bool = False


def _check(rc: int, what: str) -> None:
    if rc != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, flags: int) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(), None, flags, None),
           f"mount {source or ''} on {target}")


def _map_self(uid: int, gid: int) -> None:
    """In a user namespace just made: this process's uid and gid (read before it was
    made: inside, unmapped, they read as the overflow id) are its own there."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _unshare(flag: int = CLONE_NEWNS) -> bool:
    """A new namespace (``flag``) for this process, in a user namespace of its own when
    the one it is in does not let it; True if a user namespace was made."""
    if _libc.unshare(flag) == 0:
        return False
    if ctypes.get_errno() != errno.EPERM:
        _check(-1, f"unshare({flag:#x})")
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | flag), f"unshare(CLONE_NEWUSER|{flag:#x})")
    _map_self(uid, gid)
    return True


def _bind_all(binds: tuple[Bind, ...], keep: str) -> None:
    """In a fresh mount namespace (its mounts private already): ``binds``, outer paths
    first; the machine's own directories are held at ``keep/<n>`` while the ones above
    them are covered, then bound back (and a fresh mount inside one, such as a dataset
    under the working directory under ``/tmp``, is bound after it)."""
    spots = {}
    for n, bind in enumerate(b for b in binds if b.machine):
        spot = os.path.join(keep, str(n))
        os.makedirs(spot, exist_ok=True)
        _mount(bind.source, spot, MS_BIND | MS_REC)
        spots[bind.target] = spot
    fresh: list[str] = []
    for bind in sorted(binds, key=lambda b: b.target.rstrip("/").count("/")):  # stable
        if bind.machine:
            spot = spots[bind.target]
            os.makedirs(bind.target, exist_ok=True)  # in the bound directory: the sandbox's
            _mount(spot, bind.target, MS_BIND | MS_REC)
            _check(_libc.umount2(spot.encode(), MNT_DETACH), f"umount {spot}")
            continue
        if not os.path.lexists(bind.target) and any(is_under(bind.target, t) for t in fresh):
            os.makedirs(bind.target)  # inside a fresh mount made above (a host's /tmp)
        _mount(bind.source, bind.target, MS_BIND | MS_REC)
        fresh.append(bind.target)
    for bind in binds:  # last: a read-only /tmp still takes the mount points made in it
        if bind.readonly and not bind.machine:
            _mount(None, bind.target, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC)


#: Mount flags a remount must keep (a user namespace may not drop them: the kernel locks
#: them), by the names ``/proc/self/mountinfo`` gives them.
_KEPT = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024,
         "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
#: Kernel trees a process writes as it runs (``/dev/null``, a pty); ``/proc`` is the world's.
_LIVE = ("/dev", "/proc")
#: What of a world's ``/proc`` stays read-only, as container runtimes keep it: the
#: machine's settings (``/proc/sys``) and its triggers.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")


def _mount_points() -> list[tuple[str, int]]:
    """Every mount of this namespace: its mount point and the flags a remount keeps."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            out.append((point, sum(_KEPT.get(o, 0) for o in fields[5].split(","))))
    return out


def _read_only_machine(writable: tuple[str, ...]) -> None:
    """Every mount of the machine's read-only in this namespace but ``writable`` (the
    world's own directory, a passthrough mount's, each bound on itself first) and the
    kernel's live trees. What the view does not see (a subprocess, C code) meets ``EROFS``
    there rather than write the machine; a bind made later of a directory here is
    read-only as its source is (the working directory bound back under a host's /tmp)."""
    for point, flags in _mount_points():
        if any(is_under(point, top) for top in (*writable, *_LIVE)):
            continue
        rc = _libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags,
                         None)
        if rc != 0 and ctypes.get_errno() not in (errno.ENOENT, errno.EINVAL):
            _check(rc, f"remount {point} read-only")  # ENOENT, EINVAL: a mount hidden below


def _own_proc() -> None:
    """The world's ``/proc`` (this process is in its PID namespace), its machine-wide
    settings read-only."""
    _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
           "mount proc on /proc")
    for path in PROC_READ_ONLY:
        if os.path.exists(path):
            _mount(path, path, MS_BIND | MS_REC)
            _mount(None, path, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
                   | MS_NOEXEC)


#: The machine's devices a world keeps (as bubblewrap's ``--dev`` does): no disk, no
#: ``/dev/kvm``, ``/dev/kmsg``, ``/dev/mem`` or loop device is there for a rank to write.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def _own_dev(staging: str) -> None:
    """The world's ``/dev``: a small tmpfs with ``DEVICES`` (each bound from the machine's),
    ``pts``, an empty ``shm`` (each host binds its own over it) and the ``fd`` and std
    links, made at ``staging`` and moved over the machine's ``/dev``."""
    os.makedirs(staging, exist_ok=True)
    _check(_libc.mount(b"tmpfs", staging.encode(), b"tmpfs", MS_NOSUID | MS_NOEXEC,
                       b"mode=0755,size=65536"), f"mount tmpfs on {staging}")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            with open(os.path.join(staging, name), "w"):
                pass
            _mount(f"/dev/{name}", os.path.join(staging, name), MS_BIND)
    os.mkdir(os.path.join(staging, "pts"), 0o755)
    if os.path.isdir("/dev/pts"):
        _mount("/dev/pts", os.path.join(staging, "pts"), MS_BIND | MS_REC)
    os.mkdir(os.path.join(staging, "shm"))
    os.chmod(os.path.join(staging, "shm"), 0o1777)
    for link, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                     ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                     ("ptmx", "pts/ptmx")):
        os.symlink(to, os.path.join(staging, link))
    _mount(staging, "/dev", MS_MOVE)


#: A host's namespace, held open: (its mount namespace, its user namespace or -1).
Held = tuple[int, int]


def prepare(binds: dict[int, tuple[Bind, ...]], keep: str, proc: bool = False
            ) -> dict[int, Held]:
    """In the leader: a mount namespace per host with its ``binds``, held open by
    descriptors its units inherit. One child makes them all: it unshares a base namespace
    (every mount private), then for each host a copy of the base with that host's binds,
    which the leader opens before the child goes back to the base for the next. ``proc``:
    the leader's children are a PID namespace of the world's (``world_pids``), and each
    host's ``/proc`` is that namespace's own. The machine's mounts are read-only in every
    host's namespace but for what its binds make writable (a host's fresh directories, the
    world's own directory bound on itself). Raises ``OSError`` saying what the kernel refused."""
    #: the machine's directories that stay writable (bound on themselves), on every host
    writable = tuple(sorted({b.target for host_binds in binds.values() for b in host_binds
                             if b.source == b.target and not b.readonly}, key=len))
    said_r, said_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # makes every host's namespace, then goes
        code = 0
        try:
            os.close(said_r)
            os.close(go_w)
            word = b"ou" if _unshare() else b"ok"  # ou: in a user namespace of its own
            _mount(None, "/", MS_REC | MS_PRIVATE)
            # What every host shares is made once, here, and copied into each host's
            # namespace: the writable directories of the machine's, the read-only rest,
            # the world's /proc.
            for path in writable:
                _mount(path, path, MS_BIND | MS_REC)
            _read_only_machine(writable)
            if proc:
                _own_proc()
            _own_dev(os.path.join(keep, "dev"))
            base = os.open("/proc/self/ns/mnt", os.O_RDONLY)
            for host, host_binds in binds.items():
                _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
                _bind_all(tuple(b for b in host_binds if b.target not in writable or
                                b.machine), os.path.join(keep, f"host-{host}"))
                os.write(said_w, word)
                if os.read(go_r, 1) != b"x":  # until the leader holds it open
                    raise OSError(errno.EPIPE, "the leader went away")
                _check(_libc.setns(base, CLONE_NEWNS), "setns(base)")
        except BaseException as exc:  # noqa: BLE001 - said to the leader, whatever it is
            os.write(said_w, f"{exc}".encode()[:4000] or b"failed")
            code = 1
        finally:
            os._exit(code)
    os.close(said_w)
    os.close(go_r)
    held: dict[int, Held] = {}
    try:
        user = -1
        for host in binds:
            said = os.read(said_r, 4096)
            if said not in (b"ok", b"ou"):
                raise OSError(errno.EPERM, f"host {host}'s mount namespace: "
                                           f"{said.decode(errors='replace') or 'no word'}")
            if said == b"ou" and user < 0:
                user = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
            held[host] = (os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY), user)
            os.write(go_w, b"x")
    except BaseException:
        close(held)
        raise
    finally:
        os.close(said_r)
        os.close(go_w)
        os.waitpid(pid, 0)
    return held


def world_pids() -> int:
    """In the leader, before it forks anything of its world: its children from now on are
    a PID namespace of their own (in a user namespace of the leader's when it is not root),
    whose first process, forked here, is that namespace's init. The init adopts every
    orphan of the world and lives as long as the leader; when it goes the kernel kills
    every process of the namespace, so nothing of the world outlives it, and no rank can
    see or signal a process outside it (the harness, its fork server, the leader). Returns
    the init's pid (as the leader sees it). Raises ``OSError`` if the kernel refuses."""
    _unshare(CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        _init()
    return pid


def _init() -> None:
    """Pid 1 of a world: reaps what is orphaned to it until the leader goes."""
    import signal

    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # go with the leader
        if os.getppid() != 0:  # the leader (outside the namespace) went before the line above
            os._exit(0)
        for fd in os.listdir("/proc/self/fd"):
            if int(fd) > 2:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
        with open("/proc/self/comm", "w") as comm:
            comm.write("harness-init")
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        while True:
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
            signal.sigtimedwait({signal.SIGCHLD}, 1.0)
    finally:
        os._exit(0)


def enter(held: dict[int, Held], host: int) -> None:
    """In a unit, right after its fork (one thread): join ``host``'s namespace, keep the
    working directory it had (the kernel moves it to the namespace's root), and close
    every host's descriptors: the target sees none of them."""
    cwd = os.getcwd()
    mnt, user = held[host]
    if user >= 0:
        _check(_libc.setns(user, CLONE_NEWUSER), "setns(user)")
    _check(_libc.setns(mnt, CLONE_NEWNS), "setns(mnt)")
    close(held)
    os.chdir(cwd)


def close(held: dict[int, Held]) -> None:
    for fd in {fd for fds in held.values() for fd in fds if fd >= 0}:
        os.close(fd)


_available: str | None = None


def unavailable() -> str:
    """Why this machine cannot give a world its namespaces ("" when it can): tried once per
    harness process, in a child, exactly as a world's leader would (a PID namespace, then,
    in its first process, a mount namespace with the world's own ``/proc``)."""
    global _available
    if _available is None:
        import tempfile

        staging = tempfile.mkdtemp(prefix="harness-dev-")  # where the probe's /dev is made
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                _unshare(CLONE_NEWPID)
                first = os.fork()
                if first == 0:
                    try:
                        _unshare()
                        _mount(None, "/", MS_REC | MS_PRIVATE)
                        _read_only_machine(())
                        _own_proc()
                        _own_dev(staging)  # a mount point only: nothing is written to it
                        os.write(write, b"ok")
                    except BaseException as exc:  # noqa: BLE001
                        os.write(write, str(exc).encode()[:2000] or b"refused")
                    finally:
                        os._exit(0)
                os.waitpid(first, 0)
            except BaseException as exc:  # noqa: BLE001
                os.write(write, str(exc).encode()[:2000] or b"refused")
            finally:
                os._exit(0)
        os.close(write)
        said = os.read(read, 4096)
        os.close(read)
        os.waitpid(pid, 0)
        os.rmdir(staging)
        _available = "" if said == b"ok" else said.decode(errors="replace")
    return _available
