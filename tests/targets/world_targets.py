"""Rank-side targets for tests/world/test_world.py: each misbehaves in one way."""

import json
import os
import signal
import subprocess
import sys
import time

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr


def identity():
    return {"ordinal": xr.global_ordinal(), "world": xr.world_size(), "host": xr.host_index(),
            "local": xr.local_ordinal(), "pid": os.getpid(),
            "worker_id": os.environ.get("TPU_WORKER_ID")}


def rank0_skips_rendezvous():
    if xm.get_ordinal() == 0:
        return "skipped"
    xm.rendezvous("config_save")
    return "synced"


def rank0_sigkilled_before_rendezvous():
    if xm.get_ordinal() == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    xm.rendezvous("config_save")


def rank0_sigkilled_while_others_poll():
    """The peers of a dead writer poll for its flag in Python, outside any collective."""
    if xm.get_ordinal() == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    while True:
        time.sleep(0.01)


def raises_on(rank):
    if xm.get_ordinal() == rank:
        raise ValueError(f"bad config on rank {rank}")
    return "fine"


def exits_hard_on(rank):
    if xm.get_ordinal() == rank:
        os._exit(3)
    return "fine"


def sys_exit(code):
    sys.exit(code)


def prints(text):
    print(f"{text} from {xm.get_ordinal()}")
    print(f"err {xm.get_ordinal()}", file=sys.stderr)
    return True


def stubborn(pid_dir):
    """Ignores SIGTERM, blocks what it can, leaves children everywhere, spins."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGUSR1,
                                               signal.SIGUSR2, signal.SIGHUP})
    pids = [os.getpid()]
    pids.append(subprocess.Popen(["sleep", "300"], start_new_session=True).pid)
    read, write = os.pipe()
    if os.fork() == 0:  # a daemon: new session, double fork, parent exits
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(300)
            os._exit(0)
        os.write(write, str(grandchild).encode())
        os._exit(0)
    pids.append(int(os.read(read, 64)))
    with open(os.path.join(pid_dir, f"rank-{xm.get_ordinal()}.json"), "w") as f:
        json.dump(pids, f)
    while True:
        pass


def spawns_daemon_and_returns(pid_dir):
    """Returns normally but leaves a detached child behind."""
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    with open(os.path.join(pid_dir, f"rank-{xm.get_ordinal()}.json"), "w") as f:
        json.dump([child.pid], f)
    return "left a child"


def shape_mismatch():
    import torch
    size = 3 if xm.get_ordinal() == 1 else 4
    xm.all_reduce(xm.REDUCE_SUM, torch.ones(size))


def op_mismatch():
    import torch
    if xm.get_ordinal() == 2:
        xm.rendezvous("odd_one_out")
    else:
        xm.all_reduce(xm.REDUCE_SUM, torch.ones(2))


def tag_mismatch():
    tag = "config_save" if xm.get_ordinal() != 1 else "config_load"
    return xm.rendezvous(tag, str(xm.get_ordinal()).encode())


def unpicklable_result():
    return lambda: None


def sleeps_in_python(seconds):
    time.sleep(seconds)
    return "woke"


def temp_names():
    """Three names tempfile draws in this rank (files created in the rank's sandboxed /tmp)."""
    import tempfile

    names = []
    for _ in range(3):
        with tempfile.NamedTemporaryFile(dir="/tmp", delete=True) as f:
            names.append(f.name)
    return names


def process_names():
    """What ``ps`` calls this rank and the process that started it (the world's leader;
    None where the rank cannot see it: outside the world's PID namespace)."""
    def name(pid):
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    return name("self"), name(os.getppid()) if os.getppid() else None
