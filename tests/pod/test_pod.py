"""Pod mode against a local pod: real SSH servers on 127.0.0.1, each worker its own disk.

Every step runs for real (connect, install, sync, push, launch, collect) and
every pod failure the issue names has a test with the message a user sees:
an unreachable host, a refused key, a missing commit, a host that stops
answering, a host killed mid-run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.pod.controller import Pod, PodFailure, PodInfo
from harness.pod.local import LocalPod
from harness.pod.matrix import off_pod, plan_pod, run_on_pod
from harness.pod.session import PodSession, SshOptions
from harness.pod.sync import code_source
from harness.pod.workers import HostsFileError, parse_hosts
from harness.runner.cells import INFRA, UNEXERCISED
from harness.scenarios import catalog, load_scenario
from harness.workloads.registry import target

from support import REPO, run_cli

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the local pod needs Linux namespaces")

#: A user's sync function, written as a stranger would: rank 0 writes JSON to /tmp, the
#: others read it after a rendezvous; rank 1 can be told to wait (a pod failure mid-run).
USER_SYNC = '''
import json, os, time
import torch_xla.core.xla_model as xm

def sync(inputs):
    if xm.get_ordinal() == 0:
        with open("/tmp/team_config.json", "w") as f:
            json.dump({"lr": 0.1}, f)
    if xm.get_ordinal() == 1 and os.path.exists(os.path.expanduser("~/linger")):
        time.sleep(60)
    xm.rendezvous("config")
    with open("/tmp/team_config.json") as f:
        return json.load(f)
'''


def _pod(local: LocalPod, **kw: object) -> Pod:
    workers = local.workers
    ssh = SshOptions(key=str(local.client_key), known_hosts=str(local.known_hosts),
                     connect_timeout=10, keepalive_interval=1, keepalive_count=2)
    return Pod(workers, PodInfo("test", "local", len(workers), 1), ssh, python=sys.executable,
               fabric_host="127.0.0.1", **kw)  # type: ignore[arg-type]


# -- workers -------------------------------------------------------------------------------

def test_hosts_file_keeps_line_order_and_names_the_bad_line() -> None:
    workers = parse_hosts("# the pod\nalice@10.0.0.9\n10.0.0.2:2222\n\nbob@[::1]:22\n", "w.txt")
    assert [(w.index, w.host, w.port, w.user) for w in workers] == [
        (0, "10.0.0.9", 22, "alice"), (1, "10.0.0.2", 2222, None), (2, "::1", 22, "bob")]
    assert workers[1].name == "worker 1 (10.0.0.2:2222)"
    with pytest.raises(HostsFileError, match=r"w.txt, line 3: 'not a host!' is not user@host"):
        parse_hosts("a@h1\n\nnot a host!\n", "w.txt")
    with pytest.raises(HostsFileError, match=r"line 2: h1:22 is already worker 0"):
        parse_hosts("h1\nroot@h1:22\n", "w.txt")
    with pytest.raises(HostsFileError, match="line 1: port 70000"):
        parse_hosts("h1:70000\n", "w.txt")
    with pytest.raises(HostsFileError, match="no worker listed"):
        parse_hosts("# nobody\n", "w.txt")


def test_which_catalog_scenarios_run_on_a_pod_and_why_the_others_do_not() -> None:
    reasons = {s.name: off_pod(s) for s in catalog()}
    assert reasons["isolated-tmp"] is None and reasons["baseline"] is None
    assert reasons["divergent-slugs"] is None  # at the rank's start: the engine runs there
    # file faults act through the view over the pod's own files
    assert reasons["partial-write"] is None and reasons["writer-killed"] is None
    assert reasons["empty-file"] == ("fault empty-window: it holds a write back and publishes it "
                                     "by what the other ranks do, which only the simulator's "
                                     "coordinator sees")
    assert reasons["read-only-fs"].startswith("it mounts role handoff-dir with the simulator's")
    assert "pre-empted rank comes back only in the simulator" in off_pod_of(
        {"kind": "preempt", "op": "collective"})


def off_pod_of(fault: dict) -> str | None:
    from harness.faults.plan import check_fault

    return check_fault(fault).off_pod()


# -- the local pod ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pod2(tmp_path_factory: pytest.TempPathFactory) -> LocalPod:
    local = LocalPod(2, tmp_path_factory.mktemp("pod2"))
    local.start()
    yield local
    local.stop()


def test_each_local_worker_has_its_own_tmp_and_home(pod2: LocalPod) -> None:
    marker = f"/tmp/harness-test-{os.getpid()}"
    session = PodSession(pod2.workers, SshOptions(key=str(pod2.client_key),
                                                  known_hosts=str(pod2.known_hosts)))
    try:
        assert session.connect() == []
        w0, w1 = pod2.workers
        assert session.run(w0, f"echo zero > {marker} && echo $HOME").ok
        seen = session.run(w1, f"cat {marker}; echo $HOME")
        assert "No such file" in seen.stderr  # worker 1's /tmp is not worker 0's
        assert not os.path.exists(marker)  # nor the machine's
        homes = {session.run(w, "echo $HOME").stdout for w in (w0, w1)}
        assert len(homes) == 2
        session.put(w1, b"pushed", "inputs/a.txt")
        assert session.get(w1, "inputs/a.txt") == b"pushed"
        assert session.get(w0, "inputs/a.txt") is None
    finally:
        session.close()


def test_pod_run_of_isolated_tmp_fails_naive_sync_as_the_simulator_on_v4_64(tmp_path: Path) -> None:
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    pod = run_cli("pod", "run", "--local", "8", "--scenario", "isolated-tmp", "--target",
                  "naive-sync", "--report-dir", str(tmp_path / "pod"), "--format", "json",
                  cwd=tmp_path, timeout=300)
    sim = run_cli("run", "--scenario", "isolated-tmp", "--target", "naive-sync", "--report-dir",
                  str(tmp_path / "sim"), "--format", "json", cwd=tmp_path)
    assert pod.returncode == sim.returncode == 0, pod.stdout + pod.stderr  # known, as simulated
    assert "pod local-8: local (the torch_xla shim), 8 workers x 1 chip (topology v4-64)" in pod.stdout
    cells = {}
    for side in ("pod", "sim"):
        data = json.loads((tmp_path / side / "latest" / "matrix.json").read_text())
        cells[side] = data["cells"][0]
        assert data["mode"] == side
        if side == "pod":  # every worker's stack, in the report
            import platform

            assert sorted(data["pod"]["stacks"], key=int) == [str(w) for w in range(8)]
            assert {s["python"] for s in data["pod"]["stacks"].values()} == \
                {platform.python_version()}
            # the logs it announces are there, one per worker, even when the ranks are quiet
            logs = [(tmp_path / "pod" / "latest" / f"worker-{w}.log") for w in range(8)]
            assert all("harness: connected\n" in log.read_text() for log in logs)
            assert f"python {platform.python_version()}, torch " in logs[7].read_text()
            assert "worker-N.log (one per worker)" in pod.stdout
            assert "isolation" not in pod.stdout.split("cell in")[1].splitlines()[0]
    assert (cells["pod"]["outcome"], cells["pod"]["verdict"]) == \
        (cells["sim"]["outcome"], cells["sim"]["verdict"]) == ("ERROR", "known")
    assert cells["pod"]["detail"].startswith(
        "'/tmp/temp_config.yaml' is per host on v4-64: ranks 1-7 on hosts 1-7 never see what "
        "rank 0 wrote on host 0 (/tmp is each host's own on a pod); ranks 1-7 raised "
        "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/temp_config.yaml'")
    assert cells["pod"]["detail"] == cells["sim"]["detail"]
    assert cells["pod"]["replay"] == ("harness pod run --local 8 --scenario isolated-tmp "
                                      "--target naive-sync --seed 0")
    calls = [e for e in cells["pod"]["history"] if e["kind"] == "call"]
    assert sorted(e["rank"] for e in calls) == list(range(8))  # every rank's, from its own record
    assert {e["op"] for e in calls} == {"rendezvous"}


# -- the workers' stack ------------------------------------------------------------------------

def _prepare_fails(pod: Pod) -> str:
    """What the PodFailure that ``pod.prepare`` must raise says; the pod closed either way."""
    try:
        with pytest.raises(PodFailure) as caught:
            pod.prepare(None)
    finally:
        pod.close()
    return caught.value.describe()


def _python_seeing(where: Path) -> Path:
    """A worker's Python: this one, but a worker whose home holds ``site`` sees what is there
    first (a worker on which someone installed another torch)."""
    where.mkdir()
    wrapper = where / "python"
    wrapper.write_text(f'#!/bin/sh\n[ -d "$HOME/site" ] && export PYTHONPATH="$HOME/site"\n'
                       f'exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_a_worker_whose_torch_differs_is_a_pod_failure_naming_it(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # shared: under /tmp, a worker would see its own /tmp
    python = _python_seeing(bin_dir)
    with LocalPod(3, tmp_path / "pod", share=(bin_dir,)) as local:
        info = local.local[1].disk / "home" / "site" / "torch-2.8.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.8.0\n")
        pod = _pod(local)
        pod.python = str(python)
        message = _prepare_fails(pod)
    assert message.startswith("checking the workers' Python and packages: worker 1 (")
    assert "its torch is 2.8.0, the other workers' " in message
    assert "(workers 0,2): a pod's workers must run one stack" in message
    assert "worker 0" not in message.split("workers 0,2")[0]
    assert pod.stacks[0].versions["torch"] == pod.stacks[2].versions["torch"] != "2.8.0"


def test_a_tpu_pod_whose_python_cannot_import_torch_xla_names_the_fix(tmp_path: Path) -> None:
    with LocalPod(2, tmp_path / "pod") as local:
        pod = _pod(local)
        pod.fabric_host = None  # as on a real pod: the ranks import the real torch_xla
        message = _prepare_fails(pod)
    for w in (0, 1):
        assert f"worker {w} (" in message
    assert "cannot import torch_xla with PJRT_DEVICE=TPU (ModuleNotFoundError: No module " \
           "named 'torch_xla'): run harness pod setup, or install it there: " in message
    assert "'torch_xla[tpu]==" in message and "storage.googleapis.com/libtpu-releases" in message


# -- pod failures --------------------------------------------------------------------------------

def test_an_unreachable_worker_is_named_and_nothing_starts(tmp_path: Path) -> None:
    with LocalPod(2, tmp_path / "pod", unreachable=frozenset({1})) as local:
        pod = _pod(local)
        message = _prepare_fails(pod)
    assert message.startswith("cannot connect to every worker (1 of 2 answered; the pod run stops "
                              "here, on every worker): worker 1 (")
    assert "connection refused (nothing listens on its SSH port)" in message
    assert "worker 0" not in message


def test_a_refused_key_is_named_and_the_cli_exits_4(tmp_path: Path) -> None:
    with LocalPod(2, tmp_path / "pod", refuses_key=frozenset({0})) as local:
        pod = _pod(local)
        try:
            with pytest.raises(PodFailure, match=r"worker 0 \(.*\): the SSH key was refused"):
                pod.prepare(None)
        finally:
            pod.close()
        hosts = tmp_path / "hosts.txt"
        hosts.write_text("".join(f"{w.user}@{w.host}:{w.port}\n" for w in local.workers))
        out = run_cli("pod", "run", "--hosts", str(hosts), "--ssh-key", str(local.client_key),
                      "--known-hosts", str(local.known_hosts), "--scenario", "isolated-tmp",
                      "--target", "naive-sync", "--report-dir", str(tmp_path / "r"),
                      "--format", "json", cwd=tmp_path)
    assert out.returncode == 4, out.stdout + out.stderr
    assert "the pod failed: cannot connect to every worker (1 of 2 answered" in out.stderr
    assert "worker 0 (" in out.stderr and "the SSH key was refused" in out.stderr
    data = json.loads((tmp_path / "r" / "latest" / "matrix.json").read_text())
    assert [(c["outcome"], c["verdict"]) for c in data["cells"]] == [(INFRA, UNEXERCISED)]


def test_a_commit_missing_from_the_remote_is_named_with_what_to_do(tmp_path: Path) -> None:
    remote, code = tmp_path / "origin.git", tmp_path / "code"
    git = lambda *a, cwd=code: subprocess.run(["git", *a], cwd=cwd, check=True,  # noqa: E731
                                               capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    code.mkdir()
    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "one")
    git("remote", "add", "origin", str(remote))
    git("push", "-q", "origin", "HEAD:refs/heads/main")
    (code / "team_sync.py").write_text(USER_SYNC)
    git("add", "team_sync.py")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "two (not pushed)")
    head = git("rev-parse", "HEAD")
    source = code_source(code, "fetch")
    assert (source.mode, source.commit, source.remote) == ("fetch", head, str(remote))
    with LocalPod(2, tmp_path / "pod", share=(remote,)) as local:
        pod = _pod(local)
        try:
            with pytest.raises(PodFailure) as caught:
                pod.prepare(source)
            git("push", "-q", "origin", "HEAD:refs/heads/main")  # pushed: now every worker has it
            pod.prepare(source)
            assert pod.session.run(local.workers[1], f"cd {source.remote_dir} && git rev-parse "
                                   "HEAD && cat team_sync.py").stdout.startswith(head)
        finally:
            pod.close()
    message = caught.value.describe()
    assert message.startswith("cannot sync the code to every worker: worker 0 (")
    assert f"commit {head[:12]} is not on {remote}: push it (or run with --sync archive)" in message


def _run_user_cell(local: LocalPod, code: Path, during: object, timeout: float = 20.0) -> object:
    """The user's sync on a 2-worker pod, ``during(local)`` called once rank 1 started."""
    (code / "team_sync.py").write_text(USER_SYNC)
    pod = _pod(local)
    scenario = load_scenario(REPO / "scenarios" / "isolated-tmp.yaml")
    user = target(str(code / "team_sync.py") + ":sync", "config-sync")
    plans, not_run = plan_pod([scenario], [user], 0, "2x1", timeout)
    disk1 = local.local[1].disk / "home"
    (disk1 / "linger").write_text("")

    def watch() -> None:
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if list(disk1.glob(".harness-pod/runs/*/cell-1/rank-1.pid")):
                during(local)  # type: ignore[operator]
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    try:
        pod.prepare(code_source(code, "archive"))
        matrix = run_on_pod(pod, plans, 0, not_run)
    finally:
        pod.close()
    return matrix


def test_a_host_that_stops_answering_is_named_and_the_others_are_stopped(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    with LocalPod(2, tmp_path / "pod") as local:
        matrix = _run_user_cell(local, code, lambda pod: pod.freeze(1))
        disk0 = local.local[0].disk / "home"
        report = json.loads(next(disk0.glob(".harness-pod/runs/*/cell-1/host-0.json")).read_text())
        errs = [p.read_text()[-800:] for p in disk0.glob(".harness-pod/runs/*/cell-1/rank-0.stderr")]
    cell = matrix.cells[0]  # type: ignore[attr-defined]
    assert (cell.outcome, cell.verdict) == (INFRA, UNEXERCISED)
    assert cell.detail.startswith("the pod failed during the cell (not the target); the other "
                                  "hosts were stopped: worker 1 ("), cell.detail
    assert "stopped answering" in cell.detail
    # worker 0's launcher and rank were ended by the harness, not left for the deadline
    assert report.get("ended") == "stopped", (report, errs)


def test_a_host_killed_mid_run_is_named_and_what_the_others_did_is_kept(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    with LocalPod(2, tmp_path / "pod") as local:
        matrix = _run_user_cell(local, code, lambda pod: pod.kill(1))
    cell = matrix.cells[0]  # type: ignore[attr-defined]
    assert cell.outcome == INFRA
    assert "worker 1 (" in cell.detail and "stopped answering" in cell.detail
    assert cell.detail.count("worker 0") == 0
    # rank 0 was blocked in the rendezvous its dead peer never reached (as on a pod: a
    # rendezvous has no timeout), so the harness stopped it
    assert cell.detail.endswith("; kept: rank 0 stopped by the harness; rank 1 unknown (on a "
                                "lost worker)"), cell.detail
    assert [r.rank for r in cell.ranks] == [0, 1]


def test_hosts_file_errors_are_usage_errors(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("root@h1\nbad host\n")
    out = run_cli("pod", "run", "--hosts", str(hosts), cwd=tmp_path)
    assert out.returncode == 2
    assert f"{hosts}, line 2: 'bad host' is not user@host[:port]" in out.stderr
    out = run_cli("pod", "run", "--local", "2", "--hosts", str(hosts), cwd=tmp_path)
    assert out.returncode == 2 and "exactly one of --tpu NAME --zone Z, --hosts FILE or --local N" \
        in out.stderr


def test_a_rank_traceback_from_a_worker_starts_at_the_users_code() -> None:
    from harness.reports.diagnosis import hide_own_frames

    lib = "/home/u/.harness-pod/lib/35ab4ad8c288064a/harness"
    text = ("Traceback (most recent call last):\n"
            f'  File "{lib}/rank/bootstrap.py", line 162, in run_reporting\n    value = fn()\n'
            f'  File "{lib}/pod/rank.py", line 80, in <lambda>\n    lambda: target()\n'
            '  File "/home/u/.harness-pod/code/team/sync.py", line 9, in sync\n    f.fileno()\n'
            "ValueError: I/O operation on closed file\n")
    shown = hide_own_frames(text)
    assert "bootstrap.py" not in shown and "rank.py" not in shown
    assert shown.splitlines()[1] == '  File "/home/u/.harness-pod/code/team/sync.py", line 9, in sync'


def test_the_simulator_and_a_local_pod_agree_cell_by_cell(tmp_path: Path) -> None:
    """``harness diff`` of a simulator run and a local pod run at the same topology: no cell
    changes (what each side judged, from what really happened on it)."""
    cells = ["--scenario", "baseline", "--scenario", "isolated-tmp", "--target", "naive-sync",
             "--target", "robust-sync", "--format", "json"]
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    pod = run_cli("pod", "run", "--local", "2", *cells, "--report-dir", str(tmp_path / "pod"),
                  cwd=tmp_path, timeout=300)
    sim = run_cli("run", "-t", "2x1", *cells, "--report-dir", str(tmp_path / "sim"), cwd=tmp_path)
    assert pod.returncode == sim.returncode == 1, pod.stdout + pod.stderr  # baseline[naive-sync]
    diff = run_cli("diff", str(tmp_path / "sim" / "latest" / "matrix.json"),
                   str(tmp_path / "pod" / "latest" / "matrix.json"), cwd=tmp_path)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    outcomes = {(c["scenario"], c["target"]): c["outcome"] for c in json.loads(
        (tmp_path / "pod" / "latest" / "matrix.json").read_text())["cells"]}
    assert outcomes == {("baseline", "naive-sync"): "ERROR", ("baseline", "robust-sync"): "PASS",
                        ("isolated-tmp", "naive-sync"): "ERROR",
                        ("isolated-tmp", "robust-sync"): "PASS"}


def test_a_hung_ranks_stack_is_shown_as_the_simulator_shows_one() -> None:
    from harness.pod.controller import stack_text

    lib = "/h/.harness-pod/lib/135eef5089af22ac/harness"
    dump = ("Current thread 0x00007fc7 (most recent call first):\n"
            '  File "/usr/lib/python3.11/threading.py", line 327 in wait\n'
            f'  File "{lib}/pod/fabric.py", line 210 in _peer_loss_blocks\n'
            f'  File "{lib}/_shims/torch_xla/core/xla_model.py", line 488 in _exchange\n'
            '  File "/home/u/code/sync.py", line 12 in sync\n'
            f'  File "{lib}/pod/rank.py", line 88 in <lambda>\n')
    assert stack_text(dump) == ("Thread 0x00007fc7:\n"
                                '  File "/home/u/code/sync.py", line 12, in sync\n'
                                '  File "/usr/lib/python3.11/threading.py", line 327, in wait')


def test_a_hang_on_a_pod_ends_at_the_deadline_with_every_ranks_stack(tmp_path: Path) -> None:
    """Rank 1 never reaches the rendezvous: the cell is a HANG at its deadline, each rank's
    stack is where it was (the user's lines), and nothing the cell started is left running."""
    from harness.pod.local import _namespace_members

    code = tmp_path / "code"
    code.mkdir()
    with LocalPod(2, tmp_path / "pod") as local:
        matrix = _run_user_cell(local, code, lambda pod: None, timeout=3.0)
        left = {w.index: sorted(Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].decode()
                                for p in _namespace_members(w.process.pid)) for w in local.local}
    cell = matrix.cells[0]  # type: ignore[attr-defined]
    assert cell.outcome == "HANG", cell.detail
    assert cell.detail == ("'/tmp/team_config.json' is per host on 2x1: rank 1 on host 1 never "
                           "sees what rank 0 wrote on host 0 (/tmp is each host's own on a pod); "
                           "HANG at the deadline (3 s): rank 0 in rendezvous 'config'; rank 1 "
                           "before any collective")
    stacks = {r.rank: r.stack or "" for r in cell.ranks}
    assert 'team_sync.py", line 11, in sync' in stacks[0]  # xm.rendezvous("config")
    assert 'team_sync.py", line 10, in sync' in stacks[1]  # time.sleep(60)
    assert "/.harness-pod/lib/" not in stacks[0]  # the harness's own frames left out
    # each worker's init and its SSH server, and nothing else (no process, no zombie)
    assert left == {0: [sys.executable, "sh"], 1: [sys.executable, "sh"]}, left


def test_ctrl_c_during_a_pod_cell_stops_it_on_every_host_and_exits_130(tmp_path: Path) -> None:
    import signal

    code = tmp_path / "code"
    code.mkdir()
    # stuck on the pod only: its fault-free run in the simulator (which teaches the pod run
    # what files the target writes) returns at once
    (code / "stuck.py").write_text(
        "import os, time\nimport torch_xla.core.xla_model as xm\n\n"
        "def run(inputs):\n    if xm.get_ordinal() == 1 and 'HARNESS_LOCAL_POD_DISK' in os.environ:\n"
        "        time.sleep(600)\n    xm.rendezvous('never complete')\n")
    reports = tmp_path / "r"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "pod", "run", "--local", "2", "--target",
         "stuck.py:run", "--scenario", "isolated-tmp", "--timeout", "120", "--report-dir",
         str(reports), "--format", "json", "--keep-disks"],
        cwd=code, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        # as at a terminal: a shell's background job (a CI step, say) starts with SIGINT
        # ignored, and Python then installs no KeyboardInterrupt for it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        deadline = time.monotonic() + 120
        while not list(reports.glob("2*/pod-disks/worker-1/home/.harness-pod/runs/*/cell-1/"
                                    "rank-1.pid")):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)  # rank 0 waits in the rendezvous, rank 1 sleeps
        out, err = proc.communicate(timeout=100)  # well before the cell's 120 s deadline
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    data = json.loads((reports / "latest" / "matrix.json").read_text())
    assert data["summary"].get("interrupted") is True and data["cells"] == []
    hosts = [json.loads(p.read_text()) for p in reports.glob(
        "2*/pod-disks/worker-*/home/.harness-pod/runs/*/cell-1/host-*.json")]
    assert sorted(h["ended"] for h in hosts) == ["stopped", "stopped"]


# -- the workers' own Python (--python) ---------------------------------------------------------

#: A Python 3.10 with the harness's packages and torch 2.9: the pods' stack (.ci/run names the
#: one it makes for its 3.10 lane here).
PY310 = os.environ.get("HARNESS_TEST_PY310")


@pytest.mark.skipif(not PY310, reason="HARNESS_TEST_PY310 names no Python 3.10 with the "
                    "harness's packages (.ci/run sets it to its 3.10 environment)")
def test_a_local_pod_on_the_pods_python_gives_the_simulators_outcomes(tmp_path: Path) -> None:
    """A 3.10 worker under this (newer) controller: the same cells as the simulator, and
    the report says which Python each worker ran."""
    cells = ["--scenario", "isolated-tmp", "--target", "naive-sync", "--target", "robust-sync",
             "--format", "json"]
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    pod = run_cli("pod", "run", "--local", "2", "--python", PY310, *cells, "--report-dir",
                  str(tmp_path / "pod"), cwd=tmp_path, timeout=300)
    sim = run_cli("run", "-t", "2x1", *cells, "--report-dir", str(tmp_path / "sim"), cwd=tmp_path)
    assert pod.returncode == sim.returncode == 0, pod.stdout + pod.stderr  # naive-sync: known
    diff = run_cli("diff", str(tmp_path / "sim" / "latest" / "matrix.json"),
                   str(tmp_path / "pod" / "latest" / "matrix.json"), cwd=tmp_path)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    data = json.loads((tmp_path / "pod" / "latest" / "matrix.json").read_text())
    versions = {w: s["python"] for w, s in data["pod"]["stacks"].items()}
    assert sorted(versions) == ["0", "1"] and all(v.startswith("3.10.") for v in versions.values())
    assert data["pod"]["python"] == PY310
    assert f"Python {versions['0']}, torch " in pod.stdout and " on workers 0-1)" in pod.stdout
    naive = next(c for c in data["cells"] if c["target"] == "naive-sync")
    assert (naive["outcome"], naive["verdict"]) == ("ERROR", "known")
    assert f"--python {PY310} " in naive["replay"]


def test_a_workers_python_that_is_not_one_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    missing = run_cli("pod", "run", "--local", "2", "--python", str(tmp_path / "nope"),
                      "-s", "isolated-tmp", "-T", "naive-sync", cwd=tmp_path)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert f"--python {tmp_path / 'nope'}: no such executable" in missing.stderr
    old = tmp_path / "python3.9"  # says what a 3.9 says of itself
    old.write_text('#!/bin/sh\necho \'{"version": [3, 9], "prefixes": ["/usr"], '
                   '"base": "/usr/bin/python3.9"}\'\n')
    old.chmod(0o755)
    refused = run_cli("pod", "run", "--local", "2", "--python", str(old), "-s", "isolated-tmp",
                      "-T", "naive-sync", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"--python {old} is Python 3.9: the harness runs on 3.10 or newer" in refused.stderr
    assert not (tmp_path / "reports").exists()  # refused before anything was made
