"""``harness pod``: run the catalog on a pod, and provision the pod it runs on."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from harness.cli import common, stop
from harness.cli.options import REPORTS, SEED_OPTION, SELECTION, VERDICT, Duration, Seconds, options
from harness.vocabulary import MAX_POD_TIMEOUT, POD_DEADLINE, ExitCode, plural


@click.group("pod")
def pod() -> None:
    """Run scenarios on real TPU VMs over SSH (or on a local pod of SSH servers)."""


def _where(f):  # noqa: ANN001, ANN202 - a click decorator stack
    """Which pod, and how to reach it: the options ``pod run`` and ``pod setup`` share."""
    for decorator in reversed([
        click.option("--tpu", default=None, metavar="NAME", help="A Cloud TPU VM (its workers "
                     "found with gcloud compute tpus tpu-vm describe); needs --zone."),
        click.option("--zone", default=None, help="The TPU's zone."),
        click.option("--project", default=None, help="The TPU's project (default: gcloud's)."),
        click.option("--hosts", "hosts_file", default=None, type=click.Path(dir_okay=False),
                     help="A file of workers, one user@host[:port] per line, in worker order."),
        click.option("--local", "local", default=None, type=click.IntRange(1, 64), metavar="N",
                     help="A local pod: N SSH servers on 127.0.0.1, each its own disk and "
                          "/tmp, the shim standing in for torch_xla."),
        click.option("--bare", is_flag=True, default=False,
                     help="A local pod whose workers start from a Python with no packages, as "
                          "a TPU VM made minutes ago (set them up with --setup)."),
        click.option("--disks", "disks", default=None, type=click.Path(file_okay=False),
                     help="A local pod: keep its workers' disks here and find them here next "
                          "time (the same pod: what a setup installed stays)."),
        click.option("--chips", default=None, type=click.IntRange(1, 16),
                     help="Ranks per worker (chips per host). Default: 1 on a local pod, 4 "
                          "otherwise."),
        click.option("--ssh-key", default=None, type=click.Path(exists=True, dir_okay=False),
                     help="The private key to log in with (default: the agent and ~/.ssh's)."),
        click.option("--known-hosts", default=None, type=click.Path(exists=True, dir_okay=False),
                     help="Host keys to trust (default: ~/.ssh/known_hosts)."),
        click.option("--trust-new-hosts", is_flag=True, default=False,
                     help="Do not check the workers' host keys: for TPU VMs made minutes ago, "
                          "whose keys nobody could have recorded (the nightly job). Not for a "
                          "pod you reuse."),
        click.option("--external-ip", is_flag=True, default=False,
                     help="--tpu: reach the workers at their external addresses (from outside "
                          "the TPU's network, e.g. a GitHub-hosted runner)."),
        click.option("--user", default=None, help="The login user where the hosts file names "
                     "none."),
        click.option("--python", "python", default=None,
                     help="The workers' Python. Default: the environment harness pod setup "
                          "made where every worker has one, else python3 (a local pod that is "
                          "not --bare: this one). A local pod's workers run this interpreter "
                          "(a 3.10 one, as a TPU VM's); --bare: their image is made from it, "
                          "and --setup installs its environment's packages, not this one's."),
        click.option("--connect-timeout", default=30.0, show_default=True,
                     type=click.FloatRange(1, 600), help="Seconds each worker has to answer."),
        click.option("--keepalive", default=10.0, show_default=True,
                     type=click.FloatRange(0.5, 600),
                     help="Seconds between keepalives; a worker silent for 3 is lost."),
    ]):
        f = decorator(f)
    return f


def _setup_options(f):  # noqa: ANN001, ANN202 - a click decorator stack
    f = click.option("--requirements", "requirements", default=None,
                     type=click.Path(dir_okay=False),
                     help="Your packages, installed on every worker beside the stack: a pip "
                          "requirements file (packages only) or your pyproject.toml (its "
                          "[project] dependencies).")(f)
    f = click.option("--torch", "torch_version", default=None, metavar="VERSION",
                     help="A TPU pod: the torch and torch_xla[tpu] release to install "
                          "(default 2.9.0, the one the shim follows). A local pod gets this "
                          "machine's torch.")(f)
    return f


@dataclasses.dataclass
class _Where:
    """The pod the options chose, once started (a local pod) or found (a real one)."""

    workers: list[Any]
    info: Any
    ssh: Any
    python: str | None
    replay: tuple[str, ...]
    local_pod: Any = None
    wheelhouse: Path | None = None


def _pod_mounts(texts: tuple[str, ...], local: bool) -> tuple[Any, ...]:
    """``--mount PATH=KIND`` as PodMounts; a usage error naming the bad one."""
    from harness.pod.mounts import parse_all

    try:
        mounts = parse_all(texts)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--mount'") from None
    for m in mounts if local else ():
        if not os.path.isdir(m.path):
            raise click.BadParameter(f"{m}: a local pod mounts this machine's {m.path}, and "
                                     "there is no such directory", param_hint="'--mount'")
    return mounts


@contextlib.contextmanager
def _opened(opts: dict[str, Any], run_dir: Path, share: tuple[Path, ...] = (),
            setup_wanted: bool = False, mounts: tuple[Any, ...] = ()) -> Iterator[_Where]:
    """Start (a local pod) or find (a real one) the pod ``opts`` name; a local pod is
    stopped after, and its disks removed unless kept."""
    from harness.pod.session import SshOptions

    chosen = [n for n, k in (("--tpu", "tpu"), ("--hosts", "hosts_file"), ("--local", "local"))
              if opts[k] is not None]
    if len(chosen) != 1:
        raise click.UsageError("say which pod: exactly one of --tpu NAME --zone Z, "
                               "--hosts FILE or --local N" +
                               (f" (got {' and '.join(chosen)})" if chosen else ""))
    for flag, key in (("--bare", "bare"), ("--disks", "disks")):
        if opts[key] and opts["local"] is None:
            raise click.UsageError(f"{flag} is for a local pod (--local N): a real pod's "
                                   "workers are what they are")
    local, chips = opts["local"], opts["chips"]
    if local is None:
        workers, info, replay = _real_workers(opts["tpu"], opts["zone"], opts["project"],
                                              opts["hosts_file"], opts["user"], chips,
                                              opts["external_ip"])
        ssh = SshOptions(key=opts["ssh_key"], known_hosts=opts["known_hosts"],
                         connect_timeout=opts["connect_timeout"],
                         keepalive_interval=opts["keepalive"],
                         check_host_keys=not opts["trust_new_hosts"])
        yield _Where(workers, info, ssh, opts["python"], replay)
        return
    from harness.pod.controller import PodInfo
    from harness.pod.local import LocalPod, LocalPodError

    theirs = _local_python(opts)
    wheelhouse = None
    if setup_wanted:
        from harness.pod import wheelhouse as houses

        if theirs is None:
            click.echo("making the wheelhouse of this environment (once per set of versions)",
                       err=True)
            wheelhouse = houses.build(houses.default_dir())
        else:  # never this controller's wheels: they are built for its own Python
            click.echo(f"making the wheelhouse of {theirs.executable}'s environment "
                       f"({theirs.name}; once per set of versions)", err=True)
            try:
                wheelhouse = houses.build_for(theirs.executable, theirs.version)
            except houses.WheelhouseError as exc:
                raise click.BadParameter(str(exc), param_hint="'--python'") from None
            if houses.version_in(wheelhouse, "torch") is None:
                raise click.BadParameter(
                    f"{theirs.executable}'s environment has no torch to install on the "
                    f"workers: install the one they should run there first ({theirs.executable} "
                    "-m pip install torch==2.9.0)", param_hint="'--python'")
        share = (*share, wheelhouse)
    disks = Path(opts["disks"]).resolve() if opts["disks"] else run_dir / "pod-disks"
    local_pod = LocalPod(local, disks, share=share, bare=opts["bare"], python=theirs,
                         mounts=tuple((Path(m.path), m.kind == "ro") for m in mounts))
    try:
        try:
            workers = local_pod.start()
        except LocalPodError as exc:
            click.echo(f"the pod failed: {exc}", err=True)
            sys.exit(ExitCode.POD_FAILED)
        what = "bare: a Python with no packages" if opts["bare"] else "the torch_xla shim"
        info = PodInfo(f"local-{local}", f"local ({what})", local, chips or 1)
        ssh = SshOptions(key=str(local_pod.client_key), known_hosts=str(local_pod.known_hosts),
                         connect_timeout=opts["connect_timeout"],
                         keepalive_interval=opts["keepalive"])
        # a bare pod's cells run with what its setup made, from the image (--python's)
        python = None if opts["bare"] else str(theirs.executable) if theirs else sys.executable
        replay = ("harness", "pod", "run", "--local", str(local),
                  *(("--chips", str(chips)) if chips else ()),
                  *(("--python", str(opts["python"])) if theirs else ()),
                  *(("--bare", "--setup") if opts["bare"] else ()))
        yield _Where(workers, info, ssh, python, replay, local_pod, wheelhouse)
    finally:
        local_pod.stop()
        if not opts["keep_disks"] and not opts["disks"]:
            local_pod.remove()


def _local_python(opts: dict[str, Any]) -> Any:
    """A local pod's ``--python``: the interpreter its workers run, asked what it is (once:
    the commands call this before they make anything, so a bad one leaves nothing)."""
    if opts["local"] is None or opts["python"] is None:
        return None
    if "worker_python" not in opts:
        from harness.pod.local import LocalPodError, worker_python

        try:
            opts["worker_python"] = worker_python(opts["python"])
        except LocalPodError as exc:
            raise click.BadParameter(str(exc), param_hint="'--python'") from None
    return opts["worker_python"]


def _setup_plan(where: _Where, torch_version: str | None, requirements: str | None) -> Any:
    from harness.pod import setup

    try:
        user = setup.read_requirements(requirements) if requirements else ()
    except setup.SetupError as exc:
        raise click.BadParameter(str(exc), param_hint="'--requirements'") from None
    if where.wheelhouse is not None:
        if torch_version is not None:
            raise click.UsageError("--torch is for a TPU pod: a local pod's workers get this "
                                   "machine's torch, from its own wheels")
        return setup.for_wheelhouse(where.wheelhouse, user)
    return setup.for_tpu(torch_version or setup.TORCH_XLA_VERSION, user)


def _set_up(pod: Any, plan: Any) -> None:
    """``harness pod setup`` on ``pod``, said on stderr as it goes and per worker after."""
    started = time.monotonic()
    click.echo(f"pod {pod.info.name}: setting up {plural(len(pod.workers), 'worker')} (wait for apt, "
               "a virtualenv, pip; a worker already set up only checks it)", err=True)
    outcomes = pod.setup(plan)
    for w in pod.workers:
        click.echo(f"  {w.name}: {outcomes[w.index].describe()}", err=True)
    click.echo(f"set up in {time.monotonic() - started:.1f} s; the cells run with "
               f"~/{pod.python}", err=True)


@pod.command("run")
@_where
@options(SELECTION, [SEED_OPTION])
@click.option("--timeout", default=None, type=Seconds(MAX_POD_TIMEOUT),
              help="Every cell's deadline, in seconds of real time (a pod has no world clock). "
                   f"Default: the scenario's, at most {POD_DEADLINE:g} s.")
@options(VERDICT, REPORTS)
@click.option("--mount", "mount_texts", multiple=True, metavar="PATH=KIND",
              help="What this pod's own filesystems are, so the scenarios that need them run: "
                   "ro (a read-only disk on every worker, seed 004's /mnt/data), gcsfuse (a "
                   "bucket through Cloud Storage FUSE), shared (a read-write shared "
                   "filesystem). Checked on every worker first. A local pod mounts this "
                   "machine's PATH there (gcsfuse: shared by every worker, POSIX, no FUSE).")
@click.option("--setup", "do_setup", is_flag=True, default=False,
              help="Run harness pod setup first: install the stack on every worker (seconds "
                   "where it is already there).")
@_setup_options
@click.option("--sync", "sync_mode", default="auto", show_default=True,
              type=click.Choice(["auto", "fetch", "archive"]),
              help="How your code reaches the workers: fetch the pushed commit on each (seed "
                   "002), or send an archive of the working tree. auto: fetch when it can.")
@click.option("--keep-disks", is_flag=True, default=False,
              help="A local pod: keep its workers' disks (beside the reports) to look at.")
@click.option("--verbose", "-v", is_flag=True, default=False,
              help="Stream every worker's output, prefixed [wN] (always in the per-worker logs).")
def run_command(scenarios: tuple[str, ...], targets: tuple[str, ...], workload: str,
                data: str | None, config_file: str | None, checker: str | None, seed: int,
                timeout: float | None, require_exercised: bool, report_dir: str, formats: tuple[str, ...],
                baseline: str | None, mount_texts: tuple[str, ...], do_setup: bool,
                torch_version: str | None,
                requirements: str | None, sync_mode: str, verbose: bool,
                **where_opts: Any) -> None:
    """Run scenarios x targets on a pod: the same cells, checkers and reports as harness
    run, marked mode: pod.

    \b
    harness pod run --local 8 --scenario isolated-tmp --target naive-sync
    harness pod run --local 4 --bare --setup --scenario isolated-tmp --target naive-sync
    harness pod run --hosts workers.txt --ssh-key ~/.ssh/tpu --target train.py:sync_config
    harness pod run --tpu my-v4-64 --zone us-central2-b --setup --scenario baseline

    Exit codes: 0 no unexpected cell, 1 some cell is unexpected, 2 usage error,
    3 internal error, 4 the pod failed (a worker unreachable, a key refused, a
    commit missing, a setup that failed, a host that stopped answering).
    """
    from harness.pod.controller import Pod, PodFailure
    from harness.pod.matrix import infra_matrix, plan_pod, run_on_pod, topology_name
    from harness.pod.sync import SyncError, code_source
    from harness.reports import write_run

    common.need("asyncssh")
    if (torch_version or requirements) and not do_setup:
        raise click.UsageError("--torch and --requirements say what --setup installs: add "
                               "--setup (or run harness pod setup first)")
    pod_mounts = _pod_mounts(mount_texts, where_opts["local"] is not None)
    known = common.known_from(baseline)
    scenario_list = common.scenarios_from(scenarios, data, config_file)
    target_list = common.targets_from(targets, workload, checker, data, config_file)
    files = common.report_formats(formats)
    _local_python(where_opts)
    run_dir = common.new_run_dir(report_dir)
    echo = (lambda line: click.echo(line, err=True)) if verbose else None

    code = None
    if any(not t.builtin for t in target_list):
        try:
            code = code_source(os.getcwd(), sync_mode)
        except SyncError as exc:
            raise click.BadParameter(str(exc), param_hint="'--sync'") from None
    # a git remote on this machine is reachable from the local pod, as origin is from a pod
    share = (Path(code.remote),) if code is not None and code.remote is not None and \
        os.path.isdir(code.remote) else ()
    with _opened(where_opts, run_dir, share, do_setup, pod_mounts) as where:
        plan = _setup_plan(where, torch_version, requirements) if do_setup else None
        info = where.info
        topology = topology_name(len(where.workers), info.chips_per_worker)
        scratch = f"harness-pod-{run_dir.name}"  # the run's own directory on a writable mount
        plans, not_run = plan_pod(scenario_list, target_list, seed, topology, timeout,
                                  pod_mounts, scratch)
        replay = (*where.replay, *(a for m in pod_mounts for a in ("--mount", str(m))))
        for name, why in not_run.items():
            click.echo(f"not run on a pod: {name}: {why}", err=True)
        if not plans:
            raise click.UsageError("no cell to run on a pod: every chosen scenario needs the "
                                   "simulator (see above)")
        pod = Pod(where.workers, info, where.ssh, python=where.python,
                  fabric_host="127.0.0.1" if where.local_pod is not None else None,
                  log_dir=run_dir, echo=echo, mounts=pod_mounts, scratch=scratch)
        try:
            try:
                if plan is not None:
                    _set_up(pod, plan)
                click.echo(f"pod {info.name}: connecting to {plural(len(where.workers), 'worker')}, "
                           "installing the harness" + (" and your code" if code is not None
                                                       else ""), err=True)
                pod.prepare(code)
                done = iter(range(1, len(plans) + 1))
                matrix = run_on_pod(pod, plans, seed, not_run, known, replay,
                                    on_cell=lambda c: click.echo(
                                        f"[{next(done)}/{len(plans)}] {c.scenario}[{c.target}]: "
                                        f"{c.outcome} ({c.verdict}) {c.duration_s:.1f} s", err=True))
            except PodFailure as failure:
                click.echo(f"the pod failed: {failure.describe()}", err=True)
                matrix = infra_matrix(plans, failure, seed, pod, not_run)
        finally:
            pod.close()
    with stop.held():  # a Ctrl-C now waits for the reports
        paths = write_run(matrix, run_dir, [f for f in files if f != "terminal"] or ["json"])
    click.echo(f"pod {info.name}: {info.accelerator}, {plural(info.workers, 'worker')} x "
               f"{info.chips_per_worker} chip{'s' if info.chips_per_worker != 1 else ''} "
               f"(topology {topology})")
    common.print_matrix(matrix, verbose=False)
    common.print_paths(paths)
    click.echo(f"{'logs':>9}: {run_dir}/worker-N.log (one per worker)")
    common.exit_for(matrix, require_exercised)


@pod.command("setup")
@_where
@_setup_options
@click.option("--log-dir", default="reports/setup", show_default=True,
              type=click.Path(file_okay=False),
              help="Where each worker's log is written (worker-N.log).")
@click.option("--verbose", "-v", is_flag=True, default=False,
              help="Stream every worker's output, prefixed [wN] (always in the per-worker logs).")
def setup_command(torch_version: str | None, requirements: str | None, log_dir: str,
                  verbose: bool, **where_opts: Any) -> None:
    """Install the stack a cell needs on every worker at once: torch and torch_xla[tpu]
    (libtpu from Google's index), the harness's dependencies and your requirements, in a
    virtualenv keyed by what it holds. A worker already set up changes nothing.

    \b
    harness pod setup --tpu my-v4-64 --zone us-central2-b --requirements requirements.txt
    harness pod setup --local 4 --bare --disks /tmp/my-pod

    Exit codes: 0 every worker set up, 2 usage error, 4 the pod failed (a worker
    unreachable, apt busy past its wait, pip failing three times).
    """
    from harness.pod.controller import Pod, PodFailure

    common.need("asyncssh")
    _local_python(where_opts)
    logs = Path(log_dir)
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(f"cannot make {log_dir}: {exc.strerror}",
                                 param_hint="'--log-dir'") from None
    echo = (lambda line: click.echo(line, err=True)) if verbose else None
    if where_opts["local"] is not None and not where_opts["disks"]:
        click.echo("note: this local pod's disks go when the command ends; pass --disks DIR "
                   "to set up a pod you run later", err=True)
    with _opened({**where_opts, "keep_disks": False}, logs, setup_wanted=True) as where:
        plan = _setup_plan(where, torch_version, requirements)
        pod = Pod(where.workers, where.info, where.ssh, python=where.python,
                  fabric_host="127.0.0.1" if where.local_pod is not None else None,
                  log_dir=logs, echo=echo)
        try:
            _set_up(pod, plan)
            pod.connect()
            pod.check_stacks()
        except PodFailure as failure:
            click.echo(f"the pod failed: {failure.describe()}", err=True)
            click.echo(f"{'logs':>9}: {logs}/worker-N.log (one per worker)", err=True)
            sys.exit(ExitCode.POD_FAILED)
        finally:
            pod.close()
    for w in where.workers:
        s = pod.stacks.get(w.index)
        click.echo(f"{w.name}: {s.describe() if s is not None else '?'}")
    click.echo(f"{'logs':>9}: {logs}/worker-N.log (one per worker)")


def _real_workers(tpu: str | None, zone: str | None, project: str | None,
                  hosts_file: str | None, user: str | None, chips: int | None,
                  external: bool = False) -> Any:
    from harness.pod.controller import PodInfo
    from harness.pod.workers import HostsFileError, read_hosts

    if hosts_file is not None:
        try:
            workers = read_hosts(hosts_file)
        except HostsFileError as exc:
            raise click.BadParameter(str(exc), param_hint="'--hosts'") from None
        if user is not None:
            workers = [dataclasses.replace(w, user=w.user or user) for w in workers]
        info = PodInfo(Path(hosts_file).name, "unknown (a hosts file)", len(workers), chips or 4)
        return workers, info, ("harness", "pod", "run", "--hosts", hosts_file)
    if zone is None:
        raise click.UsageError("--tpu needs --zone")
    from harness.pod import cloud

    try:
        node = cloud.describe(str(tpu), zone, project, external=external)
    except cloud.CloudError as exc:
        click.echo(f"the pod failed: {exc}", err=True)
        sys.exit(ExitCode.POD_FAILED)
    workers = [dataclasses.replace(w, user=w.user or user) for w in node.workers]
    info = PodInfo(node.name, node.accelerator_type, len(workers), chips or 4,
                   runtime=node.runtime_version)
    replay = ("harness", "pod", "run", "--tpu", str(tpu), "--zone", zone,
              *(("--project", project) if project else ()))
    return workers, info, replay


# --- provisioning through gcloud (harness.pod.cloud): provision, release, sweep ---------

def _cloud_failed(exc: Exception) -> None:
    """A CloudError as one line on stderr, exit 4: the cloud failed, not the target."""
    click.echo(f"harness pod: {' '.join(str(exc).split())}", err=True)
    raise SystemExit(ExitCode.POD_FAILED)


def _cloud_where(f):  # noqa: ANN001, ANN202 - a click decorator stack
    f = click.option("--project", default=None, help="Google Cloud project (default: gcloud's).")(f)
    f = click.option("--zone", required=True, help="The TPU's zone, e.g. us-central2-b.")(f)
    return f


@pod.command("provision")
@click.option("--name", required=True, help="Name of the queued resource and of its TPU node.")
@_cloud_where
@click.option("--type", "accelerator_type", required=True, help="Accelerator type, e.g. v4-64.")
@click.option("--runtime-version", required=True, help="TPU VM runtime, e.g. tpu-ubuntu2204-base.")
@click.option("--ttl", default="6h", show_default=True, type=Duration(),
              help="Label it harness-ttl=<now + TTL>: `harness pod sweep` deletes it after that.")
@click.option("--wait", "wait_s", default="60m", show_default=True, type=Duration(),
              help="Give up (and delete the request) if it is not ACTIVE by then.")
@click.option("--poll", "poll_s", default="30s", show_default=True, type=Duration(),
              help="How often to ask for the request's state.")
@click.option("--spot", is_flag=True, help="Spot TPUs: cheaper, and may be pre-empted at any time.")
@click.option("--ssh-public-key", type=click.Path(dir_okay=False), default=None,
              help="Put this key in the TPU's ssh-keys metadata (with --ssh-user), for `pod run`.")
@click.option("--ssh-user", default=None, help="The user that key logs in as on every worker.")
@click.option("--startup-script", type=click.Path(dir_okay=False), default=None,
              help="Every worker runs this file as root when it boots (its startup-script "
                   "metadata), e.g. examples/pod/startup-tpu.sh, which installs torch_xla.")
def provision_command(name: str, zone: str, project: str | None, accelerator_type: str,
                      runtime_version: str, ttl: float, wait_s: float, poll_s: float, spot: bool,
                      ssh_public_key: str | None, ssh_user: str | None,
                      startup_script: str | None) -> None:
    """Request a TPU as a queued resource and wait until it is ACTIVE (exit 4 if not)."""
    from harness.inputs import InputError, read_text
    from harness.pod.cloud import CloudError, provision, ssh_keys_entry

    script = None
    if startup_script is not None:
        try:  # a metadata value holds at most 256 KiB
            script = read_text(startup_script, 256 << 10, "a startup script")
        except InputError as exc:
            raise click.BadParameter(str(exc), param_hint="'--startup-script'") from None

    ssh_key = None
    if (ssh_public_key is None) != (ssh_user is None):
        raise click.UsageError("--ssh-public-key and --ssh-user go together")
    if ssh_public_key is not None and ssh_user is not None:
        try:
            ssh_key = ssh_keys_entry(ssh_user, ssh_public_key)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--ssh-public-key' / '--ssh-user'") from None
    if ttl <= wait_s:
        raise click.BadParameter(f"{ttl:g}s must be longer than --wait ({wait_s:g}s), or the sweep "
                                 "could delete the TPU while this run waits for it",
                                 param_hint="'--ttl'")
    try:
        node = provision(name, zone, accelerator_type, runtime_version, project=project,
                         ttl=f"{ttl:g}s", wait_s=wait_s, spot=spot, poll_s=poll_s, ssh_key=ssh_key,
                         startup_script=script)
    except CloudError as exc:
        _cloud_failed(exc)
    hosts = ", ".join(w.host for w in node.workers)
    click.echo(f"{node.name} in {node.zone}: {node.accelerator_type}, {node.state}, "
               f"{plural(len(node.workers), 'worker')}: {hosts}")


@pod.command("release")
@click.option("--name", required=True, help="The queued resource and TPU node to delete.")
@_cloud_where
def release_command(name: str, zone: str, project: str | None) -> None:
    """Delete the TPU node, then its queued resource (either may be gone already)."""
    from harness.pod.cloud import CloudError, release

    try:
        deleted = release(name, zone, project)
    except CloudError as exc:
        _cloud_failed(exc)
    click.echo(f"deleted {', '.join(deleted)}" if deleted else f"nothing named {name} in {zone}")


@pod.command("sweep")
@_cloud_where
@click.option("--prefix", default="harness-", show_default=True,
              help="Only names starting with this are touched.")
def sweep_command(zone: str, project: str | None, prefix: str) -> None:
    """Delete the TPUs and queued resources named PREFIX... whose harness-ttl has passed."""
    from harness.pod.cloud import CloudError, sweep

    try:
        deleted = sweep(zone, project, prefix=prefix)
    except CloudError as exc:
        _cloud_failed(exc)
    click.echo(f"deleted {', '.join(deleted)}" if deleted else
               f"nothing past its ttl named {prefix}* in {zone}")
