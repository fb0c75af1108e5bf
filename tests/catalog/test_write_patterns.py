"""Issue 45: a fault means the same for every way of writing a file.

``tests/user_targets/write_patterns.py`` hands one config over written ten ways (in place,
fsynced, staged and renamed, ``O_TMPFILE`` and linked, shutil, torch.save, np.save, by a
subprocess) and read three ways (after a rendezvous, polling with a deadline, polling with
none). ``TABLE`` is what each cell's outcome must be, and it is the table the docs show
(``docs/reference/faults.md``): a change to one is a change to both.

One test per row: each runs its own matrix of ten cells (on v4-8, a 120 s deadline), so the
rows spread over the test workers.
"""

from __future__ import annotations

import re

import pytest

from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import find
from harness.workloads.registry import target as resolve_target

from support import REPO

PATTERNS = ("direct", "fsynced", "staged_replace", "tempfile_rename", "tmpfile_link",
            "shutil_copy", "shutil_move", "torch_save", "np_save", "by_subprocess")
READERS = {"after_rendezvous": "after a rendezvous", "poll_deadline": "polls, with a deadline",
           "poll_forever": "polls, no deadline"}
NE = "NOT-EXERCISED"


def _row(default: str, **unlike: str) -> tuple[str, ...]:
    """Every pattern's outcome: ``default``, but a subprocess's write is never seen."""
    return tuple(unlike.get(p, NE if p == "by_subprocess" else default) for p in PATTERNS)


#: (scenario, reader) -> the outcome for each of ``PATTERNS``, in order.
TABLE = {
    ("baseline", "after_rendezvous"): _row("PASS", by_subprocess="PASS"),  # no fault: all work
    ("slow-writer", "after_rendezvous"): _row("PASS"),
    ("slow-writer", "poll_deadline"): _row("ERROR"),
    ("slow-writer", "poll_forever"): _row("HANG"),
    # shutil.copy's copymode chmods the lost file: rank 0 raises before the rendezvous
    ("missing-file", "after_rendezvous"): _row("ERROR", shutil_copy="HANG"),
    ("partial-write", "after_rendezvous"): _row("ERROR"),
    ("corrupt-file", "after_rendezvous"): _row("ERROR"),
    # a write that shows up whole has no empty moment: the fault changes nothing
    ("empty-file", "after_rendezvous"): _row("ERROR", staged_replace=NE, tempfile_rename=NE,
                                             tmpfile_link=NE, shutil_move=NE),
    # os.link will not replace the leftover: FileExistsError in rank 0
    ("stale-leftover", "after_rendezvous"): _row("FAIL", tmpfile_link="HANG"),
}


def _target(pattern: str, reader: str) -> str:
    return f"{REPO / 'tests' / 'user_targets' / 'write_patterns.py'}:{pattern}__{reader}"


@pytest.mark.parametrize(("scenario", "reader"), list(TABLE), ids=lambda v: v)
def test_every_way_of_writing_meets_the_fault_alike(scenario: str, reader: str) -> None:
    targets = [resolve_target(_target(p, reader)) for p in PATTERNS]
    plans = plan_cells([find(scenario)], targets, seed=0, topology="v4-8", timeout=120)
    matrix = run_matrix(plans, jobs=2, use_cache=False)
    got = {c.target.rsplit(":", 1)[1].split("__")[0]: c for c in matrix.cells}
    assert tuple(got[p].outcome for p in PATTERNS) == TABLE[scenario, reader], "\n".join(
        f"{p}: {got[p].outcome}: {got[p].detail[:300]}" for p in PATTERNS)
    for p in PATTERNS:
        cell = got[p]
        if scenario == "baseline":
            assert not cell.faults_fired
        elif cell.outcome == NE and p == "by_subprocess":
            assert "rank 0 started processes of their own" in cell.detail, cell.detail
        elif cell.outcome == NE:  # the fault fired and changed nothing: the cell says why
            assert "fired with no effect" in cell.detail or "no planned fault fired" in \
                cell.detail, cell.detail
        elif scenario != "stale-leftover":  # (its leftover is placed before the ranks start)
            assert cell.faults_fired, f"{p}: {cell.outcome} with no fault fired"
    if scenario == "slow-writer" and reader == "after_rendezvous":  # the readers waited for it
        assert all(got[p].world_time_s >= 60 for p in PATTERNS[:-1])


def test_the_docs_show_the_table_the_tests_run() -> None:
    text = (REPO / "docs" / "reference" / "faults.md").read_text()
    block = text.split("<!-- write-pattern-table -->")[1].split("<!-- /write-pattern-table -->")[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in block.strip().splitlines()[2:]]
    by_reader = {v: k for k, v in READERS.items()}
    shown = {(re.sub(r"`", "", r[0]), by_reader[r[1]]): tuple(r[2:]) for r in rows}
    assert shown == TABLE
