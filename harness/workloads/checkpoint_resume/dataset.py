"""The files a checkpoint/resume world starts with, and the files it watches.

``setup`` plays seed 003's ``create_dataset_streams.py`` (docs/seeds.md): the dataset split into
one JSONL stream per worker ("Handles remainder distribution"), present on
every VM's disk under the workdir. Pure: it returns ``Leftover`` files, the
world places them.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any

from harness.filesystem.sandbox import Leftover
from harness.topology import Topology
from harness.vocabulary import TRUTH_DIR

if TYPE_CHECKING:
    from harness.workloads.checkpoint_resume.workload import CheckpointResumeInputs

STREAM = "data/streams/stream_{worker:03d}.jsonl"
#: Where the builder tells the checker the world's bucket (on every host's '/'; watched)
LAYOUT_PATH = f"{TRUTH_DIR}/checkpoint-resume/layout.json"
_WORDS = ("grid", "rotate", "mirror", "fill", "count", "colour", "shape", "border", "tile",
          "object", "pattern", "symmetry", "crop", "scale", "sort", "gravity")


def split(total: int, workers: int) -> list[range]:
    """Contiguous dataset slices, the first ``total % workers`` one sample longer."""
    base, extra = divmod(total, workers)
    out, start = [], 0
    for w in range(workers):
        size = base + (1 if w < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def sample_id(index: int) -> str:
    return f"sample-{index:05d}"


def streams(total: int, workers: int, seed: int) -> dict[int, list[dict[str, Any]]]:
    """Every worker's samples; the text (not the ids) depends on the seed."""
    rng = random.Random(f"checkpoint-resume-{seed}")
    out: dict[int, list[dict[str, Any]]] = {}
    for worker, indices in enumerate(split(total, workers)):
        out[worker] = [{"id": sample_id(i),
                        "text": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))}
                       for i in indices]
    return out


def setup(inputs: CheckpointResumeInputs, topology: Topology, seed: int,
          roles: object = None) -> list[Leftover]:
    """One stream per host, on every host's disk, except ``missing_streams``."""
    del roles  # the streams are the harness's own: no target's file to aim at
    workdir = inputs.workdir.rstrip("/")
    missing = set(inputs.missing_streams)
    files = []
    for worker, samples in streams(inputs.total_samples, topology.hosts, seed).items():
        if worker in missing:
            continue
        text = "".join(json.dumps(s) + "\n" for s in samples)
        files.append(Leftover(f"{workdir}/{STREAM.format(worker=worker)}", text.encode()))
    files.append(Leftover(LAYOUT_PATH, json.dumps({"bucket": inputs.bucket}).encode()))
    return files


def bucket_of(files: dict[int, dict[str, str]]) -> str | None:
    """The world's bucket, as the builder recorded it (any rank's copy)."""
    for per_rank in files.values():
        text = per_rank.get(LAYOUT_PATH)
        if text:
            return str(json.loads(text)["bucket"])
    return None


def watch(inputs: CheckpointResumeInputs) -> list[str]:
    """The streams (the checker's ground truth), the checkpoints and the whole bucket (a
    worker's own layout may put its outputs anywhere in it)."""
    workdir, bucket = inputs.workdir.rstrip("/"), inputs.bucket.rstrip("/")
    return [f"{workdir}/data/streams/*.jsonl", f"{workdir}/checkpoints/*", f"{bucket}/*",
            LAYOUT_PATH]
