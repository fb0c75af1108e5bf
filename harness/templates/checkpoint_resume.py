"""Your checkpointing worker, as the harness calls it. `harness init` wrote this file: edit it.

The harness runs this on every host of a simulated TPU pod with a stream of samples each,
pre-empts workers mid-upload, restarts them, and checks that every sample's output lands in
the bucket exactly once and no checkpoint moves backwards:

    harness run --target {target} --workload checkpoint-resume

inputs: "bucket" (where outputs go, a Cloud Storage FUSE mount on a pod), "workdir" (where
your worker runs: its streams are data/streams/stream_NNN.jsonl there), "total_samples".
"""


def process_stream(inputs):
    # EDIT: call your own worker here. This stand-in is the harness's reference worker
    # (harness/workloads/checkpoint_resume/robust.py): read it for the contract, then
    # replace this line with your code.
    from harness.workloads.checkpoint_resume.robust import run

    return run(inputs)
