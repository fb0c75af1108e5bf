"""Data sharding: every rank trained on its own shard, and together on the whole epoch.

Pure: the ranks' returned values (see ``harness.workloads.data_sharding``) and
the builder's ground truth in, a judgement out. The invariants, in the order a
detail line reports them:

1. every sample id a rank returns is in the dataset (else it read other data:
   another version, or garbled bytes);
2. every rank ran the same number of batches (else, on a pod, the ranks with
   more block forever in the last step's collective);
3. no sample is read twice, within a rank or across ranks (shards disjoint);
4. every sample is read, except at most one global batch's remainder
   (``N mod global_batch_size``): the last partial batch a loader may drop;
   if the loader reports what it dropped, exactly those;
5. a fresh loader with the same seed gives every rank the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any

from harness.checkers.common import Judgement, end_of_world, judged, ranks_phrase
from harness.vocabulary import FAIL, PASS
from harness.world.result import WorldResult

_EXAMPLES = 4


@dataclass(frozen=True)
class Epoch:
    """What one epoch must cover: the dataset's sample ids and the global batch size."""

    ids: frozenset[int]
    global_batch_size: int
    where: str = "the dataset"

    @classmethod
    def from_expected(cls, expected: dict[str, Any]) -> Epoch:
        start, n = int(expected.get("id_start", 0)), int(expected["num_samples"])
        return cls(frozenset(range(start, start + n)), int(expected["global_batch_size"]),
                   str(expected.get("data_dir") or "the dataset"))

    @property
    def droppable(self) -> int:
        return len(self.ids) % self.global_batch_size


def _examples(ids: Any) -> str:
    ids = sorted(ids)
    shown = ", ".join(map(str, ids[:_EXAMPLES]))
    return shown + (", ..." if len(ids) > _EXAMPLES else "")


def _batches(value: Any, key: str) -> list[list[int]] | None:
    if not isinstance(value, dict):
        return None
    batches = value.get(key)
    if not isinstance(batches, (list, tuple)) or not all(
            isinstance(b, (list, tuple)) and all(isinstance(i, Integral) and not isinstance(i, bool)
                                                 for i in b) for b in batches):
        return None
    return [[int(i) for i in b] for b in batches]


def check(result: WorldResult, epoch: Epoch | None) -> Judgement:
    ended = end_of_world(result)
    if ended is not None:
        return ended
    if epoch is None:
        return Judgement(FAIL, "no ground truth: the data-sharding builder's expected epoch "
                               "was not recorded (run the cell through the runner, or pass it)")
    return check_values({r.rank: r.value for r in judged(result)}, epoch)


def check_values(values: dict[int, Any], epoch: Epoch) -> Judgement:
    """The invariants over ``{rank: returned value}``."""
    problems: list[str] = []
    first: dict[int, list[list[int]]] = {}
    malformed = []
    violations: dict[str, list[int]] = {}
    for rank, value in sorted(values.items()):
        if isinstance(value, dict) and isinstance(value.get("contract_violation"), str):
            violations.setdefault(value["contract_violation"], []).append(rank)
            continue
        batches = _batches(value, "batches")
        if batches is None:
            malformed.append(rank)
        else:
            first[rank] = batches
    if violations:
        return Judgement(FAIL, "; ".join(f"{ranks_phrase(rs)}: the target does not follow the "
                                         f"contract: {why}" for why, rs in violations.items()))
    if malformed:
        got = _kind(values[malformed[0]])
        return Judgement(FAIL, f"{ranks_phrase(malformed)} returned {got}, not the data-sharding "
                               "contract's dict with 'batches' (a list of lists of sample ids; "
                               "see harness.workloads.data_sharding)")
    if not first:
        return Judgement(FAIL, "no rank returned")

    # 1. ids from outside the dataset
    foreign: dict[int, set[int]] = {}
    for rank, batches in first.items():
        alien = {i for b in batches for i in b if i not in epoch.ids}
        if alien:
            foreign[rank] = alien
    if foreign:
        every = set().union(*foreign.values())
        problems.append(
            f"{ranks_phrase(list(foreign))} trained on {len(every)} sample ids that are not in "
            f"{epoch.where} (e.g. {_examples(every)}): another version of the data, or garbled bytes")

    # 2. batch counts
    counts: dict[int, list[int]] = {}
    for rank, batches in first.items():
        counts.setdefault(len(batches), []).append(rank)
    if len(counts) > 1:
        parts = [f"{ranks_phrase(rs)} {n} batch{'es' if n != 1 else ''}"
                 for n, rs in sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
        problems.append("unequal batch counts: " + ", ".join(parts)
                        + " (on a pod the ranks with more batches block in the last step's "
                          "collective)")

    # 3. a sample read twice
    seen: dict[int, list[tuple[int, int]]] = {}
    for rank, batches in first.items():
        for index, batch in enumerate(batches):
            for i in batch:
                seen.setdefault(i, []).append((rank, index))
    twice = {i: where for i, where in seen.items() if len(where) > 1}
    if twice:
        shown = "; ".join(
            f"sample {i} in {' and '.join(f'rank {r} batch {b}' for r, b in where[:3])}"
            for i, where in sorted(twice.items())[:2])
        across = sorted({r for where in twice.values() for r, _ in where})
        problems.append(f"{len(twice)} sample{'s' if len(twice) != 1 else ''} read more than once, "
                        f"by {ranks_phrase(across)} (e.g. {shown})")

    # 4. samples never read
    read = set(seen)
    missing = epoch.ids - read
    reported = None
    for value in values.values():
        dropped = value.get("dropped") if isinstance(value, dict) else None
        if isinstance(dropped, (list, tuple)):
            reported = (reported or set()) | {int(i) for i in dropped}
    if len(missing) > epoch.droppable:
        problems.append(
            f"{len(missing)} of {len(epoch.ids)} samples never read by any rank (e.g. {_examples(missing)}): "
            f"more than the last partial global batch ({len(epoch.ids)} mod "
            f"{epoch.global_batch_size} = {epoch.droppable}) a loader may drop")
    elif reported is not None and missing != reported:
        unreported, claimed = missing - reported, reported - missing
        what = []
        if unreported:
            what.append(f"{len(unreported)} never read and not reported as dropped "
                        f"(e.g. {_examples(unreported)})")
        if claimed:
            what.append(f"{len(claimed)} reported as dropped but read or not in the data "
                        f"(e.g. {_examples(claimed)})")
        problems.append("the dropped samples are not the ones reported: " + "; ".join(what))

    # 5. the same order from a fresh loader with the same seed
    differ: dict[str, list[int]] = {}
    for rank, batches in first.items():
        again = _batches(values[rank], "restart")
        if again is None:
            differ.setdefault("returned no 'restart' pass", []).append(rank)
        elif again != batches:
            at = next((k for k, (a, b) in enumerate(zip(batches, again)) if a != b),
                      min(len(batches), len(again)))
            was = batches[at] if at < len(batches) else "(none)"
            now = again[at] if at < len(again) else "(none)"
            differ.setdefault(f"at batch {at}: {_short(was)} then {_short(now)}", []).append(rank)
    if differ:
        parts = [f"{ranks_phrase(rs)} {what}" for what, rs in
                 sorted(differ.items(), key=lambda kv: min(kv[1]))]
        problems.append("a fresh loader with the same seed gives another order: " + "; ".join(parts[:2])
                        + (f" (+{len(parts) - 2} more)" if len(parts) > 2 else ""))

    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        return Judgement(FAIL, "; ".join(problems[:3]) + more)
    n_batches = next(iter(counts))
    if missing:
        covered = (f"covering {len(epoch.ids) - len(missing)} of {len(epoch.ids)} samples (the last "
                   f"partial global batch dropped: {len(missing)} samples, e.g. {_examples(missing)})")
    else:
        covered = f"covering all {len(epoch.ids)} samples"
    return Judgement(PASS, f"{len(first)} ranks x {n_batches} batches: disjoint shards {covered}; "
                           "the same batches from a fresh loader with the same seed")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return f"a dict with keys {sorted(map(str, value))[:6]}"
    if value is None:
        return "None"
    return f"a {type(value).__name__}"


def _short(batch: Any) -> str:
    if not isinstance(batch, list):
        return str(batch)
    return "[" + ", ".join(map(str, batch[:_EXAMPLES])) + (", ...]" if len(batch) > _EXAMPLES else "]")
