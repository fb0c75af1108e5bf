"""Config sync: every rank must end with the same config, rank 0's, of this run."""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from harness.checkers.common import (
    Baseline,
    Judgement,
    array_of,
    as_json,
    canonical,
    end_of_world,
    judged,
    ranks_phrase,
)
from harness.vocabulary import FAIL, PASS
from harness.world.result import WorldResult


def digest(config: Any) -> str:
    """What ranks compare: the same only for the same config, types and signs included."""
    return hashlib.sha256(canonical(config).encode("utf-8", "surrogatepass")).hexdigest()


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
        except ValueError as exc:  # 10**5000
            uncomparable.setdefault(f"{type(exc).__name__}: {exc}", []).append(rank)
        except RecursionError:
            uncomparable.setdefault("RecursionError: it holds itself, or is nested deeper than "
                                    f"{sys.getrecursionlimit()} levels", []).append(rank)
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
        return Judgement(FAIL, f"{_all(ranks)} another run's config: {shown}{more}")
    return Judgement(PASS, f"{_all(ranks)} the same config "
                           f"(sha256 {digests[reference_rank][:12]})",
                     unexercised=_ignores_its_config(baseline))


def _ignores_its_config(baseline: Baseline | None) -> str | None:
    """Why a config that every rank agrees on says nothing (None: it does): the target's
    fault-free runs returned the very same value for this run's config and another run's,
    so it does not hand over the config it is given (it returns constants, or a part of
    the config no run changes), and no cell can tell whose config a rank holds."""
    if baseline is None or not isinstance(baseline.this_run, dict) \
            or not isinstance(baseline.another_run, dict):
        return None
    try:
        same = digest(baseline.this_run) == digest(baseline.another_run)
    except (ValueError, RecursionError):
        return None
    return ("the target returned the same config in a fault-free run handed another run's "
            "config: it does not return the config it is handed (inputs['config']), so "
            "agreeing ranks say nothing of the handoff") if same else None


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
        shown = ", ".join(_difference(k, a, b) for k, a, b in keys[:3])
        more = f" (+{len(keys) - 3} more)" if len(keys) > 3 else ""
        by_diff.setdefault(shown + more, []).append(rank)
    parts = [f"{ranks_phrase(rs)} {'differs' if len(rs) == 1 else 'differ'} from rank {ref_rank}: "
             f"{what}"
             for what, rs in sorted(by_diff.items(), key=lambda kv: min(kv[1]))]
    return "; ".join(parts)


def _difference(key: str, a: Any, b: Any) -> str:
    """``lr 0.0 != -0.0``; when the two print alike, what tells them apart: their types, or
    the first element where two arrays differ."""
    what = f"{key} " if key else "the config: "
    if repr(a) != repr(b):
        return f"{what}{a!r} != {b!r}"
    if type(a) is not type(b):
        return f"{what}{a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"
    x, y = array_of(a), array_of(b)
    if x is not None and y is not None and x.shape == y.shape and x.dtype == y.dtype:
        where = next((i for i, (p, q) in enumerate(zip(x.flat, y.flat)) if repr(p) != repr(q)), None)
        if where is not None:
            return f"{what}{a!r} != {b!r}: element {where} is {x.flat[where]!r} != {y.flat[where]!r}"
    return f"{what}{a!r} != {b!r} (they print alike)"


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def key_diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every dotted key whose value differs between two nested mappings, as ``canonical``
    tells values apart (a key one side lacks holds ``MISSING``)."""
    if isinstance(a, dict) and type(a) is type(b):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(a) | set(b), key=lambda k: (str(k), type(k).__name__)):
            child = f"{path}.{key}" if path else str(key)
            out += key_diff(a.get(key, MISSING), b.get(key, MISSING), child)
        return out
    return [] if canonical(a) == canonical(b) else [(path, a, b)]


def _all(ranks: list[Any]) -> str:
    """``all 8 ranks hold``; a world of one rank: ``the one rank holds``."""
    return "the one rank holds" if len(ranks) == 1 else f"all {len(ranks)} ranks hold"
