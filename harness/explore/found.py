"""What an exploration leaves: each finding as a scenario file the user can add
to their catalog, the command that replays it, and the report of the search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.explore.search import Exploration, Finding, Search
from harness.runner.cells import Cell
from harness.runner.replay import RUN, Replay
from harness.runner.run import CellPlan
from harness.world.fates import one_line

SCHEMA = "harness.explore/1"
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Written:
    """A finding as a file, the command that replays it, and whether it did."""

    finding: Finding
    path: Path
    replay: str
    reproduced: Cell


def slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-")


def name_of(search: Search, finding: Finding) -> str:
    """A stable name: the target, what the failure needed, how it ended."""
    needs = "-".join(slug(n) for n in sorted(finding.needs)) or \
        ("order-of-ranks" if finding.plan.order else "no-fault")
    target = slug(search.target.name.rpartition("/")[2].replace(".py:", "-"))
    name = f"{target}-{needs}-{slug(finding.outcome)}"[:120].strip("-")
    return name if name[:1].isalnum() else f"found-{name}"


def replay_of(search: Search, path: Path, seed: int) -> str:
    """``harness run`` of the scenario file written for a finding, with its plan's seed
    (and ``--check-determinism`` when the search ran each world twice)."""
    target = search.target
    command = str(Replay(str(path), target.name, seed=seed, command=RUN,
                         workload=None if target.builtin else target.workload,
                         timeout=search.timeout))
    return command + " --check-determinism" if search.check_determinism else command


def write(search: Search, finding: Finding, out_dir: Path) -> Written:
    """The finding as ``out_dir/NAME.yaml``, loaded back and run once more from the file,
    as ``harness run --scenario`` will: a finding that does not reproduce says so."""
    name = name_of(search, finding)
    plan = finding.plan
    shrunk = f", shrunk from {finding.first_faults} faults to {len(plan.faults)}" \
        if finding.first_faults != len(plan.faults) else ""
    seed = plan.seed(search.seed)
    order = (f" Run it with --seed {seed}: the seed draws the order of the ranks at each "
             "instant." if plan.order else "")
    description = (f"Found by harness explore (seed {search.seed}) for {search.target.name} "
                   f"after {finding.worlds} worlds{shrunk}: {plan.describe()}.{order}")
    scenario = search.load(plan, name, out_dir, description,
                           finding=f"harness explore: {one_line(finding.cell.detail)[:400]}")
    again = search.run_cell(CellPlan(scenario, search.target, seed, scenario.topology,
                              search.timeout or scenario.timeout, timeout_overridden=search.timeout
                              is not None), discovery=search.discovery)
    return Written(finding, out_dir / f"{name}.yaml",
                   replay_of(search, out_dir / f"{name}.yaml", seed), again)


def to_dict(exploration: Exploration, written: list[Written]) -> dict[str, Any]:
    """The JSON report of a search (schema ``harness.explore/1``)."""
    space = exploration.space
    return {
        "schema": SCHEMA, "target": exploration.target.name, "workload": exploration.workload,
        "seed": exploration.seed, "base": space.base.name, "worlds": exploration.worlds,
        "duration_s": round(exploration.duration_s, 3), "stopped": exploration.stopped,
        "lanes": exploration.lanes, "campaign": exploration.campaign,
        "space": {"topologies": list(space.topologies), "kinds": list(space.kinds),
                  "left_out": dict(space.left_out)},
        "findings": [{
            "scenario": str(w.path), "replay": w.replay, "outcome": w.finding.outcome,
            "needs": sorted(w.finding.needs), "plan": w.finding.plan.describe(),
            "faults": [dict(f) for f in w.finding.plan.faults],
            "topology": w.finding.plan.topology, "detail": w.finding.cell.detail,
            "found_after_worlds": w.finding.worlds, "first_faults": w.finding.first_faults,
            "reproduced": w.reproduced.outcome == w.finding.outcome,
        } for w in written],
    }


def render(exploration: Exploration, written: list[Written]) -> str:
    """The search's report as plain lines: what it ran, each finding, why it stopped."""
    stopped = {"budget": "the time budget was spent", "examples": "the worlds budget was spent",
               "exhausted": "every search ran out of new plans to draw",
               "interrupted": "interrupted"}.get(exploration.stopped, exploration.stopped)
    lanes = f", {exploration.lanes} lanes" if exploration.lanes > 1 else ""
    lines = [f"explore {exploration.target.name} ({exploration.workload}, seed "
             f"{exploration.seed}{lanes}): {exploration.worlds} worlds in "
             f"{exploration.duration_s:.1f} s; stopped: {stopped}"]
    space = exploration.space
    lines.append(f"  space: kinds {', '.join(space.kinds) or '(none: fault-free plans)'}; "
                 f"topologies {', '.join(space.topologies)}")
    if space.left_out:
        lines.append("  not drawn: " + "; ".join(f"{k} ({why})" for k, why in
                                                 space.left_out.items()))
    if not written:
        lines.append("no failing plan found: every plan drawn passed, or met its expectation "
                     "(fail-loudly), or was not exercised")
        return "\n".join(lines) + "\n"
    lines.append(f"{len(written)} failing plan{'s' if len(written) != 1 else ''} found, each "
                 "shrunk to the smallest that still fails:")
    for w in written:
        f = w.finding
        lines.append(f"✗ {f.outcome} {f.plan.describe()}")
        lines.append(f"    {one_line(f.cell.detail)[:300]}")
        if w.reproduced.outcome != f.outcome:
            lines.append(f"    NOT reproduced from the file: it ended {w.reproduced.outcome} "
                         f"({one_line(w.reproduced.detail)[:200]})")
        lines.append(f"    scenario: {w.path}")
        lines.append(f"    replay: {w.replay}")
    return "\n".join(lines) + "\n"
