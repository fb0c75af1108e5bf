"""The local pod: N real SSH servers on 127.0.0.1, each a worker with a disk of its own.

Each worker is an asyncssh server running in its own PID and mount
namespaces (``unshare``): its ``/tmp`` and ``/dev/shm`` are directories of its
own disk bound over the machine's, so a file one worker writes to ``/tmp`` is
really not there on another, as on a v4-64; killing a worker's server kills
every process of that worker, as a host that dies. Commands run as this user
with ``HOME`` on the worker's disk. The pod's SSH keys are made fresh for each
pod and the client trusts exactly the host keys it made, so nothing here
touches ``~/.ssh``.

A worker may be made faulty for tests and demonstrations: ``unreachable``
(nothing listens on its port), ``refuses_key`` (it authorises another key),
``freeze`` (every process of it stopped: a host that stops answering) and
``kill`` (a host that dies mid-run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.pod.workers import Worker
from harness.vocabulary import PodError

log = logging.getLogger(__name__)

#: How long a worker's server may take to start listening.
START_TIMEOUT_S = 30.0


class LocalPodError(PodError, RuntimeError):
    """The local pod cannot start on this machine; the message says what is missing."""


@dataclass
class LocalWorker:
    index: int
    disk: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    refuses_key: bool = False
    unreachable: bool = False


@dataclass
class LocalPod:
    """N SSH servers on 127.0.0.1; ``with LocalPod(8, root) as pod: pod.workers``."""

    size: int
    root: Path
    refuses_key: frozenset[int] = frozenset()
    unreachable: frozenset[int] = frozenset()
    #: directories of this machine every worker reaches at the same path (under /tmp they
    #: would be hidden by the worker's own /tmp): a git remote, as a pod reaches origin
    share: tuple[Path, ...] = ()
    #: workers start from a Python with no packages (a TPU VM's image): ``python3`` on their
    #: PATH is a virtualenv made without pip, and nothing of this machine's environment
    bare: bool = False
    #: the pod's own mounts (``--mount``): this machine's directory at the same path on every
    #: worker, read-only (a data disk) or shared read-write (a shared filesystem)
    mounts: tuple[tuple[Path, bool], ...] = ()
    #: the workers' own interpreter (``--python``), where it is not this one: kept reachable
    #: on every worker as the controller's is; a bare pod's image is made from it
    python: WorkerPython | None = None
    user: str = field(default_factory=lambda: _user())
    local: list[LocalWorker] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 1 <= self.size <= 256:
            raise LocalPodError(f"a local pod has 1 to 256 workers, not {self.size}")
        self.root = Path(self.root).resolve()

    # -- keys -------------------------------------------------------------
    @property
    def client_key(self) -> Path:
        return self.root / "keys" / "client"

    @property
    def known_hosts(self) -> Path:
        return self.root / "keys" / "known_hosts"

    def _make_keys(self) -> None:
        import asyncssh

        keys = self.root / "keys"
        keys.mkdir(parents=True, exist_ok=True)
        client = asyncssh.generate_private_key("ssh-ed25519")
        client.write_private_key(str(self.client_key))
        os.chmod(self.client_key, 0o600)
        client.write_public_key(str(keys / "client.pub"))
        stranger = asyncssh.generate_private_key("ssh-ed25519")  # what a refusing worker trusts
        stranger.write_public_key(str(keys / "stranger.pub"))
        host = asyncssh.generate_private_key("ssh-ed25519")
        host.write_private_key(str(keys / "host"))
        os.chmod(keys / "host", 0o600)
        host.write_public_key(str(keys / "host.pub"))
        public = (keys / "host.pub").read_text().strip()
        self.known_hosts.write_text(f"[127.0.0.1]:* {public}\n")

    # -- life -------------------------------------------------------------
    def start(self) -> list[Worker]:
        """Start every worker's server; the workers, in order, once all listen."""
        _check_namespaces()
        self._make_keys()
        keys = self.root / "keys"
        image = self._make_image() if self.bare else None
        share = self.share + ((image,) if image is not None else ()) + \
            tuple(path for path, _ in self.mounts) + (self.python.kept if self.python else ())
        for i in range(self.size):
            disk = self.root / f"worker-{i}"
            for sub in ("tmp", "shm", "home", "srv"):
                (disk / sub).mkdir(parents=True, exist_ok=True)
            os.chmod(disk / "tmp", 0o1777)
            w = LocalWorker(i, disk, refuses_key=i in self.refuses_key,
                            unreachable=i in self.unreachable)
            self.local.append(w)
            if w.unreachable:
                w.port = _closed_port()
                continue
            port_file = disk / "port"
            port_file.unlink(missing_ok=True)  # an earlier start's, on disks kept to reuse
            # the server reads its keys inside its namespace: from its own disk
            sshd = disk / "sshd"
            sshd.mkdir(exist_ok=True)
            shutil.copy(keys / "host", sshd / "host")
            shutil.copy(keys / ("stranger.pub" if w.refuses_key else "client.pub"),
                        sshd / "authorized_keys")
            w.process = subprocess.Popen(
                _namespaced(disk, share, self.mounts, [
                    sys.executable, "-m", "harness.pod.local", "--disk", str(disk),
                    "--host-key", str(sshd / "host"), "--authorized", str(sshd / "authorized_keys"),
                    "--port-file", str(port_file),
                    *(("--image", str(image)) if image is not None else ())]),
                stdin=subprocess.DEVNULL, stdout=open(disk / "server.log", "ab"),  # noqa: SIM115
                stderr=subprocess.STDOUT, env=_server_env(), preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        for w in self.local:
            if w.unreachable:
                continue
            port_file = w.disk / "port"
            while not port_file.exists():
                if w.process is not None and w.process.poll() is not None:
                    self.stop()
                    raise LocalPodError(f"local worker {w.index} did not start (exit "
                                        f"{w.process.returncode}): {_tail(w.disk / 'server.log')}")
                if time.monotonic() > deadline:
                    self.stop()
                    raise LocalPodError(f"local worker {w.index} did not listen within "
                                        f"{START_TIMEOUT_S:g} s: {_tail(w.disk / 'server.log')}")
                time.sleep(0.02)
            w.port = int(port_file.read_text())
        return self.workers

    def _make_image(self) -> Path:
        """The bare workers' Python: this machine's interpreter in a virtualenv with no
        packages, not even pip (made once per pod directory)."""
        image = self.root / "image"
        python = image / "bin" / "python3"
        if not python.exists():
            base = self.python.base if self.python is not None else \
                Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
            made = subprocess.run([str(base if base.exists() else sys.executable), "-m", "venv",
                                   "--without-pip", str(image)], capture_output=True, text=True,
                                  timeout=120)
            if made.returncode != 0:
                raise LocalPodError(f"cannot make the bare workers' Python in {image}: "
                                    f"{made.stderr.strip()[-300:]}")
        return image

    @property
    def workers(self) -> list[Worker]:
        return [Worker(w.index, "127.0.0.1", w.port, self.user) for w in self.local]

    def freeze(self, index: int) -> None:
        """Stop every process of worker ``index`` (SIGSTOP): it no longer answers anything."""
        self._signal_all(index, signal.SIGSTOP)

    def kill(self, index: int) -> None:
        """Worker ``index`` dies: its server and every process it started."""
        w = self.local[index]
        self._signal_all(index, signal.SIGCONT)
        if w.process is not None and w.process.poll() is None:
            w.process.kill()  # unshare --kill-child: the namespace's init, and with it all
            w.process.wait()

    def _signal_all(self, index: int, sig: int) -> None:
        w = self.local[index]
        if w.process is None or w.process.poll() is not None:
            return
        for pid in _namespace_members(w.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def stop(self) -> None:
        for w in self.local:
            if w.process is not None and w.process.poll() is None:
                self._signal_all(w.index, signal.SIGCONT)
                w.process.kill()
                w.process.wait()

    def remove(self) -> None:
        """Delete the workers' disks (what the targets wrote on them)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPod:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class WorkerPython:
    """An interpreter the local pod's workers run instead of this one (``--python``)."""

    executable: Path
    version: tuple[int, int]
    #: its environment and the installation under it: bound on every worker where they
    #: live under the machine's /tmp (each worker's /tmp is its own)
    kept: tuple[Path, ...]
    #: the installation's own interpreter: a bare pod's image is a virtualenv of it
    base: Path

    @property
    def name(self) -> str:
        return f"Python {self.version[0]}.{self.version[1]}"


#: What ``WorkerPython.of`` asks the interpreter: its version, environment and installation.
_DESCRIBE = ("import json, os, sys; print(json.dumps({'version': list(sys.version_info[:2]), "
             "'prefixes': [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, "
             "os.path.dirname(sys.executable))], 'base': os.path.join(sys.base_prefix, 'bin', "
             "'python%d.%d' % sys.version_info[:2])}))")


def worker_python(path: str | os.PathLike[str]) -> WorkerPython:
    """``path`` as the workers' interpreter, asked what it is; a LocalPodError that names
    the path when it is no Python the harness runs on (3.10 or newer)."""
    import json

    where = Path(os.path.abspath(path))
    if not os.access(where, os.X_OK) or where.is_dir():
        raise LocalPodError(f"--python {path}: no such executable")
    try:
        said = subprocess.run([str(where), "-c", _DESCRIBE], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        about = json.loads(said.stdout) if said.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise LocalPodError(f"--python {path}: it did not run as a Python: {exc}") from None
    if about is None:
        raise LocalPodError(f"--python {path}: it did not run as a Python (exit "
                            f"{said.returncode}): {said.stderr.strip()[-300:]}")
    version = tuple(about["version"])
    if version < (3, 10):
        raise LocalPodError(f"--python {path} is Python {version[0]}.{version[1]}: the harness "
                            "runs on 3.10 or newer (a TPU VM's image has 3.10)")
    return WorkerPython(where, (version[0], version[1]),
                        tuple(dict.fromkeys(Path(p) for p in about["prefixes"])), Path(about["base"]))


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def _tail(path: Path, limit: int = 400) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return text[-limit:] or "(empty log)"


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed): connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    from harness.rank.process import die_with_parent

    die_with_parent()


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _namespaced(disk: Path, share: tuple[Path, ...], mounts: tuple[tuple[Path, bool], ...],
                argv: list[str]) -> list[str]:
    """``argv`` as the init of a new PID and mount namespace whose /tmp and /dev/shm are
    the worker's own; what must stay reachable under the machine's /tmp (this worker's
    disk, the Python that runs the harness, the harness itself) is bound back in place,
    as software installed on a VM's image, and nothing else of the machine's /tmp."""
    kept = _kept(disk) + [str(Path(p).resolve()) for p in share]
    keep = sorted({os.path.relpath(p, "/tmp") for p in kept if _under_tmp(p)})
    script = [f"mkdir -p {_q(disk / '.machine-tmp')}",
              f"mount --bind {_q(disk / 'shm')} /dev/shm",
              f"mount --bind /tmp {_q(disk / '.machine-tmp')}",
              f"cd {_q(disk / '.machine-tmp')}",
              f"mount --bind {_q(disk / 'tmp')} /tmp"]
    for rel in keep:
        script.append(f"mkdir -p {_q('/tmp/' + rel)} && mount --bind {_q('./' + rel)} "
                      f"{_q('/tmp/' + rel)}")
    if os.path.isdir("/srv"):  # a VM's own /srv (seed 003's workers live there), as its /tmp
        script += [f"mkdir -p {_q(disk / 'srv')}", f"mount --bind {_q(disk / 'srv')} /srv"]
    for path, read_only in mounts:  # the pod's own disks, where the machine has them
        where = _q(Path(path).resolve())
        script.append(f"mount --bind {where} {where}")
        if read_only:
            script.append(f"mount -o remount,bind,ro {where}")
    script.append("cd /")
    if not _under_tmp(str(disk.resolve())):  # else it is under the machine's /tmp, now hidden
        script.append(f"umount -l {_q(disk / '.machine-tmp')}")
    # not exec'd: the shell stays the namespace's init and reaps the orphans a worker's
    # processes leave (a killed launcher's ranks), as a VM's init does
    script.append(" ".join(_q(a) for a in argv))
    base = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount",
            "--propagation", "private"]
    if os.geteuid() != 0:
        base.insert(1, "--map-root-user")
    return [*base, "sh", "-ec", " && ".join(script)]


def _kept(disk: Path) -> list[str]:
    harness_root = str(Path(__file__).resolve().parents[2])
    return [str(disk.resolve()), os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
            os.path.realpath(os.path.dirname(sys.executable)), harness_root]


def _under_tmp(path: str) -> bool:
    return path.startswith("/tmp/")


def _q(value: object) -> str:
    import shlex

    return shlex.quote(str(value))


@functools.cache
def _check_namespaces() -> None:
    """The local pod needs mount and PID namespaces: say so plainly where there are none."""
    if shutil.which("unshare") is None:
        raise LocalPodError("the local pod needs unshare(1) (util-linux) to give each worker "
                            "its own /tmp; it is not on PATH")
    base = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount",
            "--propagation", "private"] + (["--map-root-user"] if os.geteuid() != 0 else [])
    probe = subprocess.run([*base, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        raise LocalPodError("the local pod needs mount and PID namespaces (root, or user "
                            "namespaces enabled) to give each worker its own /tmp: "
                            f"unshare failed: {probe.stderr.strip()[-300:]}")


def _namespace_members(init_pid: int) -> list[int]:
    """Every process in the PID namespace of ``unshare``'s child (and the child itself)."""
    members = []
    try:
        children = Path(f"/proc/{init_pid}/task/{init_pid}/children").read_text().split()
    except OSError:
        return members
    for child in children:
        ns = _ns_of(int(child))
        if ns is None:
            continue
        for pid in _all_pids():
            if _ns_of(pid) == ns:
                members.append(pid)
    return members


def _ns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


# -- the worker's server (runs inside its namespaces) -----------------------------------

async def _run_command(process: object, disk: Path, image: Path | None = None) -> None:
    """One exec request: ``sh -c COMMAND`` in the worker's home, its output streamed back.

    As sshd without a pty: when the client goes away, the command's pipes close
    under it and it is not signalled.
    """
    import asyncssh

    assert isinstance(process, asyncssh.SSHServerProcess)
    home = disk / "home"
    env = {"HOME": str(home), "USER": _user(), "LOGNAME": _user(),
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "SHELL": "/bin/sh", "HARNESS_LOCAL_POD_DISK": str(disk)}
    if image is None:  # this machine's environment, as the local pod's workers share it
        for name in ("PYTHONPATH", "VIRTUAL_ENV"):
            if name in os.environ:
                env[name] = os.environ[name]
    else:  # a bare worker: its image's python3 first, no trace of this machine's environment
        here = {os.path.realpath(os.path.dirname(sys.executable))}
        rest = [d for d in env["PATH"].split(os.pathsep) if os.path.realpath(d) not in here]
        env["PATH"] = os.pathsep.join([str(image / "bin"), *rest])
    env.update({k: v for k, v in (process.env or {}).items() if isinstance(v, str)})
    command = process.command or "exec /bin/sh"
    child = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", command, cwd=home, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    async def pump(reader: asyncio.StreamReader, writer: object) -> None:
        while chunk := await reader.read(65536):
            try:
                writer.write(chunk)  # type: ignore[attr-defined]
            except (OSError, asyncssh.Error):
                return

    async def feed() -> None:
        assert child.stdin is not None
        try:
            while chunk := await process.stdin.read(65536):
                child.stdin.write(chunk)
                await child.stdin.drain()
        except (OSError, asyncssh.Error, ConnectionError):
            pass
        with contextlib.suppress(OSError, ConnectionError):
            child.stdin.close()

    assert child.stdout is not None and child.stderr is not None
    feeder = asyncio.ensure_future(feed())
    await asyncio.gather(pump(child.stdout, process.stdout), pump(child.stderr, process.stderr))
    code = await child.wait()
    feeder.cancel()
    with contextlib.suppress(OSError, asyncssh.Error):
        if code < 0:
            process.exit_with_signal(signal.Signals(-code).name.removeprefix("SIG"))
        else:
            process.exit(code)


async def _serve(disk: Path, host_key: str, authorized: str, port_file: Path,
                 image: Path | None = None) -> None:
    import asyncssh

    os.chdir(disk / "home")  # SFTP's relative paths start in the home directory, as sshd's do
    server = await asyncssh.create_server(
        asyncssh.SSHServer, "127.0.0.1", 0, server_host_keys=[host_key],
        authorized_client_keys=authorized, encoding=None, sftp_factory=True,
        process_factory=lambda p: _run_command(p, disk, image), allow_scp=True)
    port = server.sockets[0].getsockname()[1]
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(port))
    os.replace(tmp, port_file)
    await server.wait_closed()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one worker of a local pod (an SSH server)")
    parser.add_argument("--disk", required=True, type=Path)
    parser.add_argument("--host-key", required=True)
    parser.add_argument("--authorized", required=True)
    parser.add_argument("--port-file", required=True, type=Path)
    parser.add_argument("--image", default=None, type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_serve(args.disk, args.host_key, args.authorized, args.port_file, args.image))


if __name__ == "__main__":
    main()
