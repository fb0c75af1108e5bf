"""What ``harness exec`` says when a launcher, not a rank, decides the run (issue 11, bug 9).

A launcher that raises or dies before its ``xmp.spawn`` started no rank: its ranks never
ran, so they neither raised its error nor are "still running". A launcher that raises
after its ranks returned failed the run on its own: "all N ranks returned" is no reason.
The one line names the launcher, what it did (its traceback's last line), and what became
of its ranks.
"""

from __future__ import annotations

import textwrap

import pytest

from harness import CRASH, ERROR, HANG, PASS, run_world
from harness.reports.diagnosis import describe, diagnose, group_line

from support import run_cli

SCRIPT = """
import os, signal, sys
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index):
    xm.rendezvous("sync")
    if sys.argv[1] in ("ranks-raise", "catches"):
        raise ValueError("rank %d refuses" % (index % 2))

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "raise-before":
        raise ValueError("the launcher refuses")
    if mode == "exit-3-before":
        os._exit(3)
    if mode == "sigkill-before":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "rank-raises":  # no spawn: on one rank per host the launcher is the rank
        xm.rendezvous("sync")
        raise ValueError("the rank refuses")
    if mode == "host-1-skips" and os.environ["TPU_WORKER_ID"] == "1":
        sys.exit(0)
    if mode == "catches":  # a test that expects its ranks to raise: spawn re-raises, it catches
        try:
            xmp.spawn(_mp_fn, args=())
        except ValueError:
            sys.exit(0)
    xmp.spawn(_mp_fn)
    if mode == "exit-true-after":  # unittest.main() ends so when a test failed
        sys.exit(True)
    if mode == "raise-after":
        raise AssertionError("the launcher's own check failed")
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT))
    return str(path)


def _world(script: str, mode: str, topology: str = "2x2"):
    return run_world(argv=(script, mode), topology=topology, timeout=20)


def test_a_launcher_that_raises_before_spawn_is_named_and_its_ranks_never_started(script):
    result = _world(script, "raise-before")
    assert result.outcome == ERROR
    assert result.detail() == ("launchers 0-1 raised ValueError: the launcher refuses before "
                               "starting their ranks (ranks 0-3 never started)")
    assert [r.summary() for r in result.ranks[:2]] == \
        ["never started: launcher 0 raised ValueError: the launcher refuses before starting it"] * 2
    diagnosis = diagnose(result)
    # the launchers' traceback is shown once, as theirs; the ranks that never ran left none
    assert [t.label for t in diagnosis.tracebacks] == ["launchers 0-1"]
    assert group_line(diagnosis.groups[1]) == (
        "ranks 0-1 (host 0): ERROR: NeverStarted: launcher 0 raised ValueError: the "
        "launcher refuses before starting it")


@pytest.mark.parametrize("mode, how", [
    ("exit-3-before", "exited with code 3 without a Python exception"),
    ("sigkill-before", "killed by SIGKILL without a Python exception"),
])
def test_a_launcher_that_dies_before_spawn_is_named_not_its_ranks_still_running(script, mode,
                                                                                 how):
    result = _world(script, mode, topology="single-host-8")
    assert result.outcome == CRASH
    assert result.detail() == (f"launcher 0 {how} before starting its ranks "
                               "(ranks 0-7 never started)")
    assert "still running" not in describe(result)
    assert all(r.summary() == f"never started: launcher 0 {how} before starting it"
               for r in result.ranks)


def test_a_launcher_that_raises_after_its_ranks_returned_says_so(script):
    result = _world(script, "raise-after")
    assert result.outcome == ERROR
    assert [r.outcome for r in result.ranks] == [PASS] * 4
    assert result.detail() == ("launchers 0-1 raised AssertionError: the launcher's own check "
                               "failed after their ranks 0-3 returned")


def test_a_launcher_that_exits_true_exits_1_as_python_does(script):
    """``sys.exit(True)`` (how ``unittest.main()`` ends after a failure) is exit status 1;
    it was sent as the bool ``True``, which the protocol refused, hiding the script's end."""
    result = _world(script, "exit-true-after")
    assert result.outcome == ERROR
    assert [h.exit_code for h in result.hosts] == [1, 1]
    assert result.detail() == ("launchers 0-1 raised SystemExit: True after their ranks 0-3 "
                               "returned")


def test_a_launcher_whose_ranks_raised_is_left_to_their_fates(script):
    """xmp.spawn raises its ranks' error in the launcher: the ranks' errors are the reason."""
    result = _world(script, "ranks-raise")
    assert result.outcome == ERROR
    assert result.detail() == ("ranks 0,2 raised ValueError: rank 0 refuses; "
                               "ranks 1,3 raised ValueError: rank 1 refuses")


def test_a_launcher_that_is_its_hosts_rank_is_judged_once_as_the_rank(script):
    """On a one-rank-per-host world the launcher that runs no spawn is rank 0 itself."""
    result = _world(script, "rank-raises", topology="2x1")
    assert result.outcome == ERROR
    assert result.detail() == "ranks 0-1 raised ValueError: the rank refuses"
    alone = _world(script, "raise-before", topology="1x1")
    assert alone.detail() == ("launcher 0 raised ValueError: the launcher refuses before "
                              "starting its rank (rank 0 never started)")


def test_ranks_a_passing_launcher_never_started_show_no_exit_of_their_own(script):
    """Host 1 exits 0 without spawning: host 0's ranks wait for ranks 2-3 forever. Ranks
    2-3 were never processes: their row says so, not that they are still running."""
    result = _world(script, "host-1-skips")
    assert result.outcome == HANG
    rows = {tuple(g.ranks): g for g in diagnose(result).groups if g.noun == "rank"}
    assert rows[(2, 3)].exit == "-"
    assert rows[(2, 3)].result == "NeverStarted: launcher 1 exited 0 without starting it"


def test_exec_prints_the_launchers_error_as_the_reason(script):
    done = run_cli("exec", "-t", "single-host-8", "--", "python", script, "raise-before")
    assert done.returncode == 1, done.stdout + done.stderr
    flat = " ".join(done.stdout.split())
    assert ("ERROR: launcher 0 raised ValueError: the launcher refuses before starting its "
            "ranks (ranks 0-7 never started)") in flat
    assert "ranks 0-7 raised" not in flat
    assert flat.count("traceback of") == 1


def test_ranks_that_raised_in_a_launcher_that_caught_it_say_the_launcher_went_on(script):
    """The ranks' error is the run's (ERROR), and the line says the script caught what its
    spawn raised: "all the same" is why the launcher's exit 0 is no contradiction."""
    result = _world(script, "catches")
    assert result.outcome == ERROR, describe(result)
    assert [h.outcome for h in result.hosts] == [PASS, PASS]
    assert result.detail() == ("ranks 0,2 raised ValueError: rank 0 refuses; "
                               "ranks 1,3 raised ValueError: rank 1 refuses; launchers 0-1 "
                               "exited 0 all the same (the script caught what its xmp.spawn "
                               "raised)")


STRANGER = """
import json, os
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

def main(index):
    path = "/tmp/myjob/cfg.json"
    if xm.get_ordinal() == 0:
        os.makedirs("/tmp/myjob", exist_ok=True)
        with open(path, "w") as f:
            json.dump({"lr": 0.1}, f)
    xm.rendezvous("cfg")
    with open(path) as f:
        print("lr", json.load(f)["lr"])

if __name__ == "__main__":
    xmp.spawn(main, args=())
"""


def test_one_missing_file_is_said_once_with_where_it_was_written(tmp_path):
    """A stranger's script whose rank 0 writes its config to /tmp and the others read it: the
    error once (a launcher re-raising its ranks' error, and a stderr that is only the
    traceback, are not said again), where the file was written, no harness frame, no path
    cut at 80 columns."""
    (tmp_path / "train.py").write_text(STRANGER)
    done = run_cli("exec", "-t", "v4-64", "--", "python", "train.py", cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "ERROR: ranks 1-7 raised FileNotFoundError: [Errno 2] No such file or directory: " \
           "'/tmp/myjob/cfg.json'\n" in out
    assert "'/tmp/myjob/cfg.json' was written on host 0 only (by rank 0); ranks 1-7 on hosts " \
           "1-7 looked for it on their own host, where no rank wrote it\n" in out
    assert out.count("Traceback (most recent call last):") == 1
    assert "traceback of launchers" not in out and "stderr of" not in out
    assert "harness/" not in out.split("traceback of ranks 1-7")[1]
    assert len(out.splitlines()) < 30, out


def test_exec_writes_the_run_as_a_one_cell_report_when_asked(tmp_path):
    import json

    (tmp_path / "train.py").write_text(STRANGER)
    done = run_cli("exec", "-t", "v4-64", "--report-dir", str(tmp_path / "r"), "--format",
                   "json", "--", "python", "train.py", cwd=tmp_path)
    assert done.returncode == 1
    assert f"json: {tmp_path}/r/" in done.stdout
    report = json.loads((tmp_path / "r" / "latest" / "matrix.json").read_text())
    [cell] = report["cells"]
    assert (cell["scenario"], cell["target"], cell["outcome"], cell["verdict"]) == \
        ("exec", "python train.py", "ERROR", "unexpected")
    assert cell["replay"] == "harness exec -t v4-64 --seed 0 -- python train.py"
    assert sorted(r["rank"] for r in cell["ranks"]) == list(range(8))
    again = run_cli("report", str(tmp_path / "r" / "latest" / "matrix.json"), cwd=tmp_path)
    assert "1 unexpected · the run fails" in again.stdout
    lone = run_cli("exec", "--format", "json", "--", "python", "train.py", cwd=tmp_path)
    assert lone.returncode == 2 and "add --report-dir" in lone.stderr
