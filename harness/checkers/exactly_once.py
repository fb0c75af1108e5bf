"""Exactly-once: after the last restart, every input sample is in the uploaded
outputs exactly once, and no worker's checkpoint ever moved backwards.

Pure: it reads only the ``WorldResult`` -- the watched files at the end
(``files``: the bucket, each host's checkpoint and input streams) and the
``snapshot`` events of the history (each rank's files every time it left,
pre-empted or not). The input streams, as the world's disks held them, are the
ground truth of what had to be processed; nothing the targets say is trusted.

What it reads is the written contract of ``harness.workloads.checkpoint_resume``
and nothing a reference worker happens to do:

- the input streams ``{workdir}/data/streams/stream_NNN.jsonl`` (the harness's
  builder writes them: one JSON sample with an ``"id"`` per line);
- the outputs in the bucket, ``{bucket}/activations/tpu_N/*.jsonl`` (any object
  name; one JSON record with the sample's ``"id"`` per line), or any other object
  under the bucket in the worker's own layout and format: each line holding one
  sample's id (``sample-00017``, as JSON or as a column) is a record of that sample;
  lines without one are not records (a header), and neither is an object that is one
  JSON document (a manifest, a checkpoint kept in the bucket);
- optionally, the worker's checkpoints: any ``{workdir}/checkpoints/*.json``
  holding a JSON object. Its ``processed_sample_ids`` (a list) are the samples
  it claims are uploaded, and every integer ``total_*`` is a counter that must
  never decrease. A worker may keep no such file, or other keys: then those
  claims are not judged, and the detail says so where it would have mattered;
- the ``worker_id`` a worker returns, if it returns one (optional).

Outcomes:

- HANG or CRASH as every workload's (``common.end_of_world``).
- FAIL when anything is silently wrong: a sample uploaded twice, a record that
  is not an input sample or does not parse, a checkpoint that moved backwards,
  or a lost sample that nobody announced: one a checkpoint claimed as
  processed, or one whose worker returned as if its work were done.
- ERROR when the only problem is that some workers raised: the samples missing
  are exactly those of workers that raised before claiming them. It is
  *loud* when every one of them raised with a clear message. For independent
  workers this is the reading of "a loud, clear error on every surviving rank":
  every worker that could not finish its own stream said so, and every worker
  that returned delivered its stream exactly once. A worker without a stream
  (absent on its host) must raise.
- PASS otherwise. Samples of a worker the fault plan killed for good (a
  ``kill``, not a pre-emption) are not judged, as its rank is not.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.checkers.common import Judgement, end_of_world, judged, ranks_phrase, why_not_loud
from harness.history import format_ranks
from harness.vocabulary import CRASH, ERROR, FAIL, HANG, PASS, plural
from harness.world.result import WorldResult

STREAM = re.compile(r"/data/streams/stream_(\d+)\.jsonl$")
#: a sample's id inside a line of a worker's own output format
SAMPLE_ID = re.compile(r"sample-\d+")
OUTPUT = re.compile(r"/activations/tpu_(\d+)/([^/]+\.jsonl)$")
CHECKPOINT = re.compile(r"/checkpoints/[^/]+\.json$")
SHOWN = 4  # ids named in a detail line before "(+n more)"


def ids_phrase(ids: list[str] | set[str]) -> str:
    """``sample-00001, sample-00002, ... (+6 more)``: the first few, sorted."""
    ordered = sorted(ids)
    more = f" (+{len(ordered) - SHOWN} more)" if len(ordered) > SHOWN else ""
    return ", ".join(ordered[:SHOWN]) + more


@dataclass
class Audit:
    """What the files say, before any verdict."""

    expected: dict[str, int] = field(default_factory=dict)  # sample id -> worker whose stream has it
    streams: set[int] = field(default_factory=set)  # workers whose stream exists on some host
    seen: dict[str, list[str]] = field(default_factory=dict)  # sample id -> objects holding it
    objects: int = 0
    no_records: list[str] = field(default_factory=list)  # objects of an own layout without one
    corrupt: list[str] = field(default_factory=list)  # "object:line"
    unknown: dict[str, list[str]] = field(default_factory=dict)  # id not in any stream -> objects
    claimed: dict[str, set[int]] = field(default_factory=dict)  # sample id -> ranks claiming it
    backwards: list[str] = field(default_factory=list)
    unreadable: list[tuple[int, str]] = field(default_factory=list)  # (rank, after when)
    checkpoints: int = 0  # checkpoint files seen (any rank, any time)
    with_claims: int = 0  # of those, the ones that ever listed processed_sample_ids


def _one_document(text: str) -> bool:
    """A file that is one JSON document over several lines (not JSON lines)."""
    if text.count("\n") < 2:
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def audit(result: WorldResult, bucket: str | None = None) -> Audit:
    """What the files say; ``bucket``: where the outputs are (None: the contract's
    ``activations/tpu_N/*.jsonl`` objects only)."""
    a = Audit()
    final = result.files or {}
    snapshots = [e for e in result.history if e.kind == "snapshot"]
    # Ground truth: every stream any host held, at any exit or at the end.
    for files in [*(e.detail.get("files", {}) for e in snapshots), *final.values()]:
        for path, text in files.items():
            m = STREAM.search(path)
            if m:
                worker = int(m.group(1))
                a.streams.add(worker)
                for line in text.splitlines():
                    try:
                        a.expected.setdefault(json.loads(line)["id"], worker)
                    except (ValueError, KeyError, TypeError):
                        continue
    # The bucket at the end: the mount is shared, but take the union of views.
    objects: dict[str, str] = {}
    for files in final.values():
        for path, text in files.items():
            if bucket is None and OUTPUT.search(path) or \
                    bucket is not None and path.startswith(bucket.rstrip("/") + "/"):
                objects.setdefault(path, text)
    a.objects = len(objects)
    for path, text in sorted(objects.items()):
        short = "/".join(path.rsplit("/", 2)[-2:])
        if not OUTPUT.search(path):  # the worker's own layout: the ids its lines hold
            if _one_document(text):
                a.objects -= 1
                continue
            records = 0
            for line in text.splitlines():
                ids = set(SAMPLE_ID.findall(line))
                if len(ids) != 1:
                    continue
                sid = ids.pop()
                records += 1
                if sid in a.expected:
                    a.seen.setdefault(sid, []).append(short)
                else:
                    a.unknown.setdefault(sid, []).append(short)
            if not records:
                a.no_records.append(short)
            continue
        for number, line in enumerate(text.splitlines(), 1):
            try:
                sid = json.loads(line)["id"]
            except (ValueError, KeyError, TypeError):
                a.corrupt.append(f"{short}:{number}")
                continue
            if sid in a.expected:
                a.seen.setdefault(sid, []).append(short)
            else:
                a.unknown.setdefault(str(sid), []).append(short)
    # Checkpoints, rank by rank, in the order the rank left them.
    states: dict[tuple[int, str], list[tuple[str, Any]]] = {}
    for event in snapshots:
        life = event.detail.get("life", 0)
        for path, text in event.detail.get("files", {}).items():
            if CHECKPOINT.search(path) and event.rank is not None:
                seq = states.setdefault((event.rank, path), [])
                if not seq or seq[-1][1] != text:  # a state is named by the exit that first left it
                    seq.append((f"life {life}", text))
    for rank, files in final.items():
        for path, text in files.items():
            if CHECKPOINT.search(path):
                seq = states.setdefault((rank, path), [])
                if not seq or seq[-1][1] != text:
                    seq.append(("the end", text))
    a.checkpoints = len(states)
    for (rank, path), seq in sorted(states.items()):
        name = path.rsplit("/", 1)[-1]
        if any(isinstance((_checkpoint(text) or {}).get("processed_sample_ids"), list)
               for _, text in seq):
            a.with_claims += 1
        previous: tuple[str, dict[str, Any]] | None = None
        for when, text in seq:
            state = _checkpoint(text)
            if state is None:
                a.unreadable.append((rank, when))
                continue
            for sid in state.get("processed_sample_ids") or []:
                if isinstance(sid, str):
                    a.claimed.setdefault(sid, set()).add(rank)
            if previous is not None:
                went = _backwards(previous[1], state)
                if went:
                    a.backwards.append(f"rank {rank}'s {name} moved backwards from {previous[0]} "
                                       f"to {when}: {went}")
            previous = (when, state)
    return a


def _checkpoint(text: str) -> dict[str, Any] | None:
    try:
        state = json.loads(text)
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def _backwards(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    parts = []
    before, after = old.get("processed_sample_ids"), new.get("processed_sample_ids")
    if isinstance(before, list) and isinstance(after, list):
        dropped = set(map(str, before)) - set(map(str, after))
        if dropped:
            parts.append(f"{plural(len(dropped), 'sample')} no longer processed "
                         f"({ids_phrase(dropped)})")
    for key in sorted(k for k in old if k.startswith("total_")):
        a, b = old.get(key), new.get(key)
        if isinstance(a, int) and isinstance(b, int) and b < a:
            parts.append(f"{key} {a} -> {b}")
    return "; ".join(parts) or None


def check(result: WorldResult, worker_of_rank: Mapping[int, int],
          bucket: str | None = None) -> Judgement:
    """``worker_of_rank``: which worker (stream) each rank is meant to be (its host);
    ``bucket``: the bucket's mount point, where a worker's own layout puts its outputs."""
    ended = end_of_world(result)
    if ended is not None and ended.outcome in (HANG, CRASH):
        return ended
    if ended is not None and ended.outcome == FAIL and not judged(result):
        return ended
    a = audit(result, bucket)
    ranks = {r.rank: r for r in judged(result)}
    killed = {r.rank for r in result.ranks if r.killed_by_fault}
    raised = {rank for rank, r in ranks.items() if r.outcome == ERROR}
    returned = {rank for rank, r in ranks.items() if r.outcome == PASS}
    ranks_of: dict[int, set[int]] = {}
    for rank, worker in worker_of_rank.items():
        ranks_of.setdefault(worker, set()).add(rank)

    silent: list[str] = []
    excused: list[str] = []
    notes: list[str] = []
    claimed_lost: dict[int, list[str]] = {}  # worker -> lost ids a checkpoint claimed
    unannounced: dict[int, list[str]] = {}  # worker -> lost ids of a worker that returned
    explained: dict[int, list[str]] = {}  # worker -> lost ids of a worker that raised
    lost_by_worker: dict[int, list[str]] = {}
    for sid, worker in a.expected.items():
        if sid not in a.seen:
            lost_by_worker.setdefault(worker, []).append(sid)
    for worker in sorted(set(lost_by_worker) | (set(ranks_of) - a.streams)):
        owners = ranks_of.get(worker, set())
        if worker not in a.streams:
            if owners & returned:
                silent.append(f"worker {worker} ({ranks_phrase(sorted(owners))}) returned, but its "
                              "stream is on no host: its samples were never processed")
            else:
                notes.append(f"worker {worker} has no input stream on any host")
            continue
        lost = lost_by_worker.get(worker, [])
        claimed = [sid for sid in lost if sid in a.claimed]
        unclaimed = [sid for sid in lost if sid not in a.claimed]
        if claimed:
            claimed_lost[worker] = claimed
        if not unclaimed:
            continue
        if owners and owners <= killed:
            excused.append(f"worker {worker}: {plural(len(unclaimed), 'sample')} not judged "
                           "(its rank was killed by the fault plan)")
        elif owners & raised and not owners & returned:
            explained[worker] = unclaimed
        else:
            unannounced[worker] = unclaimed
    if claimed_lost:
        silent.append(_by_worker(claimed_lost, ranks_of, "lost that {whose} claim{s} processed",
                                 "its checkpoint", "their checkpoints"))
    if unannounced:
        silent.append(_by_worker(unannounced, ranks_of, "lost", "", ""))
    for rank in sorted(returned):
        value = _value(result, rank)
        meant = worker_of_rank.get(rank)
        if isinstance(value, dict) and meant is not None and value.get("worker_id") not in (None, meant):
            silent.append(f"rank {rank} (host of worker {meant}) ran as worker {value['worker_id']}")
    dups = {sid: where for sid, where in a.seen.items() if len(where) > 1}
    if dups:
        by_worker: dict[int, list[str]] = {}
        for sid in dups:
            by_worker.setdefault(a.expected[sid], []).append(sid)
        first = sorted(dups)[0]
        copies = Counter(dups[first])
        where = ", ".join(o + (f" x{n}" if n > 1 else "") for o, n in sorted(copies.items()))
        silent.append(_by_worker(by_worker, ranks_of, "uploaded more than once", "", "")
                      + f" ({first} in {where})")
    if a.unknown:
        silent.append(f"{plural(len(a.unknown), 'record')} for samples in no input stream: "
                      f"{ids_phrase(set(a.unknown))}")
    if a.corrupt:
        silent.append(f"{plural(len(a.corrupt), 'unparseable output line')}: "
                      f"{', '.join(a.corrupt[:SHOWN])}")
    silent.extend(a.backwards)

    if not a.objects and lost_by_worker:
        notes.append("no output object in the bucket (activations/tpu_N/*.jsonl, or any object "
                     "whose lines hold the samples' ids)")
    elif a.no_records and lost_by_worker:
        notes.append(f"{plural(len(a.no_records), 'object')} in the bucket "
                     f"{'holds' if len(a.no_records) == 1 else 'hold'} no record "
                     f"({', '.join(a.no_records[:SHOWN])}): a record is a line holding one "
                     "sample's id (see the checkpoint-resume contract)")
    if explained and not a.with_claims and not a.unreadable:  # (a torn one says so below)
        notes.append(_NO_CLAIMS + ": whether the raising workers had claimed the missing samples "
                     "is not judged")
    if a.unreadable:  # not an outcome by itself: the bucket says whether anything was lost
        when: dict[str, list[int]] = {}
        for rank, after in a.unreadable:
            when.setdefault(after, []).append(rank)
        notes.append("checkpoint torn (unreadable) " + ", ".join(
            f"after {after} on {ranks_phrase(rs)}" for after, rs in sorted(when.items(), key=_chrono)))
    restarts = sum(r.restarts for r in result.ranks)
    raised_note = f"; {ended.detail}" if ended is not None and ended.outcome == ERROR else ""
    tail = "".join(f"; {e}" for e in notes + excused)
    if silent:
        return Judgement(FAIL, "; ".join(silent) + raised_note + tail)
    if raised:
        missing = sum(len(v) for v in explained.values())
        workers = sorted(explained)
        what = (f"; {plural(missing, 'sample')} of worker{'s' if len(workers) > 1 else ''} "
                f"{format_ranks(workers)} not uploaded" if missing else "")
        quiet = why_not_loud([ranks[r] for r in raised])
        assert ended is not None
        return Judgement(ERROR, ended.detail + what + tail, loud=not quiet, quiet=quiet)
    total = len(a.expected)
    if a.checkpoints and not a.with_claims:  # a checkpoint of the worker's own schema
        tail += "; " + _NO_CLAIMS + ": its claims were not judged"
    return Judgement(PASS, f"all {plural(total, 'sample')} of {plural(len(a.streams), 'stream')} "
                           f"uploaded exactly once ({plural(a.objects, 'object')}, "
                           f"{plural(restarts, 'restart')}); no checkpoint moved backwards" + tail)


_NO_CLAIMS = ("no checkpoint (checkpoints/*.json under the workdir) listed 'processed_sample_ids' "
              "(see the checkpoint-resume contract)")


def _chrono(item: tuple[str, Any]) -> tuple[int, int]:
    """``life 2`` before ``life 10`` before ``the end``."""
    when = item[0]
    return (1, 0) if not when.startswith("life ") else (0, int(when.split()[-1]))


def _by_worker(ids: dict[int, list[str]], ranks_of: Mapping[int, set[int]], what: str,
               one: str, many: str) -> str:
    """``worker 0 (rank 0): 8 samples lost: ...`` or, for several workers,
    ``workers 0-3: 24 samples lost (8, 8, 4, 4): ...`` (ids sorted, the first few)."""
    workers = sorted(ids)
    every = [sid for w in workers for sid in ids[w]]
    if len(workers) == 1:
        w = workers[0]
        owners = sorted(ranks_of.get(w, ()))
        who = f"worker {w}" + (f" ({ranks_phrase(owners)})" if owners else "")
        phrase = what.format(whose=one, s="s")
        return f"{who}: {plural(len(every), 'sample')} {phrase}: {ids_phrase(every)}"
    phrase = what.format(whose=many, s="")
    counts = ", ".join(str(len(ids[w])) for w in workers)
    return (f"workers {format_ranks(workers)}: {plural(len(every), 'sample')} {phrase} "
            f"({counts}): {ids_phrase(every)}")


def _value(result: WorldResult, rank: int) -> Any:
    for r in result.ranks:
        if r.rank == rank:
            try:
                return r.value
            except Exception:  # noqa: BLE001 - a value that does not unpickle says nothing
                return None
    return None
