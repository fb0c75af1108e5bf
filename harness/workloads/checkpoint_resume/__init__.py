"""Checkpoint/resume: independent pre-emptible workers (seed 003, docs/seeds.md).

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

The contract a user's worker implements
---------------------------------------

``harness run --target mypkg/worker.py:main --workload checkpoint-resume``
runs ``main(inputs: dict)`` as every worker (one per host), as the VM's
launcher would run the worker's main. A worker is a program: what it needs
comes from its environment and its paths, so there is no other shape to adapt.

**Identity**: the environment, as on a TPU VM: ``TPU_WORKER_ID`` (the host's
index), ``HOSTNAME`` and ``TPU_WORKER_HOSTNAMES`` as on a real slice;
``HARNESS_LIFE`` counts the restarts (for logs; a worker should not need it).

**inputs** (defaults and bounds: ``workload.CheckpointResumeInputs``):

- ``workdir``: the directory the launcher starts the worker in (the worker
  usually changes to it; it is on the host's disk, which survives a
  pre-emption). The input stream is ``{workdir}/data/streams/stream_{id:03d}.jsonl``:
  one JSON sample per line, each with a unique ``"id"`` (a string) and the
  sample's other fields;
- ``bucket``: the mount point of the shared bucket, with object semantics (an
  object appears whole when its writer closes it, or not at all);
- ``shard_size``: samples per output object (a hint; the checker does not
  count objects);
- ``upload_attempts``: how many times an upload may be tried (a hint);
- ``total_samples``, ``missing_streams``: the builder's; a worker must not
  read them.

**What it must write**: for every sample of its stream, one output record,
a JSON object on its own line carrying the sample's ``"id"``, in an object
``{bucket}/activations/tpu_{id}/<any name>.jsonl``; or, in a layout of its own,
a line holding the sample's id (as a JSON field or a column) in any object under
the bucket (an object that is one JSON document holds no records). Object names
are the worker's choice (idempotent names make a redone shard replace itself).
The catalog's faults aim at the worker's roles, learned from its fault-free run
(``harness.roles``): ``output`` (the directories its uploads go to), ``state`` (a
file it rewrites: its checkpoint) and ``input`` (its stream).

**What it may write**: a checkpoint, any ``{workdir}/checkpoints/*.json``
holding a JSON object. If it lists ``processed_sample_ids`` (the samples the
worker claims are safely uploaded), the checker holds it to them: a sample a
checkpoint claimed must be in the bucket, and a claim must never be withdrawn
by a later state. Every integer ``total_*`` key is a counter that must never
decrease across restarts. A checkpoint elsewhere, or of another schema, is
fine; its claims are then not judged, and the detail says so where it would
have mattered.

**What it returns**: anything; a dict with ``"worker_id"`` lets the checker
flag a rank that ran as another worker. A worker that cannot do its stream
(no stream, an identity it cannot trust, an upload that keeps failing) must
**raise** with a clear message: that is how it says so.

**How it is judged** (``harness.checkers.exactly_once``, from the input
streams, the bucket's objects and the checkpoints above only; never from what
the worker returns about its own work): after the last restart, every sample
of every stream is in the bucket exactly once; no record is for a sample in no
stream or fails to parse; no checkpoint claims a sample the bucket lacks or
moves backwards. FAIL when anything is silently wrong; ERROR when the only
problem is that some workers raised (the samples missing are exactly theirs,
and no checkpoint claimed them), loud when each raised with a message; PASS
otherwise.

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
