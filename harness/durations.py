"""Durations as people write them on a command line: one grammar for every option.

``90`` and ``90s`` are seconds, ``5m`` minutes, ``6h`` hours, and parts add up:
``1m30s``, ``1h30m``, ``0.5m``."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)([hms]?)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}


def parse_duration(text: str) -> float:
    """Seconds, more than 0; a ValueError that says how to write one otherwise."""
    spelled = text.strip().lower()
    parts = _PART.findall(spelled)
    if not spelled or "".join(n + u for n, u in parts) != spelled or \
            (len(parts) > 1 and any(not u for _, u in parts)):
        raise ValueError(f"{text!r} is not a duration: write 90s, 5m, 1h or 1h30m")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be more than 0 seconds")
    return seconds
