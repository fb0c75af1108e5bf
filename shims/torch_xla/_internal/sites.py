"""Where the user's code called in: ``file:line in function`` of the first frame outside
torch_xla and torch.

It imports nothing, of torch_xla or of the harness, so that the harness's pod recorder
(``harness/pod/recorder.py``), which wraps the real torch_xla's collectives, loads this very
file and names the same line for the same call as the shim does. A module whose globals set
``__call_site_transparent__`` is skipped too: the recorder's wrappers sit between the user's
code and torch_xla, and must not become the site of the calls they pass through.
"""

from __future__ import annotations

import os
from types import FrameType

TRANSPARENT = "__call_site_transparent__"


def user_site(frame: FrameType | None, packages: tuple[str, ...]) -> str | None:
    """The first frame from ``frame`` outwards that is in none of ``packages`` (directories),
    not in torch and not in a transparent module; None if every frame is."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if (not filename.startswith(packages) and "/torch/" not in filename
                and not frame.f_globals.get(TRANSPARENT)):
            return f"{os.path.basename(filename)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return None
