"""The nightly TPU workflow calls the harness with options the harness has: a renamed option
would fail only at 03:17 on a pod that costs $100 an hour, so it fails here instead."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import yaml

from harness.cli import cli

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "nightly-tpu.yml"


def _harness_calls() -> list[tuple[str, list[str]]]:
    """(step name, argv after ``harness``) of every harness command the workflow runs."""
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["smoke"]["steps"]
    calls = []
    for step in steps:
        script = (step.get("run") or "").replace("\\\n", " ")
        for line in script.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["harness"]:
                calls.append((step.get("name", "?"), words[1:]))
    return calls


def _resolve(argv: list[str]) -> tuple[click.Command, list[str]]:
    command: click.Command = cli
    while isinstance(command, click.Group) and argv and argv[0] in command.commands:
        command, argv = command.commands[argv[0]], argv[1:]
    return command, argv


def test_every_harness_call_in_the_nightly_names_options_its_command_has():
    calls = _harness_calls()
    assert {name for name, _ in calls} >= {"Sweep what earlier runs left past their ttl",
                                           "Simulator run", "Pod run (same commit, same "
                                           "catalog, real torch_xla)", "Diff the simulator "
                                           "and the pod", "Release the TPU"}
    for name, argv in calls:
        command, rest = _resolve(argv)
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        used = {w.split("=")[0] for w in rest if w.startswith("--")}
        assert used <= known, f"{name}: harness {' '.join(argv[:2])} has no {used - known}"


def test_the_nightly_sets_the_workers_up_before_its_pod_run():
    pod_runs = [argv for _, argv in _harness_calls() if argv[:2] == ["pod", "run"]]
    assert len(pod_runs) == 1 and "--setup" in pod_runs[0] and "--torch" in pod_runs[0]
