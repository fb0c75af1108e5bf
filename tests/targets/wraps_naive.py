"""A user's target that runs naive-sync's code through its module (as a team wrapping the
reference target to try it)."""

from harness.workloads.config_sync.naive import run


def sync(inputs):
    return run(inputs)
