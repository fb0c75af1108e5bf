"""The one diagnosis: the rank-range phrase, and what a world or a cell is diagnosed as.

Built on synthetic results, so each case (a hang with stacks, groups of errors, a
crash, a rank the fault plan killed, exec-mode launchers) is exact and fast.
"""

from __future__ import annotations

import io
import os
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

import harness
from harness.cli import render_world
from harness.frames import own_frame
from harness.history import Event, format_ranks, ranks_phrase
from harness.reports.diagnosis import RankGroup, describe, diagnose, group_line, hide_own_frames
from harness.reports.html import to_html
from harness.reports.junit import to_junit
from harness.reports.markdown import to_markdown
from harness.runner.cells import Cell, FaultRow, Matrix, RankRow
from harness.world.result import CRASH, ERROR, HANG, PASS, RankResult, WorldResult

import support
from support import error

STACK = 'Thread MainThread:\n  File "sync.py", line 12, in load\n    xm.rendezvous("config_save")\n'


def parse_phrase(phrase: str) -> tuple[str, set[int]]:
    """``'ranks 1-3,5'`` -> ``('ranks', {1, 2, 3, 5})``: how a reader reads the phrase back."""
    noun, _, rest = phrase.partition(" ")
    if rest == "none":
        return noun, set()
    found: set[int] = set()
    for part in rest.split(","):
        first, _, last = part.partition("-")
        found |= set(range(int(first), int(last or first) + 1))
    return noun, found


# -- the rank-range phrase ----------------------------------------------------------------------

@given(st.sets(st.integers(min_value=0, max_value=10**6), max_size=60)
       | st.sets(st.integers(min_value=0, max_value=40)))
def test_the_rank_phrase_reads_back_as_the_same_set(ranks: set[int]) -> None:
    phrase = ranks_phrase(ranks)
    noun, parsed = parse_phrase(phrase)
    assert parsed == ranks
    assert noun == ("rank" if len(ranks) == 1 else "ranks")
    if ranks:  # canonical: each run of consecutive ranks is one part, "3" or "1-3"
        runs = {r for r in ranks if r - 1 not in ranks}
        assert len(phrase.split(" ", 1)[1].split(",")) == len(runs)


@given(st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=30))
def test_the_rank_phrase_ignores_order_and_repeats(ranks: list[int]) -> None:
    assert ranks_phrase(ranks) == ranks_phrase(sorted(set(ranks), reverse=True))


def test_the_rank_phrase_in_words() -> None:
    assert ranks_phrase([0]) == "rank 0"
    assert ranks_phrase([3, 1, 2, 5]) == "ranks 1-3,5"
    assert ranks_phrase(range(8)) == "ranks 0-7"
    assert ranks_phrase([4, 6]) == "ranks 4,6"
    assert ranks_phrase([2], "host") == "host 2"
    assert ranks_phrase([0, 1], "launcher") == "launchers 0-1"
    assert format_ranks([]) == "none"


# -- synthetic worlds ---------------------------------------------------------------------------

def rank(r: int, outcome: str = PASS, host: int | None = None, **kw) -> RankResult:
    return support.rank(r, outcome, "run-3f2a", host=host, **kw)


def world(ranks: list[RankResult], outcome: str, **kw) -> WorldResult:
    return support.world(ranks, outcome, **{**dict(world_id="w1", topology="v4-64", seed=3,
                                                   duration_s=1.5), **kw})


def test_a_hang_names_the_blocked_ranks_and_shows_their_stack_once() -> None:
    report = "ranks 1-3 blocked in rendezvous 'config_save' (step 0); rank 0 exited with SIGKILL"
    killed = rank(0, CRASH, signal=9, killed_by_fault=True)
    hung = [rank(r, HANG, signal=9, stack=STACK) for r in (1, 2, 3)]
    fired = Event(t=0.012, kind="fault", rank=0, op="kill", detail={"message": "SIGKILL after write 1"})
    result = world([killed, *hung], HANG, hang_report=report, history=[fired])
    d = diagnose(result)
    assert d.detail == report
    assert [(g.ranks, g.outcome, g.exit) for g in d.groups] == [
        ([0], CRASH, "SIGKILL (killed by the fault plan)"), ([1, 2, 3], HANG, "SIGKILL")]
    assert [(s.ranks, s.text) for s in d.stacks] == [([1, 2, 3], STACK)]
    assert [(f.rank, f.fault, f.message) for f in d.faults] == [(0, "kill", "SIGKILL after write 1")]
    text = describe(result)
    assert text.splitlines()[0] == "world w1 on v4-64 (legacy), seed 3: HANG in 1.50 s"
    assert "  rank 0 (host 0): CRASH, SIGKILL (killed by the fault plan)" in text
    assert "  ranks 1-3 (hosts 1-3): HANG, SIGKILL" in text
    assert "  fault kill fired on rank 0 at 12.0 ms: SIGKILL after write 1" in text
    assert text.count("--- stack of ranks 1-3, still blocked at the deadline ---") == 1
    assert "replay:" not in text  # a bare world has no replay command


def test_errors_group_by_what_was_raised_and_only_the_first_traceback_is_printed() -> None:
    ranks = [rank(0), *(rank(r, ERROR, exit_code=1, error=error("FileNotFoundError", "no config"))
                        for r in (1, 2, 5)),
             rank(3, ERROR, exit_code=1, error=error("ValueError", "bad [bold]config[/]")), rank(4)]
    result = world(ranks, ERROR)
    d = diagnose(result)
    assert result.detail() == ("ranks 1-2,5 raised FileNotFoundError: no config; "
                               "rank 3 raised ValueError: bad [bold]config[/]")
    assert [(g.label, g.result) for g in d.groups] == [
        ("ranks 0,4 (hosts 0,4)", "returned 'run-3f2a'"),
        ("ranks 1-2,5 (hosts 1-2,5)", "FileNotFoundError: no config"),
        ("rank 3 (host 3)", "ValueError: bad [bold]config[/]")]
    assert [t.ranks for t in d.tracebacks] == [[1, 2, 5], [3]]
    text = describe(result)
    assert "--- traceback of ranks 1-2,5 ---" in text and text.count("--- traceback of") == 1
    assert "(other tracebacks: rank 3; every one is in a run's matrix.json and matrix.txt)" in text


def test_a_crash_says_how_the_rank_ended() -> None:
    result = world([rank(0), rank(1), rank(2, CRASH, exit_code=3)], CRASH)
    d = diagnose(result)
    assert d.detail == "rank 2 exited with code 3 without a Python exception"
    assert [(g.ranks, g.outcome, g.exit, g.result) for g in d.groups] == [
        ([0, 1], "returned", "exit 0", "returned 'run-3f2a'"), ([2], CRASH, "exit 3", "")]
    assert d.tracebacks == [] and d.stacks == []


def test_exec_mode_launchers_come_first_and_are_named_as_launchers() -> None:
    launcher = RankResult(rank=0, host=0, outcome=ERROR, exit_code=1,
                          error=error("BrokenProcessPool", "a child died"), stderr="launcher caught\n")
    ranks = [rank(0, host=0), rank(1, PASS, host=0), rank(2, CRASH, host=1, signal=9)]
    result = world(ranks, ERROR, hosts=[launcher], topology="2x2")
    d = diagnose(result)
    assert [g.label for g in d.groups] == ["launcher 0 (host 0)", "ranks 0-1 (host 0)", "rank 2 (host 1)"]
    assert d.tracebacks[0].label == "launcher 0"
    assert [(t.label, t.passed) for t in d.stderr] == [("launcher 0", False)]
    text = describe(result)
    assert "  launcher 0 (host 0): ERROR, exit 1: BrokenProcessPool: a child died" in text
    assert "--- traceback of launcher 0 ---" in text


def test_harness_exec_renders_the_diagnosis_and_never_reads_run_text_as_markup() -> None:
    ranks = [rank(0, stdout="hello from 0\n"),
             rank(1, ERROR, exit_code=1, error=error("KeyError", "'[red]x[/red]'"), stdout="out 1\n")]
    console = Console(record=True, width=120, file=io.StringIO(), color_system=None)
    render_world(world(ranks, ERROR), console)
    out = console.export_text(styles=False)
    assert "ERROR: rank 1 raised KeyError: '[red]x[/red]'" in out
    assert "traceback of rank 1" in out
    assert "out 1" in out and "hello from 0" not in out  # a passing rank's output only with --output
    console = Console(record=True, width=120, file=io.StringIO(), color_system=None)
    render_world(world(ranks, ERROR), console, show_output=True)
    assert "hello from 0" in console.export_text(styles=False)


# -- a cell: the same diagnosis, whatever renders it ----------------------------------------------

def cell_of(result: WorldResult, verdict: str = "unexpected") -> Cell:
    return Cell(scenario="writer-killed", target="naive-sync", topology=result.topology,
                seed=result.seed, outcome=result.outcome, expected="fail-loudly", verdict=verdict,
                duration_s=result.duration_s, detail=result.detail(),
                replay="harness replay --scenario writer-killed --target naive-sync --seed 3",
                ranks=[RankRow.of(r) for r in result.ranks], faults_fired=FaultRow.fired(result.history),
                mismatches=list(result.mismatches), finding="seed 000, Finding 5")


def hung_world() -> WorldResult:
    ranks = [rank(0, CRASH, signal=9, killed_by_fault=True),
             *(rank(r, HANG, stack=STACK) for r in range(1, 8))]
    return world(ranks, HANG, hang_report="ranks 1-7 blocked in rendezvous 'config_save'",
                 mismatches=["rank 0 exited while ranks 1-7 wait for it"],
                 history=[Event(t=0.002, kind="fault", rank=0, op="kill", detail={"message": "killed"})])


def test_a_cell_read_from_a_world_is_diagnosed_as_the_world_is() -> None:
    result = hung_world()
    from_world, from_cell = diagnose(result), diagnose(cell_of(result))
    for part in ("detail", "groups", "faults", "mismatches", "tracebacks", "stacks"):
        assert getattr(from_cell, part) == getattr(from_world, part), part
    assert from_cell.headline == ("writer-killed[naive-sync] on v4-64, seed 3: HANG "
                                  "(expected fail-loudly, verdict unexpected) in 1.50 s")
    text = describe(cell_of(result))
    assert "  seed finding: seed 000, Finding 5" in text
    assert text.endswith("replay: harness replay --scenario writer-killed --target naive-sync --seed 3")


def test_every_report_renders_the_same_groups_and_replay() -> None:
    cell = cell_of(hung_world())
    matrix = Matrix(cells=[cell], seed=3, created="2026-05-09T00:00:00+00:00", harness_version="0")
    failure = ET.fromstring(to_junit(matrix)).find("testcase/failure")
    assert failure is not None and failure.text == describe(cell) + "\n"
    markdown, page = to_markdown(matrix), to_html(matrix)
    assert "| 1-7 | 1-7 | HANG | running |" in markdown and "| 0 | 0 | CRASH |" in markdown
    assert "stack (still blocked) of ranks 1-7" in markdown
    assert "Stack (still blocked at the deadline) · ranks 1-7" in page
    for rendered in (markdown, page, failure.text):
        assert cell.replay in rendered
        assert "SIGKILL (killed by the fault plan)" in rendered


# -- what a person reads starts at the user's code --------------------------------------------

HARNESS = os.path.dirname(os.path.realpath(harness.__file__))
OWN_HEAD = (f'  File "{HARNESS}/rank/bootstrap.py", line 154, in report_and_exit\n'
            "    value = fn()\n            ^^^^\n"
            f'  File "{HARNESS}/rank/bootstrap.py", line 258, in <lambda>\n'
            "    report_and_exit(ctx, lambda: resolve_target(target)(*args, **spec.kwargs))\n")
USER = ('  File "/home/me/proj/sync.py", line 12, in load\n'
        '    with open("/tmp/cfg.yaml") as f:\n'
        f'  File "{HARNESS}/workloads/config_sync/naive.py", line 65, in load_synced_config\n'
        '    with open(temp_config_path, "r") as f:\n')
OWN_TAIL = (f'  File "{HARNESS}/filesystem/files.py", line 52, in open\n'
            "    fd = self._open_fd(r, _flags_of(mode), 0o666)\n")
RAW = ("Traceback (most recent call last):\n" + OWN_HEAD + USER + OWN_TAIL
       + "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/cfg.yaml'\n")


def test_a_traceback_starts_and_ends_at_the_users_code() -> None:
    assert hide_own_frames(RAW) == ("Traceback (most recent call last):\n" + USER
                                    + "FileNotFoundError: [Errno 2] No such file or directory: "
                                      "'/tmp/cfg.yaml'\n")


def test_the_loader_adapter_is_machinery_and_the_reference_targets_are_code_under_test() -> None:
    """A user's loader is called by the data-sharding adapter: its traceback starts at the
    loader, as a config sync's starts at the sync (the adapter's frames are the bootstrap's)."""
    adapter = (f'  File "{HARNESS}/workloads/data_sharding/adapter.py", line 99, in build_loader\n'
               "    return factory(**kwargs)\n")
    loader = '  File "/home/me/proj/data.py", line 12, in __init__\n    np.load(path)\n'
    raw = "Traceback (most recent call last):\n" + OWN_HEAD + adapter + loader + "OSError: x\n"
    assert hide_own_frames(raw) == "Traceback (most recent call last):\n" + loader + "OSError: x\n"
    assert own_frame(f"{HARNESS}/workloads/data_sharding/adapter.py")
    assert not own_frame(f"{HARNESS}/workloads/data_sharding/seed_loader.py")
    assert not own_frame(f"{HARNESS}/workloads/config_sync/model.py")


def test_each_chained_traceback_is_trimmed_and_the_harness_own_bug_is_left_whole() -> None:
    chained = RAW + "\nDuring handling of the above exception, another exception occurred:\n\n" + RAW
    assert hide_own_frames(chained).count("bootstrap.py") == 0
    assert hide_own_frames(chained).count("/home/me/proj/sync.py") == 2
    own_only = "Traceback (most recent call last):\n" + OWN_HEAD + "KeyError: 'x'\n"
    assert hide_own_frames(own_only) == own_only


def test_the_diagnosis_hides_harness_frames_and_the_report_keeps_them() -> None:
    ranks = [rank(0), rank(1, ERROR, exit_code=1,
                         error={"type": "FileNotFoundError", "message": "no", "traceback": RAW})]
    result = world(ranks, ERROR)
    text = describe(result)
    assert "bootstrap.py" not in text and "filesystem/files.py" not in text
    assert ('--- traceback of rank 1 ---\nTraceback (most recent call last):\n'
            '  File "/home/me/proj/sync.py"') in text
    assert RankRow.of(result.ranks[1]).traceback == RAW  # what the JSON report writes


def test_a_rank_that_returned_in_a_failing_cell_is_not_called_pass() -> None:
    failing = describe(world([rank(0), rank(1, ERROR, exit_code=1, error=error())], ERROR))
    assert "  rank 0 (host 0): returned, exit 0: 'run-3f2a'" in failing
    assert "PASS" not in failing.split("\n", 1)[1]
    passing = diagnose(world([rank(0), rank(1)], PASS))
    assert [g.outcome for g in passing.groups] == [PASS]


def test_a_group_line_says_no_word_twice() -> None:
    hung = RankGroup(ranks=[1, 2], hosts=[1, 2], outcome=HANG, exit="HANG", result="HANG")
    assert group_line(hung) == "ranks 1-2 (hosts 1-2): HANG"
    blocked = RankGroup(ranks=[1], hosts=[1], outcome=HANG, exit="running",
                        result="HANG: blocked in rendezvous")
    assert group_line(blocked) == "rank 1 (host 1): HANG, running: blocked in rendezvous"
    error_group = RankGroup(ranks=[3], hosts=[3], outcome=ERROR, exit="exit 1",
                            result="ValueError: bad")
    assert group_line(error_group) == "rank 3 (host 3): ERROR, exit 1: ValueError: bad"


def test_a_link_of_a_chain_made_of_the_harness_frames_alone_shows_its_exception_line() -> None:
    """A fault raising inside the view (ENOSPC from a write hook) while the user's code
    handles another: the link is shown as Python shows a frameless one (a real ENOSPC raises
    from C), not as three harness frames the user cannot act on."""
    hook = (f'  File "{HARNESS}/faults/kinds/enospc.py", line 38, in on_write\n'
            "    raise oserror(errno.ENOSPC)\n")
    chained = (RAW + "\nDuring handling of the above exception, another exception occurred:\n\n"
               "Traceback (most recent call last):\n" + OWN_TAIL + hook
               + "OSError: [Errno 28] No space left on device\n")
    shown = hide_own_frames(chained)
    assert "enospc.py" not in shown and "files.py" not in shown
    assert shown.endswith("another exception occurred:\n\n"
                          "OSError: [Errno 28] No space left on device\n")
    assert shown.count("Traceback (most recent call last)") == 1


def test_a_fault_that_fired_alike_many_times_is_one_line_with_its_count() -> None:
    """A poll loop that meets EACCES on every try: 700 firings are one line, not 700."""
    from harness.reports.diagnosis import fault_groups, fault_line
    from harness.runner.cells import FaultRow

    polls = [FaultRow(t=0.001 * i, rank=1 + i % 7, fault="permission-denied", op="stat",
                      path="/tmp/job/ready", message="EACCES on stat /tmp/job/ready")
             for i in range(700)]
    once = FaultRow(t=0.5, rank=0, fault="eio", op="write", path="/tmp/job/cfg",
                    message="EIO on write")
    groups = fault_groups([*polls[:3], once, *polls[3:]])
    assert [fault_line(g) for g in groups] == [
        "fault permission-denied fired 700 times on ranks 1-7, first at 0.0 ms: "
        "EACCES on stat /tmp/job/ready",
        "fault eio fired on rank 0 at 500.0 ms: EIO on write"]


def test_a_read_only_write_is_the_machines_only_where_no_read_only_mount_explains_it():
    """Under kernel isolation an EROFS the scenario's read-only mounts do not explain is the
    read-only machine's (said so); a shell's words name no path, so where the scenario has a
    read-only mount they may be its doing, and nothing is claimed (a new user's read-only-fs
    cell said "on a pod this write would land" of the scenario's own read-only directory)."""
    from harness.world.fates import read_only_machine

    from support import error, rank, world

    sh = error("CalledProcessError", "returned non-zero exit status 2.")
    failed = rank(0, "ERROR", error=sh, exit_code=1,
                  stderr="sh: 1: cannot create run_meta/x: Read-only file system\n")
    python = rank(0, "ERROR", error=error(
        "OSError", "[Errno 30] Read-only file system: '/work/proj/x'"), exit_code=1)
    assert read_only_machine(world([failed], isolation="kernel"))
    assert not read_only_machine(world([failed], isolation="kernel", read_only=("/mnt/cfg",)))
    assert not read_only_machine(world([failed], isolation="python"))
    assert read_only_machine(world([python], isolation="kernel", read_only=("/mnt/cfg",)))
    assert not read_only_machine(world([python], isolation="kernel", read_only=("/work/proj",)))


def test_ranks_whose_words_differ_only_by_their_own_number_are_one_group():
    """A poller's 'rank 3: ... did not appear' on seven ranks is one phrase, not seven; words
    that merely hold a number equal to some rank's stay as they are."""
    from harness.world.fates import fates_phrase

    from support import error, rank

    polling = [rank(r, "ERROR", host=0, error=error(
        "TimeoutError", f"rank {r}: /tmp/myjob/cfg.json did not appear in 30 s"))
        for r in range(1, 8)]
    leader = rank(0, "ERROR", host=0, error=error("ValueError", "bad value 0"))
    assert fates_phrase([leader, *polling]) == (
        "rank 0 raised ValueError: bad value 0; ranks 1-7 raised TimeoutError: rank N: "
        "/tmp/myjob/cfg.json did not appear in 30 s")
    same = [rank(r, "ERROR", host=0, error=error("KeyError", "'lr' at step 2")) for r in range(4)]
    assert fates_phrase(same) == "ranks 0-3 raised KeyError: 'lr' at step 2"
    two = [rank(r, "ERROR", host=0, error=error("OSError", f"shard {r} of 2.5")) for r in (2, 5)]
    assert fates_phrase(two) == "ranks 2,5 raised OSError: shard N of 2.5"


def test_a_checkpoint_exception_says_what_each_failing_process_raised() -> None:
    """torch.distributed.checkpoint gathers every process's failure into one exception whose
    message opens with their tracebacks' frames: the line says what each process raised."""
    import traceback

    from torch.distributed.checkpoint.api import CheckpointException

    from harness.world.fates import raised

    def write() -> None:
        raise OSError(28, "No space left on device")

    try:
        write()
    except OSError as exc:
        disk = (exc, traceback.extract_tb(exc.__traceback__))
    failure = CheckpointException("write", {0: disk, 3: (ValueError("bad\nshape"), None)})
    line = raised({"type": "torch.distributed.checkpoint.api.CheckpointException",
                   "message": str(failure)})
    assert line == ("raised torch.distributed.checkpoint.api.CheckpointException: rank 0: "
                    "OSError: [Errno 28] No space left on device; rank 3: ValueError: bad shape")
    assert raised({"type": "KeyError", "message": "'lr'\n(at step 2)"}) == \
        "raised KeyError: 'lr' (at step 2)"
