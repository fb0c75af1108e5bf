"""How a rank ended, in words: said here once, for every face.

Two forms of the same facts. A sentence, for a world's one-line detail and the checkers'
judgements (``ranks 1-7 raised FileNotFoundError: ...; rank 0 killed by SIGKILL without a
Python exception``); and the cells of the diagnosis's table, read from a saved report's rows
(``SIGKILL``, ``exit 1``, ``returned 'x'``). A change of wording is made here, and every
report, the command line, pytest and the checkers say the new words.

The words live beside the world's results (not in ``reports``) because the checkers, which
sit below the reports, word their judgements with them.
"""

from __future__ import annotations

import re
import signal
from typing import TYPE_CHECKING, Any

from harness.filesystem.mounts import is_under
from harness.history import ranks_phrase
from harness.vocabulary import CRASH, ERROR, HANG, PASS

if TYPE_CHECKING:
    from harness.world.result import RankResult, WorldResult

#: The error type of a rank whose process never started (its outcome is still the world's
#: word for it: CRASH, or HANG when the deadline came first).
NEVER_STARTED = "NeverStarted"
#: ... and its message when nothing more is known of why
NO_PROCESS = "the process never started"
#: The error type of a unit alive when its world passed a limit (``harness.world.limits``):
#: killed then, CRASH, as a pod's OOM killer would leave it; its message names the limit.
STOPPED = "LimitExceeded"
#: The error type of a unit the harness itself failed in (it exited ``UNIT_FAILED``, its
#: traceback beside its output): a bug of the harness's, never the target's fate
HARNESS_FAILED = "HarnessFailed"
#: The error types of a rank that returned a value the harness would not read
#: (``harness.rank.values``): its message says what it returned.
UNREAD_VALUES = ("UnreadableValue", "ValueTooLarge")
#: what a launcher that exits 0 after its ranks failed did: ``xmp.spawn`` re-raises the first
#: failure, so the script caught it (a test that expects a rank to raise, for one)
CAUGHT = "the script caught what its xmp.spawn raised"


def one_line(text: str, limit: int = 240) -> str:
    """A message as one line a report can show (multi-line errors are common)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


#: a process's traceback inside torch.distributed.checkpoint's CheckpointException
_REMOTE = re.compile(r"^Traceback \(most recent call last\): \(RANK (\d+)\)$", re.M)


def raised(error: dict[str, Any]) -> str:
    """``raised FileNotFoundError: [Errno 2] ...``. An exception that carries other
    processes' tracebacks (``CheckpointException``: a save or load failed somewhere) says
    what each of them raised, not the first frames of the first traceback."""
    message = str(error["message"])
    parts = _REMOTE.split(message)
    if len(parts) > 2:  # [head, rank, block, rank, block, ...]
        causes = []
        for rank, block in zip(parts[1::2], parts[2::2]):
            lines = [ln for ln in block.splitlines() if ln.strip()]
            first = next((i for i, ln in enumerate(lines) if not ln[0].isspace()), len(lines))
            causes.append(f"rank {rank}: {' '.join(lines[first:]) or 'no exception shown'}")
        message = "; ".join(causes)
    return f"raised {error['type']}: {one_line(message)}"


# -- as a sentence ----------------------------------------------------------------------

def exit_description(signum: int | None, exit_code: int | None) -> str:
    if signum is not None:
        return f"killed by {signal_name(signum)}"
    if exit_code is not None:
        return f"exited with code {exit_code}"
    return "still running"


def summary(r: RankResult) -> str:
    """How one rank ended."""
    if r.never_started:
        assert r.error is not None
        message = r.error["message"]
        return "never started" + ("" if message == NO_PROCESS else
                                  f": {one_line(message)}")
    if r.outcome == PASS:
        return "returned " + (r.value_repr or "None")
    if r.invalid:
        return "returned an invalid value: " + one_line(r.invalid)
    if r.outcome == ERROR and r.error and r.error["type"] in UNREAD_VALUES:
        return one_line(r.error["message"])  # "returned a value that ...": it raised nothing
    if r.outcome == ERROR and r.error:
        return raised(r.error)
    if r.outcome == CRASH and r.error and r.error["type"] in (STOPPED, HARNESS_FAILED):
        return one_line(r.error["message"])
    if r.outcome == CRASH:
        return exit_description(r.signal, r.exit_code) + " without a Python exception"
    if r.outcome == HANG:
        return "still blocked at the deadline"
    return r.outcome


def fates_phrase(ranks: list[RankResult]) -> str:
    """``ranks 1-7 raised FileNotFoundError: ...; rank 0 killed by SIGKILL ...``: the ranks
    grouped by how they ended, in order of their lowest rank. Words that differ only by
    each rank's own number (``rank 3: cfg.json did not appear``) are one group, the number
    written ``N`` (``ranks 1-7 raised TimeoutError: rank N: cfg.json did not appear``)."""
    same: dict[str, list[int]] = {}
    for r in ranks:
        same.setdefault(summary(r), []).append(r.rank)
    alike: dict[str, list[tuple[int, str]]] = {}  # a rank alone in its words, by them sans its number
    for words, rs in same.items():
        if len(rs) == 1:
            alike.setdefault(re.sub(rf"(?<![\w.]){rs[0]}(?![\w.])", "N", words), []).append(
                (rs[0], words))
    groups = {words: rs for words, rs in same.items() if len(rs) > 1}
    for key, members in alike.items():
        if len(members) > 1:
            groups[key] = [r for r, _ in members]
        else:
            groups[members[0][1]] = [members[0][0]]
    return "; ".join(f"{ranks_phrase(sorted(rs))} {what}"
                     for what, rs in sorted(groups.items(), key=lambda kv: min(kv[1])))


#: What a failing rank's words say when it met a read-only filesystem: the kernel's EROFS
#: (with the path where Python names it), sqlite's
_READ_ONLY = re.compile(r"Read-only file system(?:: '([^']*)')?|attempt to write a readonly "
                        r"database")
#: Said once when one did under kernel isolation, where no scenario made it read-only.
READ_ONLY_MACHINE = ("under kernel isolation the machine's directories are read-only to "
                     "what the harness's view does not see (a subprocess, C code): on a pod "
                     "this write would land; see docs/explanation/isolation.md (--isolation python "
                     "lets it write this machine)")


def read_only_machine(result: WorldResult) -> bool:
    """Did a failing rank or launcher meet the read-only machine of kernel isolation (an
    EROFS no read-only mount of the scenario's explains; words that name no path, where
    the scenario has one, may be its doing and are not claimed)?"""
    if result.isolation != "kernel":
        return False
    for unit in (*result.ranks, *result.hosts):
        if unit.outcome == PASS:
            continue
        error = unit.error or {}
        if error.get("type") in (NEVER_STARTED, HARNESS_FAILED):
            continue  # the harness's own failure, which says so: not the target's write
        text = f"{error.get('message', '')}\n{error.get('traceback', '')}\n{unit.stderr}"
        for met in _READ_ONLY.finditer(text):
            path = met.group(1)  # None: a shell's or a library's words, which name no path
            if (path is None and not result.read_only) or (
                    path is not None and not any(is_under(path, ro) for ro in result.read_only)):
                return True
    return False


def walls_note(result: WorldResult) -> str:
    """What a world's line adds when a rank met the read-only machine ("" if none did), or
    when a failing rank ran a subprocess under python isolation (``SUBPROCESS_SEES``), and
    when ranks of several hosts used the machine's one network (``shared_network``)."""
    if read_only_machine(result):
        return f" ({READ_ONLY_MACHINE})" + shared_network(result)
    ran = [r.rank for r in result.ranks if r.outcome != PASS and r.rank in result.forked]
    if result.isolation == "python" and ran:
        return f" ({ranks_phrase(ran)} {SUBPROCESS_SEES})" + shared_network(result)
    return shared_network(result)


def shared_network(result: WorldResult) -> str:
    """What a world of several hosts says, whatever its outcome, when its ranks used an IP
    socket under python isolation ("" otherwise): its hosts shared the machine's network."""
    if result.isolation != "python" or not result.networked or \
            len({r.host for r in result.ranks}) < 2:
        return ""
    return f" ({ranks_phrase(result.networked)} {SHARED_NETWORK})"


#: Said when ranks of a world of several hosts used the network under python isolation.
SHARED_NETWORK = ("used the network: under python isolation every host of the world shares "
                  "this machine's, one 127.0.0.1 and one set of ports, where each TPU VM has "
                  "its own; kernel isolation gives each host its own (see "
                  "docs/explanation/isolation.md)")


#: Said when a failing rank ran a subprocess under python isolation, whose files are the
#: machine's: what it wrote the target's Python code does not find, and the other way round.
SUBPROCESS_SEES = ("ran a subprocess: under python isolation it reads and writes the "
                   "machine's files, not the host's that the target's Python code sees; "
                   "kernel isolation gives it the host's (see docs/explanation/isolation.md)")


def world_detail(result: WorldResult) -> str:
    """A world's one line a person can act on (``WorldResult.detail``), and why a write
    was refused where kernel isolation refused it."""
    return _world_detail(result) + walls_note(result)


def _world_detail(result: WorldResult) -> str:
    if result.outcome == HANG and result.hang_report:
        return result.hang_report
    if result.hosts and not result.ranks and result.outcome == PASS:
        launchers = ranks_phrase([h.rank for h in result.hosts], "launcher")
        if result.single_hosts:
            which = ("" if len(result.hosts) == 1 else "each " if len(result.single_hosts)
                     == len(result.hosts) else ranks_phrase(result.single_hosts, "launcher") + " ")
            return (f"no rank started: {launchers} ran the script to its end (exit 0), "
                    f"{which}running the function itself as a world of one "
                    "(xmp.spawn with nprocs=1)")
        return (f"no rank started: {launchers} ran the script to its end (exit 0) "
                "without xmp.spawn or the XLA runtime")
    launchers, accounted = _launchers_phrase(result)
    if launchers:
        others = [r for r in result.ranks if r.outcome != PASS and r.rank not in accounted]
        return "; ".join([launchers] + ([fates_phrase(others)] if others else []))
    if all(r.outcome == PASS for r in result.ranks):
        return "the one rank returned" if len(result.ranks) == 1 else \
            f"all {len(result.ranks)} ranks returned"
    fates = fates_phrase([r for r in result.ranks if r.outcome != PASS])
    if result.hosts and all(h.outcome == PASS for h in result.hosts):
        fates += (f"; {ranks_phrase([h.rank for h in result.hosts], 'launcher')} exited 0 "
                  f"all the same ({CAUGHT})")
    return fates


def _launchers_phrase(result: WorldResult) -> tuple[str, set[int]]:
    """Exec mode: the launchers that failed the run, and what became of their ranks
    (``launcher 0 raised ValueError: x before starting its ranks (ranks 0-7 never
    started)``), with the ranks that says all there is about. A launcher whose ranks
    failed is left to their fates (its spawn raised theirs), and one that is its host's
    rank (no ``xmp.spawn``) is judged as that rank."""
    as_rank = {r.pid for r in result.ranks if r.pid is not None}
    groups: dict[str, tuple[list[int], list[int]]] = {}
    for host in result.hosts:
        if host.outcome == PASS or (host.pid is not None and host.pid in as_rank):
            continue
        mine = [r for r in result.ranks if r.host == host.rank]
        if mine and all(r.never_started for r in mine):
            how = " before starting {its} {noun} ({ranks} never started)"
        elif mine and all(r.outcome == PASS for r in mine):
            how = " after {its} {ranks} returned"
        else:  # its ranks failed: it failed with them, and their fates say why
            continue
        launchers, ranks = groups.setdefault(summary(host) + how, ([], []))
        launchers.append(host.rank)
        ranks += [r.rank for r in mine]
    phrases = [f"{ranks_phrase(launchers, 'launcher')} " + what.format(
                   its="its" if len(launchers) == 1 else "their",
                   noun="rank" if len(ranks) == 1 else "ranks", ranks=ranks_phrase(ranks))
               for what, (launchers, ranks) in groups.items()]
    return "; ".join(phrases), {r for _, ranks in groups.values() for r in ranks}


# -- as the cells of a table (a saved report's rows) -------------------------------------

def exit_text(row: Any) -> str:
    """How a rank ended, in words: ``exit 1``, ``SIGKILL``, ``running`` (a hung rank), ``-``
    (a rank that never started)."""
    if row.signal is not None:
        text = signal_name(row.signal)
    elif row.exit_code is not None:
        text = f"exit {row.exit_code}"
    elif (row.error or "").startswith(NEVER_STARTED + ":"):
        text = "-"  # no process of it ever ran, so none is still running
    else:
        text = "running" if row.outcome == HANG else "-"
    if row.killed_by_fault:
        text += " (killed by the fault plan)"
    return text


def result_text(row: Any) -> str:
    """The rank's error, or what it returned, or nothing."""
    if row.error:
        return row.error
    if row.value is not None and row.invalid:
        return f"returned {row.value}, which the checker refuses: {row.invalid}"
    if row.value is not None:
        return f"returned {row.value}"
    return ""
