"""Kernel isolation: each world a PID namespace, each of its hosts a mount namespace.

In Python isolation the view (``harness.filesystem``) draws the sandbox for the code that
goes through Python's file functions; a subprocess, or C code that opens paths itself
(``sqlite3``, ``torch.jit.save``), sees the machine. In kernel isolation the kernel draws
it too, in a mount namespace of each host's own that the host's ranks share: its fresh
directories (its ``/tmp``, its ``/dev/shm``, a scenario's fresh mounts) are bound over the
machine's, and the machine's ``/`` (and a working directory under ``/tmp``) is the kernel's
overlay whose writes land in the host's copy in the sandbox (``_new_root``); whatever a
rank runs meets the same walls and sees the same files. The view keeps doing what only it
does (faults, consistency between hosts, the history) on the very directories bound here.
The world's processes are a PID namespace whose init takes them all with it
(``world``), and each host's ``/proc`` is that namespace's: no rank sees or signals a
process outside its world. Its ``/dev`` holds only the harmless devices (``DEVICES``): no
disk of the machine's is there to write.

How: the world's leader makes the PID namespace and forks its init first. The init
unshares a mount namespace (inside a user namespace when it may not otherwise), makes
every mount private, makes what every host shares (the read-only machine, the world's
``/proc`` and ``/dev``), and then makes copies of it, one per host, with that host's
directories bound and overlaid, handing each namespace's descriptors to the leader
(``world``), before it settles to reaping the world's orphans (a child of its own for
this cost a fork and an exit of the leader's whole address space per world). Each unit
of that host, right after its fork, joins the namespace (``enter``). Paths of the
machine's that lie under a bound directory (a working directory under ``/tmp`` without
overlays) are bound back at their own path, so code and data stay where they were.
``unavailable`` and ``overlays`` say once per harness process what this machine allows.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from harness.filesystem.mounts import is_under
from harness.rank.probe import in_a_child

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET = 0x04000000, 0x08000000, 0x40000000
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
    #: an overlay the kernel draws at ``target``: ``source`` (the machine's directory) read
    #: through, every write landing in ``upper`` of ``(upper, work)`` (the host's copy in
    #: the sandbox, the very directory the view backs it with; ``work`` is the kernel's
    #: scratch beside it), a deletion as the kernel's whiteout there
    overlay: tuple[str, str] | None = None
    #: an overlay of a mount of the machine's (a ``/home`` of its own) the host may go
    #: without: where the kernel refuses that filesystem as a layer, it stays read-only
    #: there, as the machine's rest
    optional: bool = False


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
    _own_user(flag)
    return True


def _own_user(flag: int = 0) -> None:
    """This process (and ``flag``'s namespaces) in a user namespace of its own, its uid and
    gid its own there: its capabilities hold only over what that namespace owns."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | flag), f"unshare(CLONE_NEWUSER|{flag:#x})")
    _map_self(uid, gid)


def _bind_all(binds: tuple[Bind, ...], user: bool, keep: str,
              under: dict[str, list[str]] | None = None) -> None:
    """In a fresh mount namespace (its mounts private already): ``binds``, outer paths
    first. The machine's directories (bound back, or an overlay's lower layer) are held by
    descriptors before anything covers them; an overlay covers the mounts under its
    target (the world's directory bound on itself, the world's ``/proc``), so those are
    held too and bound again over it; an overlay of ``/`` becomes the namespace's root
    (``_new_root``); a fresh mount inside one (a dataset under the working directory under
    ``/tmp``) is bound after it. ``keep``: a directory of the world's for this host;
    ``under``: the mount points under each overlay's target, when already read (every host
    is made from the same base namespace: its mount table is read once, not per host)."""
    under = {} if under is None else under
    for b in binds:
        if b.overlay and b.target not in under:
            under[b.target] = _mounts_under(b.target)
    held = {b.target: os.open(b.source, os.O_PATH | os.O_DIRECTORY)
            for b in binds if b.machine or b.overlay}
    covered = {b.target: [(point, os.open(point, os.O_PATH)) for point in under[b.target]]
               for b in binds if b.overlay}
    try:
        made: list[str] = []  # the fresh mounts and overlays made: the host's own directories
        for bind in sorted(binds, key=lambda b: b.target.rstrip("/").count("/")):  # stable
            source = f"/proc/self/fd/{held.get(bind.target)}"
            if bind.overlay and bind.target == "/":
                _new_root(source, *bind.overlay, covered["/"], user, keep, under)
            elif bind.overlay:
                os.makedirs(bind.target, exist_ok=True)  # in a bound directory: the sandbox's
                try:
                    _overlay(source, *bind.overlay, bind.target, user)
                except OSError:
                    if not bind.optional:
                        raise
                    continue  # the machine's mount, read-only, as the new root bound it
                for point, fd in covered[bind.target]:
                    _mount(f"/proc/self/fd/{fd}", point, MS_BIND | MS_REC)
            elif bind.machine:
                os.makedirs(bind.target, exist_ok=True)  # in a bound directory: the sandbox's
                _mount(source, bind.target, MS_BIND | MS_REC)
            else:
                if not os.path.lexists(bind.target) and any(is_under(bind.target, t)
                                                            for t in made):
                    os.makedirs(bind.target)  # in a host's own directory (its /tmp, its copy)
                _mount(bind.source, bind.target, MS_BIND | MS_REC)
            if not bind.machine:
                made.append(bind.target)
        for bind in binds:  # last: a read-only /tmp still takes the mount points made in it
            if bind.readonly and not bind.machine:  # (not below it: an overlay there keeps
                _mount(None, bind.target, MS_BIND | MS_REMOUNT | MS_RDONLY)  # its own mode)
    finally:
        for fd in [*held.values(), *(fd for points in covered.values() for _, fd in points)]:
            os.close(fd)


def _new_root(lower: str, upper: str, work: str, covered: list[tuple[str, int]], user: bool,
              keep: str, under: dict[str, list[str]]) -> None:
    """The host's own ``/``: the kernel's overlay of the machine's, made at ``keep/root``
    with every mount of the machine's bound again at its place in it (the world's
    ``/proc`` and ``/dev``, the world's directory...), then moved over ``/`` and made this
    process's root, as ``switch_root`` does. A unit joining the namespace starts at its
    topmost root, this one."""
    top = os.path.join(keep, "root")
    os.makedirs(top, exist_ok=True)
    _overlay(lower, upper, work, top, user)
    for point, fd in covered:
        _bind_into_root(f"/proc/self/fd/{fd}", point, top, under)
    os.chdir(top)
    _mount(".", "/", MS_MOVE)
    _check(_libc.chroot(b"."), "chroot")
    os.chdir("/")


def _bind_into_root(source: str, point: str, top: str, under: dict[str, list[str]]) -> None:
    """The machine's mount at ``point`` bound again at its place in the new root ``top``,
    with what is mounted below it, unless ``top`` lies inside it (the world's directory,
    or the mount that holds it: a ``/var/tmp`` of its own, a tmpfs or a partition): that
    one with what is mounted below it would bring the new root along inside itself, a
    loop no walk of the tree should meet, so it is bound alone and each mount below it
    the same way, the new root left out. ``under``: the mounts below each point, read once
    for every host (``_bind_all``)."""
    if not is_under(top, point):
        _mount(source, top + point, MS_BIND | MS_REC)
        return
    _mount(source, top + point, MS_BIND)
    if point not in under:
        under[point] = _mounts_under(point)
    for inner in under[point]:
        if not is_under(inner, top):
            _bind_into_root(inner, inner, top, under)


def _overlay(lower: str, upper: str, work: str, target: str, user: bool) -> None:
    """The kernel's overlay at ``target``: ``lower`` read through, writes in ``upper``.
    Every layer is named by a descriptor's path (``/proc/self/fd/N``), so a comma or a
    colon in a directory's name cannot break the mount's options; in a user namespace the
    overlay keeps its own attributes as ``user.overlay.*`` (``userxattr``), the only ones
    it may write there."""
    os.makedirs(upper, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in (upper, work)]
    try:
        options = (f"lowerdir={lower},upperdir=/proc/self/fd/{fds[0]},"
                   f"workdir=/proc/self/fd/{fds[1]}" + (",userxattr" if user else ""))
        _check(_libc.mount(b"overlay", target.encode(), b"overlay", 0, options.encode()),
               f"mount an overlay on {target}")
    finally:
        for fd in fds:
            os.close(fd)


def _mounts_under(target: str) -> list[str]:
    """The topmost mount points strictly under ``target`` (each bind of one carries what
    is mounted below it)."""
    points = sorted({p for p, _ in _mount_points() if p != target and is_under(p, target)},
                    key=len)
    top: list[str] = []
    for point in points:
        if not any(is_under(point, t) for t in top):
            top.append(point)
    return top

#: Mount flags a remount must keep (a user namespace may not drop them: the kernel locks
#: them), by the names ``/proc/self/mountinfo`` gives them.
_KEPT = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024,
         "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
#: Kernel trees a process writes as it runs (``/dev/null``, a pty); ``/proc`` is the world's.
_LIVE = ("/dev", "/proc")
#: What of a world's ``/proc`` stays read-only, as container runtimes keep it: the
#: machine's settings (``/proc/sys``) and its triggers.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")


def mount_points() -> list[str]:
    """Every mount point of this process's namespace."""
    return [point for point, _ in _mount_points()]


#: Filesystems the kernel's overlay takes as a lower layer, whose writable mounts of the
#: machine's (a ``/home`` or a data disk of their own) a host gets its own copy of as it does
#: of ``/``; any other (autofs, FUSE, the kernel's pseudo filesystems) stays read-only to
#: what the view does not see.
COPIED_TYPES = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "bcachefs",
                          "tmpfs", "nfs", "nfs4"})


def copied_mounts() -> list[str]:
    """The machine's mounts a host gets its own copy of (``COPIED_TYPES``, writable), but
    ``/`` and the kernel's trees."""
    return [point for point, options, kind in _mountinfo()
            if point != "/" and "rw" in options and kind in COPIED_TYPES
            and not any(is_under(point, tree) for tree in _LIVE + ("/sys",))]


def _mount_points() -> list[tuple[str, int]]:
    """Every mount of this namespace: its mount point and the flags a remount keeps."""
    return [(point, sum(_KEPT.get(o, 0) for o in options)) for point, options, _ in _mountinfo()]


def _mountinfo() -> list[tuple[str, list[str], str]]:
    """Every mount of this namespace: its mount point, its own options, its filesystem."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            kind = fields[fields.index("-") + 1] if "-" in fields[6:] else ""
            out.append((point, fields[5].split(","), kind))
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


def loopback_up() -> None:
    """This network namespace's loopback up (a new one's is down): ``127.0.0.1`` answers."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


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


def settings_read_only() -> None:
    """Python isolation, in a unit of the machine's root: the machine's settings
    (``PROC_READ_ONLY``) read-only in a mount namespace of its own, every other mount the
    machine's as it is (private: nothing made here reaches the machine's). Root writes a
    setting that checks no capability (``vm.*``, most of ``kernel.*``) by its uid alone, so
    dropping its capabilities does not keep it off them."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(None, "/", MS_REC | MS_PRIVATE)
    for path in PROC_READ_ONLY:
        if os.path.exists(path):
            _mount(path, path, MS_BIND | MS_REC)
            _mount(None, path, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
                   | MS_NOEXEC)


#: The machine's devices a world keeps (as bubblewrap's ``--dev`` does): no disk, no
#: ``/dev/kvm``, ``/dev/kmsg``, ``/dev/mem`` or loop device is there for a rank to write.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def _own_dev(staging: str) -> None:
    """The world's ``/dev``: a small tmpfs (``nodev``: a device node made in it opens nothing)
    with ``DEVICES`` (each bound from the machine's, the bind's own mount opening it),
    ``pts``, an empty ``shm`` (each host binds its own over it) and the ``fd`` and std
    links, made at ``staging`` and moved over the machine's ``/dev``."""
    os.makedirs(staging, exist_ok=True)
    _check(_libc.mount(b"tmpfs", staging.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
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


#: A host's namespaces, held open: (its mount namespace, its user namespace or -1, its root
#: directory: the harness reaches the host's files through it, ``/proc/<leader>/fd/N``, its
#: network namespace).
Held = tuple[int, int, int, int]

#: Did the leader make the world's user namespace (one its units are in already)? Else
#: each unit makes its own once it joined its host (``enter``).
_in_user_namespace = False


#: Descriptors the leader holds while the namespaces are made: a unit forked meanwhile
#: closes them (``enter``), as it closes every host's.
_making: set[int] = set()


def world(binds: dict[int, tuple[Bind, ...]], keep: str) -> tuple[int, Iterator[tuple[int, Held]]]:
    """In the leader, before it forks anything of its world: its children from now on are
    a PID namespace of their own, and the leader and they an IPC namespace (SysV objects
    and POSIX message queues die with the world), in a user namespace of the leader's when
    it is not root (each unit of root's makes its own: ``enter``),
    whose first process, forked here, is that namespace's init. The init makes a mount
    namespace per host with its ``binds`` (``_make_hosts``), then adopts every orphan of
    the world and lives as long as the leader; when it goes the kernel kills every process
    of the namespace, so nothing of the world outlives it, and no rank can see or signal a
    process outside it (the harness, its fork server, the leader).

    Returns the init's pid (as the leader sees it) and the hosts' namespaces, each yielded
    as soon as the init has made it, held open by descriptors the units inherit (the
    leader starts that host's units while the next is made). Raises ``OSError`` saying
    what the kernel refused."""
    import socket

    global _in_user_namespace
    _in_user_namespace = _unshare(CLONE_NEWPID | CLONE_NEWIPC)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        _init(binds, keep, theirs)
    theirs.close()
    _making.add(ours.fileno())
    return pid, _hosts_made(ours, len(binds))


def _hosts_made(ours: object, count: int) -> Iterator[tuple[int, Held]]:
    """The leader's side of ``_make_hosts``: each host's descriptors, as they come."""
    import socket

    assert isinstance(ours, socket.socket)
    try:
        for _ in range(count):
            said, fds, _, _ = socket.recv_fds(ours, 4096, 3)
            if not said or said.startswith(b"!"):
                for fd in fds:
                    os.close(fd)
                raise OSError(errno.EPERM, "a host's mount namespace: "
                                           f"{said[1:].decode(errors='replace') or 'no word'}")
            yield int(said), (fds[0], fds[3] if len(fds) > 3 else -1, fds[1], fds[2])
    finally:
        _making.discard(ours.fileno())
        ours.close()


def _make_hosts(binds: dict[int, tuple[Bind, ...]], keep: str, leader: object) -> None:
    """In the world's init, first: unshare a base mount namespace (every mount private; the
    machine's read-only but for what the binds make writable, the world's own directory
    bound on itself; the world's ``/proc``, this PID namespace's, and ``/dev``), then make
    a copy of the base per host with that host's binds and hand its descriptors to the
    leader (``SCM_RIGHTS``), or say what failed (``!why``)."""
    import socket

    assert isinstance(leader, socket.socket)
    #: the machine's directories that stay writable (bound on themselves), on every host
    writable = tuple(sorted({b.target for host_binds in binds.values() for b in host_binds
                             if b.source == b.target and not b.readonly
                             and b.overlay is None}, key=len))
    try:
        user = _unshare()
        _mount(None, "/", MS_REC | MS_PRIVATE)
        # What every host shares is made once, here, and copied into each host's
        # namespace: the writable directories of the machine's, the read-only rest,
        # the world's /proc and /dev.
        for path in writable:
            _mount(path, path, MS_BIND | MS_REC)
        _read_only_machine(writable)
        _own_proc()
        _own_dev(os.path.join(keep, "dev"))
    except BaseException as exc:  # noqa: BLE001 - said to the leader, whatever it is
        leader.send(b"!" + (f"{exc}".encode()[:4000] or b"failed"))
        return
    _make(binds, writable, user, keep, leader)


def _make(binds: dict[int, tuple[Bind, ...]], writable: tuple[str, ...], user: bool,
          keep: str, leader: object) -> None:
    """In the base namespace: each host's namespaces, their descriptors sent to ``leader``
    (a socket) as they are made, or what failed. A host's network is a namespace of its
    own with its loopback up, as each TPU VM has its own ``127.0.0.1``: a sync over it
    reaches the ranks of that host only. (Two makers at once on two cores took longer: a
    host's cost is the new inodes its overlay's work directory takes.)"""
    import socket

    assert isinstance(leader, socket.socket)
    host = None
    base = -1
    try:
        base = os.open("/proc/self/ns/mnt", os.O_RDONLY)
        under: dict[str, list[str]] = {}
        for host in binds:
            _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare(CLONE_NEWNS|CLONE_NEWNET)")
            loopback_up()
            _bind_all(tuple(b for b in binds[host] if b.target not in writable or b.machine),
                      user, keep, under)
            fds = [os.open("/proc/self/ns/mnt", os.O_RDONLY),
                   os.open("/proc/self/root", os.O_PATH | os.O_DIRECTORY),
                   os.open("/proc/self/ns/net", os.O_RDONLY),
                   *([os.open("/proc/self/ns/user", os.O_RDONLY)] if user else [])]
            try:
                socket.send_fds(leader, [str(host).encode()], fds)
            finally:
                for fd in fds:
                    os.close(fd)
            _check(_libc.setns(base, CLONE_NEWNS), "setns(base)")
    except BaseException as exc:  # noqa: BLE001 - said to the leader, whatever it is
        leader.send(b"!" + (f"host {host}: {exc}".encode()[:4000] or b"failed"))
    finally:
        if base >= 0:
            os.close(base)


def _init(binds: dict[int, tuple[Bind, ...]], keep: str, leader: object) -> None:
    """Pid 1 of a world: makes its hosts' namespaces, then reaps what is orphaned to it
    until the leader goes."""
    import signal

    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # go with the leader
        if os.getppid() != 0:  # the leader (outside the namespace) went before the line above
            os._exit(0)
        mine = getattr(leader, "fileno", lambda: -1)()
        for fd in os.listdir("/proc/self/fd"):
            if int(fd) > 2 and int(fd) != mine:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
        with open("/proc/self/comm", "w") as comm:
            comm.write("harness-init")
        _make_hosts(binds, keep, leader)
        getattr(leader, "close", lambda: None)()
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


def enter(held: dict[int, Held], host: int, hostname: str | None = None) -> None:
    """In a unit, right after its fork (one thread): join ``host``'s namespaces, keep the
    working directory it had (the kernel moves it to the namespace's root), close every
    host's descriptors (the target sees none of them) and, given ``hostname``, be on a host
    of that name (a UTS namespace of its own: ``hostname``, ``uname -n`` and C code say it,
    as on a TPU VM; where the kernel refuses, ``environment`` says it to Python alone).
    Last, a unit of a world the machine's root made (no user namespace: root makes the
    host's overlay of ``/`` whole, a cost per host a tenth of one per directory) enters a
    user namespace of its own, as bubblewrap's sandbox does: it is root there, over nothing
    the machine owns (every namespace it joined is the machine root's, so it can mount or
    remount nothing in them), and ``confine`` drops even that."""
    cwd = os.getcwd()
    mnt, user, _, net = held[host]
    if user >= 0:
        _check(_libc.setns(user, CLONE_NEWUSER), "setns(user)")
    _check(_libc.setns(mnt, CLONE_NEWNS), "setns(mnt)")
    _check(_libc.setns(net, CLONE_NEWNET), "setns(net)")
    if hostname and _libc.unshare(CLONE_NEWUTS) == 0:
        name = hostname.encode()
        _libc.sethostname(name, len(name))
    close(held)
    for fd in _making:
        os.close(fd)
    if user < 0 and not _in_user_namespace:  # the machine's root made the world: from here
        _own_user()  # on, what the unit may do as root holds only in a namespace of its own
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

        def first_process() -> str:
            _unshare(CLONE_NEWNS | CLONE_NEWNET)
            loopback_up()
            _mount(None, "/", MS_REC | MS_PRIVATE)
            _read_only_machine(())
            _own_proc()
            _own_dev(staging)  # a mount point only: nothing is written to it
            _own_user()  # as each unit of the world does last (``enter``)
            return ""

        def leader() -> str:
            _unshare(CLONE_NEWPID | CLONE_NEWIPC)
            done, said = in_a_child(first_process)  # its namespace's first process
            if not done:
                raise OSError(said)
            return ""

        try:
            done, said = in_a_child(leader)
        finally:
            os.rmdir(staging)
        _available = "" if done else said
    return _available


#: How much of the machine the kernel overlays for a host: ``/`` whole (its lower layer the
#: machine's root, every mount of the machine's bound again over it), or each directory with
#: no mount of the machine's below it (in a user namespace the kernel will not take a layer
#: with mounts inherited below it: they are locked to it, and an overlay would uncover what
#: they hide).
WHOLE, DIRECTORIES = "whole", "directories"
_overlays: tuple[str, str] | None = None


def overlays(base: str) -> tuple[str, str]:
    """(``WHOLE``, "") or (``DIRECTORIES``, "") where the kernel draws a host's overlays with
    their copies under ``base``, else ("", why not): tried once per harness process, in a
    child, as a host's namespace would (an upper directory on a filesystem the kernel
    refuses, such as a container's own overlay, is the usual reason; a kernel older than
    5.11 refuses them in a user namespace)."""
    global _overlays
    if _overlays is None:
        import shutil
        import tempfile

        # named as a world's directory is: the reaper removes it if this process dies here
        scratch = tempfile.mkdtemp(prefix=f"harness-{os.getpid()}-overlay-", dir=base)
        layers = [os.path.join(scratch, name) for name in ("lower", "upper", "work", "top")]
        for layer in layers:
            os.mkdir(layer)

        def host() -> str:
            user = _unshare()
            _mount(None, "/", MS_REC | MS_PRIVATE)
            try:
                _overlay("/", layers[1], layers[2], layers[3], user)
                how = WHOLE
            except OSError:
                os.rmdir(os.path.join(layers[2], "work"))  # the kernel's, from the try
                _overlay(layers[0], layers[1], layers[2], layers[3], user)
                how = DIRECTORIES
            with open(os.path.join(layers[3], "probe"), "w") as f:
                f.write("x")
            return how

        try:
            done, said = in_a_child(host)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        _overlays = (said, "") if done else ("", said)
    return _overlays
