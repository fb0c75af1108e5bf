"""Computed at import: ROUNDS rounds of sha256, about a third of a second of one core on this
project's machine (``HEAVY_MODEL_ROUNDS`` sets it: 6,000,000 is two seconds)."""

import hashlib
import os


def _build(rounds: int) -> dict[int, str]:
    digest = b"seed"
    out = {}
    for i in range(rounds):
        digest = hashlib.sha256(digest).digest()
        if i % 1000 == 0:
            out[i] = digest.hex()[:8]
    return out


VOCAB = _build(int(os.environ.get("HEAVY_MODEL_ROUNDS", "1000000")))
