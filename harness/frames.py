"""Which code is the harness's machinery and which is the user's: one answer for the rank
(naming the line that made an operation) and for every report (hiding the harness's frames).

Kept apart from ``reports`` so that a rank can ask without importing the renderers."""

from __future__ import annotations

import functools
import os
import re

_HARNESS_DIR = os.path.dirname(os.path.realpath(__file__))
#: The reference targets are code under test, not the harness's machinery; the modules beside
#: them that run a workload (the data-sharding adapter that calls a user's loader, the
#: checkers' helpers, the datasets) are the machinery.
_TARGETS_DIR = os.path.join(_HARNESS_DIR, "workloads")
_WORKLOAD_MACHINERY = frozenset({"__init__.py", "base.py", "registry.py", "workload.py",
                                 "adapter.py", "content.py", "own_data.py", "dataset.py"})
#: The harness as a pod's workers run it (``harness.pod.sync.lib_dir``): its frames there
#: are its machinery too.
_ON_A_WORKER = re.compile(r"/\.harness-pod/lib/[0-9a-f]+/harness/(?!workloads/)")


@functools.lru_cache(maxsize=4096)
def own_frame(path: str) -> bool:
    """A frame of the harness's machinery (the bootstrap that calls the target, the
    filesystem view under its ``open``), which no user wrote and none can act on. (Asked
    for every frame of every report's traceback: a file's answer is kept.)"""
    if _ON_A_WORKER.search(path):
        return True
    real = os.path.realpath(path)
    if not real.startswith(_HARNESS_DIR + os.sep):
        return False
    return not real.startswith(_TARGETS_DIR + os.sep) or \
        os.path.basename(real) in _WORKLOAD_MACHINERY
