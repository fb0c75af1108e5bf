"""What only the kernel sees: a subprocess, C code that opens paths itself, an import of a
module the target wrote, ``io.FileIO``. Under kernel isolation each lands in its host's
sandbox; under Python isolation each is a documented hole."""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys

import torch_xla.core.xla_model as xm


def outside_python() -> dict:
    """Rank 0 writes /tmp through every route the view does not see; every rank then says
    what its host's /tmp holds."""
    if xm.get_ordinal() == 0:
        subprocess.run(["sh", "-c", "echo x > /tmp/from-sh"], check=True)
        db = sqlite3.connect("/tmp/db.sqlite")
        db.execute("create table t (x)")
        db.commit()
        db.close()
        import torch

        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), "/tmp/model.pt")
        with io.FileIO("/tmp/fileio.txt", "w") as f:
            f.write(b"raw")
        with open("/tmp/written_module.py", "w") as f:
            f.write("VALUE = 42\n")
    xm.rendezvous("written")
    seen = {name: os.path.exists(f"/tmp/{name}") for name in
            ("from-sh", "db.sqlite", "model.pt", "fileio.txt")}
    seen["sh sees from-sh"] = subprocess.run(["sh", "-c", "test -e /tmp/from-sh"]).returncode == 0
    if xm.get_ordinal() == 0:
        sys.path.insert(0, "/tmp")
        import written_module  # noqa: PLC0415 - what the import system finds on this host

        seen["imported"] = written_module.VALUE
    return seen


def reach_the_harness(inputs: dict) -> dict:
    """A rank that tries to freeze the harness (SIGSTOP to the pid it was given), looks
    for it in /proc, and leaves a daemon behind that ignores SIGTERM; says what it saw."""
    import signal

    xm.rendezvous("all started")  # every rank's process is there to be seen
    out: dict = {"ppid": os.getppid(), "pid": os.getpid(), "self": os.readlink("/proc/self")}
    try:
        os.kill(inputs["harness"], signal.SIGSTOP)
        out["sigstop"] = "sent"
    except OSError as exc:
        out["sigstop"] = type(exc).__name__
    out["sees harness"] = os.path.exists(f"/proc/{inputs['harness']}")
    out["procs"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    if xm.get_ordinal() == 0 and os.fork() == 0:  # a daemon, orphaned at once
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open("/proc/self/comm", "w") as comm:
                comm.write(inputs["daemon"])
            while True:
                signal.pause()
        os._exit(0)
    xm.rendezvous("looked")
    return out


def writes_the_machine(inputs: dict) -> dict:
    """Rank 0 changes the machine's directories the way only the kernel sees: a subprocess
    writes a new file in the working directory and in a machine directory given, appends to
    a file there and deletes another; C code (sqlite3, io.FileIO) makes a database and a
    file; a subprocess tries a root-only setting in /proc/sys; Python writes a file that a
    subprocess then reads.
    Then every rank says what its host shows, through Python and through a subprocess."""
    import sqlite3

    def attempt(fn) -> str:
        try:
            fn()
            return "written"
        except (OSError, sqlite3.OperationalError, subprocess.CalledProcessError) as exc:
            return type(exc).__name__

    def sh(script: str) -> None:
        subprocess.run(["sh", "-c", script], check=True, capture_output=True)

    machine = inputs["machine"]
    out = {}
    if xm.get_ordinal() == 0:
        out = {
            "sh into cwd": attempt(lambda: sh("echo x > from-sh.txt")),
            "sh into the machine": attempt(lambda: sh(f"echo x > {machine}/from-sh.txt")),
            "sh appends": attempt(lambda: sh("echo more >> kept.txt")),
            "sh deletes": attempt(lambda: sh("rm gone.txt")),
            "sqlite3 into cwd": attempt(lambda: sqlite3.connect("db.sqlite").execute(
                "create table t (x)")),
            "io.FileIO into cwd": attempt(lambda: io.FileIO("fileio.txt", "w").write(b"raw")),
            "/proc/sys": attempt(lambda: sh("echo 1 > /proc/sys/vm/drop_caches")),
        }
        with open("through-the-view.txt", "w") as f:  # Python's own write, through the view
            f.write("py")
    xm.rendezvous("written")
    out["python sees"] = sorted(os.listdir("."))
    out["python reads kept.txt"] = open("kept.txt").read()
    out["sh sees"] = subprocess.run(["ls"], capture_output=True, text=True).stdout.split()
    out["sh reads python's"] = subprocess.run(["cat", "through-the-view.txt"],
                                              capture_output=True, text=True).stdout
    out["machine dir"] = sorted(os.listdir(machine))
    return out


def shares_through_a_mount(inputs: dict | None = None) -> dict:
    """Rank 0 writes run_cfg/a.txt through Python and run_cfg/b.txt through a subprocess;
    every rank reads each the other way."""
    if xm.get_ordinal() == 0:
        os.makedirs("run_cfg", exist_ok=True)
        with open("run_cfg/a.txt", "w") as f:
            f.write("from python\n")
        subprocess.run(["sh", "-c", "echo 'from sh' > run_cfg/b.txt"], check=True)
    xm.rendezvous("shared")
    return {"sh reads python's": subprocess.run(["cat", "run_cfg/a.txt"], capture_output=True,
                                                text=True).stdout,
            "python reads sh's": open("run_cfg/b.txt").read()}


def held_then_read(inputs: dict | None = None) -> dict | None:
    """Rank 0 writes cfg/cfg.json; the others poll for it (through Python: they are seen
    to look), then read it through Python and through a subprocess."""
    import time

    if xm.get_ordinal() == 0:
        os.makedirs("cfg", exist_ok=True)
        with open("cfg/cfg.json", "w") as f:
            f.write("v1")
        return None
    looked = False
    while not os.path.exists("cfg/cfg.json"):
        looked = True
        time.sleep(0.5)
    return {"python": open("cfg/cfg.json").read(), "looked before": looked,
            "sh": subprocess.run(["cat", "cfg/cfg.json"], capture_output=True,
                                 text=True).stdout}


def stages_then_copies(inputs: dict | None = None) -> str:
    """Rank 0 stages a config in /tmp through Python, then a subprocess copies it into the
    working directory (a new user's sync did just this)."""
    if xm.get_ordinal() == 0:
        with open("/tmp/staged-by-python.json", "w") as f:
            f.write("{}")
        subprocess.run(["cp", "/tmp/staged-by-python.json", "cfg.json"], check=True)
    return "copied"


def moves_between_mounts(inputs: dict | None = None) -> dict:
    """Files and a directory moved between the overlaid checkout and the host's fresh /tmp,
    both ways, then a tree of the checkout removed, all through Python."""
    import shutil

    with open("a.txt", "w") as f:
        f.write("a")
    os.makedirs("tree/sub", exist_ok=True)
    with open("tree/sub/b.txt", "w") as f:
        f.write("b")
    os.replace("a.txt", "/tmp/a.txt")
    os.rename("/tmp/a.txt", "back.txt")
    shutil.move("tree", "/tmp/tree")
    shutil.copytree("/tmp/tree", "again")
    shutil.rmtree("again")
    return {"cwd": sorted(os.listdir(".")), "tmp": sorted(os.listdir("/tmp")),
            "back": open("back.txt").read(), "moved": open("/tmp/tree/sub/b.txt").read()}


def writes_tmp(inputs: dict | None = None) -> dict:
    """Python and a subprocess each write /tmp; says what each met."""
    out = {}
    try:
        with open("/tmp/python.txt", "w") as f:
            f.write("x")
        out["python"] = "written"
    except OSError as exc:
        out["python"] = type(exc).__name__
    done = subprocess.run(["sh", "-c", "echo x > /tmp/sh.txt"], capture_output=True)
    out["sh"] = "written" if done.returncode == 0 else "refused"
    return out


def hello() -> str:
    return f"rank {xm.get_ordinal()}"


def subprocess_writes_cwd(inputs: dict | None = None) -> str:
    """Rank 0's subprocess writes the working directory (fine on a pod); fails loudly here."""
    if xm.get_ordinal() == 0:
        subprocess.run(["sh", "-c", "echo x > from-sh.txt"], check=True)  # its stderr: the rank's
    return "written"


def devices():
    """What of /dev a rank and its subprocess see, and whether a disk of the machine's is
    there to open (kernel isolation: only the harmless devices)."""
    seen = {"dev": sorted(os.listdir("/dev"))}
    for disk in ("/dev/loop0", "/dev/vda", "/dev/sda", "/dev/kmsg"):
        seen[disk] = os.path.exists(disk)
    with open("/dev/null", "w") as f:
        f.write("nothing")
    with open("/dev/urandom", "rb") as f:
        seen["urandom"] = len(f.read(8))
    seen["sh"] = subprocess.run(["sh", "-c", "ls /dev; head -c 3 /dev/zero | wc -c"],
                                capture_output=True, text=True).stdout.split()
    return seen


def writes_home() -> dict:
    """A tool's cache under ~ (torch hub's, XLA's, wandb's), written by Python and by a
    subprocess; what the host then sees there, and the machine's file it read through."""
    cache = os.path.expanduser("~/.cache/tool")
    os.makedirs(cache, exist_ok=True)
    rank = xm.get_ordinal()
    with open(os.path.join(cache, f"py-{rank}"), "w") as f:
        f.write("x")
    subprocess.run(["sh", "-c", f"echo y > {cache}/sh-{rank}"], check=True)
    with open(os.path.expanduser("~/kept.txt")) as f:
        kept = f.read().strip()
    return {"seen": sorted(os.listdir(cache)), "kept": kept}


def hostnames(inputs=None):
    """Every way code asks which host it is on."""
    import platform
    import socket
    import subprocess

    return {"socket": socket.gethostname(), "uname": os.uname().nodename,
            "platform": platform.node(),
            "subprocess": subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()}


_POWERS = r'''
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
harness, readonly, scratch, dev = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

def attempt(fn):
    try:
        rc = fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    if isinstance(rc, int) and rc < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return "done"

class Handle(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint), ("kind", ctypes.c_int), ("bytes", ctypes.c_ubyte * 128)]

def by_handle():  # a handle of /dev (a tmpfs: an overlay's / may give none), then open it
    handle, mount_id = Handle(size=128), ctypes.c_int()
    if libc.name_to_handle_at(-100, b"/dev", ctypes.byref(handle), ctypes.byref(mount_id), 0):
        raise OSError(ctypes.get_errno(), "name_to_handle_at")
    return libc.open_by_handle_at(os.open("/dev", os.O_RDONLY), ctypes.byref(handle), 0)

disk = os.stat("/").st_dev
os.makedirs(f"{scratch}/mnt", exist_ok=True)
print(json.dumps({
    "mount": attempt(lambda: libc.mount(b"tmpfs", f"{scratch}/mnt".encode(), b"tmpfs", 0, None)),
    "remount read-write": attempt(lambda: libc.mount(None, readonly.encode(), None,
                                                     32 | 4096, None)),
    "mknod the machine's disk": attempt(lambda: os.mknod(
        f"{scratch}/disk", 0o600 | 0o060000, os.makedev(os.major(disk), os.minor(disk)))),
    "mknod in /dev": attempt(lambda: os.mknod(dev, 0o600 | 0o020000, os.makedev(1, 3))),
    "a fifo": attempt(lambda: os.mkfifo(f"{scratch}/fifo")),
    "open_by_handle_at": attempt(by_handle),
    "write /proc/sys": attempt(lambda: open("/proc/sys/kernel/domainname", "w").write("x")),
    "remount /proc/sys": attempt(lambda: libc.mount(None, b"/proc/sys", None, 32 | 4096,
                                                    None)),
    "ptrace the harness": attempt(lambda: libc.ptrace(16, harness, 0, 0)),
    "keyring": attempt(lambda: libc.syscall(248, b"user", b"k", b"v", 1, -2)),
}))
'''


def root_powers(inputs: dict) -> dict:
    """What the machine's root could do to the machine, tried by the rank and by a fresh
    process it starts (``exec`` gives root's capabilities back unless they are gone for
    good): each answer is the errno the kernel gave, or "done". ``inputs``: the pid to
    trace, a read-only mount to remount, a directory for the mount and device nodes, and
    the path of a device node in ``/dev``."""
    done = subprocess.run([sys.executable, "-c", _POWERS, str(inputs["harness"]),
                           inputs["readonly"], inputs["scratch"], inputs["dev"]],
                          capture_output=True, text=True, check=True)
    import json

    with open("/proc/self/status") as f:
        capabilities = {line.split(":")[0]: line.split()[1] for line in f
                        if line.startswith(("CapEff", "CapPrm", "CapBnd", "NoNewPrivs"))}
    return {"exec": json.loads(done.stdout), "capabilities": capabilities}
