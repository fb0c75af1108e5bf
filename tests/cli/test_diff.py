"""``harness diff``: a simulator run against a pod run (or before against after), cell by cell,
held against a reviewed expected-differences file, as a user runs it and reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.reports.diff import WIDTH
from harness.reports.json_report import to_json
from harness.runner.cells import INFRA, Cell, Matrix

from support import REPO, run_cli_here

DETAIL = {
    "PASS": "every rank returned run-3f2a",
    "ERROR": "ranks 1-7: FileNotFoundError: [Errno 2] No such file or directory: "
             "'/tmp/temp_config.yaml'",
    "HANG": "ranks 1-7 still blocked in rendezvous('config_save') at the deadline",
}
NOT_RUN = "topology v6e-256: the pod is a v4-64"
POD = {"name": "nightly-v4", "accelerator": "v4-64", "workers": [f"w{i}" for i in range(8)],
       "not_run": {"v6e-mounts": NOT_RUN}}



@pytest.fixture
def cli():
    """``harness diff`` reads two files and prints: run in this process (see run_cli_here)."""
    return run_cli_here

def cell(scenario: str, target: str = "naive-sync", outcome: str = "PASS", verdict: str = "ok",
         detail: str | None = None) -> Cell:
    return Cell(scenario=scenario, target=target, topology="v4-64", seed=7, outcome=outcome,
                expected="pass", verdict=verdict, duration_s=0.5,
                detail=DETAIL.get(outcome, "") if detail is None else detail,
                replay=f"harness replay --scenario {scenario} --target {target} --seed 7")


def sim_matrix() -> Matrix:
    """Four cells the simulator ran: two pass, one is a known ERROR, one needs v6e-256."""
    return Matrix(cells=[cell("baseline"), cell("baseline", "robust-sync"),
                         cell("isolated-tmp", outcome="ERROR", verdict="known"),
                         cell("v6e-mounts")],
                  seed=7, created="2026-11-23T00:00:00+00:00", harness_version="0.1.0")


def pod_matrix() -> Matrix:
    """The same cells on the pod, which does not run v6e-mounts: the pod agrees everywhere."""
    sim = sim_matrix()
    return Matrix(cells=[c for c in sim.cells if c.scenario != "v6e-mounts"], seed=7,
                  created="2026-11-23T01:00:00+00:00", harness_version="0.1.0", mode="pod",
                  pod=json.loads(json.dumps(POD)))


def write(tmp_path: Path, sim: Matrix, pod: Matrix) -> tuple[str, str]:
    (tmp_path / "sim.json").write_text(to_json(sim))
    (tmp_path / "pod.json").write_text(to_json(pod))
    return str(tmp_path / "sim.json"), str(tmp_path / "pod.json")


def expected(tmp_path: Path, text: str) -> str:
    """The file written in ``tmp_path``, named as ``run`` (started there) passes it."""
    (tmp_path / "expected.yaml").write_text(text)
    return "expected.yaml"


def run(cli, tmp_path: Path, sim: Matrix, pod: Matrix, *args: str):
    """``harness diff sim.json pod.json ARGS`` run from ``tmp_path``, so the names are short."""
    write(tmp_path, sim, pod)
    return cli("diff", "sim.json", "pod.json", *args, cwd=tmp_path)


def isolated_tmp_passes_on_the_pod() -> Matrix:
    pod = pod_matrix()
    changed = pod.cell("isolated-tmp", "naive-sync")
    assert changed is not None
    changed.outcome, changed.verdict, changed.detail = "PASS", "unexpected", "every rank read it"
    return pod


LISTED = """\
differences:
  - cell: isolated-tmp[naive-sync]
    sim: ERROR
    pod: {pod}
    reason: each TPU VM of the pod has its own /tmp, but the rendezvous ends later
"""


# -- agreement and differences ------------------------------------------------------------------

def test_reports_that_agree_exit_0_and_name_their_sides_by_mode(cli, tmp_path: Path) -> None:
    done = run(cli, tmp_path, sim_matrix(), pod_matrix())
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "comparing sim (sim.json) with pod (pod.json: nightly-v4, v4-64, 8 workers)"
    assert "cells that differ" not in done.stdout
    assert lines[-1] == ("3 cells agree, 0 differ, 1 only in sim (not run on the pod), "
                         "0 pod failures")


def test_a_changed_cell_exits_1_naming_it_with_both_details(cli, tmp_path: Path) -> None:
    done = run(cli, tmp_path, sim_matrix(), isolated_tmp_passes_on_the_pod())
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("cells that differ (1):")
    assert lines[at + 1:at + 5] == [
        "  isolated-tmp[naive-sync]: sim ERROR, pod PASS (verdicts: sim known, pod unexpected)",
        f"    sim: {DETAIL['ERROR']}",
        "    pod: every rank read it",
        "",
    ]
    assert lines[-2:] == [
        "2 cells agree, 1 differs, 1 only in sim (not run on the pod), 0 pod failures",
        "FAILED: 1 difference is not listed as expected (--expected FILE lists reviewed ones)"]


def test_a_listed_difference_exits_0_and_shows_its_reason(cli, tmp_path: Path) -> None:
    listed = expected(tmp_path, LISTED.format(pod="PASS"))
    done = run(cli, tmp_path, sim_matrix(), isolated_tmp_passes_on_the_pod(), "--expected", listed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("    expected: each TPU VM of the pod has its own /tmp, but the rendezvous ends later"
            in done.stdout.splitlines())
    assert "1 differs (listed as expected)" in done.stdout
    assert "FAILED" not in done.stdout and "warning" not in done.stdout


def test_an_entry_that_omits_the_outcomes_accepts_any(cli, tmp_path: Path) -> None:
    listed = expected(tmp_path, "differences:\n  - cell: isolated-tmp[naive-sync]\n"
                                "    reason: flaky on real hardware\n")
    done = run(cli, tmp_path, sim_matrix(), isolated_tmp_passes_on_the_pod(), "--expected", listed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "    expected: flaky on real hardware" in done.stdout.splitlines()


def test_a_difference_listed_with_other_outcomes_still_fails(cli, tmp_path: Path) -> None:
    listed = expected(tmp_path, LISTED.format(pod="HANG"))
    done = run(cli, tmp_path, sim_matrix(), isolated_tmp_passes_on_the_pod(), "--expected", listed)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("    listed at expected.yaml:2 as sim ERROR, pod HANG, which is not this difference:"
            " check the entry") in done.stdout.splitlines()
    assert "expected: each TPU VM" not in done.stdout
    assert "FAILED: 1 difference is not listed as expected in expected.yaml" in done.stdout


def test_the_sides_of_an_entry_follow_the_modes_not_the_argument_order(cli, tmp_path: Path) -> None:
    """``harness diff pod.json sim.json``: ``sim:`` is still the simulator's outcome."""
    listed = expected(tmp_path, LISTED.format(pod="PASS"))
    write(tmp_path, sim_matrix(), isolated_tmp_passes_on_the_pod())
    done = cli("diff", "pod.json", "sim.json", "--expected", listed, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("  isolated-tmp[naive-sync]: pod PASS, sim ERROR (verdicts: pod unexpected, sim known)"
            in done.stdout.splitlines())


def test_cells_the_pod_does_not_run_are_listed_but_never_fail(cli, tmp_path: Path) -> None:
    done = run(cli, tmp_path, sim_matrix(), pod_matrix())
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    at = lines.index("cells only one side ran (1):")
    assert lines[at + 1:at + 3] == ["  v6e-mounts[naive-sync]: only in sim (PASS, ok)",
                                    f"    not run on the pod: {NOT_RUN}"]


def test_a_cell_only_one_side_ran_without_a_reason_is_a_difference(cli, tmp_path: Path) -> None:
    pod = pod_matrix()
    pod.cells = [c for c in pod.cells if c.target != "robust-sync"]
    done = run(cli, tmp_path, sim_matrix(), pod)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[lines.index("  baseline[robust-sync]: only in sim (PASS, ok)") + 1] == \
        f"    sim: {DETAIL['PASS']}"
    assert "2 only in sim (1 not run on the pod)" in done.stdout
    assert "FAILED: 1 difference is not listed" in done.stdout


def test_common_compares_only_the_cells_both_reports_ran(cli, tmp_path: Path) -> None:
    """A run of one scenario against the full catalog: without --common every other cell is
    a difference; with it, only the cells both ran are compared, the rest counted."""
    full, subset = sim_matrix(), sim_matrix()
    subset.cells = [c for c in subset.cells if c.scenario == "isolated-tmp"]
    (tmp_path / "full.json").write_text(to_json(full))
    (tmp_path / "subset.json").write_text(to_json(subset))
    plain = cli("diff", str(tmp_path / "subset.json"), str(tmp_path / "full.json"))
    assert plain.returncode == 1 and "3 only in" in plain.stdout
    done = cli("diff", "--common", str(tmp_path / "subset.json"), str(tmp_path / "full.json"))
    assert done.returncode == 0, done.stdout
    assert "--common: 3 cells only one report ran left out" in done.stdout
    assert "only in" not in done.stdout and "1 cell agrees, 0 differ" in done.stdout
    subset.cells[0].outcome = "PASS"  # a real difference still fails
    (tmp_path / "subset.json").write_text(to_json(subset))
    assert cli("diff", "--common", str(tmp_path / "subset.json"),
               str(tmp_path / "full.json")).returncode == 1


# -- cells the pod itself failed --------------------------------------------------------------

def pod_that_lost_a_host() -> Matrix:
    pod = pod_matrix()
    lost = pod.cell("baseline", "robust-sync")
    assert lost is not None
    lost.outcome, lost.verdict = INFRA, "unexercised"
    lost.detail = "worker 3 (tpu@10.0.0.4): host stopped answering after 30 s"
    return pod


def test_a_pod_failure_is_its_own_group_and_exits_4(cli, tmp_path: Path) -> None:
    done = run(cli, tmp_path, sim_matrix(), pod_that_lost_a_host())
    assert done.returncode == 4, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("cells the pod failed (1), not the target's outcome, not compared:")
    assert lines[at + 1:at + 3] == [
        "  baseline[robust-sync]: the pod failed here: worker 3 (tpu@10.0.0.4): host stopped "
        "answering after",
        "      30 s"]
    assert lines[at + 3] == "    sim: PASS (ok)"
    assert "cells that differ" not in done.stdout  # never a difference of the target
    assert "2 cells agree, 0 differ, 1 only in sim (not run on the pod), 1 pod failure" in lines
    assert lines[-1] == ("FAILED (--allow-infra accepts this): the pod failed in 1 cell, "
                         "so the comparison is incomplete")


def test_allow_infra_accepts_a_pod_failure(cli, tmp_path: Path) -> None:
    done = run(cli, tmp_path, sim_matrix(), pod_that_lost_a_host(), "--allow-infra")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("accepted (--allow-infra): the pod failed in 1")


def test_an_unlisted_difference_outranks_a_pod_failure(cli, tmp_path: Path) -> None:
    pod = pod_that_lost_a_host()
    pod.cells = [c for c in isolated_tmp_passes_on_the_pod().cells
                 if c.scenario == "isolated-tmp"] + \
        [c for c in pod.cells if c.scenario != "isolated-tmp"]
    done = run(cli, tmp_path, sim_matrix(), pod)
    assert done.returncode == 1  # a fidelity finding is the news, whatever else failed
    assert "isolated-tmp[naive-sync]: sim ERROR, pod PASS" in done.stdout
    assert "the pod failed in 1 cell" in done.stdout


# -- the expected-differences file ---------------------------------------------------------------

@pytest.mark.parametrize("text, line, message", [
    ("differences: [\n  - cell: a[b]\n", 2, "not valid YAML"),
    ("differences:\n  - cell: isolated-tmp[naive-sync]\n    pod: PASS\n", 2,
     "required field is missing (field 'differences.0.reason')"),
    ("differences:\n  - cell: isolated-tmp[naive-sync]\n    reason: ''\n", 3,
     "is empty: a listed difference must say why it is expected (field 'differences.0.reason')"),
    ("differences:\n  - cell: isolated-tmp[naive-sync]\n    reason: why\n    owner: me\n", 4,
     "unknown key; allowed keys are cell, sim, pod, reason (field 'differences.0.owner')"),
    ("differences:\n  - cell: isolated-tmp[naive-sync]\n    reason: 42\n", 3,
     "Input should be a valid string (field 'differences.0.reason')"),
    ("differences:\n  - cell: isolated-tmp[naive-sync]\n    sim: PAS\n    reason: x\n", 3,
     "(field 'differences.0.sim')"),
    ("differences:\n  - reason: x\n    cell: isolated-tmp/naive-sync\n", 3,
     "'isolated-tmp/naive-sync' does not name a cell: write it as scenario[target]"),
    ("differences:\n  - {cell: 'a[b]', reason: x}\n  - {cell: 'a[b]', reason: y}\n", 3,
     "a[b] is listed twice (first at line 2)"),
    ("- cell: a[b]\n  reason: x\n", 1, "a mapping with one key, differences"),
    ("differences:\n  cell: a[b]\n", 2, "Input should be a valid list (field 'differences')"),
])
def test_a_bad_expected_file_exits_2_naming_file_line_and_field(cli, tmp_path: Path, text: str,
                                                                 line: int, message: str) -> None:
    listed = expected(tmp_path, text)
    done = run(cli, tmp_path, sim_matrix(), pod_matrix(), "--expected", listed)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{listed}:{line}: " in done.stderr
    assert message in done.stderr
    assert "--expected" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_stale_entries_are_warnings_not_failures(cli, tmp_path: Path) -> None:
    listed = expected(tmp_path, """\
differences:
  - cell: baseline[naive-sync]
    reason: the pod used to time out here
  - cell: retired-scenario[naive-sync]
    reason: gone since the catalog changed
  - cell: v6e-mounts[naive-sync]
    reason: the pod has no /mnt/data
""")
    done = run(cli, tmp_path, sim_matrix(), pod_matrix(), "--expected", listed)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("warnings about expected.yaml (3):")
    assert lines[at + 1:at + 5] == [
        "  warning: expected.yaml:2: baseline[naive-sync]: listed as expected but the cells agree"
        " now: remove",
        "    it",
        "  warning: expected.yaml:4: retired-scenario[naive-sync]: listed but not in either report",
        "  warning: expected.yaml:6: v6e-mounts[naive-sync]: listed as expected but not a "
        "difference: not run",
    ]
    assert "FAILED" not in done.stdout


def test_an_empty_list_of_differences_is_a_valid_file(cli, tmp_path: Path) -> None:
    listed = expected(tmp_path, "differences: []\n")
    assert run(cli, tmp_path, sim_matrix(), pod_matrix(), "--expected", listed).returncode == 0
    done = run(cli, tmp_path, sim_matrix(), isolated_tmp_passes_on_the_pod(), "--expected", listed)
    assert done.returncode == 1
    assert "    not listed in expected.yaml" in done.stdout.splitlines()


# -- the header, the labels, the width -----------------------------------------------------------

def test_reports_of_the_same_mode_are_named_by_file(cli, tmp_path: Path) -> None:
    """Before and after a fix: the file names label the sides; a verdict alone that changed is
    a difference, a detail alone is not, and a cell in one report only is one."""
    before = sim_matrix()
    after = sim_matrix()
    after.cells[0].detail = "another detail"  # not a difference
    after.cells[1].verdict = "unexpected"  # same outcome, another verdict: a difference
    after.cells[2].outcome, after.cells[2].verdict = "PASS", "ok"  # the fix
    del after.cells[3]
    after.cells.append(cell("api-drift"))
    (tmp_path / "before.json").write_text(to_json(before))
    (tmp_path / "after.json").write_text(to_json(after))
    done = cli("diff", "before.json", "after.json", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == "comparing before.json with after.json"
    assert ("  baseline[robust-sync]: before.json PASS, after.json PASS (verdicts: before.json ok,"
            " after.json unexpected)") in lines
    assert "  isolated-tmp[naive-sync]: before.json ERROR, after.json PASS (verdicts: before.json "\
        "known, after.json ok)" in lines
    assert "  v6e-mounts[naive-sync]: only in before.json (PASS, ok)" in lines
    assert "  api-drift[naive-sync]: only in after.json (PASS, ok)" in lines
    assert "baseline[naive-sync]" not in done.stdout
    assert "1 cell agrees, 2 differ, 1 only in before.json, 1 only in after.json" in done.stdout
    assert "pod failure" not in done.stdout  # neither report is a pod's


def test_seed_version_and_catalog_differences_are_said_first(cli, tmp_path: Path) -> None:
    pod = pod_matrix()
    pod.seed, pod.harness_version = 8, "0.2.0"
    pod.cells.append(cell("pod-only-scenario"))
    done = run(cli, tmp_path, sim_matrix(), pod)
    lines = done.stdout.splitlines()
    assert lines[1:4] == [
        "note: the reports ran with different seeds (sim: 7, pod: 8): faults fire at other points, "
        "so a cell",
        "      may change with the seed, not the code",
        "note: the reports come from different harness versions (sim: 0.1.0, pod: 0.2.0)",
    ]
    assert lines[4] == "note: the reports ran different scenarios (only pod: pod-only-scenario)"
    assert done.returncode == 1  # the pod-only cell is a difference; the notes are not


def test_a_seed_alone_is_no_failure(cli, tmp_path: Path) -> None:
    pod = pod_matrix()
    pod.seed = 8
    done = run(cli, tmp_path, sim_matrix(), pod)
    assert done.returncode == 0
    assert "different seeds (sim: 7, pod: 8)" in done.stdout


def test_long_details_keep_to_the_width_of_a_ci_log(cli, tmp_path: Path) -> None:
    sim = sim_matrix()
    sim.cells[2].detail = "ranks 1-7 could not read the config: " + "x" * 150 + " " + \
        "words " * 400
    done = run(cli, tmp_path, sim, isolated_tmp_passes_on_the_pod())
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert any(line.endswith("more lines in the report") for line in lines)


def test_a_report_whose_pod_not_run_is_malformed_is_refused(cli, tmp_path: Path) -> None:
    pod = pod_matrix()
    assert pod.pod is not None
    pod.pod["not_run"] = ["v6e-mounts"]
    done = run(cli, tmp_path, sim_matrix(), pod)
    assert done.returncode == 2
    assert "pod.json: 'pod.not_run' must map each scenario name to the reason" in done.stderr


# -- JSON for the nightly job ---------------------------------------------------------------------

def test_json_carries_the_groups_and_the_exit_code(cli, tmp_path: Path) -> None:
    pod = isolated_tmp_passes_on_the_pod()
    lost = pod.cell("baseline", "robust-sync")
    assert lost is not None
    lost.outcome, lost.verdict, lost.detail = INFRA, "unexercised", "worker 5: key refused"
    listed = expected(tmp_path, LISTED.format(pod="PASS") +
                      "  - cell: baseline[naive-sync]\n    reason: old\n")
    done = run(cli, tmp_path, sim_matrix(), pod, "--expected", listed, "--format", "json")
    assert done.returncode == 4, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["schema"] == "harness.diff/1"
    assert (out["reports"]["a"]["label"], out["reports"]["b"]["label"]) == ("sim", "pod")
    assert out["reports"]["b"]["pod"]["name"] == "nightly-v4"
    [differ] = out["differ"]
    assert differ["cell"] == "isolated-tmp[naive-sync]"
    assert (differ["a"]["outcome"], differ["b"]["outcome"]) == ("ERROR", "PASS")
    assert differ["a"]["detail"] == DETAIL["ERROR"] and differ["b"]["detail"] == "every rank read it"
    assert differ["expected"] is True and differ["listed"]["line"] == 2
    assert [(o["cell"], o["not_run"], o["difference"]) for o in out["only"]] == \
        [("v6e-mounts[naive-sync]", NOT_RUN, False)]
    [failed] = out["pod_failed"]
    assert (failed["cell"], failed["b"]["detail"]) == ("baseline[robust-sync]",
                                                       "worker 5: key refused")
    assert out["agree"] == ["baseline[naive-sync]"]
    assert out["warnings"] == [{"line": 6, "cell": "baseline[naive-sync]",
                                "message": "listed as expected but the cells agree now: remove it"}]
    assert {k: out["summary"][k] for k in ("agree", "differ", "not_run", "pod_failed",
                                           "listed_as_expected", "unlisted")} == \
        {"agree": 1, "differ": 1, "not_run": 1, "pod_failed": 1, "listed_as_expected": 1,
         "unlisted": 0}
    assert out["exit_code"] == 4
    allowed = json.loads(cli("diff", "sim.json", "pod.json", "--expected", listed, "--format",
                             "json", "--allow-infra", cwd=tmp_path).stdout)
    assert allowed["exit_code"] == 0


def test_the_docs_example_of_an_expected_file_is_valid(tmp_path: Path) -> None:
    from harness.reports.expected import load_expected

    page = (REPO / "docs" / "reference" / "cli.md").read_text()
    after = page[page.index("The expected-differences file is reviewed like code"):]
    start = after.index("```yaml\n") + len("```yaml\n")
    block = after[start:after.index("\n```", start)]
    (tmp_path / "expected.yaml").write_text(block + "\n")
    [entry] = load_expected(tmp_path / "expected.yaml").entries
    assert (entry.name, entry.sim, entry.pod, entry.line) == \
        ("isolated-tmp[naive-sync]", "ERROR", "PASS", 2)
