"""The verdict of a whole script's world (``harness exec``): what the world's outcome says,
read with what the script says of itself.

Two things a world's outcome alone gets wrong for a script:

- A script that started no rank (a test file that skipped itself, a ``--help``) tested
  nothing: NOT-EXERCISED with its reason, never PASS.
- A test file judges its own ranks: one that expects a rank to raise (``assertRaises``
  around ``xmp.spawn``) catches what the spawn re-raises and reports OK. Its verdict is
  read from what its runner printed last (unittest and absltest's ``Ran N tests`` then
  ``OK``, pytest's closing ``N passed``): when every launcher exited 0 and says so, the
  ranks' errors were what it expected, and the world is a PASS that says it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.checkers.common import end_of_world
from harness.faults.plan import make_plan
from harness.history import ranks_phrase
from harness.roles import Roles, derive
from harness.runner.cells import Cell, FaultRow, RankRow
from harness.scenarios import Scenario
from harness.topology import get_topology
from harness.vocabulary import ERROR, NOT_EXERCISED, PASS
from harness.world.result import RankResult, WorldResult
from harness.world.world import run_world

#: unittest (and absltest, which prints through it): the last "Ran N tests" and its verdict
_UNITTEST = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n\s*\n(OK|FAILED)\b(.*)$", re.M)
#: pytest's closing line: "==== 3 passed, 1 skipped in 0.52s ====" (bare with -q)
_PYTEST = re.compile(r"^=*\s*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|"
                     r"warnings?|deselected|rerun)(?:, )?)+) in [\d.]+s\b.*$", re.M)


@dataclass(frozen=True)
class Verdict:
    outcome: str
    detail: str


def reported(launcher: RankResult) -> tuple[bool, str] | None:
    """What a test runner said of its own run in this launcher's output: (passed, its
    words), or None if it printed no verdict a runner prints."""
    text = f"{launcher.stdout}\n{launcher.stderr}"
    found = list(_UNITTEST.finditer(text))
    if found:
        last = found[-1]
        words = f"unittest: ran {last.group(1)}, {last.group(2)}{last.group(3).rstrip()}"
        return last.group(2) == "OK", words
    found = list(_PYTEST.finditer(text))
    if found:
        summary = found[-1].group(1)
        bad = re.search(r"\b\d+ (failed|errors?)\b", summary)
        return bad is None and re.search(r"\b\d+ passed\b", summary) is not None, \
            f"pytest: {summary}"
    return None


def judge(result: WorldResult) -> Verdict:
    """The verdict of a script's world (``result``, from ``run_world(argv=...)``)."""
    launchers = result.hosts
    if not launchers or any(h.outcome != PASS for h in launchers):
        return Verdict(result.outcome, result.detail())
    if not result.single_hosts and all(r.never_started for r in result.ranks):
        said = [r for r in (reported(h) for h in launchers) if r is not None]
        why = f" ({said[0][1]})" if said else ""
        return Verdict(NOT_EXERCISED, f"{result.detail()}{why}: nothing of the world was "
                                      "tested")
    if result.outcome == PASS:
        return Verdict(PASS, result.detail())
    said = [reported(h) for h in launchers]
    if all(s is not None and s[0] for s in said):
        failed = [r.rank for r in result.ranks if r.outcome != PASS]
        words = said[0][1] if said[0] else ""
        return Verdict(PASS, f"the test file reported its own run passed ({words}): "
                             f"{ranks_phrase(failed)} ended {result.outcome} as it expected "
                             f"({result.detail()})")
    return Verdict(result.outcome, result.detail())


@dataclass(frozen=True)
class Applied:
    """A scenario's faults and mounts applied to a whole script (``harness exec --scenario``):
    the script's verdict, and whether it met the scenario's expectation."""

    scenario: Scenario
    result: WorldResult
    verdict: Verdict
    met: bool
    #: why the scenario's faults did not happen to the script (None: they did)
    unexercised: str | None = None
    #: why an ERROR is not the loud failure the scenario expects ("" when it is, or not asked)
    quiet: str = ""

    def describe(self) -> str:
        expect = self.scenario.expect.value
        if self.unexercised is not None:
            return f"scenario {self.scenario.name} (expect {expect}): not exercised: {self.unexercised}"
        return (f"scenario {self.scenario.name} (expect {expect}): "
                f"{'met' if self.met else 'not met'}: the script ended {self.verdict.outcome}"
                f"{self.quiet}")


def apply(argv: tuple[str, ...], scenario: Scenario, seed: int = 0, topology: str | None = None,
          timeout: float | None = None, profile: str | None = None,
          run: Callable[..., WorldResult] = run_world, **world: Any) -> Applied:
    """Run the script ``argv`` under ``scenario``: its topology, deadline and profile unless
    given, its mounts and its faults. Faults aimed at a role (the file one rank writes and
    another reads) need the script's roles: a fault-free run of it, recording every file
    operation, learns them first, as a target's discovery does. The workload's inputs and
    planted files are not applied: a script brings its own."""
    from harness.runner.run import meets, not_exercised

    home = os.path.expanduser("~")
    topo = get_topology(topology or scenario.topology)
    setting = {"argv": tuple(argv), "topology": topo, "timeout": timeout or scenario.timeout,
               "profile": profile or scenario.profile, **world}
    roles = Roles()
    if scenario.uses_roles:
        learned = run(**setting, seed=0, record_files=True, mounts=scenario.mount_list(home))
        roles = derive(learned.history)
    faults = make_plan(scenario.faults, seed=seed, world_size=topo.world_size, hosts=topo.hosts,
                       home=home, roles=roles)
    result = run(**setting, seed=seed, faults=faults, mounts=scenario.mount_list(home, roles))
    verdict = judge(result)
    ended = end_of_world(result) if verdict.outcome == ERROR else None
    met, quiet = (True, "") if verdict.outcome == PASS else meets(scenario.expect, ended)
    why = not_exercised(faults, result.history, scenario.unresolved_mounts(home, roles),
                        topo.world_size) if scenario.uses_roles or scenario.faults else None
    given = sorted({*scenario.inputs, *(k for i in scenario.host_inputs.values() for k in i)})
    if why is None and not scenario.faults and given:
        why = (f"it acts through its workload's inputs ({', '.join(given)}: the files the "
               "harness builds for a target), which a script does not take; only a scenario's "
               "faults and mounts apply to a script")
    return Applied(scenario, result, verdict, met and why is None, why, quiet)


def cell_of(argv: tuple[str, ...], result: WorldResult, verdict: Verdict,
            applied: Applied | None, seed: int, replay: str) -> Cell:
    """A script's world as a report's one cell: the scenario it ran under (``exec`` when
    none), the script as its target, its verdict against what the scenario expects."""
    from harness.vocabulary import OK, UNEXERCISED, UNEXPECTED

    if applied is not None:
        name, expect = applied.scenario.name, applied.scenario.expect.value
        judged = UNEXERCISED if applied.unexercised is not None else OK if applied.met \
            else UNEXPECTED
        detail = f"{verdict.detail}; {applied.describe()}"
    else:
        name, expect = "exec", "pass"
        judged = UNEXERCISED if verdict.outcome == NOT_EXERCISED else OK \
            if verdict.outcome == PASS else UNEXPECTED
        detail = verdict.detail
    return Cell(scenario=name, target=" ".join(argv), topology=result.topology, seed=seed,
                outcome=verdict.outcome, expected=expect, verdict=judged,
                duration_s=result.duration_s, detail=detail, replay=replay,
                ranks=[RankRow.of(r, output_limit=4000) for r in result.ranks],
                faults_fired=FaultRow.fired(result.history),
                history=[e.to_dict() for e in result.history],
                mismatches=list(result.mismatches), met=judged == OK,
                world_time_s=result.world_time_s, isolation=result.isolation)
