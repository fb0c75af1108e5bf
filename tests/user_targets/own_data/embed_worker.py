"""A stranger's pre-emptible worker with its own layout: tab-separated embeddings under
``{bucket}/embeddings/worker-N/part-KKKK.tsv``, its progress in ``{workdir}/state/progress-N.json``
written to a temporary file and renamed. Parts are numbered: a part redone after a
pre-emption replaces itself."""

import hashlib
import json
import os


def main(inputs):
    worker = int(os.environ["TPU_WORKER_ID"])
    stream = os.path.join(inputs["workdir"], "data", "streams", f"stream_{worker:03d}.jsonl")
    with open(stream) as f:
        samples = [json.loads(line) for line in f if line.strip()]
    out = os.path.join(inputs["bucket"], "embeddings", f"worker-{worker}")
    os.makedirs(out, exist_ok=True)
    state = os.path.join(inputs["workdir"], "state", f"progress-{worker}.json")
    os.makedirs(os.path.dirname(state), exist_ok=True)
    done = 0
    if os.path.exists(state):
        with open(state) as f:
            done = json.load(f)["parts_done"]
    per_part = 5
    parts = [samples[i:i + per_part] for i in range(0, len(samples), per_part)]
    for k in range(done, len(parts)):
        with open(os.path.join(out, f"part-{k:04d}.tsv"), "w") as f:
            f.write("sample\tembedding\n")
            for s in parts[k]:
                vec = hashlib.sha256(s["text"].encode()).hexdigest()[:16]
                f.write(f"{s['id']}\t{vec}\n")
        with open(state + ".tmp", "w") as f:
            json.dump({"parts_done": k + 1}, f)
        os.replace(state + ".tmp", state)
    return {"worker_id": worker, "parts": len(parts)}
