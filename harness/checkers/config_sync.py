"""Config sync: every rank must end with the same config, rank 0's, of this run."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.checkers.common import Baseline, Judgement, as_json, end_of_world, judged, ranks_phrase
from harness.vocabulary import FAIL, PASS
from harness.world.result import WorldResult


def digest(config: Any) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def check(result: WorldResult, baseline: Baseline | None = None) -> Judgement:
    """Every judged rank returned a config (its validity, if a checker was given, was
    judged in the rank: ``common.end_of_world``), the same on every rank, and not the
    one another run of the job makes (``baseline``: what the fault-free runs returned)."""
    ended = end_of_world(result)
    if ended is not None:
        return ended
    ranks = judged(result)
    values = {r.rank: r.value for r in ranks}
    shapeless = [r for r, config in values.items() if not isinstance(config, dict)]
    if shapeless:
        kinds = sorted({type(values[r]).__name__ for r in shapeless})
        return Judgement(FAIL, f"{ranks_phrase(shapeless)} returned no config: "
                               f"{' / '.join(kinds)} instead of a dict")
    digests: dict[int, str] = {}
    uncomparable: dict[str, list[int]] = {}
    for rank, config in values.items():
        try:
            digests[rank] = digest(config)
        except (TypeError, ValueError, RecursionError) as exc:  # mixed keys, 10**5000, a cycle
            uncomparable.setdefault(f"{type(exc).__name__}: {exc}", []).append(rank)
    if uncomparable:
        return Judgement(FAIL, "; ".join(
            f"{ranks_phrase(rs)} returned a config that cannot be compared ({why})"
            for why, rs in sorted(uncomparable.items(), key=lambda kv: min(kv[1]))))
    reference_rank = min(values)
    reference = values[reference_rank]
    differing = {r: c for r, c in values.items() if digests[r] != digests[reference_rank]}
    if differing:
        return Judgement(FAIL, diff_line(reference_rank, reference, differing))
    foreign = another_runs(reference, baseline)
    if foreign:
        shown = ", ".join(f"{k} {theirs!r} (this run's: {mine!r})" for k, theirs, mine in foreign[:3])
        more = f" (+{len(foreign) - 3} more)" if len(foreign) > 3 else ""
        return Judgement(FAIL, f"all {len(ranks)} ranks hold another run's config: {shown}{more}")
    return Judgement(PASS, f"all {len(ranks)} ranks hold the same config "
                           f"(sha256 {digests[reference_rank][:12]})")


def another_runs(config: dict, baseline: Baseline | None) -> list[tuple[str, Any, Any]]:
    """``(key, another run's value, this run's)`` for each key where ``config`` holds what
    only another run of the job makes: the keys its inputs change (a learning rate, a
    seed, a run name), not those a target draws anew each run (a timestamp matches neither)."""
    if baseline is None or not isinstance(baseline.this_run, dict) \
            or not isinstance(baseline.another_run, dict):
        return []
    held = as_json(config)
    if not isinstance(held, dict):
        return []
    theirs = {k: b for k, _, b in key_diff(baseline.this_run, baseline.another_run)}
    return [(k, got, mine) for k, mine, got in key_diff(baseline.this_run, held)
            if k in theirs and got == theirs[k]]


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
