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

A sample is an id (the harness's own data: column 0) or, for a user's own data, a
digest of its content (``harness.workloads.data_sharding.content``), counted as a
multiset: the reference epoch is what a fault-free world of one rank read
(``Epoch.from_reference``), and a sample is named by its place in that epoch and
what it holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

from harness.checkers.common import Judgement, end_of_world, judged, ranks_phrase
from harness.vocabulary import FAIL, HANG, PASS, plural
from harness.world.result import WorldResult

_EXAMPLES = 4


@dataclass(frozen=True)
class Epoch:
    """What one epoch must cover: its samples (each as often as the data holds it) and the
    global batch size."""

    ids: Collection[int]
    global_batch_size: int
    where: str = "the dataset"
    #: sample -> what it holds, for a report line (content identity)
    names: Mapping[int, str] = field(default_factory=dict)
    #: True: the samples are the content a world of one rank read (``from_reference``)
    by_content: bool = False

    @property
    def counts(self) -> Counter[int]:
        return Counter(self.ids)

    @classmethod
    def from_expected(cls, expected: dict[str, Any]) -> Epoch:
        start, n = int(expected.get("id_start", 0)), int(expected["num_samples"])
        return cls(frozenset(range(start, start + n)), int(expected["global_batch_size"]),
                   str(expected.get("data_dir") or "the dataset"))

    @classmethod
    def from_reference(cls, value: Any, global_batch_size: int, where: str) -> Epoch | None:
        """The epoch a fault-free world of one rank read (its rank's returned value), or
        None if it returned no batches."""
        batches = _batches(value, "batches")
        if batches is None:
            return None
        names = value.get("names") if isinstance(value.get("names"), dict) else {}
        order = [i for b in batches for i in b]
        shown: dict[int, str] = {}
        for n, i in enumerate(order, 1):
            shown.setdefault(i, f"#{n} {names.get(str(i), '')}".rstrip())
        return cls(tuple(order), global_batch_size, where, shown, by_content=True)

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def droppable(self) -> int:
        return self.size % self.global_batch_size

    def examples(self, samples: Collection[int], also: Mapping[int, str] | None = None) -> str:
        """A few of ``samples``, named: ids, or (content) their place in the reference
        epoch and what they hold (``also``: names the ranks gave, for samples outside it)."""
        if not self.by_content:  # ints, then the strings a loader's dropped_ids may hold
            shown = sorted(samples, key=lambda i: (isinstance(i, str), i))
            return ", ".join(map(str, shown[:_EXAMPLES])) + (", ..." if len(shown) > _EXAMPLES else "")
        order = {i: n for n, i in enumerate(self.names)}
        shown = sorted(samples, key=lambda i: (order.get(i, len(order)), i))
        return "; ".join(self.name(i, also) for i in shown[:2]) + ("; ..." if len(shown) > 2 else "")

    def name(self, sample: int, also: Mapping[int, str] | None = None) -> str:
        if not self.by_content:
            return f"sample {sample}"
        return "sample " + (self.names.get(sample) or (also or {}).get(sample) or f"{sample:016x}")


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
    if ended is not None and ended.outcome == HANG:
        return Judgement(HANG, ended.detail + _steps_taken(result))
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

    names: dict[int, str] = {}  # what the ranks say their samples hold (content identity)
    for value in values.values():
        if epoch.by_content and isinstance(value, dict) and isinstance(value.get("names"), dict):
            for key, text in value["names"].items():
                if isinstance(key, str) and key.isdigit() and isinstance(text, str):
                    names.setdefault(int(key), text[:80])
    dataset = epoch.counts

    # 1. samples from outside the dataset
    foreign: dict[int, set[int]] = {}
    for rank, batches in first.items():
        alien = {i for b in batches for i in b if i not in dataset}
        if alien:
            foreign[rank] = alien
    if foreign:
        every = set().union(*foreign.values())
        if epoch.by_content:
            problems.append(
                f"{ranks_phrase(list(foreign))} trained on {len(every)} sample"
                f"{'s' if len(every) != 1 else ''} that a world of one rank never read from "
                f"{epoch.where} with the same seed (e.g. {epoch.examples(every, names)}): another "
                "version of the data, garbled bytes, or an order that depends on the world size "
                "or on unseeded randomness")
        else:
            problems.append(
                f"{ranks_phrase(list(foreign))} trained on {len(every)} sample ids that are not in "
                f"{epoch.where} (e.g. {epoch.examples(every)}): another version of the data, or "
                "garbled bytes")

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

    # 3. a sample read more often than the data holds it
    seen: dict[int, list[tuple[int, int]]] = {}
    for rank, batches in first.items():
        for index, batch in enumerate(batches):
            for i in batch:
                seen.setdefault(i, []).append((rank, index))
    twice = {i: where for i, where in seen.items() if len(where) > max(1, dataset.get(i, 0))}
    if twice:
        shown = "; ".join(
            f"{epoch.name(i, names)} in {' and '.join(f'rank {r} batch {b}' for r, b in where[:3])}"
            for i, where in sorted(twice.items(), key=lambda kv: kv[1])[:2])
        across = sorted({r for where in twice.values() for r, _ in where})
        held = ("more often than the data holds them" if any(dataset.get(i, 0) > 1 for i in twice)
                else "more than once")
        padded = len(twice) < len(first) and all(
            b == len(first[r]) - 1 for where in twice.values() for r, b in where[1:])
        pad = (" (every repeat is in a rank's last batch: a sampler that pads the epoch to a "
               "multiple of the ranks, as torch's DistributedSampler does unless drop_last=True)"
               if padded else "")
        problems.append(f"{len(twice)} sample{'s' if len(twice) != 1 else ''} read {held}, "
                        f"by {ranks_phrase(across)} (e.g. {shown}){pad}")

    # 4. samples never read
    unread = dataset - Counter({i: len(where) for i, where in seen.items()})
    missing = set(unread)
    n_missing = sum(unread.values())
    reported = None
    for value in values.values():
        dropped = value.get("dropped") if isinstance(value, dict) else None
        if isinstance(dropped, (list, tuple)):  # ints, or strings a loader names them by
            reported = (reported or set()) | {int(i) if isinstance(i, Integral) else str(i)
                                              for i in dropped}
    if n_missing > epoch.droppable:
        problems.append(
            f"{n_missing} of {epoch.size} samples never read by any rank (e.g. "
            f"{epoch.examples(missing)}): more than the last partial global batch ({epoch.size} "
            f"mod {epoch.global_batch_size} = {epoch.droppable}) a loader may drop")
    elif reported is not None and missing != reported:
        unreported, claimed = missing - reported, reported - missing
        what = []
        if unreported:
            what.append(f"{len(unreported)} never read and not reported as dropped "
                        f"(e.g. {epoch.examples(unreported)})")
        if claimed:
            what.append(f"{len(claimed)} reported as dropped but read or not in the data "
                        f"(e.g. {epoch.examples(claimed)})")
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
    if n_missing:
        covered = (f"covering {epoch.size - n_missing} of {epoch.size} samples (the last "
                   f"partial global batch dropped: {n_missing} samples, e.g. "
                   f"{epoch.examples(missing)})")
    else:
        covered = f"covering all {epoch.size} samples"
    padding = sum(int(v.get("padding", 0)) for v in values.values()
                  if isinstance(v, dict) and isinstance(v.get("padding"), int))
    if padding:
        covered += f", and {padding} padding row{'s' if padding != 1 else ''}"
    batches = f"{n_batches} batch{'' if n_batches == 1 else 'es'}"
    return Judgement(PASS, f"{plural(len(first), 'rank')} x {batches}: disjoint shards {covered}; "
                           "the same batches from a fresh loader with the same seed")


def _steps_taken(result: WorldResult) -> str:
    """For a HANG: how many batches the ranks that returned ran (the others wait in a step
    they never take: unequal batch counts)."""
    counts: dict[int, list[int]] = {}
    for r in judged(result):
        if r.outcome == PASS:
            batches = _batches(r.value, "batches")
            if batches is not None:
                counts.setdefault(len(batches), []).append(r.rank)
    if not counts:
        return ""
    groups = [(ranks_phrase(rs), f"{n} batch{'es' if n != 1 else ''}")
              for n, rs in sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    ran = f"{groups[0][0]} returned after {groups[0][1]} an epoch" + "".join(
        f" and {who} after {n}" for who, n in groups[1:])
    return (f" ({ran}: the ranks still waiting have more batches, and wait in the all-reduce "
            "of a step the others never take; unequal batch counts)")


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
