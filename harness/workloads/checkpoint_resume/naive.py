"""naive-worker: seed 003's pre-emptible worker (``extract_activations.py``) as its
implementation summary describes it, flaws included.

The summary is all the seed shows (no code), so where it leaves a gap the most
literal reading is taken; every line below that matters says which line of
``003_*.txt`` it comes from ("003:NN"; mapped in docs/seeds.md). No flaw is added
on purpose; these are the ones the description implies:

1. The checkpoint is written in place (``open('w')`` + ``json.dump``, 003:20
   ``save_checkpoint()``, 003:108 ``./checkpoints/checkpoint_worker_N.json``):
   a pre-emption while it is being written leaves a torn JSON file, and
   ``load_checkpoint()`` (003:20) has nothing to fall back on, so every restart
   raises ``JSONDecodeError`` -- against 003:96 "No Manual Intervention".
2. Shard names come from a counter that restarts at 0 in every process:
   ``core/activation_storage.py`` is reused unchanged (003:134 "GCS upload
   (existing)"; 003:119 lists ``extract_activations.py`` as the only modified
   file), and the resume logic the summary lists (003:20-25, 003:123-124)
   restores the processed samples, not the storage's shard counter; the
   checkpoint only *reports* it (003:188 ``jq '.total_shards'``). After a
   restart the first new shard is uploaded as ``shard_0000`` again and replaces
   the one the first life uploaded: samples the checkpoint calls processed are
   gone from the bucket, and ``total_shards`` moves backwards.
3. The upload is one plain write of the object, with no retry and no read-back
   (003:134 "GCS upload (existing)", 003:113 "Periodic GCS upload prevents data
   loss"): a transient EIO kills the worker.
4. The worker id is whatever ``TPU_WORKER_ID`` says, 0 if unset (003:12, 003:30
   "defaults to 0"), never checked against the VM: two VMs given the same id
   write the same folder (against 003:106 "No Conflicts: Each worker writes to
   its own folder") and one stream is never processed.

What the seed gets right is kept: a missing stream fails loudly (003:60
``launch_worker.sh`` "Validates dataset file exists before launching"; here the
``open`` raises), and the checkpoint is saved after the shard's upload (003:16).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from harness.workloads.checkpoint_resume.model import extract, record_line


def get_worker_id() -> int:
    # 003:12 "Worker ID auto-detection from TPU_WORKER_ID"; 003:30 "defaults to 0"
    return int(os.environ.get("TPU_WORKER_ID", 0))


def load_checkpoint(checkpoint_path: str) -> dict[str, Any] | None:
    # 003:14 "Resume from checkpoint on restart (skips processed samples)".
    # Flaw 1: a torn file raises here, on every restart.
    if os.path.exists(checkpoint_path):
        with open(checkpoint_path) as f:
            checkpoint = json.load(f)
        print(f"Loaded checkpoint: {checkpoint['total_samples_processed']} samples processed, "
              f"{checkpoint['total_shards']} shards", flush=True)
        return checkpoint
    return None


def save_checkpoint(checkpoint_path: str, checkpoint: dict[str, Any]) -> None:
    # 003:16 "Periodic checkpoint saving (after each shard upload)".
    # Flaw 1: truncated and rewritten in place; no temporary file, no fsync, no rename.
    os.makedirs(os.path.dirname(checkpoint_path), exist_ok=True)
    with open(checkpoint_path, "w") as f:
        json.dump(checkpoint, f, indent=2)


class ActivationStorage:
    """``core/activation_storage.py``, reused as it was (003:134): buffers the
    records and uploads a shard each time ``shard_size`` of them are buffered."""

    def __init__(self, gcs_prefix: str, shard_size: int) -> None:
        self.gcs_prefix = gcs_prefix  # 003:15 gs://bucket/activations/tpu_N/
        self.shard_size = shard_size
        self.buffer: list[dict[str, Any]] = []
        self.shard_count = 0  # Flaw 2: starts at 0 in every process; names come from it

    def add(self, record: dict[str, Any]) -> None:
        self.buffer.append(record)
        if len(self.buffer) >= self.shard_size:
            self.save_shard()

    def save_shard(self) -> None:
        if not self.buffer:
            return
        name = f"shard_{self.shard_count:04d}.jsonl"
        os.makedirs(self.gcs_prefix, exist_ok=True)
        # Flaw 3: one attempt, nothing read back.
        with open(f"{self.gcs_prefix}/{name}", "w") as f:
            for record in self.buffer:
                f.write(record_line(record))
        print(f"Uploaded {name} ({len(self.buffer)} samples)", flush=True)
        self.last_shard = (name, [r["id"] for r in self.buffer])
        self.shard_count += 1
        self.buffer = []


def run(inputs: dict[str, Any]) -> dict[str, Any]:
    os.chdir(inputs.get("workdir", "."))  # launch_worker.sh runs from the repository
    worker_id = get_worker_id()  # Flaw 4: trusted as given
    bucket = inputs.get("bucket", "/mnt/bucket").rstrip("/")
    stream_path = f"data/streams/stream_{worker_id:03d}.jsonl"  # 003:168
    checkpoint_path = f"checkpoints/checkpoint_worker_{worker_id}.json"  # 003:169
    life = int(os.environ.get("HARNESS_LIFE", "0"))

    checkpoint = load_checkpoint(checkpoint_path)
    processed = set(checkpoint["processed_sample_ids"]) if checkpoint else set()
    # 003:25 "Enhanced logging to show worker ID and resume status"
    status = f"resuming with {len(processed)} samples done" if checkpoint else "starting fresh"
    print(f"Worker {worker_id}: {status}", flush=True)

    with open(stream_path) as f:  # a missing stream raises FileNotFoundError (003:60)
        samples = [json.loads(line) for line in f if line.strip()]

    storage = ActivationStorage(f"{bucket}/activations/tpu_{worker_id}", int(inputs["shard_size"]))
    done_this_life, uploaded = 0, []
    for sample in samples:
        if sample["id"] in processed:  # 003:23 "skip processed samples"
            continue
        shards_before = storage.shard_count
        storage.add(extract(sample))
        done_this_life += 1
        if storage.shard_count > shards_before:  # 003:24 "checkpoint saving after each shard creation"
            name, ids = storage.last_shard
            processed.update(ids)
            uploaded.append(name)
            save_checkpoint(checkpoint_path, {
                "worker_id": worker_id,
                "processed_sample_ids": sorted(processed),  # 003:242 the list grows with the samples
                "total_samples_processed": len(processed),  # 003:188
                "total_shards": storage.shard_count,  # 003:188 (flaw 2: this life's count)
                "last_shard": name,
                "timestamp": time.time(),
            })
    if storage.buffer:  # the last, partial shard
        storage.save_shard()
        name, ids = storage.last_shard
        processed.update(ids)
        uploaded.append(name)
        save_checkpoint(checkpoint_path, {
            "worker_id": worker_id, "processed_sample_ids": sorted(processed),
            "total_samples_processed": len(processed), "total_shards": storage.shard_count,
            "last_shard": name, "timestamp": time.time()})
    print(f"Worker {worker_id} done: {len(processed)}/{len(samples)} samples", file=sys.stderr, flush=True)
    return {"worker_id": worker_id, "life": life, "samples_processed": done_this_life,
            "shards_uploaded": uploaded, "total_samples_processed": len(processed)}
