"""A rank that tries every route out of the sandbox the hostile probe found: each route
writes, renames, lists or deletes a sentinel file of the machine's (``sentinel.txt`` in the
working directory, which every host sees as an overlay of the real one). What each route
did is returned, so a test can say which route broke out; the test compares the real file
byte for byte."""

from __future__ import annotations

import fcntl
import mmap
import os
import threading

SENTINEL = "sentinel.txt"
#: A second file of the machine's, opened to be read, then reopened by its descriptor.
READ_ONLY = "read-only.txt"
#: A third, mapped to be read, then reopened through ``/proc/self/map_files``.
MAPPED = "mapped.txt"
SHM_NAME = "harness_escape_probe"


def _try(fn) -> str:
    try:
        fn()
        return "done"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


def _through_link(text: str, tag: str) -> dict[str, str]:
    """A symlink whose text goes through /proc, then a write, a rename, a listing and a
    delete through it."""
    link = f"/tmp/escape-{tag}"
    os.symlink(text, link)
    here = f"{link}/{SENTINEL}"
    out = {
        f"{tag}: write": _try(lambda: open(here, "w").write("overwritten through " + tag)),
        f"{tag}: list": _try(lambda: os.listdir(link)),
    }
    out[f"{tag}: rename"] = _try(lambda: os.rename(here, f"{link}/renamed-{tag}"))
    out[f"{tag}: delete"] = _try(lambda: os.remove(f"{link}/renamed-{tag}"))
    return out


def escape(inputs: dict | None = None) -> dict[str, str]:
    import torch_xla.core.xla_model as xm

    if xm.get_ordinal() != 0:
        return {}
    cwd = os.getcwd()
    out: dict[str, str] = {}
    tid = threading.get_native_id()
    for text, tag in ((f"/proc/self/root{cwd}", "proc-self-root"),
                      ("/proc/self/cwd", "proc-self-cwd"),
                      (f"/proc/{os.getpid()}/root{cwd}", "proc-pid-root"),
                      (f"/proc/thread-self/root{cwd}", "proc-thread-self-root"),
                      (f"/proc/self/task/{tid}/root{cwd}", "proc-task-root")):
        out.update(_through_link(text, tag))
    # A file of the machine's, opened to be read, reopened for writing by its descriptor.
    fd = os.open(f"{cwd}/{READ_ONLY}", os.O_RDONLY)
    out["/dev/fd"] = _try(lambda: open(f"/dev/fd/{fd}", "w").write("via /dev/fd"))
    out["/proc/self/fd"] = _try(lambda: open(f"/proc/self/fd/{fd}", "w").write("via proc fd"))
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD, 200)
    out["F_DUPFD"] = _try(lambda: open(f"/proc/self/fd/{copy}", "w").write("via F_DUPFD"))
    raw = os.open(f"{cwd}/{MAPPED}", os.O_RDONLY)
    mapped = mmap.mmap(raw, 0, prot=mmap.PROT_READ)
    out["map_files"] = _try(lambda: open(_map_file(MAPPED), "w").write("via map_files"))
    mapped.close()
    # A shared memory segment: the machine's /dev/shm must never see it.
    from multiprocessing import shared_memory

    segment = shared_memory.SharedMemory(name=SHM_NAME, create=True, size=4096)
    segment.buf[:5] = b"hello"
    out["shared_memory"] = "seen in the host's /dev/shm" if os.path.exists(
        f"/dev/shm/{SHM_NAME}") else "not seen"
    segment.close()  # left behind on purpose: the harness's sandbox takes it away
    return out


def _map_file(name: str) -> str:
    """``/proc/self/map_files/<range>`` of the mapping of the file ``name``."""
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("/" + name):
                return f"/proc/self/map_files/{line.split()[0]}"
    raise OSError(2, "no mapping of " + name)
