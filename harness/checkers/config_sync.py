"""Config sync: every rank must end with the same, valid config: rank 0's."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.checkers.common import Judgement, end_of_world, judged, ranks_phrase
from harness.world.result import FAIL, PASS, WorldResult


def digest(config: Any) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def check(result: WorldResult, validate: Any = None) -> Judgement:
    """``validate(config) -> str | None`` names what is invalid (None: valid)."""
    ended = end_of_world(result)
    if ended is not None:
        return ended
    ranks = judged(result)
    values = {r.rank: r.value for r in ranks}
    invalid = {}
    for rank, config in values.items():
        problem = "returned no config" if not isinstance(config, dict) else \
            (validate(config) if validate else None)
        if problem:
            invalid.setdefault(problem, []).append(rank)
    if invalid:
        parts = [f"{ranks_phrase(rs)} returned an invalid config: {what}"  # lowest rank first
                 for what, rs in sorted(invalid.items(), key=lambda kv: min(kv[1]))]
        return Judgement(FAIL, "; ".join(parts))
    reference_rank = min(values)
    reference = values[reference_rank]
    differing = {r: c for r, c in values.items() if digest(c) != digest(reference)}
    if differing:
        return Judgement(FAIL, diff_line(reference_rank, reference, differing))
    return Judgement(PASS, f"all {len(ranks)} ranks hold the same valid config "
                           f"(sha256 {digest(reference)[:12]})")


def diff_line(ref_rank: int, reference: dict, others: dict[int, dict]) -> str:
    """``ranks 1-7 differ from rank 0: run_name 'a' != 'b'`` (first keys that differ)."""
    by_diff: dict[str, list[int]] = {}
    for rank, config in others.items():
        keys = key_diff(reference, config)
        shown = ", ".join(f"{k} {a!r} != {b!r}" for k, a, b in keys[:3])
        more = f" (+{len(keys) - 3} more)" if len(keys) > 3 else ""
        by_diff.setdefault(shown + more, []).append(rank)
    parts = [f"{ranks_phrase(rs)} {'differs' if len(rs) == 1 else 'differ'} from rank {ref_rank}: "
             f"{what}"
             for what, rs in sorted(by_diff.items(), key=lambda kv: min(kv[1]))]
    return "; ".join(parts)


def key_diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every dotted key whose value differs between two nested mappings."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(a) | set(b), key=str):
            child = f"{path}.{key}" if path else str(key)
            out += key_diff(a.get(key, "<missing>"), b.get(key, "<missing>"), child)
        return out
    return [] if a == b else [(path, a, b)]
