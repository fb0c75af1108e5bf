"""Where a virtual path lives for one rank: mount, scope, real layers.

A path resolves to its mount (the longest prefix), the scope's backing
directory (the upper layer, where writes land), the machine's real path under
an overlay (the lower layer), its whiteout (a deletion the rank made of a real
path) and, on a non-local mount, the writer's staging file (as the mount's
consistency model names it). The view, not the kernel, follows the symlinks a
target makes: their text is a virtual path, and on the machine it would lead
out of the sandbox.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat as stat_module
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.filesystem import machine
from harness.filesystem.consistency import Local, model_of
from harness.filesystem.machine import oserror
from harness.filesystem.mounts import (
    KERNEL_TREES,
    Mount,
    MountTable,
    is_under,
    normalize,
    real_root,
    whiteout_root,
)

_MAX_LINKS = 40  # symlinks followed in one lookup before ELOOP, as Linux allows
#: How many paths a view keeps resolved (``Resolution._resolve``) before it starts again.
_RESOLVED_KEPT = 4096
#: A process's own window on its filesystem: ``/proc/self/root/tmp/x`` is ``/tmp/x`` of
#: the view, not of the machine.
_PROC_SELF = re.compile(r"^/proc/(self|thread-self|\d+)(?:/task/\d+)?/(root|cwd|fd/\d+)(/.*)?$")
#: What a rank may write of the machine's kernel trees (everything else there is this
#: machine's, which a world must not change): the devices every program writes, its own
#: terminal and descriptors, its own /proc entries.
_MACHINE_SINKS = re.compile(
    r"^/dev/(null|zero|full|random|urandom|tty|ptmx|pts/\d+)$"
    r"|^/proc/(self|thread-self)(/|$)")
#: ``/dev/fd/N``, ``/dev/stdout``: the kernel's names for ``/proc/self/fd/N``.
_DEV_FD = re.compile(r"^/dev/(?:fd/(\d+)|(stdin|stdout|stderr))(/.*)?$")
_STD_FD = {"stdin": "0", "stdout": "1", "stderr": "2"}
#: What the kernel adds to the name of a descriptor's file that has none left.
_DELETED = " (deleted)"
#: The magic links of a process's own ``/proc`` entry that lead to a file by itself, not by
#: its name: a descriptor, a mapped file, the executable. Reopened for writing, they write
#: whatever file they lead to, wherever it is.
_MAGIC = re.compile(r"^(/proc/(?:self|thread-self)(?:/task/\d+)?/(?:fd/\d+|map_files/[^/]+|exe))"
                    r"(/.*)?$")


@dataclass
class Resolved:
    vpath: str
    mount: Mount
    key: str  # scope key: shared | host-N | rank-N
    upper: str  # where writes land (and fresh mounts live)
    lower: str | None  # the machine's real path under an overlay
    whiteout: str | None
    staging: str | None  # private write area for non-local consistency
    # Set by the hooks at open: faults that decide at close what this write's bytes are.
    content_faults: list[Any] = field(default_factory=list)
    #: where the mount's model stages this write, while the faults hold its bytes apart
    model_staging: str | None = None
    #: the host's copy in the sandbox where the kernel draws the overlay (``upper`` is then
    #: the path itself, in the host's namespace): where the harness finds this file
    backing: str | None = None

    @property
    def on_disk(self) -> str:
        """Where the harness, outside the host's namespace, finds what was written here."""
        return self.backing or self.upper

    @property
    def passthrough(self) -> bool:
        return self.mount.base == "passthrough"

    @property
    def model(self) -> Local:
        """The mount's consistency model."""
        return model_of(self.mount)


_PASS = Mount("/", scope="shared", base="passthrough")


class Resolution:
    """The view's half that maps virtual paths to real ones (a mixin of ``View``)."""

    table: MountTable
    sandbox: str
    rank: int
    host: int
    home: str
    hooks: Any
    fds: dict[int, Resolved]
    unnamed: dict[int, str]
    _cwd: str
    _private: tuple[str, ...]
    #: path -> ``Resolved``'s fields but the hooks' (``_resolve``)
    _paths_resolved: dict[str, tuple[Any, ...]]
    #: where the kernel draws an overlay in this rank's host namespace (kernel isolation)
    _drawn: tuple[str, ...]
    stat: Callable[..., Any]

    # -- resolution -----------------------------------------------------------
    def vpath(self, path: Any) -> str:
        return self._through_kernel(normalize(os.fsdecode(os.fspath(path)), self._cwd, self.home))

    def _through_kernel(self, vpath: str) -> str:
        """A path the kernel would lead elsewhere by itself (``/proc/self/root/...``,
        ``/dev/fd/3``) as the path in the view it leads to; any other path as it is."""
        if vpath.startswith("/dev/"):
            m = _DEV_FD.match(vpath)
            if m is not None:
                vpath = f"/proc/self/fd/{m.group(1) or _STD_FD[m.group(2)]}{m.group(3) or ''}"
        return self._through_proc(vpath) if vpath.startswith("/proc/") else vpath

    def _through_proc(self, vpath: str) -> str:
        """``/proc/self/{root,cwd,fd/N}/...`` as the path in the view it leads to (the
        kernel would lead it to the machine's)."""
        m = _PROC_SELF.match(vpath)
        if m is None or (m.group(1).isdigit() and int(m.group(1)) != os.getpid()):
            return vpath
        where, rest = m.group(2), (m.group(3) or "").lstrip("/")
        if where == "root":
            return "/" + rest
        if where == "cwd":
            return posixpath.join(self._cwd, rest) if rest else self._cwd
        opened = self.fd_vpath(int(where[3:]))
        if opened is None:
            return vpath  # not a file of the view's: a pipe, a terminal, the world's own
        return posixpath.join(opened, rest) if rest else opened

    def fd_vpath(self, fd: int) -> str | None:
        """The virtual path of what ``fd`` is open on: the view's own descriptor's, else
        the name the kernel gives it, read in the view (``foreign``)."""
        r = self.fds.get(fd)
        return r.vpath if r is not None else self.foreign(fd)

    def foreign(self, fd: int) -> str | None:
        """Where a descriptor the view did not open leads in the view: one received over a
        socket (``recv_fds``, ``SCM_RIGHTS``), copied by ``socket.dup`` or ``posix.dup``,
        opened by C code. It is the view's all the same, by the name the kernel gives its
        file: a machine's file is its own virtual path (an overlay's lower layer, a file of
        a fresh mount's the view does not have), a file of the sandbox the path it backs. A
        call through it then acts on the view, never on the machine's file. None: not a
        file (a pipe, a socket), or the harness's own (the world's directory, the view's
        nameless files): the machine's call acts on it, as it always did. Only calls given
        a descriptor the view does not know pay this ``readlink``."""
        try:
            real = machine.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None  # not open: the machine's call says EBADF
        if real.endswith(_DELETED):
            if fd in self.unnamed or self._is_private(real[:-len(_DELETED)]):
                return None  # a nameless file of the view's own
            real = real[:-len(_DELETED)]
        if not real.startswith("/"):
            return None  # pipe:[...], socket:[...], anon_inode:[...]
        if self._is_private(real):
            return self._backs(real)
        return real

    def _backs(self, real: str) -> str | None:
        """The virtual path whose copy in the sandbox is ``real`` (None: another
        file of the harness's)."""
        for mount in self.table.mounts:
            root = real_root(self.sandbox, mount, mount.scope_key(self.rank, self.host))
            if is_under(real, root):
                rest = real[len(root):].lstrip("/")
                return posixpath.join(mount.path, rest) if rest else mount.path
        return None

    def machine_write(self, r: Resolved) -> None:
        """A write to a passthrough path: in the kernel's trees, only to the machine's
        sinks (``/dev/null``, the rank's own ``/proc/self``); EACCES for the rest."""
        vpath = r.vpath
        if self._is_private(vpath) or not any(is_under(vpath, tree) for tree in KERNEL_TREES):
            return  # the harness's own files; a passthrough mount the caller asked for
        if vpath.startswith(f"/proc/{os.getpid()}/"):
            vpath = "/proc/self/" + vpath[len(f"/proc/{os.getpid()}/"):]
        if not _MACHINE_SINKS.match(vpath):
            raise oserror(errno.EACCES, r.vpath)
        magic = _MAGIC.match(vpath)
        if magic is not None and not self._own_file(magic.group(1)):
            raise oserror(errno.EACCES, r.vpath)

    def _own_file(self, link: str) -> bool:
        """May a write go through the magic link ``link`` (``/proc/self/fd/3``)? Only to
        what is not a file of the machine: a pipe, a socket, a terminal, a device, or a file
        of this world's own (its sandbox, its captured output). A descriptor the view did
        not open (an ``F_DUPFD`` copy, a mapped file) may lead to a file of the machine's
        that was opened to be read."""
        try:
            info = machine.stat(link)
        except OSError:
            return True  # nothing there: the machine's own call will say so
        if not (stat_module.S_ISREG(info.st_mode) or stat_module.S_ISDIR(info.st_mode)):
            return True
        try:
            real = machine.readlink(link).removesuffix(" (deleted)")
        except OSError:
            return False
        return self._is_private(real)  # the kernel's own name for it: already canonical

    def resolve(self, path: Any, follow: bool = True) -> Resolved:
        """Where ``path`` lives for this rank; symlinks the target made are
        followed here, through the view (the last one only if ``follow``)."""
        return self._resolve(self._expand(self.vpath(path), follow))

    def _at(self, path: Any, dir_fd: int | None) -> Any:
        """``path`` as ``*at()`` calls read it: relative to the directory ``dir_fd`` is
        open on in the view (``fd_vpath``: one the view did not open is the view's too).
        None: a descriptor of no file in the view (a socket, the harness's own): the
        caller makes the machine's own call, which says ENOTDIR or acts on the harness's."""
        if dir_fd is None or isinstance(path, int):
            return path
        text = os.fsdecode(os.fspath(path))
        if text.startswith("/"):
            return text
        base = self.fd_vpath(dir_fd)
        return None if base is None else posixpath.join(base, text)

    def _expand(self, vpath: str, follow: bool) -> str:
        """``vpath`` with every symlink that lives in the sandbox replaced by its
        target, resolved in the view. The kernel must never follow those links:
        their targets are virtual paths, and on the machine they lead out."""
        done, rest, hops = "", [p for p in vpath.split("/") if p], 0
        while rest:
            candidate = done + "/" + rest.pop(0)
            link = None if (not rest and not follow) else self._link_at(candidate)
            if link is None:
                done = candidate
                continue
            hops += 1
            if hops > _MAX_LINKS:
                raise oserror(errno.ELOOP, vpath)
            target = posixpath.normpath(posixpath.join(posixpath.dirname(candidate), link))
            # a link into /proc/self/root (or /dev/fd/N) leads into the view, not the machine
            target = self._through_kernel(target)
            rest = [p for p in target.split("/") if p] + rest
            done = ""
        return done or "/"

    def _link_at(self, vpath: str) -> str | None:
        """The text of the symlink at ``vpath``: one the target made (in the sandbox), or
        one the machine has under an overlay. Either is followed here, in the view: the
        kernel would follow it on the machine, out of the view."""
        r = self._resolve(vpath)
        if r.passthrough or machine.is_plain(r.staging):
            return None  # (staging never holds links: a staged file is what this path is)
        try:
            mode = machine.lstat(r.upper).st_mode
            return machine.readlink(r.upper) if stat_module.S_ISLNK(mode) else None
        except OSError:
            pass  # nothing of the view's own here: the machine's, if the mount shows it
        if r.lower is None or machine.is_plain(r.whiteout) or self._whited_out_above(r):
            return None
        try:
            if not stat_module.S_ISLNK(machine.lstat(r.lower).st_mode):
                return None
            return machine.readlink(r.lower)
        except OSError:
            return None

    def _resolve(self, vpath: str) -> Resolved:
        """Where ``vpath`` lives, without following links: a function of the path and of
        what the view was made with (its table, sandbox, rank and host), so worked out
        once per path (a lookup of ``/a/b/c`` resolves ``/a`` and ``/a/b`` too, each
        time), and a new ``Resolved`` each call (the fault hooks mark theirs)."""
        layers = self._paths_resolved.get(vpath)
        if layers is None:
            if len(self._paths_resolved) >= _RESOLVED_KEPT:
                self._paths_resolved.clear()  # a target that walks a million paths: bounded
            r = self._resolve_anew(vpath)
            layers = self._paths_resolved[vpath] = (
                r.vpath, r.mount, r.key, r.upper, r.lower, r.whiteout, r.staging, r.backing)
        return Resolved(*layers[:7], backing=layers[7])

    def _resolve_anew(self, vpath: str) -> Resolved:
        mount = self.table.match(vpath)
        if mount.base == "passthrough" or self._is_private(vpath):
            return Resolved(vpath, _PASS, "shared", vpath, None, None, None)
        if mount.base == "real":  # the machine's own file, its operations through the hooks
            return Resolved(vpath, mount, "real", vpath, None, None, None)
        key = mount.scope_key(self.rank, self.host)
        rel = mount.relative(vpath)
        upper = os.path.join(real_root(self.sandbox, mount, key), rel)
        if mount.base == "overlay" and any(is_under(vpath, p) and is_under(p, mount.path)
                                           for p in self._drawn):
            # the kernel's overlay: its copy-on-write, its whiteouts, seen by every process
            # of the host alike; the view keeps the faults and the history
            staging = model_of(mount).staging(self.sandbox, mount, key, self.rank, self.host, rel)
            return Resolved(vpath, mount, key, vpath, None, None, staging,
                            backing=upper.rstrip("/"))
        lower = vpath if mount.base == "overlay" else None
        whiteout = os.path.join(whiteout_root(self.sandbox, mount, key), rel) if lower else None
        staging = model_of(mount).staging(self.sandbox, mount, key, self.rank, self.host, rel)
        return Resolved(vpath, mount, key, upper.rstrip("/") or "/", lower, whiteout, staging)

    def _is_private(self, vpath: str) -> bool:
        return any(vpath == p or vpath.startswith(p + "/") for p in self._private)

    def chdir(self, path: Any) -> None:
        r = self.resolve(path)
        st = self.stat(path)
        if not stat_module.S_ISDIR(st.st_mode):
            raise oserror(errno.ENOTDIR, r.vpath)
        self._cwd = r.vpath

    def getcwd(self) -> str:
        return self._cwd

    # -- where things are -----------------------------------------------------
    def _read_location(self, r: Resolved) -> str | None:
        """The real file behind a virtual path for a reader, or None."""
        if r.passthrough:
            return r.vpath
        if r.model.shows_staged(r):
            return r.staging  # staging holds files; its directories only contain them
        own = self.hooks.own_copy(r.vpath)
        if own is not None:
            return own
        if machine.exists(r.upper):
            return r.upper
        if r.lower is not None and not machine.is_plain(r.whiteout) and not self._whited_out_above(r):
            if machine.exists(r.lower):
                return r.lower
        return None

    def _whited_out_above(self, r: Resolved) -> bool:
        if not r.whiteout:
            return False
        root = whiteout_root(self.sandbox, r.mount, r.key).rstrip("/")
        parts = r.whiteout[len(root):].strip("/").split("/")[:-1]
        # From the top down: below an ancestor the whiteouts do not have, none can be
        # (most lookups end at the first, where upwards cost an lstat per level).
        ancestor = root
        for part in parts:
            ancestor += "/" + part
            if not machine.exists(ancestor):
                return False
            if not machine.is_dir(ancestor):
                return True
        return False

    def _write_location(self, r: Resolved, keep_content: bool, staged: bool = True) -> str:
        """The real file a writer writes: the upper copy (copied up when needed) or
        staging (``staged``: content written through an open file, which the
        mount's consistency model publishes at close)."""
        parent = posixpath.dirname(r.vpath)
        if parent != r.vpath and self._read_location(self.resolve(parent)) is None:
            raise oserror(errno.ENOENT, r.vpath)
        target = (r.staging if staged else None) or r.upper
        machine.makedirs(os.path.dirname(target), exist_ok=True)
        if keep_content and not machine.exists(target):
            source = self._read_location(r)
            if source is not None and source != target:
                machine.copy(source, target)
        if machine.is_plain(r.whiteout):  # not a directory's: its children's marks stay
            machine.rm(r.whiteout)
        return target

    def _meta_location(self, r: Resolved) -> str:
        """Where a metadata change (mode, owner, times, xattrs) lands: the open
        write in staging if there is one, else the upper copy, visible at once."""
        if machine.is_plain(r.staging):
            return r.staging
        return self._write_location(r, keep_content=True, staged=False)

    def _check_writable(self, r: Resolved) -> None:
        if r.mount.mode == "ro":
            raise oserror(errno.EROFS, r.vpath)


    def _enter(self, path: Any, dir_fd: int | None, machine_call: Callable[..., Any], *,
               follow: bool = True, op: str | None = None, writes: bool = False,
               at_kwargs: dict[str, Any] | None = None) -> tuple[Resolved | None, Any]:
        """The opening path operations share. ``path`` as ``*at()`` reads it, resolved;
        for an fd the view never saw (``machine_call`` gets ``dir_fd`` and
        ``at_kwargs``), or a passthrough path, the machine's own call is made and
        its result returned as ``(None, result)``. Then the fault hooks have their
        say on ``op``, and a writer on a read-only mount meets EROFS."""
        vpath = self._at(path, dir_fd)
        if vpath is None:
            return None, machine_call(path, dir_fd=dir_fd, **(at_kwargs or {}))
        r = self.resolve(vpath, follow=follow)
        if r.passthrough:
            if writes:
                self.machine_write(r)
            return None, machine_call(r.vpath)
        if op is not None:
            self.hooks.before(self, op, r)
        if writes:
            self._check_writable(r)
        return r, None

    def _existing(self, r: Resolved, vpath2: str | None = None) -> str:
        """The real file a reader of ``r`` reaches; ENOENT if there is none."""
        source = self._read_location(r)
        if source is None:
            raise oserror(errno.ENOENT, r.vpath, vpath2)
        return source


def opaque(r: Resolved) -> None:
    """Hide the real children of ``r`` that its upper directory does not have."""
    if r.lower is None or r.whiteout is None or not machine.leads_to_dir(r.lower):
        return
    for name in machine.listdir(r.lower):
        if not machine.exists(os.path.join(r.upper, name)):
            machine.touch(os.path.join(r.whiteout, name))
