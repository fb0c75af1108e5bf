"""heavy_sync without its heavy import: the same code, to compare verdicts with."""

from harness.workloads.config_sync.naive import run


def sync(inputs):
    return run(inputs)
