"""A team's own pre-emptible worker, as they wrote it (not the harness's code).

One worker per TPU VM: it reads its stream, writes one output file per chunk of
samples into its folder of the bucket, and remembers how far it got in a small
JSON file on the VM's disk, so that a restarted VM carries on from there.

    harness run --target tests/user_targets/ckpt_worker.py:main --workload checkpoint-resume
"""

import json
import os


def count_words(sample):
    return {"id": sample["id"], "words": len(sample["text"].split())}


def main(inputs):
    worker = int(os.environ["TPU_WORKER_ID"])
    os.chdir(inputs["workdir"])
    out_dir = os.path.join(inputs["bucket"], "activations", f"tpu_{worker}")
    progress_file = f"checkpoints/progress_{worker}.json"
    chunk_size = inputs["shard_size"]

    progress = {"next_line": 0, "files_written": 0}
    if os.path.exists(progress_file):
        with open(progress_file) as f:
            progress = json.load(f)

    with open(f"data/streams/stream_{worker:03d}.jsonl") as f:
        samples = [json.loads(line) for line in f if line.strip()]

    os.makedirs(out_dir, exist_ok=True)
    os.makedirs("checkpoints", exist_ok=True)
    while progress["next_line"] < len(samples):
        start = progress["next_line"]
        chunk = samples[start:start + chunk_size]
        # named by position in the stream: writing the same chunk again replaces it
        with open(os.path.join(out_dir, f"part-{start:06d}.jsonl"), "w") as f:
            for sample in chunk:
                f.write(json.dumps(count_words(sample)) + "\n")
        progress = {"next_line": start + len(chunk), "files_written": progress["files_written"] + 1}
        with open(progress_file + ".tmp", "w") as f:
            json.dump(progress, f)
        os.replace(progress_file + ".tmp", progress_file)

    return {"worker_id": worker, "samples": len(samples)}
