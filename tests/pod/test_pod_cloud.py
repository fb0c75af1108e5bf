"""Provisioning through gcloud (harness.pod.cloud, `harness pod provision|release|sweep`).

A fake ``gcloud`` written into tmp_path stands in for Google's: a small Python script that
logs its argv and answers from a JSON file the test writes (answers per command, taken in
order, the last one repeated). The harness finds it as it finds the real one, on PATH or
through HARNESS_GCLOUD, and runs it as a real subprocess.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.durations import parse_duration
from harness.pod import cloud
from harness.pod.cloud import CloudError

from support import REPO, run_cli

FAKE = r'''#!{python}
import json, sys
from pathlib import Path
here = Path(__file__).resolve().parent
args = sys.argv[1:]
with open(here / "log.jsonl", "a") as f:
    f.write(json.dumps(args) + "\n")
for a, b in zip(args, args[1:]):
    if a == "--metadata-from-file":  # gone once gcloud returns: keep what it said
        said = {}
        for pair in b.split(","):
            key, _, path = pair.partition("=")
            said[key] = Path(path).read_text()
        with open(here / "files.jsonl", "a") as f:
            f.write(json.dumps(said) + "\n")
words = [a for a in args if not a.startswith("-")]
key = " ".join(words[2:4])  # compute tpus <group> <verb>
state = json.loads((here / "state.json").read_text())
queue = state.get(key)
if not queue:
    sys.stderr.write("fake gcloud: no answer for " + key + "\n")
    sys.exit(2)
answer = queue.pop(0) if len(queue) > 1 else queue[0]
(here / "state.json").write_text(json.dumps(state))
if "hang" in answer:
    import time
    time.sleep(answer["hang"])
if "json" in answer:
    sys.stdout.write(json.dumps(answer["json"]))
sys.stderr.write(answer.get("stderr", ""))
sys.exit(answer.get("rc", 0))
'''

NOT_FOUND = ("ERROR: (gcloud.compute.tpus.tpu-vm.delete) NOT_FOUND: Resource "
             "'projects/p/locations/z/nodes/harness-n' was not found\n")


class FakeGcloud:
    """The fake's directory: what it will answer, and what it was asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(exist_ok=True)
        exe = root / "gcloud"
        exe.write_text(FAKE.replace("{python}", sys.executable))
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self.save()

    def answer(self, key: str, *answers: dict[str, Any]) -> None:
        self.answers[key] = list(answers)
        self.save()

    def save(self) -> None:
        (self.root / "state.json").write_text(json.dumps(self.answers))

    def calls(self, key: str | None = None) -> list[list[str]]:
        log = self.root / "log.jsonl"
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        if key is None:
            return calls
        return [c for c in calls if " ".join(a for a in c if not a.startswith("-")).split()[2:4]
                == key.split()]


@pytest.fixture
def gcloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGcloud:
    fake = FakeGcloud(tmp_path / "fake-gcloud")
    monkeypatch.setenv("HARNESS_GCLOUD", str(fake.root / "gcloud"))
    return fake


class Clock:
    """Time that passes only when the code under test sleeps."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def qr_state(state: str, **data: Any) -> dict[str, Any]:
    return {"json": {"name": "projects/p/locations/z/queuedResources/harness-n",
                     "state": {"state": state, **data}}}


def node_json(ips: list[str], external: list[str] | None = None) -> dict[str, Any]:
    endpoints = []
    for i, ip in enumerate(ips):
        ep: dict[str, Any] = {"ipAddress": ip, "port": 8470}
        if external:
            ep["accessConfig"] = {"externalIp": external[i]}
        endpoints.append(ep)
    return {"json": {"name": "projects/p/locations/z/nodes/harness-n", "acceleratorType": "v4-64",
                     "state": "READY", "networkEndpoints": endpoints,
                     "runtimeVersion": "tpu-ubuntu2204-base"}}


OK: dict[str, Any] = {"json": {"done": True}}


def test_workers_are_in_network_endpoint_order_never_sorted(gcloud: FakeGcloud) -> None:
    ips = ["10.0.0.9", "10.0.0.2", "10.0.0.17", "10.0.0.3"]
    gcloud.answer("tpu-vm describe", node_json(ips, external=[f"34.0.0.{i}" for i in range(4)]))
    node = cloud.describe("harness-n", "us-central2-b", "proj")
    assert [(w.index, w.host, w.port) for w in node.workers] == [(i, ip, 22) for i, ip in enumerate(ips)]
    assert (node.accelerator_type, node.state, node.runtime_version) == \
        ("v4-64", "READY", "tpu-ubuntu2204-base")  # the runtime goes into the pod report
    assert [w.host for w in cloud.workers("harness-n", "z", external=True)] == \
        ["34.0.0.0", "34.0.0.1", "34.0.0.2", "34.0.0.3"]
    first = gcloud.calls("tpu-vm describe")[0]
    assert first[:6] == ["compute", "tpus", "tpu-vm", "describe", "harness-n", "--zone"]
    assert "--format=json" in first and first[first.index("--project") + 1] == "proj"


def test_external_addresses_asked_for_but_missing_name_the_worker(gcloud: FakeGcloud) -> None:
    gcloud.answer("tpu-vm describe", node_json(["10.0.0.2", "10.0.0.3"]))
    with pytest.raises(CloudError, match="worker 0 has no external IP"):
        cloud.workers("harness-n", "z", external=True)


def test_provision_polls_through_waiting_until_active(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("ACCEPTED"), qr_state("WAITING_FOR_RESOURCES"),
                  qr_state("WAITING_FOR_RESOURCES"), qr_state("PROVISIONING"), qr_state("ACTIVE"))
    gcloud.answer("tpu-vm describe", node_json([f"10.0.0.{i}" for i in range(8)]))
    clock = Clock()
    node = cloud.provision("harness-n", "us-central2-b", "v4-64", "tpu-ubuntu2204-base",
                           project="proj", ttl="6h", wait_s=3600, spot=True, poll_s=30,
                           clock=clock, sleep=clock.sleep)
    assert len(node.workers) == 8 and node.accelerator_type == "v4-64"
    assert clock.sleeps == [30, 30, 30, 30]
    assert len(gcloud.calls("queued-resources describe")) == 5
    assert not gcloud.calls("queued-resources delete")
    create = gcloud.calls("queued-resources create")[0]
    opt = dict(zip(create, create[1:]))
    assert create[4] == "harness-n" and opt["--node-id"] == "harness-n"
    assert opt["--accelerator-type"] == "v4-64" and opt["--runtime-version"] == "tpu-ubuntu2204-base"
    assert opt["--valid-until-duration"] == "3600s"
    assert opt["--labels"] == f"harness-ttl={int(1_800_000_000 + 6 * 3600)},harness=nightly"
    assert "--spot" in create and "--async" in create


def test_provision_puts_the_harness_key_in_the_ssh_keys_metadata(gcloud: FakeGcloud,
                                                                 tmp_path: Path) -> None:
    pub = tmp_path / "id.pub"
    pub.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJx harness@ci\n")
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("ACTIVE"))
    gcloud.answer("tpu-vm describe", node_json(["10.0.0.2"]))
    cloud.provision("harness-n", "z", "v4-8", "rt", ssh_key=cloud.ssh_keys_entry("tpu", pub))
    files = [json.loads(line) for line in (gcloud.root / "files.jsonl").read_text().splitlines()]
    assert files == [{"ssh-keys": "tpu:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJx harness@ci\n"}]
    private = tmp_path / "id"
    private.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----\n")
    with pytest.raises(ValueError, match=r"id: not one OpenSSH public key line .*ssh-keygen -y"):
        cloud.ssh_keys_entry("tpu", private)
    with pytest.raises(ValueError, match="'Bad User' is not a Linux user name"):
        cloud.ssh_keys_entry("Bad User", pub)


def test_provision_at_the_deadline_deletes_the_request_and_names_it(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("WAITING_FOR_RESOURCES"))
    gcloud.answer("queued-resources delete", OK)
    clock = Clock()
    with pytest.raises(CloudError) as err:
        cloud.provision("harness-n", "z", "v4-64", "rt", wait_s=100, poll_s=30,
                        clock=clock, sleep=clock.sleep)
    message = str(err.value)
    assert "harness-n" in message and "WAITING_FOR_RESOURCES after 100s" in message
    assert "deleted it" in message
    assert clock.sleeps == [30, 30, 30, 10]  # never past the deadline
    delete = gcloud.calls("queued-resources delete")
    assert len(delete) == 1 and delete[0][4] == "harness-n" and "--force" in delete[0]
    assert not gcloud.calls("tpu-vm describe")


def test_provision_deadline_with_a_failing_delete_says_to_delete_by_hand(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("WAITING_FOR_RESOURCES"))
    gcloud.answer("queued-resources delete", {"rc": 1, "stderr": "ERROR: PERMISSION_DENIED: no\n"})
    clock = Clock()
    with pytest.raises(CloudError, match="delete it by hand.*PERMISSION_DENIED"):
        cloud.provision("harness-n", "z", "v4-64", "rt", wait_s=60, clock=clock, sleep=clock.sleep)


def test_a_failed_request_raises_with_gclouds_reason_and_is_deleted(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("WAITING_FOR_RESOURCES"),
                  qr_state("FAILED", failedData={"error": {
                      "code": 8, "message": "Quota 'TPUV4sPodPerProjectPerZone' exhausted"}}))
    gcloud.answer("queued-resources delete", OK)
    clock = Clock()
    with pytest.raises(CloudError, match=r"harness-n in z is FAILED: Quota 'TPUV4sPodPerProjectPerZone' "
                                         r"exhausted; deleted it"):
        cloud.provision("harness-n", "z", "v4-64", "rt", clock=clock, sleep=clock.sleep)
    assert len(gcloud.calls("queued-resources delete")) == 1


def test_an_interrupted_wait_deletes_the_request(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("WAITING_FOR_RESOURCES"))
    gcloud.answer("queued-resources delete", OK)

    def interrupted(_: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cloud.provision("harness-n", "z", "v4-64", "rt", sleep=interrupted)
    assert len(gcloud.calls("queued-resources delete")) == 1


def test_a_describe_that_fails_while_waiting_deletes_the_request(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("PROVISIONING"),
                  {"rc": 1, "stderr": "ERROR: (gcloud) UNAVAILABLE: try again\n"})
    gcloud.answer("queued-resources delete", OK)
    clock = Clock()
    with pytest.raises(CloudError, match=r"exited 1: ERROR: \(gcloud\) UNAVAILABLE: try again; "
                                         r"queued resource harness-n: deleted it"):
        cloud.provision("harness-n", "z", "v4-64", "rt", clock=clock, sleep=clock.sleep)
    assert len(gcloud.calls("queued-resources delete")) == 1


def test_a_create_that_times_out_deletes_what_it_may_have_made(gcloud: FakeGcloud,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cloud, "_DESCRIBE_TIMEOUT_S", 1.0)
    gcloud.answer("queued-resources create", {"hang": 60})
    gcloud.answer("queued-resources delete", {"rc": 1, "stderr": NOT_FOUND})
    with pytest.raises(CloudError, match=r"queued-resources create harness-n .* did not finish in 1s; "
                                         r"it was not there to delete"):
        cloud.provision("harness-n", "z", "v4-64", "rt")
    assert len(gcloud.calls("queued-resources delete")) == 1


def test_provision_refuses_a_ttl_shorter_than_its_wait(gcloud: FakeGcloud) -> None:
    with pytest.raises(ValueError, match="ttl 30m must be longer than the wait"):
        cloud.provision("harness-n", "z", "v4-64", "rt", ttl="30m", wait_s=3600)
    assert gcloud.calls() == []


def test_a_create_that_fails_deletes_nothing(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", {"rc": 1, "stderr": "ERROR: (gcloud) ALREADY_EXISTS: taken\n"})
    with pytest.raises(CloudError, match=r"`gcloud compute tpus queued-resources create harness-n .*` "
                                         r"exited 1: ERROR: \(gcloud\) ALREADY_EXISTS: taken"):
        cloud.provision("harness-n", "z", "v4-64", "rt")
    assert not gcloud.calls("queued-resources delete")


def test_release_tries_both_deletes_when_the_first_fails(gcloud: FakeGcloud) -> None:
    gcloud.answer("tpu-vm delete", {"rc": 1, "stderr": "ERROR: (gcloud.compute.tpus.tpu-vm.delete) "
                                                       "INTERNAL: backend error\n"})
    gcloud.answer("queued-resources delete", OK)
    with pytest.raises(CloudError) as err:
        cloud.release("harness-n", "z", "proj")
    message = str(err.value)
    assert "node harness-n" in message and "exited 1" in message and "INTERNAL: backend error" in message
    assert "(deleted: queued resource harness-n)" in message
    assert len(gcloud.calls("tpu-vm delete")) == 1
    qr = gcloud.calls("queued-resources delete")
    assert len(qr) == 1 and "--force" in qr[0] and "--quiet" in qr[0]


def test_release_tolerates_not_found(gcloud: FakeGcloud) -> None:
    gcloud.answer("tpu-vm delete", {"rc": 1, "stderr": NOT_FOUND})
    gcloud.answer("queued-resources delete", OK)
    assert cloud.release("harness-n", "z") == ["queued resource harness-n"]
    gcloud.answer("queued-resources delete", {"rc": 1, "stderr": NOT_FOUND})
    assert cloud.release("harness-n", "z") == []


def _labelled(ttl: int | None) -> dict[str, str]:
    return {} if ttl is None else {"harness-ttl": str(ttl), "harness": "nightly"}


def test_sweep_deletes_only_expired_resources_with_the_prefix(gcloud: FakeGcloud) -> None:
    now = 1_800_000_000

    def qr(name: str, ttl: int | None) -> dict[str, Any]:
        return {"name": f"projects/p/locations/z/queuedResources/{name}",
                "tpu": {"nodeSpec": [{"nodeId": name, "node": {"labels": _labelled(ttl)}}]}}

    def node(name: str, ttl: int | None) -> dict[str, Any]:
        return {"name": f"projects/p/locations/z/nodes/{name}", "labels": _labelled(ttl)}

    gcloud.answer("queued-resources list", {"json": [
        qr("harness-old", now - 1), qr("harness-fresh", now + 3600), qr("other-old", now - 1),
        qr("harness-unlabelled", None)]})
    gcloud.answer("tpu-vm list", {"json": [
        node("harness-old", now - 1), node("harness-fresh", now + 3600), node("other-old", now - 1),
        node("harness-lone", now - 60), node("harness-hand-made", None)]})
    gcloud.answer("tpu-vm delete", OK)
    gcloud.answer("queued-resources delete", OK)
    deleted = cloud.sweep("z", "proj", prefix="harness-", now=now)
    assert deleted == ["node harness-old", "queued resource harness-old", "node harness-lone"]
    assert [c[4] for c in gcloud.calls("tpu-vm delete")] == ["harness-old", "harness-lone"]
    assert [c[4] for c in gcloud.calls("queued-resources delete")] == ["harness-old"]


def test_gcloud_missing_from_path_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.delenv("HARNESS_GCLOUD", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CloudError, match="gcloud is not on PATH: install the Google Cloud CLI"):
        cloud.workers("harness-n", "z")
    monkeypatch.setenv("HARNESS_GCLOUD", str(tmp_path / "nope"))
    with pytest.raises(CloudError, match=r"HARNESS_GCLOUD=.*nope is not an executable"):
        cloud.workers("harness-n", "z")


def test_durations_are_one_grammar_for_every_option() -> None:
    """--ttl, --wait and --poll read durations as explore's --budget does (1h30m too)."""
    assert [parse_duration(t) for t in ("90s", "60m", "6h", "1h30m", "1.5h", "6")] == \
        [90, 3600, 21600, 5400, 5400, 6]
    for bad in ("", "1d", "-5m", "0s", "5m 1", "h"):
        with pytest.raises(ValueError, match="is not a duration|more than 0"):
            parse_duration(bad)


# --- the command line -------------------------------------------------------------------

def _env(fake: FakeGcloud) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("HARNESS_GCLOUD", None)
    env["PATH"] = os.pathsep.join([str(fake.root), env.get("PATH", "")])  # found on PATH
    return env


def test_cli_a_pod_failure_is_one_line_and_exit_4(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("FAILED", failedData={"error": {
        "message": "Quota exhausted\nin us-central2"}}))
    gcloud.answer("queued-resources delete", OK)
    proc = run_cli("pod", "provision", "--name", "harness-n", "--zone", "z", "--type", "v4-64",
                   "--runtime-version", "rt", "--wait", "90s", env=_env(gcloud))
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.splitlines() == [
        "harness pod: queued resource harness-n in z is FAILED: Quota exhausted in us-central2; deleted it"]


def test_cli_provision_prints_the_workers(gcloud: FakeGcloud) -> None:
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("ACTIVE"))
    gcloud.answer("tpu-vm describe", node_json(["10.0.0.5", "10.0.0.4"]))
    proc = run_cli("pod", "provision", "--name", "harness-n", "--zone", "z", "--project", "p",
                   "--type", "v4-64", "--runtime-version", "rt", env=_env(gcloud))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "harness-n in z: v4-64, READY, 2 workers: 10.0.0.5, 10.0.0.4"


def test_cli_provision_gives_every_worker_the_startup_script(gcloud: FakeGcloud,
                                                              tmp_path: Path) -> None:
    """The example that installs the torch_xla stack on a bare VM, with the harness's key:
    both in the node's metadata, in one flag (gcloud keeps the last of a repeated one)."""
    pub = tmp_path / "id.pub"
    pub.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJx harness@ci\n")
    script = REPO / "examples" / "pod" / "startup-tpu.sh"
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("ACTIVE"))
    gcloud.answer("tpu-vm describe", node_json(["10.0.0.5"]))
    proc = run_cli("pod", "provision", "--name", "harness-n", "--zone", "z", "--type", "v4-8",
                   "--runtime-version", "tpu-ubuntu2204-base", "--startup-script", str(script),
                   "--ssh-public-key", str(pub), "--ssh-user", "tpu", env=_env(gcloud))
    assert proc.returncode == 0, proc.stderr
    files = [json.loads(line) for line in (gcloud.root / "files.jsonl").read_text().splitlines()]
    assert files == [{"ssh-keys": "tpu:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJx harness@ci\n",
                      "startup-script": script.read_text()}]
    binary = tmp_path / "startup.bin"
    binary.write_bytes(b"\x00\xff")
    bad = run_cli("pod", "provision", "--name", "harness-n", "--zone", "z", "--type", "v4-8",
                  "--runtime-version", "rt", "--startup-script", str(binary), env=_env(gcloud))
    assert bad.returncode == 2 and "'--startup-script'" in bad.stderr and "UTF-8" in bad.stderr


def test_the_example_startup_script_is_valid_bash_and_waits_for_the_dpkg_lock() -> None:
    script = REPO / "examples" / "pod" / "startup-tpu.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    assert "fuser /var/lib/dpkg/lock-frontend" in text and "torch_xla[tpu]==$TORCH_VERSION" in text


@pytest.mark.parametrize("args, message", [
    (["--wait", "10x"], "Invalid value for '--wait': '10x' is not a duration: write 90s, 5m, 1h or 1h30m"),
    (["--ttl", "1d"], "Invalid value for '--ttl': '1d' is not a duration"),
    (["--poll", "0s"], "Invalid value for '--poll': '0s': a duration must be more than 0 seconds"),
    (["--ttl", "30m", "--wait", "1h"], "Invalid value for '--ttl': 1800s must be longer than --wait"),
    (["--ssh-user", "tpu"], "--ssh-public-key and --ssh-user go together"),
    (["--ssh-user", "tpu", "--ssh-public-key", "/nonexistent/id.pub"],
     "Invalid value for '--ssh-public-key' / '--ssh-user': /nonexistent/id.pub: cannot read a public key"),
])
def test_cli_bad_durations_are_usage_errors(gcloud: FakeGcloud, args: list[str], message: str) -> None:
    proc = run_cli("pod", "provision", "--name", "harness-n", "--zone", "z", "--type", "v4-64",
                   "--runtime-version", "rt", *args, env=_env(gcloud))
    assert proc.returncode == 2
    assert message in proc.stderr
    assert gcloud.calls() == []


def test_cli_durations_add_up_as_everywhere_else(gcloud: FakeGcloud) -> None:
    """--ttl 1h30m is 5400 s, as explore's --budget 1h30m: the label says so."""
    gcloud.answer("queued-resources create", OK)
    gcloud.answer("queued-resources describe", qr_state("ACTIVE"))
    gcloud.answer("tpu-vm describe", node_json(["10.0.0.5"]))
    before = int(time.time())
    proc = run_cli("pod", "provision", "--name", "harness-n", "--zone", "z", "--type", "v4-8",
                   "--runtime-version", "rt", "--ttl", "1h30m", "--wait", "1h", env=_env(gcloud))
    assert proc.returncode == 0, proc.stderr
    create = gcloud.calls("queued-resources create")[0]
    opt = dict(zip(create, create[1:]))
    assert opt["--valid-until-duration"] == "3600s"
    expiry = int(opt["--labels"].split(",")[0].split("=")[1])
    assert before + 5400 <= expiry <= int(time.time()) + 5400


def test_cli_release_and_sweep(gcloud: FakeGcloud) -> None:
    gcloud.answer("tpu-vm delete", OK)
    gcloud.answer("queued-resources delete", {"rc": 1, "stderr": NOT_FOUND})
    proc = run_cli("pod", "release", "--name", "harness-n", "--zone", "z", env=_env(gcloud))
    assert (proc.returncode, proc.stdout.strip()) == (0, "deleted node harness-n"), proc.stderr

    gcloud.answer("tpu-vm delete", {"rc": 1, "stderr": "ERROR: PERMISSION_DENIED: tpu.nodes.delete\n"})
    proc = run_cli("pod", "release", "--name", "harness-n", "--zone", "z", env=_env(gcloud))
    assert proc.returncode == 4
    assert len(proc.stderr.splitlines()) == 1 and "PERMISSION_DENIED: tpu.nodes.delete" in proc.stderr

    gcloud.answer("queued-resources list", {"json": []})
    gcloud.answer("tpu-vm list", {"json": []})
    proc = run_cli("pod", "sweep", "--zone", "z", "--prefix", "nightly-", env=_env(gcloud))
    assert (proc.returncode, proc.stdout.strip()) == (0, "nothing past its ttl named nightly-* in z")


def test_cli_without_gcloud_exits_4_with_one_line(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("HARNESS_GCLOUD", None)
    env["PATH"] = str(tmp_path)
    proc = run_cli("pod", "sweep", "--zone", "z", env=env)
    assert proc.returncode == 4
    assert proc.stderr.splitlines() == [
        "harness pod: gcloud is not on PATH: install the Google Cloud CLI "
        "(or google-github-actions/setup-gcloud), or set HARNESS_GCLOUD to it"]
