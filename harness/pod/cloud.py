"""Cloud TPUs through the ``gcloud`` CLI: a pod's workers, provisioning, release and sweep.

Everything goes through ``gcloud ... --format=json`` (an argument list, never a shell
string), so what works from a terminal works here and the credentials are gcloud's own
(``google-github-actions/auth`` in the nightly workflow). ``HARNESS_GCLOUD`` names the
executable; otherwise ``gcloud`` is found on ``PATH``.

What this follows, from TPU CI pipelines that run every night:

- GoogleCloudPlatform/ml-auto-solutions (the XLA/PyTorch-XLA nightly TPU tests),
  ``xlml/utils/tpu.py``: a queued resource with a ``ttl`` label and a
  ``valid_until_duration`` equal to the provisioning timeout; polled while CREATING,
  WAITING_FOR_RESOURCES, ACCEPTED or PROVISIONING, ACTIVE is success and any other state
  an error; deletion nodes first, then the queued resource, each tolerant of NOT_FOUND
  (their PR #177: the cleanup job may have deleted it first); ``dags/infra/clean_up.py``:
  a sweep every 10 minutes that deletes nodes past their ttl. Their ttl is seconds after
  creation; ours is the Unix time of expiry, so the sweep needs no creation time.
- marin-community/marin issue #4724 and PR #4764: a queued resource whose wait timed out
  but was not cancelled was fulfilled 70 minutes later and left 33 zombie workers; so at
  our deadline the request is deleted (``--force``: its nodes too) before we raise.
  Issue #87: FAILED and SUSPENDED queued resources still hold quota, so a failed
  request is deleted too.
- pytorch/xla's own TPU CI (``.github/workflows/_tpu_ci.yml``) runs on a standing GKE
  node pool through Actions Runner Controller (``infra/terraform_modules/
  arc_v4_container_cluster``), not on provisioned VMs: nothing of its provisioning
  applies to a nightly that creates a slice and deletes it.
- ``gcloud compute tpus queued-resources create|delete`` reference: ``--valid-until-duration``,
  ``--spot``, ``--labels``; ``delete --force`` deletes the nodes first.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.durations import parse_duration
from harness.inputs import InputError, read_text
from harness.pod.workers import Worker
from harness.vocabulary import PodError

log = logging.getLogger(__name__)

GCLOUD_ENV = "HARNESS_GCLOUD"
TTL_LABEL = "harness-ttl"
PURPOSE_LABEL = "harness"
PURPOSE = "nightly"

#: A queued resource in one of these is still on its way; ACTIVE is there; anything else
#: (FAILED, SUSPENDING, SUSPENDED, DELETING, an unknown state) will not become ACTIVE.
WAITING_STATES = frozenset({"CREATING", "WAITING_FOR_RESOURCES", "ACCEPTED", "PROVISIONING"})
ACTIVE = "ACTIVE"

_DESCRIBE_TIMEOUT_S = 300.0
_DELETE_TIMEOUT_S = 1800.0  # deleting a v4-64's eight VMs takes minutes


class CloudError(PodError, RuntimeError):
    """gcloud failed or answered what the pod cannot use; one line naming the command."""


@dataclass(frozen=True)
class TpuNode:
    """A Cloud TPU as ``gcloud compute tpus tpu-vm describe`` shows it."""

    name: str
    zone: str
    accelerator_type: str
    state: str
    workers: list[Worker]
    runtime_version: str = ""  # the TPU VM software image, e.g. tpu-ubuntu2204-base


def gcloud_executable() -> str:
    """``$HARNESS_GCLOUD``, or ``gcloud`` on ``PATH``; a CloudError saying how to get one."""
    named = os.environ.get(GCLOUD_ENV)
    if named:
        found = shutil.which(named)
        if found is None:
            raise CloudError(f"{GCLOUD_ENV}={named} is not an executable")
        return found
    found = shutil.which("gcloud")
    if found is None:
        raise CloudError("gcloud is not on PATH: install the Google Cloud CLI "
                         f"(or google-github-actions/setup-gcloud), or set {GCLOUD_ENV} to it")
    return found


def _tail(stderr: str, lines: int = 3) -> str:
    kept = [line.strip() for line in stderr.splitlines() if line.strip()]
    return " / ".join(kept[-lines:]) or "(no message)"


def _command_text(args: Sequence[str]) -> str:
    return "gcloud " + " ".join(args)


class _Failed(CloudError):
    """gcloud ran and exited non-zero; ``stderr`` kept to tell NOT_FOUND from the rest."""

    def __init__(self, args: Sequence[str], code: int, stderr: str) -> None:
        super().__init__(f"`{_command_text(args)}` exited {code}: {_tail(stderr)}")
        self.stderr = stderr

    @property
    def not_found(self) -> bool:
        return "NOT_FOUND" in self.stderr or "was not found" in self.stderr


class _TimedOut(CloudError):
    """gcloud did not answer in time: what it was asked to do may have happened."""


def _gcloud(args: Sequence[str], *, project: str | None, timeout: float) -> Any:
    """Run ``gcloud ARGS [--project P] --format=json --quiet``; its JSON answer, or None."""
    full = [*args, *(["--project", project] if project else []), "--format=json", "--quiet"]
    log.debug("running %s", _command_text(full))
    try:
        proc = subprocess.run([gcloud_executable(), *full], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise _TimedOut(f"`{_command_text(full)}` did not finish in {timeout:.0f}s") from None
    except OSError as exc:
        raise CloudError(f"`{_command_text(full)}` could not start: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        raise _Failed(full, proc.returncode, proc.stderr)
    if not proc.stdout.strip():
        return None
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise CloudError(f"`{_command_text(full)}` printed what is not JSON ({exc.msg}): "
                         f"{_tail(proc.stdout, 1)[:200]}") from None


def _short(name: str) -> str:
    """``projects/p/locations/z/nodes/n`` -> ``n``."""
    return name.rsplit("/", 1)[-1]


def _node_from(answer: Any, name: str, zone: str, external: bool) -> TpuNode:
    if not isinstance(answer, dict):
        raise CloudError(f"TPU {name} in {zone}: gcloud's describe answered {type(answer).__name__}, "
                         "not an object")
    state = str(answer.get("state", "UNKNOWN"))
    endpoints = answer.get("networkEndpoints") or []
    if not endpoints:
        raise CloudError(f"TPU {name} in {zone} has no network endpoints (state {state}): "
                         "it has no workers to reach yet")
    workers = []
    for i, ep in enumerate(endpoints):
        if external:
            host = (ep.get("accessConfig") or {}).get("externalIp")
            if not host:
                raise CloudError(f"TPU {name} in {zone}: worker {i} has no external IP "
                                 "(created with --internal-ips?); use its internal address")
        else:
            host = ep.get("ipAddress")
            if not host:
                raise CloudError(f"TPU {name} in {zone}: worker {i} has no ipAddress")
        workers.append(Worker(i, str(host)))
    return TpuNode(name=name, zone=zone, accelerator_type=str(answer.get("acceleratorType", "unknown")),
                   state=state, workers=workers,
                   runtime_version=str(answer.get("runtimeVersion") or ""))


def describe(name: str, zone: str, project: str | None = None, *, external: bool = False) -> TpuNode:
    """The TPU VM ``name`` and its workers in ``networkEndpoints`` order (worker i = host i).

    Internal addresses unless ``external``: the controller normally runs in the same VPC;
    from outside it (a GitHub-hosted runner) the external ones are the reachable ones.
    """
    answer = _gcloud(["compute", "tpus", "tpu-vm", "describe", name, "--zone", zone],
                     project=project, timeout=_DESCRIBE_TIMEOUT_S)
    return _node_from(answer, name, zone, external)


def workers(name: str, zone: str, project: str | None = None, *, external: bool = False) -> list[Worker]:
    """``describe(...).workers``: who to SSH to, in worker order."""
    return describe(name, zone, project, external=external).workers


def _queued_state(name: str, zone: str, project: str | None) -> tuple[str, str]:
    """A queued resource's state and, when it has one, gcloud's reason for it."""
    answer = _gcloud(["compute", "tpus", "queued-resources", "describe", name, "--zone", zone],
                     project=project, timeout=_DESCRIBE_TIMEOUT_S)
    state = (answer or {}).get("state") or {}
    kind = str(state.get("state", "STATE_UNSPECIFIED"))
    reason = ""
    for key in ("failedData", "suspendingData", "suspendedData", "deletingData"):
        data = state.get(key)
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict) and error.get("message"):
                reason = str(error["message"])
                break
    if not reason and state.get("stateInitiator"):
        reason = f"initiated by {state['stateInitiator']}"
    return kind, reason


def _delete_queued(name: str, zone: str, project: str | None) -> bool:
    """Delete the queued resource and, ``--force``, its nodes; False if it was not there."""
    return _delete(["queued-resources", "delete", name, "--zone", zone, "--force"], project)


def _delete_node(name: str, zone: str, project: str | None) -> bool:
    return _delete(["tpu-vm", "delete", name, "--zone", zone], project)


def _delete(args: list[str], project: str | None) -> bool:
    """``gcloud compute tpus ARGS``; False if what it deletes was not there (NOT_FOUND)."""
    try:
        _gcloud(["compute", "tpus", *args], project=project, timeout=_DELETE_TIMEOUT_S)
    except _Failed as exc:
        if exc.not_found:
            return False
        raise
    return True


def _cancel(name: str, zone: str, project: str | None) -> str:
    """Delete a request we gave up on (with its nodes); says how that went, for the error."""
    try:
        existed = _delete_queued(name, zone, project)
    except CloudError as exc:
        log.error("could not delete queued resource %s: %s", name, exc)
        return f"deleting it failed too, delete it by hand ({exc})"
    return "deleted it" if existed else "it was not there to delete"


_KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-", "sk-ssh-ed25519@", "sk-ecdsa-sha2-")
_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")


def ssh_keys_entry(user: str, public_key_file: str | Path) -> str:
    """``USER:KEY``, the form of Compute Engine's ``ssh-keys`` metadata; ValueError naming
    the file or the user when either cannot be one."""
    if not _USER.match(user):
        raise ValueError(f"{user!r} is not a Linux user name for the workers")
    try:  # a public key is one line; 64 KiB bounds a FIFO or /dev/zero given by mistake
        text = read_text(public_key_file, 1 << 16, "a public key").strip()
    except InputError as exc:
        raise ValueError(str(exc)) from None
    if "\n" in text or not text.startswith(_KEY_TYPES):
        raise ValueError(f"{public_key_file}: not one OpenSSH public key line (ssh-ed25519 AAAA...); "
                         "a private key? derive the public one with ssh-keygen -y -f KEY")
    return f"{user}:{text}"


def provision(name: str, zone: str, accelerator_type: str, runtime_version: str,
              project: str | None = None, ttl: str = "6h", wait_s: float = 3600, spot: bool = False,
              poll_s: float = 30, *, ssh_key: str | None = None,
              startup_script: str | None = None,
              clock: Callable[[], float] = time.time,
              sleep: Callable[[float], None] = time.sleep) -> TpuNode:
    """Request a TPU as a queued resource and wait until it is ACTIVE; the node it made.

    The request carries ``--valid-until-duration`` (the queue drops it at our deadline
    too) and the labels ``harness-ttl=<Unix time of expiry>`` and ``harness=nightly`` on
    its node, for ``sweep``. At the deadline, or in a state that will not become ACTIVE,
    the request is deleted with its nodes before the CloudError: a request fulfilled after
    we gave up would leave workers holding quota. ``ssh_key`` (``USER:ssh-ed25519 AAAA...``,
    see ``ssh_keys_entry``) goes into the node's ``ssh-keys`` metadata, so the harness's own
    SSH client can log in as USER on every worker (``gcloud ... ssh`` is never used).
    ``startup_script`` (its text) goes into ``startup-script``: every worker runs it as
    root when it boots (``examples/pod/startup-tpu.sh`` installs the torch_xla stack).
    """
    ttl_s = parse_duration(ttl)
    if ttl_s <= wait_s:
        raise ValueError(f"ttl {ttl} must be longer than the wait ({wait_s:.0f}s): the sweep "
                         "would delete the TPU while this run still waits for it")
    start = clock()
    expiry = int(start + ttl_s)
    args = ["compute", "tpus", "queued-resources", "create", name, "--node-id", name,
            "--zone", zone, "--accelerator-type", accelerator_type,
            "--runtime-version", runtime_version, "--valid-until-duration", f"{int(wait_s)}s",
            "--labels", f"{TTL_LABEL}={expiry},{PURPOSE_LABEL}={PURPOSE}", "--async"]
    if spot:
        args.append("--spot")
    try:
        with tempfile.TemporaryDirectory(prefix="harness-gcloud-") as tmp:
            metadata = {"ssh-keys": ssh_key + "\n" if ssh_key is not None else None,
                        "startup-script": startup_script}
            pairs = []
            for key, text in metadata.items():
                if text is not None:
                    (Path(tmp) / key).write_text(text, encoding="utf-8")
                    pairs.append(f"{key}={Path(tmp) / key}")
            if pairs:  # one flag: gcloud keeps the last of a repeated one
                args += ["--metadata-from-file", ",".join(pairs)]
            _gcloud(args, project=project, timeout=_DESCRIBE_TIMEOUT_S)
    except _TimedOut as exc:  # the request may exist: do not leave it queued
        raise CloudError(f"{exc}; {_cancel(name, zone, project)}") from None
    # any other failure created nothing (ALREADY_EXISTS is someone's TPU: never delete it)
    log.info("queued resource %s requested in %s (%s), waiting up to %.0fs", name, zone,
             accelerator_type, wait_s)
    deadline = start + wait_s
    cancelled = False
    try:
        while True:
            state, reason = _queued_state(name, zone, project)
            if state == ACTIVE:
                return describe(name, zone, project)
            if state not in WAITING_STATES:
                why = f": {reason}" if reason else ""
                cancelled = True
                raise CloudError(f"queued resource {name} in {zone} is {state}{why}; "
                                 f"{_cancel(name, zone, project)}")
            left = deadline - clock()
            if left <= 0:
                cancelled = True
                raise CloudError(f"queued resource {name} in {zone} was still {state} after "
                                 f"{wait_s:.0f}s (fulfilled later, it would leave workers holding "
                                 f"quota): {_cancel(name, zone, project)}")
            log.info("queued resource %s is %s; %.0fs left", name, state, left)
            sleep(min(poll_s, left))
    except CloudError as exc:
        if cancelled:
            raise
        # describe failed: this run cannot use the TPU, so nobody would release it
        raise CloudError(f"{exc}; queued resource {name}: {_cancel(name, zone, project)}") from None
    except BaseException:  # Ctrl-C, a cancelled job: the request must not outlive us
        _cancel(name, zone, project)
        raise


def release(name: str, zone: str, project: str | None = None) -> list[str]:
    """Delete the node, then the queued resource, both always tried; what was deleted.

    Either may be gone already (NOT_FOUND is fine: a sweep, or a request that never made
    a node); any other failure is reported after both were tried, in one CloudError.
    """
    return _release(node=name, queued=name, zone=zone, project=project)


def _release(node: str | None, queued: str | None, zone: str, project: str | None) -> list[str]:
    deleted: list[str] = []
    errors: list[str] = []
    # the node first, then its request: both always tried, each error kept
    for what, name, delete in (("node", node, _delete_node),
                               ("queued resource", queued, _delete_queued)):
        if not name:
            continue
        try:
            if delete(name, zone, project):
                deleted.append(f"{what} {name}")
        except CloudError as exc:
            errors.append(f"{what} {name}: {exc}")
    for what in deleted:
        log.info("deleted %s in %s", what, zone)
    if errors:
        done = f" (deleted: {', '.join(deleted)})" if deleted else ""
        raise CloudError(f"release in {zone} failed: {'; '.join(errors)}{done}")
    return deleted


def _expired(labels: Any, now: float) -> bool:
    if not isinstance(labels, dict) or TTL_LABEL not in labels:
        return False
    try:
        return int(labels[TTL_LABEL]) < now
    except (TypeError, ValueError):
        log.warning("ignoring a %s label that is not a Unix time: %r", TTL_LABEL, labels[TTL_LABEL])
        return False


def sweep(zone: str, project: str | None = None, prefix: str = "harness-",
          now: float | None = None) -> list[str]:
    """Release every queued resource and node in ``zone`` named ``prefix...`` whose
    ``harness-ttl`` is past: what a cancelled or crashed run left. What it deleted."""
    now = time.time() if now is None else now
    queued = _gcloud(["compute", "tpus", "queued-resources", "list", "--zone", zone],
                     project=project, timeout=_DESCRIBE_TIMEOUT_S) or []
    nodes = _gcloud(["compute", "tpus", "tpu-vm", "list", "--zone", zone],
                    project=project, timeout=_DESCRIBE_TIMEOUT_S) or []
    targets: list[tuple[str | None, str | None]] = []
    claimed: set[str] = set()
    for qr in queued:
        qname = _short(str(qr.get("name", "")))
        specs = ((qr.get("tpu") or {}).get("nodeSpec")) or []
        node_ids = [str(s.get("nodeId")) for s in specs if s.get("nodeId")]
        claimed.update(node_ids)
        labels = next((((s.get("node") or {}).get("labels")) for s in specs), None)
        if qname.startswith(prefix) and _expired(labels, now):
            targets.extend((n, None) for n in node_ids)
            targets.append((None, qname))
    for node in nodes:
        nname = _short(str(node.get("name", "")))
        if nname.startswith(prefix) and nname not in claimed and _expired(node.get("labels"), now):
            targets.append((nname, None))
    deleted: list[str] = []
    errors: list[str] = []
    for node_name, qname in targets:
        try:
            deleted.extend(_release(node_name, qname, zone, project))
        except CloudError as exc:
            errors.append(str(exc))
    if errors:
        done = f" (deleted: {', '.join(deleted)})" if deleted else ""
        raise CloudError(f"sweep of {zone}: {'; '.join(errors)}{done}")
    return deleted
