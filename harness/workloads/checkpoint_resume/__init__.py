"""Checkpoint/resume: independent pre-emptible workers (seed 003).

Every worker (one per TPU VM) reads its own input stream, processes it in
shards, "uploads" each shard to a bucket and keeps a checkpoint so that, when
the VM is pre-empted and started again, it resumes where it stopped. The
harness pre-empts workers (SIGKILL, then the same rank, env and host disk
again) and the exactly-once checker reads the bucket at the end.

Two reference targets, each a module with a ``run`` function:

- ``naive-worker`` (``naive.py``): seed 003's ``extract_activations.py`` worker
  as its implementation summary describes it, flaws included (each one names
  the seed line it comes from).
- ``robust-worker`` (``robust.py``): the recipe we recommend: verified
  identity, the bucket as the source of truth, content-named (idempotent)
  shards, verified uploads with retries, an atomic checkpoint.

The calling convention (the same for a user's checkpoint/resume target)
------------------------------------------------------------------------
Every rank is one worker and calls ``run(inputs: dict) -> dict``. The worker
id comes from the environment, as on a TPU VM: ``TPU_WORKER_ID`` (the harness
sets it to the host's index; ``HOSTNAME`` and ``TPU_WORKER_HOSTNAMES`` are set
as on a real slice, and ``HARNESS_LIFE`` counts the restarts). ``inputs`` holds:

- ``workdir``: the repository directory the launcher (``launch_worker.sh``)
  starts the worker in; ``run`` first does ``os.chdir(workdir)``. Relative to
  it: the input stream ``data/streams/stream_{id:03d}.jsonl`` (one JSON sample
  per line, each with a unique ``"id"``) and the checkpoint
  ``checkpoints/checkpoint_worker_{id}.json`` (host-local disk: it survives a
  pre-emption, as the VM's disk does here).
- ``bucket``: the mount point of the shared bucket (object semantics: an
  object appears whole when its writer closes it, or not at all). Outputs go
  to ``{bucket}/activations/tpu_{id}/`` as ``*.jsonl`` objects, one output
  record per line, each carrying the ``"id"`` of the sample it came from
  (``model.extract``).
- ``shard_size``: samples per shard (the last shard may be smaller).
- ``upload_attempts`` (robust only): attempts per upload before giving up.
- ``total_samples`` and ``missing_streams`` are read by ``dataset.setup`` only
  (the size of the dataset split into one stream per host; which streams are
  absent), never by a worker.

The defaults and bounds of these keys are ``workload.CheckpointResumeInputs``.

The checkpoint is a JSON object; the checker reads ``processed_sample_ids``
(the samples it claims are safely uploaded) and every ``total_*`` counter
(neither may move backwards across restarts). ``run`` returns a summary:
``{"worker_id", "life", "samples_processed", "shards_uploaded", ...}``.

``PRELOAD`` lists the modules worth importing in the warm fork server.
"""

from __future__ import annotations

#: Built-in target name -> ``module:function``.
TARGETS = {
    "naive-worker": "harness.workloads.checkpoint_resume.naive:run",
    "robust-worker": "harness.workloads.checkpoint_resume.robust:run",
}

#: Only the pure helper: a target module's own code must first run inside its world.
PRELOAD = ("harness.workloads.checkpoint_resume.model",)

__all__ = ["TARGETS", "PRELOAD"]
