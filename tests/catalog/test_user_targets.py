"""Issue 9's acceptance: the catalog means the same for a stranger's config sync as for the seed's.

``tests/user_targets/`` holds config-sync targets written as different users would write
them (their own paths, formats and schema; see each module). Each fragile one hands the
config over through a file, as the seed's code does, only not through
``/tmp/temp_config.yaml``, so it must fail every file scenario the way ``naive-sync`` does
(PASS where naive-sync passes, a real failure where it fails) and the faults that fire for
naive-sync must fire for it too. Before roles (faults aimed at the file a writer rank
writes and readers read, learned from a fault-free run) they mostly passed with no fault
fired: the catalog aimed at the seed's file names (tests/user_targets/README.md).

``collective_only`` shares no file: the file scenarios cannot touch it, so those cells must
say so (NOT-EXERCISED) instead of showing a green PASS; the process scenarios judge it.

One matrix per target, run once per test process (module-scoped, so ``-n 2`` runs each
target's matrix at most once per worker).
"""

from __future__ import annotations

import functools

import pytest

from harness.runner.cells import Cell
from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import catalog, find
from harness.workloads.registry import target as resolve_target
from harness.world.result import PASS

from support import REPO

#: The outcome of a cell whose planned faults never fired (tentative name: issue 9). A
#: verdict spelled "not exercised" is accepted too (see ``not_exercised``).
NOT_EXERCISED = "NOT-EXERCISED"

#: The config-sync scenarios whose faults or mounts act on files.
FILE_SCENARIOS = (
    "missing-file", "partial-write", "empty-file", "corrupt-file", "stale-leftover",
    "isolated-tmp", "transient-eio", "disk-full", "permission-denied", "read-only-fs",
    "slow-writer", "visibility-delay", "writer-killed", "concurrent-jobs")
#: The others: no file involved (a raising or diverging rank, random seeds, the API).
PROCESS_SCENARIOS = tuple(s.name for s in catalog()
                          if s.workload == "config-sync" and s.name not in FILE_SCENARIOS)

FRAGILE = ("yaml_open", "json_pathlib", "pickle_sync", "torch_save", "flag_poll", "own_schema")

#: Where a fragile target rightly differs from naive-sync: its outcome (None: either is right).
#: flag_poll polls for its flag for sync_timeout_s (2 s), so a write that shows up 1.5 s
#: late (visibility-delay) is survived, a real PASS; on a loaded machine the 0.5 s margin
#: can run out, and its TimeoutError on ranks 1-7 is right too.
#: flag_poll's readers poll for the flag with a deadline: a writer slower than any polling
#: window (slow-writer) beats them, where naive-sync's wait in the rendezvous for it.
DIFFERS_FROM_NAIVE = {("flag_poll", "visibility-delay"): None, ("flag_poll", "slow-writer"): "ERROR"}

def user_target(name: str) -> str:
    return f"{REPO / 'tests' / 'user_targets' / name}.py:sync"


def not_exercised(cell: Cell) -> bool:
    names = {cell.outcome, cell.verdict}
    return NOT_EXERCISED in {str(n).upper().replace(" ", "-") for n in names}


#: own_schema is judged by its own pydantic model (``--checker``), not by agreement alone
CHECKERS = {"own_schema": f"{REPO / 'tests' / 'user_targets' / 'own_schema'}.py:TrainConfig"}


@functools.cache
def _matrix(target: str, scenarios: tuple[str, ...]) -> dict[str, Cell]:
    checker = CHECKERS.get(target.rpartition("/")[2].removesuffix(".py:sync"))
    plans = plan_cells([find(s) for s in scenarios], [resolve_target(target, checker=checker)],
                       seed=0)
    return {cell.scenario: cell for cell in run_matrix(plans).cells}


@pytest.fixture(scope="module")
def matrix():
    """``matrix(target)``: the target's cells by scenario, run once (config-sync, seed 0)."""

    def get(target: str) -> dict[str, Cell]:
        if target == "naive-sync":
            return _matrix(target, FILE_SCENARIOS)
        if target == "own_schema":
            return _matrix(user_target(target), ("baseline", *FILE_SCENARIOS))
        if target in ("collective_only", "guarded_broadcast"):
            return _matrix(user_target(target), (*PROCESS_SCENARIOS, *FILE_SCENARIOS))
        return _matrix(user_target(target), FILE_SCENARIOS)

    yield get
    _matrix.cache_clear()


def _summary(cell: Cell) -> str:
    return (f"{cell.scenario}[{cell.target}]: {cell.outcome} ({cell.verdict}), "
            f"{len(cell.faults_fired)} faults fired: {cell.detail}")


def _fragile_cases() -> list:
    cases = []
    for name in FRAGILE:
        for scenario in FILE_SCENARIOS:
            cases.append(pytest.param(name, scenario, id=f"{name}-{scenario}"))
    return cases


@pytest.mark.parametrize(("name", "scenario"), _fragile_cases())
def test_fragile_target_fails_file_scenarios_as_naive_sync_does(matrix, name, scenario):
    naive = matrix("naive-sync")[scenario]
    cell = matrix(name)[scenario]
    why = f"\n  {_summary(cell)}\n  {_summary(naive)}"
    assert not not_exercised(cell), f"the scenario's faults never reached {name}'s file:{why}"
    if naive.faults_fired:
        assert cell.faults_fired, f"faults fired for naive-sync, none for {name}:{why}"
    if (name, scenario) in DIFFERS_FROM_NAIVE:
        wanted = DIFFERS_FROM_NAIVE[name, scenario]
        assert wanted is None or cell.outcome == wanted, why
        return
    assert (cell.outcome == PASS) == (naive.outcome == PASS), \
        f"{name} {'passes' if cell.outcome == PASS else 'fails'} where naive-sync does not:{why}"


#: Scenarios that hurt a target through no file: a whole pod's topology, a rank raising
#: at its first collective, killed at it (collective_only's wait has no deadline: a real
#: finding, HANG), its random seeds, its inputs and the API.
_COLLECTIVE_FINDS = {"rank0-raises": "HANG", "writer-killed": "HANG"}


@pytest.mark.parametrize("scenario", [*PROCESS_SCENARIOS, "isolated-tmp"])
def test_collective_only_passes_process_scenarios(matrix, scenario):
    cell = matrix("collective_only")[scenario]
    assert not not_exercised(cell), _summary(cell)
    assert cell.outcome == _COLLECTIVE_FINDS.get(scenario, PASS), _summary(cell)


def _collective_file_cases() -> list:
    # writer-killed also kills rank 0 on entering a collective: that one fires (exercised);
    # isolated-tmp has no fault: the pod's topology is exercised on any target
    return [pytest.param(s, id=s) for s in FILE_SCENARIOS
            if s not in ("writer-killed", "isolated-tmp")]


@pytest.mark.parametrize("scenario", _collective_file_cases())
def test_collective_only_is_not_exercised_by_file_scenarios(matrix, scenario):
    """No file to aim at: the cell must say so rather than show a PASS nothing tested."""
    cell = matrix("collective_only")[scenario]
    assert not_exercised(cell), _summary(cell)


def test_collective_only_writer_killed_is_exercised(matrix):
    """Its rendezvous has no deadline: rank 0 killed on entering it leaves the others
    waiting (HANG), a real finding, not a cell to hide as not exercised."""
    cell = matrix("collective_only")["writer-killed"]
    assert cell.faults_fired and not not_exercised(cell), _summary(cell)
    assert cell.outcome != PASS, _summary(cell)


@pytest.mark.parametrize("scenario", [*PROCESS_SCENARIOS, "isolated-tmp", "writer-killed"])
def test_a_correct_target_sharing_no_file_meets_every_scenario_that_can_reach_it(matrix, scenario):
    """guarded_broadcast: the config in a rendezvous payload, every wait with a deadline.
    It passes what it can pass and fails loudly (every survivor raises, in time) where the
    scenario says no code can succeed: rank 0 raising, or killed, at its collective."""
    cell = matrix("guarded_broadcast")[scenario]
    assert not not_exercised(cell), _summary(cell)
    assert cell.met and cell.verdict == "ok", _summary(cell)
    assert cell.outcome == (PASS if cell.expected == "pass" else "ERROR"), _summary(cell)


@pytest.mark.parametrize("scenario", _collective_file_cases())
def test_a_correct_target_sharing_no_file_is_not_exercised_by_file_scenarios(matrix, scenario):
    cell = matrix("guarded_broadcast")[scenario]
    assert not_exercised(cell) and cell.outcome != PASS, _summary(cell)
    assert "role handoff resolved to nothing" in cell.detail or \
        "mount on role handoff-dir resolved to nothing" in cell.detail, _summary(cell)


def test_own_schema_passes_baseline_judged_by_its_own_model(matrix):
    cell = matrix("own_schema")["baseline"]
    assert cell.outcome == PASS, _summary(cell)
    assert cell.checker == CHECKERS["own_schema"]
    assert "--checker" in cell.replay


#: The content scenarios: each changes what the handoff holds
_CONTENT = ("partial-write", "corrupt-file", "concurrent-jobs")


@pytest.mark.parametrize("scenario", _CONTENT)
def test_a_handoff_staged_under_a_random_tempfile_name_is_still_hit(scenario):
    """tempfile_rename writes ``tmpXXXXXXXX.tmp`` and renames it onto config.yaml: the
    staging name shares nothing with the final one, so only because tempfile draws the same
    names in every run (seeded by rank and life) is the file the fault-free run staged
    under the one the cell stages under too."""
    cell = _matrix(user_target("tempfile_rename"), _CONTENT)[scenario]
    assert cell.faults_fired and not not_exercised(cell), _summary(cell)
    for fault in cell.faults_fired:  # at the staging file the fault-free run learned
        assert fault.path.endswith(".tmp") and f"through {fault.path}" in cell.roles["handoff"], \
            _summary(cell)
    assert cell.outcome != PASS, _summary(cell)
