"""What both reference workers share: the stand-in for the model's forward pass.

``extract`` plays ``qwen2_jax_with_hooks``: one output record per sample, a pure
function of the sample (as a deterministic forward pass is). The record carries
the sample's id, so that the bucket can be audited sample by sample, and a short
digest standing for the activations (records stay small: reports show them).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def extract(sample: dict[str, Any]) -> dict[str, Any]:
    digest = hashlib.sha256(json.dumps(sample, sort_keys=True).encode()).hexdigest()
    return {"id": sample["id"], "act": digest[:12]}


def record_line(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True) + "\n"
