"""One vocabulary: the outcomes, verdicts, exit codes, limits and error root are defined in
``harness.vocabulary`` and nowhere else, and saved reports keep their words."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from harness import vocabulary as v

from support import REPO

HARNESS = REPO / "harness"


def test_the_words_are_the_saved_reports_words():
    assert json.dumps([v.PASS, v.NOT_EXERCISED, v.INFRA, v.UNEXERCISED, v.Expect.FAIL_LOUDLY]) == \
        '["PASS", "NOT-EXERCISED", "INFRA", "unexercised", "fail-loudly"]'
    assert f"{v.HANG} {v.KNOWN}" == "HANG known" and v.Outcome("CRASH") is v.CRASH
    assert [int(c) for c in v.ExitCode] == [0, 1, 2, 3, 4, 130]
    assert set(v.SEVERITY) == set(v.WORLD_OUTCOMES)
    assert set(v.VERDICT_ORDER) == set(v.VERDICTS)


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), filename=str(p))) for p in sorted(HARNESS.rglob("*.py"))
            if p.name != "vocabulary.py" and "workloads" not in p.parts]  # targets: user code


WORDS = {str(o) for o in v.Outcome} | {str(w) for w in v.Verdict} | {str(e) for e in v.Expect}


def test_no_module_defines_an_outcome_or_verdict_of_its_own():
    """``X = "PASS"`` (or a tuple of such words) outside the vocabulary is a second definition."""
    found = []
    for path, tree in _modules():
        for node in tree.body:
            if not isinstance(node, ast.Assign):
                continue
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            words = [c.value for c in values if isinstance(c, ast.Constant) and c.value in WORDS]
            if words:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {words}")
    assert found == []


LIMITS = {86_400: "MAX_TIMEOUT", 86_400_000: "MAX_TIMEOUT_MS", 2**32 - 1: "MAX_SEED",
          600_000: "MAX_TIMEOUT_MS (600,000 ms was a stale limit)"}


@pytest.mark.parametrize("value", [86_400, 86_400_000, 2**32 - 1, 600_000])
def test_no_module_writes_a_limit_the_vocabulary_names(value):
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            literal = isinstance(node, ast.Constant) and node.value == value and \
                not isinstance(node.value, bool)
            power = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and \
                isinstance(node.left, ast.Constant) and node.left.value == 2 and \
                isinstance(node.right, ast.Constant) and 2 ** node.right.value - 1 == value
            if literal or power:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == [], f"use harness.vocabulary.{LIMITS[value]}"


def test_every_error_a_user_sees_has_the_one_root_and_its_exit_code():
    from harness.explore.crash import CrashError
    from harness.pod.cloud import CloudError
    from harness.pod.controller import PodFailure
    from harness.pod.local import LocalPodError
    from harness.pod.sync import SyncError
    from harness.pod.workers import HostsFileError
    from harness.reports.store import ReportDirError
    from harness.runner.cluster import ClusterError
    from harness.scenario_yaml import ScenarioError
    from harness.scenarios import UnknownScenario

    usage = [ScenarioError, UnknownScenario, ReportDirError, ClusterError, CrashError, SyncError,
             HostsFileError]
    pod = [CloudError, LocalPodError, PodFailure]
    assert all(issubclass(e, v.UsageError) and e.exit_code == v.ExitCode.USAGE for e in usage)
    assert all(issubclass(e, v.PodError) and e.exit_code == v.ExitCode.POD_FAILED for e in pod)
    # the bases they had still hold, for code that catches them by those
    assert issubclass(ReportDirError, OSError) and issubclass(HostsFileError, ValueError)
