"""naive-sync's code (rank 0 writes /tmp/temp_config.yaml, a rendezvous, the others read it)
in a module that imports a heavy model package first, as a real training script does."""

import heavy_model  # noqa: F401 - its import takes seconds: the point

from harness.workloads.config_sync.naive import run


def sync(inputs):
    return run(inputs)
