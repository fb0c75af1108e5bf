"""What a unit may ask of the kernel: no capability, no new privileges, no call a rank never
needs.

Run as the machine's root (as CI containers run), a rank used to hold root's capabilities:
it could remount the target's read-only directory, ``mknod`` the machine's disk, reach any
file through ``open_by_handle_at``, or trace the harness. So every unit, right after its
fork (and after it joined its host's namespaces), drops them for good, as bubblewrap and
container runtimes do for the process they start:

- every capability (effective, permitted, inheritable, ambient and the bounding set), with
  ``SECBIT_NOROOT`` locked: uid 0 keeps owning root's files, but an ``exec`` gives it no
  capability back;
- ``no_new_privs``: no setuid program or file capability raises it again;
- a seccomp filter (``FILTER``) answering ``EPERM`` to what bubblewrap, Flatpak and Docker's
  default profile refuse a sandbox (mounts, device nodes, handles, keyrings, bpf, modules,
  kexec, swap, reboot, the clock's setting) whatever capability a process might regain,
  and ``ENOSYS`` to a foreign system-call ABI (an i386 or x32 call made from x86-64), as
  Docker's does, so no other table of numbers slips past it. Under Python isolation, where
  the world shares the machine's processes, attaching ``ptrace`` to another process and
  writing another's memory are refused too (a rank would otherwise trace the harness), and
  a root unit sees the machine's settings (``/proc/sys``) read-only, as kernel isolation's
  ranks do (``namespaces.settings_read_only``).

Where the kernel refuses seccomp (no ``CONFIG_SECCOMP_FILTER``), the capabilities still go;
``unavailable`` says so once per harness process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

from harness.rank.probe import in_a_child

_libc = ctypes.CDLL(None, use_errno=True)

PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 22, 38, 24
PR_SET_SECUREBITS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 28, 47, 4
SECCOMP_MODE_FILTER = 2
SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1 << 0, 1 << 1
_CAPABILITY_VERSION_3 = 0x20080522

# seccomp's BPF: (code, jt, jf, k)
_LD_W_ABS, _JEQ_K, _AND_K, _RET_K, _JGE_K = 0x20, 0x15, 0x54, 0x06, 0x35
_ALLOW, _ERRNO, _ARCH, _NR, _ARG = 0x7FFF0000, 0x00050000, 4, 0, 16

#: The calls refused, by name, and their numbers on each architecture the harness runs on.
_CALLS = {
    "x86_64": {"mount": 165, "umount2": 166, "pivot_root": 155, "swapon": 167,
               "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179,
               "init_module": 175, "finit_module": 313, "delete_module": 176,
               "kexec_load": 246, "kexec_file_load": 320, "open_by_handle_at": 304,
               "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321,
               "userfaultfd": 323, "settimeofday": 164, "clock_settime": 227,
               "iopl": 172, "ioperm": 173, "lookup_dcookie": 212, "vhangup": 153,
               "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
               "fsmount": 432, "fspick": 433, "mount_setattr": 442},
    "aarch64": {"mount": 40, "umount2": 39, "pivot_root": 41, "swapon": 224,
                "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60,
                "init_module": 105, "finit_module": 273, "delete_module": 106,
                "kexec_load": 104, "kexec_file_load": 294, "open_by_handle_at": 265,
                "add_key": 217, "request_key": 218, "keyctl": 219, "bpf": 280,
                "userfaultfd": 282, "settimeofday": 170, "clock_settime": 112,
                "lookup_dcookie": 18, "vhangup": 58, "open_tree": 428, "move_mount": 429,
                "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
                "mount_setattr": 442},
}
#: Calls refused for one argument: ``mknod``'s of a device (mode: arg 1, ``mknodat``'s arg
#: 2), under Python isolation ``ptrace``'s attach (arg 0) and ``process_vm_writev``.
_MKNOD = {"x86_64": ((133, 1), (259, 2)), "aarch64": ((33, 2),)}
_PTRACE = {"x86_64": 101, "aarch64": 117}
_VM_WRITEV = {"x86_64": 311, "aarch64": 271}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000
S_IFMT, S_IFCHR, S_IFBLK = 0o170000, 0o020000, 0o060000
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206


def _program(arch: str, shared_machine: bool) -> list[tuple[int, int, int, int]]:
    """The seccomp filter for ``arch``; ``shared_machine``: Python isolation's extras."""
    deny = (_RET_K, 0, 0, _ERRNO | errno.EPERM)
    allow = (_RET_K, 0, 0, _ALLOW)
    body: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, _NR)]
    if arch == "x86_64":  # x32's numbers are x86-64's with this bit: a table of its own
        body += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _ERRNO | errno.ENOSYS)]
    for number in sorted(_CALLS[arch].values()):
        body += [(_JEQ_K, 0, 1, number), deny]
    for number, arg in _MKNOD[arch]:
        # the mode's type bits: a device is refused; a file, FIFO or socket is made
        body += [(_JEQ_K, 0, 6, number), (_LD_W_ABS, 0, 0, _ARG + 8 * arg),
                 (_AND_K, 0, 0, S_IFMT), (_JEQ_K, 2, 0, S_IFCHR), (_JEQ_K, 1, 0, S_IFBLK),
                 allow, deny]
    if shared_machine:
        body += [(_JEQ_K, 0, 1, _VM_WRITEV[arch]), deny,
                 (_JEQ_K, 0, 4, _PTRACE[arch]), (_LD_W_ABS, 0, 0, _ARG),
                 (_JEQ_K, 1, 0, PTRACE_ATTACH), (_JEQ_K, 0, 1, PTRACE_SEIZE), deny]
    body.append(allow)
    return [(_LD_W_ABS, 0, 0, _ARCH), (_JEQ_K, 1, 0, _AUDIT_ARCH[arch]),
            (_RET_K, 0, 0, _ERRNO | errno.ENOSYS), *body]


def _arch() -> str:
    machine = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _install(program: list[tuple[int, int, int, int]]) -> None:
    code = b"".join(struct.pack("HBBI", *op) for op in program)
    filt = ctypes.create_string_buffer(code)
    prog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(filt))
    buf = ctypes.create_string_buffer(prog)
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_void_p(ctypes.addressof(buf)),
                   0, 0) != 0:
        code_ = ctypes.get_errno()
        raise OSError(code_, f"seccomp: {os.strerror(code_)}")


def _drop_capabilities() -> None:
    """Every capability, for good (see the module's docstring)."""
    # Where this process holds CAP_SETPCAP (root, or in the world's user namespace): lock
    # root out of regaining capabilities at exec, and empty the bounding set.
    _libc.prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0)
    try:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = ctypes.create_string_buffer(struct.pack("Ii", _CAPABILITY_VERSION_3, 0))
    data = ctypes.create_string_buffer(bytes(24))  # two of (effective, permitted, inheritable)
    if _libc.capset(header, data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")


def confine(shared_machine: bool) -> None:
    """In a unit, right after its fork (and after it joined its host's namespaces): no
    capability, no new privileges, and the seccomp filter. ``shared_machine``: Python
    isolation (the world's processes among the machine's). Raises ``OSError`` only when
    the capabilities could not be dropped."""
    if shared_machine and os.geteuid() == 0:
        from harness.rank.namespaces import settings_read_only

        settings_read_only()
    _drop_capabilities()
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"no_new_privs: {os.strerror(code)}")
    arch = _arch()
    if arch in _CALLS and not unavailable():
        _install(_program(arch, shared_machine))


_unavailable: str | None = None


def unavailable() -> str:
    """Why this machine runs units without the seccomp filter ("" when it filters): tried
    once per harness process, in a child."""
    global _unavailable
    if _unavailable is None:
        arch = _arch()
        if arch not in _CALLS:
            _unavailable = f"no system-call table for {arch} here"
            return _unavailable

        def filtered() -> str:
            _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            _install(_program(arch, True))
            # a path that is not there: without the filter ENOENT, whoever asks
            if _libc.mount(None, b"/proc/self/harness-no-such-path", None, 0, None) == 0 \
                    or ctypes.get_errno() != errno.EPERM:
                raise OSError("the filter did not refuse mount")
            return ""

        done, said = in_a_child(filtered)
        _unavailable = "" if done else said
    return _unavailable
