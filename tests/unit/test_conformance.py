"""The conformance script's pure parts (``benchmarks/conformance.py``): reading what
``harness exec`` and unittest printed into pass / as 2.9 / skipped / fail / hang, and the
table. Canned outputs; no upstream sources, no network, no world."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from support import REPO

_spec = importlib.util.spec_from_file_location("conformance", REPO / "benchmarks" / "conformance.py")
conformance = importlib.util.module_from_spec(_spec)
sys.modules["conformance"] = conformance
_spec.loader.exec_module(conformance)

TABLE = "world 1-0-ab · single-host-8 (current) · seed 0 · 0.4 s\n┏━━┓\n"


def unittest_tail(ran: int, result: str) -> str:
    return ("-" * 70 + f"\nRan {ran} test{'s' if ran != 1 else ''} in 1.234s\n\n{result}\n")


def test_a_passing_world_that_ran_its_tests_passes():
    out = TABLE + "PASS: all 8 ranks returned\n"
    run = conformance.classify("test/test_mp_save.py", "single-host-8", out, 0)
    assert (run.status, run.why, run.cause) == ("pass", "", "")


def test_every_test_skipping_itself_is_a_skip_not_a_pass():
    out = (TABLE + "PASS: all 8 ranks returned\n── stderr of launcher 0 ──\n"
           + unittest_tail(4, "OK (skipped=4)"))
    run = conformance.classify("test/pjrt/test_x.py", "1x2", out, 0)
    assert run.status == "skipped"
    assert run.why == "all 4 tests skipped themselves"


def test_some_tests_skipping_is_a_pass_with_a_note():
    out = TABLE + "PASS: all 2 ranks returned\n" + unittest_tail(5, "OK (skipped=2)")
    run = conformance.classify("test/pjrt/test_x.py", "1x2", out, 0)
    assert (run.status, run.note) == ("pass", "2 of 5 tests skipped themselves")


def test_a_script_that_started_no_rank_skipped_itself_and_says_what_it_printed():
    out = (TABLE + "│ launcher 0 │ 0 │ PASS │ exit 0 │ │\n"
           "PASS: no rank started: launcher 0 ran the script to its end (exit 0) without "
           "xmp.spawn or the XLA runtime\n── stdout of launcher 0 ──\n"
           "xla:0 is not a TPU device\n")
    run = conformance.classify("test/test_mp_x.py", "1x1", out, 0)
    assert run.status == "skipped"
    assert run.why == "started no rank: xla:0 is not a TPU device"


def test_a_launcher_error_is_read_as_its_error_with_its_cause():
    out = (TABLE + "ERROR: launcher 0 raised ModuleNotFoundError: No module named "
           "'torch_xla.debug' before starting its ranks (ranks 0-7 never started)\n")
    run = conformance.classify("test/pjrt/test_mesh_service.py", "single-host-8", out, 1)
    assert run.status == "fail"
    assert run.why == "ModuleNotFoundError: No module named 'torch_xla.debug'"
    assert run.cause == "shim: module torch_xla.debug is missing"


@pytest.mark.parametrize("why, cause", [
    ("AttributeError: module 'torch_xla.core.xla_model' has no attribute "
     "'reduce_scatter_bucketized'", "shim: torch_xla.core.xla_model.reduce_scatter_bucketized "
                                    "is missing"),
    ("ImportError: cannot import name 'pjrt' from 'torch_xla._internal' (/x/__init__.py)",
     "shim: torch_xla._internal.pjrt is missing"),
    ("RuntimeError: Rendezvous handler for xla:// already registered",
     "shim: torch_xla is imported a second time in the rank (bug 1)"),
    ("ModuleNotFoundError: No module named 'absl'",
     "environment: absl-py is not installed (pip install harness[conformance])"),
    ("ZeroDivisionError: division by zero", ""),
])
def test_causes_are_named_from_the_first_error_line(why, cause):
    assert conformance.cause_of(why) == cause


def test_a_failing_unittest_is_read_from_its_first_failing_tests_traceback():
    """absltest ends in SystemExit; the reason is the first failing test's last line."""
    output = (TABLE + "ERROR: launcher 0 raised SystemExit: True after its ranks 0-1 returned\n"
              + "=" * 70 + "\nERROR: test_all_gather (__main__.T.test_all_gather)\n"
              "T.test_all_gather\n" + "-" * 70  # absltest names the test again
              + "\nTraceback (most recent call last):\n  File \"t.py\", line 3, in test\n"
              "    xmp.spawn(f)\nRuntimeError: Runtime is already initialized. Do not use the "
              "XLA device before calling xmp.spawn.\n\n" + "=" * 70
              + "\nFAIL: test_b (__main__.T.test_b)\n" + "-" * 70 + "\nAssertionError: 1 != 2\n"
              + unittest_tail(2, "FAILED (errors=1, failures=1)"))
    run = conformance.classify("test/test_mp_all_gather.py", "1x2", output, 1)
    assert run.status == "fail"
    assert run.why.startswith("RuntimeError: Runtime is already initialized.")
    assert run.cause.startswith("shim: a second spawn")
    tests = conformance.read_unittest(output)
    assert (tests.ran, tests.ok, tests.counts) == (2, False, {"errors": 1, "failures": 1})


def test_the_rendezvous_failing_as_the_real_runtime_does_counts_as_fidelity():
    out = TABLE + "ERROR: ranks 0-7 raised ValueError: Only global rendezvous is supported\n"
    run = conformance.classify("test/test_mp_rendezvous.py", "single-host-8", out, 1)
    assert (run.status, run.cause) == ("as 2.9", "fails as torch_xla 2.9 fails")
    other = conformance.classify("test/test_mp_save.py", "single-host-8", out, 1)
    assert other.status == "fail"


def test_a_hang_and_a_killed_run_are_hangs():
    out = TABLE + "HANG: ranks 0-7 blocked in rendezvous 'x' (step 0) at t.py:4 in _mp_fn\n"
    assert conformance.classify("test/t.py", "1x2", out, 1).status == "hang"
    killed = conformance.classify("test/t.py", "1x2", "world 1-0", None)
    assert (killed.status, killed.why) == ("hang", "outlived its bound; killed")


def test_the_table_has_a_column_per_world_size_and_each_reason_once():
    runs = [conformance.Run("test/test_mp_save.py", "single-host-8", "pass"),
            conformance.Run("test/test_mp_save.py", "1x1", "pass",
                            note="1 of 2 tests skipped themselves"),
            conformance.Run("test/test_mp_x.py", "single-host-8", "fail", why="E: a | b",
                            cause="shim: c"),
            conformance.Run("test/test_mp_x.py", "1x1", "fail", why="E: a | b", cause="shim: c")]
    table = conformance.render_markdown(runs, ["single-host-8", "1x1"], "v2.9.0")
    assert "| file | 8 (`single-host-8`) | 1 (`1x1`) | why (and cause) |" in table
    assert "| `test_mp_save.py` | pass | pass * |  |" in table
    assert "| `test_mp_x.py` | fail | fail | E: a \\| b (shim: c) |" in table
    assert ("The 2 files named first: `single-host-8`: 1 pass, 1 fail of 2; `1x1`: 1 pass, "
            "1 fail of 2.") in table
    assert "\\* `test_mp_save.py`: 1 of 2 tests skipped themselves" in table


def test_writing_the_table_keeps_everything_outside_the_markers():
    text = f"# R\nprose before\n{conformance.BEGIN}\nold table\n{conformance.END}\nafter\n"
    new = conformance.replace_between_markers(text, "| new |\n")
    assert new == f"# R\nprose before\n{conformance.BEGIN}\n| new |\n{conformance.END}\nafter\n"
    with pytest.raises(ValueError):
        conformance.replace_between_markers("# no markers\n", "x")


def test_the_shim_page_has_the_markers_once_in_its_departures_section():
    assert conformance.SHIM_PAGE == REPO / "docs" / "reference" / "shim.md"
    text = conformance.SHIM_PAGE.read_text()
    assert text.startswith("# The shim: where it departs from torch_xla 2.9\n")
    section = text[:text.index("\n## ")]  # the page's first part, before its other sections
    assert text.count(conformance.BEGIN) == 1 == section.count(conformance.BEGIN)
    assert text.count(conformance.END) == 1 == section.count(conformance.END)


def test_extract_reads_the_ref_from_a_git_dir_and_choose_picks_the_first_set(tmp_path):
    repo = tmp_path / "xla"
    (repo / "test" / "pjrt").mkdir(parents=True)
    for name in ("test/test_mp_a.py", "test/test_other.py", "test/pjrt/test_mesh_service.py",
                 "test/pjrt/test_ddp.py"):
        (repo / name).write_text("print('hi')\n")
    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    subprocess.run([*git, "tag", "v2.9.0"], check=True)
    (repo / "test" / "test_mp_late.py").write_text("")  # not in the ref: never extracted
    dest = tmp_path / "out"
    dest.mkdir()
    tree = conformance.extract(str(repo), "v2.9.0", str(dest))
    assert "test/test_mp_late.py" not in tree
    assert conformance.choose(tree, wider=False, only=[]) == \
        ["test/pjrt/test_mesh_service.py", "test/test_mp_a.py"]
    assert conformance.choose(tree, wider=True, only=[]) == \
        ["test/pjrt/test_mesh_service.py", "test/test_mp_a.py", "test/pjrt/test_ddp.py"]
    assert conformance.choose(tree, wider=True, only=["ddp"]) == ["test/pjrt/test_ddp.py"]


def test_dynamos_advice_is_cut_from_the_error():
    out = (TABLE + "ERROR: ranks 0-1 raised torch._dynamo.exc.InternalTorchDynamoError: "
           "RuntimeError: Rendezvous handler for xla:// already registered from user code: "
           'File "t.py", line 10, in all_gather Set TORCHDYNAMO_VERBOSE=1 for more\n')
    run = conformance.classify("test/test_mp_all_gather.py", "1x2", out, 1)
    assert run.why == ("torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Rendezvous "
                       "handler for xla:// already registered")
    assert run.cause == "shim: torch_xla is imported a second time in the rank (bug 1)"


def test_one_cause_is_said_once_and_the_wider_files_are_counted_apart():
    wider = "test/torch_distributed/test_torch_distributed_all_gather_xla_backend.py"
    runs = [conformance.Run(wider, "single-host-8", "fail", why="AssertionError: 7 != 0",
                            cause="shim: bug 8"),
            conformance.Run(wider, "1x2", "fail", why="AssertionError: 1 != 0",
                            cause="shim: bug 8"),
            conformance.Run("test/test_mp_save.py", "single-host-8", "pass"),
            conformance.Run("test/test_mp_save.py", "1x2", "pass")]
    table = conformance.render_markdown(runs, ["single-host-8", "1x2"], "v2.9.0")
    assert "| fail | fail | AssertionError: 7 != 0 (shim: bug 8) |" in table
    assert "The 1 files named first: `single-host-8`: 1 pass of 1; `1x2`: 1 pass of 1." in table
    assert "The 1 wider ones: `single-host-8`: 1 fail of 1; `1x2`: 1 fail of 1." in table


def test_an_import_errors_path_on_this_machine_is_left_out():
    out = (TABLE + "ERROR: launcher 0 raised ImportError: cannot import name 'pjrt' from "
           "'torch_xla._internal' (/tmp/x/shims/torch_xla/_internal/__init__.py) before "
           "starting its ranks (ranks 0-1 never started)\n")
    run = conformance.classify("test/pjrt/test_ddp.py", "1x2", out, 1)
    assert run.why == "ImportError: cannot import name 'pjrt' from 'torch_xla._internal'"


def test_ranks_raising_inside_a_test_that_expects_it_is_the_runners_pass():
    """Upstream's test_rendezvous_string_payload asserts that run_multiprocess raises the
    rank's TypeError: the harness reports the rank's ERROR, the runner says OK."""
    detail = ("rank 0 raised TypeError: `payload` must be bytes, not <class 'str'>; "
              f"launcher 0 exited 0 all the same ({conformance.CAUGHT})")
    out = TABLE + f"ERROR: {detail}\n" + unittest_tail(7, "OK")
    run = conformance.classify("test/pjrt/test_mesh_service.py", "1x1", out, 1)
    assert run.status == "pass", run
    assert run.note == ("ranks raised as its tests expected: TypeError: `payload` must be "
                        "bytes, not <class 'str'>")
    failing = TABLE + f"ERROR: {detail}\n" + unittest_tail(7, "FAILED (failures=1)")
    assert conformance.classify("test/x.py", "1x1", failing, 1).status == "fail"


def test_a_failure_the_real_runtime_has_at_one_world_size_only_is_fidelity_there_only():
    """all_reduce is a no-op in a world of one on a real chip (scale included), so upstream's
    bucketed all_reduce test fails there on a TPU too; at 8 the same line is a failure."""
    file = "test/torch_distributed/test_torch_distributed_bucketed_all_reduce_xla_backend.py"
    out = TABLE + "ERROR: rank 0 raised AssertionError: \n"
    assert conformance.classify(file, "1x1", out, 1).status == "as 2.9"
    assert conformance.classify(file, "single-host-8", out, 1).status == "fail"
    eager = "test/eager/test_eager_all_reduce_in_place.py"
    out = TABLE + "ERROR: rank 0 raised TypeError: 'NoneType' object is not subscriptable\n"
    assert conformance.classify(eager, "1x1", out, 1).status == "as 2.9"
    assert conformance.classify(eager, "1x2", out, 1).status == "fail"


def test_mesh_service_on_several_hosts_fails_as_on_a_pod_and_its_tests_error_is_read():
    """run_multiprocess gives this host's values, rendezvous every host's: upstream's
    expectation holds on one host only. The runner's first failure is the line shown."""
    detail = ("ranks 0-7 raised TypeError: `payload` must be bytes, not <class 'str'>; "
              f"launchers 0-1 exited 0 all the same ({conformance.CAUGHT})")
    block = ("=" * 70 + "\nFAIL: test_mesh_reduce (__main__.PjRtMeshServiceTest)\n"
             + "-" * 70 + "\nTraceback (most recent call last):\n  File \"t.py\", line 3\n"
             "AssertionError: {0: [1]} != {0: [2]}\n\n")
    out = TABLE + f"ERROR: {detail}\n" + block + unittest_tail(7, "FAILED (failures=5)")
    file = "test/pjrt/test_mesh_service.py"
    run = conformance.classify(file, "2x4", out, 1)
    assert (run.status, run.why) == ("as 2.9", "AssertionError: {0: [1]} != {0: [2]}")
    assert conformance.classify(file, "single-host-8", out, 1).status == "fail"
