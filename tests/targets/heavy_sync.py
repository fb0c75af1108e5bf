"""plain_sync in a module that imports a heavy model package first, as a real training
script does."""

import heavy_model  # noqa: F401 - its import takes seconds: the point
import plain_sync


def sync(inputs):
    return plain_sync.sync(inputs)
