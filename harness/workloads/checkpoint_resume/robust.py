"""robust-worker: the pre-emptible worker we recommend instead of seed 003's (docs/seeds.md).

Exactly-once comes from the bucket, not from the checkpoint:

- **Identity is checked.** ``TPU_WORKER_ID`` must be set, and where the VM
  knows its own place (``HOSTNAME`` in ``TPU_WORKER_HOSTNAMES``) the two must
  agree; otherwise the worker refuses, naming both, before it touches any
  stream or folder (two VMs with one id would write one folder and leave a
  stream unprocessed).
- **The bucket is the source of truth.** On every start the worker lists its
  folder and verifies every shard object (its name carries the digest of its
  content); an object that does not verify is deleted and its samples redone.
  The samples still to do are the stream minus the samples held by verified
  objects. The checkpoint is a progress record kept for people and monitoring
  (``jq '.total_shards'``); ids it claims that the bucket lacks are redone.
- **Shard names are idempotent.** A shard is named after its first sample and
  the digest of its content: redoing a shard after a pre-emption writes the
  same name with the same bytes, never a second copy under a new name.
- **Uploads are verified.** Each object is written, then read back and
  compared; transient errors (EIO, EAGAIN, ...) are retried with a short
  backoff, ``upload_attempts`` times at most; other errors fail at once.
- **The checkpoint is atomic.** Written to a temporary file, fsynced, then
  ``os.replace``d over the old one: a pre-emption leaves the old or the new
  checkpoint, never a torn one. A torn or unreadable checkpoint (left by an
  older version, or a disk fault) is reported and rebuilt from the bucket.
- **A missing or malformed stream fails loudly**, naming the file and the host.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import sys
import time
from typing import Any

from harness.workloads.checkpoint_resume.model import extract, record_line

TRANSIENT = {errno.EIO, errno.EAGAIN, errno.EBUSY, errno.ETIMEDOUT, errno.EINTR,
             errno.ECONNRESET, errno.ECONNABORTED}
_SHARD = re.compile(r"^shard_(?P<first>.+)_(?P<digest>[0-9a-f]{12})\.jsonl$")


class WorkerError(RuntimeError):
    """A condition no retry can fix: the message says what and where."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def worker_identity() -> int:
    raw = os.environ.get("TPU_WORKER_ID")
    host = os.environ.get("HOSTNAME", "")
    hosts = [h for h in os.environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h]
    position = hosts.index(host) if host in hosts else None
    if raw is None or not raw.strip():
        raise WorkerError("TPU_WORKER_ID is not set: refusing to default to worker 0 (another VM "
                          "would write the same stream and folder)")
    try:
        worker_id = int(raw)
    except ValueError:
        raise WorkerError(f"TPU_WORKER_ID={raw!r} is not an integer") from None
    if worker_id < 0:
        raise WorkerError(f"TPU_WORKER_ID={worker_id} is negative")
    if position is not None and position != worker_id:
        raise WorkerError(
            f"TPU_WORKER_ID={worker_id} but this VM, {host}, is worker {position} of "
            f"TPU_WORKER_HOSTNAMES: worker {worker_id}'s stream would be processed twice and "
            f"stream {position} never; fix the launch environment")
    return worker_id


def read_stream(path: str, worker_id: int) -> list[dict[str, Any]]:
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise FileNotFoundError(
            errno.ENOENT, f"worker {worker_id}: its input stream does not exist on "
            f"{os.environ.get('HOSTNAME', 'this host')} (create_dataset_streams.py must make one "
            f"stream per worker)", path) from None
    samples, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
            sid = sample["id"]
        except (ValueError, KeyError, TypeError) as exc:
            raise WorkerError(f"{path}:{number}: not a sample with an id ({exc})") from None
        if sid in seen:
            raise WorkerError(f"{path}:{number}: sample id {sid!r} appears twice in the stream")
        seen.add(sid)
        samples.append(sample)
    return samples


def shard_content(records: list[dict[str, Any]]) -> str:
    return "".join(record_line(r) for r in records)


def shard_name(first_id: str, content: str) -> str:
    digest = hashlib.sha256(content.encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9.-]", "-", first_id)
    return f"shard_{safe}_{digest}.jsonl"


def verified_objects(folder: str) -> dict[str, list[str]]:
    """``{object name: sample ids}`` of the objects whose content matches their name;
    the others (never expected with object semantics, but cheap to handle) are deleted."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return {}
    valid: dict[str, list[str]] = {}
    for name in names:
        m = _SHARD.match(name)
        if not m:
            continue  # not ours: never touched
        path = f"{folder}/{name}"
        with open(path) as f:
            content = f.read()
        ids = _ids_of(content)
        if ids is None or hashlib.sha256(content.encode()).hexdigest()[:12] != m["digest"]:
            log(f"removing {path}: its content does not match its name; its samples are redone")
            os.remove(path)
            continue
        valid[name] = ids
    return valid


def _ids_of(content: str) -> list[str] | None:
    ids = []
    for line in content.splitlines():
        try:
            ids.append(json.loads(line)["id"])
        except (ValueError, KeyError, TypeError):
            return None
    return ids


def upload(path: str, content: str, attempts: int) -> int:
    """Write the object and read it back; retry transient errors. Returns the attempts used."""
    last = "no attempt made"
    for attempt in range(1, max(1, attempts) + 1):
        try:
            with open(path, "w") as f:
                f.write(content)
            with open(path) as f:
                if f.read() == content:
                    return attempt
            last = "the object read back differs from what was written"
        except OSError as exc:
            if exc.errno not in TRANSIENT:
                raise
            last = f"{type(exc).__name__}: {exc}"
        log(f"upload of {path}, attempt {attempt}: {last}; retrying")
        time.sleep(min(0.2, 0.01 * 2 ** attempt))
    raise WorkerError(f"upload of {path} failed {attempts} times; last: {last}")


def load_checkpoint(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            checkpoint = json.load(f)
        if not isinstance(checkpoint, dict) or not isinstance(
                checkpoint.get("processed_sample_ids"), list):
            raise ValueError("not a checkpoint object")
        return checkpoint
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log(f"checkpoint {path} is unreadable ({exc}); rebuilding it from the bucket")
        return None


def save_checkpoint(path: str, checkpoint: dict[str, Any]) -> None:
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(checkpoint, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:  # the rename itself survives a power loss only once the directory is synced
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def run(inputs: dict[str, Any]) -> dict[str, Any]:
    os.chdir(inputs.get("workdir", "."))
    worker_id = worker_identity()
    life = int(os.environ.get("HARNESS_LIFE", "0"))
    bucket = inputs.get("bucket", "/mnt/bucket").rstrip("/")
    folder = f"{bucket}/activations/tpu_{worker_id}"
    checkpoint_path = f"checkpoints/checkpoint_worker_{worker_id}.json"
    shard_size = int(inputs["shard_size"])
    attempts = int(inputs.get("upload_attempts", 5))

    samples = read_stream(f"data/streams/stream_{worker_id:03d}.jsonl", worker_id)
    in_stream = {s["id"] for s in samples}
    os.makedirs(folder, exist_ok=True)
    objects = verified_objects(folder)
    done = {sid for ids in objects.values() for sid in ids}
    checkpoint = load_checkpoint(checkpoint_path)
    if checkpoint is not None:
        claimed = set(checkpoint["processed_sample_ids"])
        if claimed - done:
            log(f"the checkpoint claims {len(claimed - done)} samples the bucket does not hold: "
                "redoing them")
    log(f"worker {worker_id} (life {life}): {len(done & in_stream)}/{len(samples)} samples in "
        f"{len(objects)} verified objects")

    def record_progress() -> None:
        save_checkpoint(checkpoint_path, {
            "worker_id": worker_id,
            "processed_sample_ids": sorted(done),
            "total_samples_processed": len(done),
            "total_shards": len(objects),
            "shards": sorted(objects),
            "complete": in_stream <= done,
        })

    todo = [s for s in samples if s["id"] not in done]
    uploaded, retried = [], 0
    for start in range(0, len(todo), shard_size):
        chunk = todo[start:start + shard_size]
        records = [extract(s) for s in chunk]
        content = shard_content(records)
        name = shard_name(chunk[0]["id"], content)
        retried += upload(f"{folder}/{name}", content, attempts) - 1
        objects[name] = [s["id"] for s in chunk]
        done.update(objects[name])
        uploaded.append(name)
        record_progress()
    if not uploaded and (checkpoint is None or set(checkpoint["processed_sample_ids"]) != done):
        record_progress()  # nothing left to do, but the checkpoint must say so
    return {"worker_id": worker_id, "life": life, "samples_processed": len(todo),
            "shards_uploaded": uploaded, "upload_retries": retried,
            "total_samples_processed": len(done & in_stream)}
