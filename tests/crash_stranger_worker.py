"""A checkpoint worker as someone who never read the harness might write it: the
checkpoint goes to a temporary file and is ``os.replace``d over the old one, but nothing
is fsynced. A killed process leaves the old or the new checkpoint (the rename is atomic),
a host that loses power can leave the new name pointing at an empty file. Used by
tests/world/test_crash_states.py (checkpoint-resume workload's contract)."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from harness.workloads.checkpoint_resume.model import extract, record_line


def load(path: str) -> dict[str, Any]:
    if not os.path.exists(path):
        return {"processed_sample_ids": []}
    with open(path) as f:
        return json.load(f)  # trusts the file: an empty one raises


def save(path: str, state: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)  # atomic, but the data was never fsynced


def run(inputs: dict[str, Any]) -> dict[str, Any]:
    os.chdir(inputs["workdir"])
    worker = int(os.environ["TPU_WORKER_ID"])
    os.makedirs("checkpoints", exist_ok=True)
    ckpt = f"checkpoints/worker_{worker}.json"
    done = set(load(ckpt)["processed_sample_ids"])
    with open(f"data/streams/stream_{worker:03d}.jsonl") as f:
        samples = [json.loads(line) for line in f if line.strip()]
    folder = f"{inputs['bucket'].rstrip('/')}/activations/tpu_{worker}"
    os.makedirs(folder, exist_ok=True)
    todo = [s for s in samples if s["id"] not in done]
    size = int(inputs["shard_size"])
    for start in range(0, len(todo), size):
        chunk = todo[start:start + size]
        with open(f"{folder}/shard_{chunk[0]['id']}.jsonl", "w") as f:
            f.write("".join(record_line(extract(s)) for s in chunk))
        done.update(s["id"] for s in chunk)
        save(ckpt, {"processed_sample_ids": sorted(done), "total_samples_processed": len(done)})
    return {"worker_id": worker, "total_samples_processed": len(done)}


def record_me() -> None:
    """What tests/world/test_crash_states.py checks the recording of: two writes around an
    fsync, then the directory's fsync (rank 0 only; every host has its own /tmp)."""
    if os.environ.get("TPU_WORKER_ID", "0") != "0":
        return
    os.makedirs("/tmp/r", exist_ok=True)
    with open("/tmp/r/a.bin", "wb", buffering=0) as f:
        f.write(b"hello")
        os.fsync(f.fileno())
        f.write(b"abc")
    fd = os.open("/tmp/r", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
