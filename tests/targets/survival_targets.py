"""Rank-side targets for tests/world/test_world_survives.py: each leaves the harness
something that used to stop it (a FIFO, a huge file, a child holding the socket)."""

import os
import time

import torch_xla.core.xla_model as xm


def leaves_a_fifo(directory):
    """A FIFO at a watched path: nobody will ever write to it."""
    os.makedirs(directory, exist_ok=True)
    os.mkfifo(os.path.join(directory, "pipe"))
    with open(os.path.join(directory, "note.txt"), "w") as f:
        f.write("written")
    return "left a fifo"


def leaves_a_sparse_file(directory, size):
    """A file of ``size`` bytes that costs no disk: reading it would cost all of them."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "huge.bin"), "wb") as f:
        f.truncate(size)
    return "left a sparse file"


def leaves_a_symlink(directory):
    """A symlink whose target is a virtual path: on the machine it leads out of the sandbox."""
    os.makedirs(directory, exist_ok=True)
    os.symlink("/nonexistent/elsewhere", os.path.join(directory, "latest"))
    return "left a symlink"


def forks_a_child_that_keeps_the_socket(seconds):
    """Returns at once, but a forked child inherits (and holds) every socket of the rank."""
    if os.fork() == 0:
        time.sleep(seconds)
        os._exit(0)
    return xm.get_ordinal()



class Sleeper:
    """Its pickling sleeps: in the rank, under the world's deadline."""

    def __reduce__(self):
        import time

        time.sleep(60)
        return (str, ("woke",))


class Shell:
    """Unpickling it would run a command: it must never be unpickled in the harness."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class Mine:
    """A class of the target's own module: the harness cannot build it."""

    def __init__(self):
        self.lr = 0.1

    def __repr__(self):
        return "Mine(lr=0.1)"


def returns(kind, marker=""):
    if kind == "sleeper":
        return Sleeper()
    if kind == "shell":
        return {"config": Shell(marker)}
    if kind == "mine":
        return Mine()
    if kind == "huge-int":
        return {"lr": 10 ** 5000}
    if kind == "bomb":
        return Bomb()
    if kind == "ten-million":
        return list(range(10 ** 7))
    raise ValueError(kind)


class Bomb:
    """Pickles to 61 bytes that read back as 10 GB (``bytearray(10**10)``)."""

    def __reduce__(self):
        return (bytearray, (10 ** 10,))


def _daemon(pid_dir):
    """Double fork and setsid: a daemon outside the rank's process group and parentage."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.path.join(pid_dir, f"daemon-{os.getpid()}"), "w") as f:
                f.write(str(os.getpid()))
            time.sleep(120)
            os._exit(0)
        os._exit(0)
    os.wait()


def daemon_then_kill_the_fork_server(pid_dir):
    """Leaves a daemon, then kills the fork server (the subreaper every rank hangs under)."""
    _daemon(pid_dir)
    xm.rendezvous("daemons-started")
    if xm.get_ordinal() == 0:
        leader = os.getppid()
        with open(f"/proc/{leader}/stat") as f:
            server = int(f.read().rsplit(")", 1)[1].split()[1])
        os.kill(server, 9)
    return "done"


def daemon_then_kill_the_leader(pid_dir):
    """Leaves a daemon, then kills the world's leader (python isolation: its parent); the
    daemons, whose subreaper it was, come back to the fork server."""
    _daemon(pid_dir)
    xm.rendezvous("daemons-started")
    if xm.get_ordinal() == 0:
        os.kill(os.getppid(), 9)
    xm.rendezvous("never, the leader is gone")
    return "done"


def daemon_then_wait(pid_dir, seconds):
    """Leaves a daemon, then keeps the world running for ``seconds`` of the machine's time
    (a wait the world's clock cannot see): the harness is killed meanwhile."""
    import select

    _daemon(pid_dir)
    select.select([], [], [], seconds)
    return "done"


def sleepy_sync(inputs):
    """A config sync that takes two minutes of the machine's time (a wait the world's clock
    cannot see, as a slow subprocess or socket is): the user presses Ctrl-C first."""
    import select

    select.select([], [], [], 120)
    return dict(inputs["config"])
