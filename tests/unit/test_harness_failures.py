"""The harness's own failure inside a world (a unit's start, a leader's namespaces) is said
as the harness's, with its exception, never as the target's crash: a /var/tmp of its own
once made every rank of every cell "exit with code 70 without a Python exception"."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.rank.process import failure_of, say_failed, unit_name
from harness.vocabulary import CRASH, LEADER, UNIT_FAILED
from harness.world.assemble import unit_result
from harness.world.fates import HARNESS_FAILED, summary, walls_note
from harness.world.lifecycle import Unit
from harness.world.protocol import Result

from support import world

EROFS = "OSError: [Errno 30] Read-only file system: '/var/tmp/w/rank-0.stdout'"


def _fail_in(outdir: Path, name: str) -> None:
    try:
        raise OSError(30, "Read-only file system", "/var/tmp/w/rank-0.stdout")
    except OSError:
        say_failed(str(outdir), name)


def test_a_rank_the_harness_failed_in_says_what_failed_and_whose_bug_it_is(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    _fail_in(tmp_path, unit_name("rank", 0))
    assert EROFS in capfd.readouterr().err, "its stderr has the traceback too"
    rank = unit_result(str(tmp_path), 0, 0, Unit(pid=5, status=UNIT_FAILED << 8), "rank-0")
    assert (rank.outcome, rank.error["type"]) == (CRASH, HARNESS_FAILED)
    assert summary(rank) == (f"was ended by a failure of the harness's own ({EROFS}): a bug "
                             "of the harness's, not the target's")
    assert rank.error["traceback"].startswith("Traceback (most recent call last):")
    assert walls_note(world([rank], isolation="kernel")) == "", \
        "the harness's EROFS is not a write of the target's that the read-only machine refused"


def test_a_targets_own_exit_70_and_a_rank_that_returned_are_their_own_fates(
        tmp_path: Path) -> None:
    """Only the file the harness leaves makes a failure the harness's: a target's own
    ``os._exit(70)`` leaves none, and a rank that reported its result was not ended by it."""
    other = unit_result(str(tmp_path), 1, 0, Unit(pid=6, status=UNIT_FAILED << 8), "rank-1")
    assert summary(other) == "exited with code 70 without a Python exception"
    _fail_in(tmp_path, "rank-2")
    returned = unit_result(str(tmp_path), 2, 0, Unit(pid=7, status=0, result=Result(
        ok=True, value_repr="'x'")), "rank-2")
    assert summary(returned) == "returned 'x'"


def test_the_ranks_a_failed_leader_never_started_say_why(tmp_path: Path) -> None:
    _fail_in(tmp_path, LEADER)
    text, last = failure_of(str(tmp_path), LEADER)
    assert last == EROFS and "raise OSError" in text
    assert failure_of(str(tmp_path), "rank-9") == ("", "")
    never = unit_result(str(tmp_path), 3, 0, Unit(), "rank-3",
                        never=f"its world's leader failed first ({last})")
    assert summary(never) == f"never started: its world's leader failed first ({EROFS})"
