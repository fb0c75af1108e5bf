"""The catalog x the reference targets, one test per cell (``pytest -m faults``).

Cells run in parallel once per session (only those selected), then each test
asserts its own cell's verdict: ``ok`` passes, ``known`` (the seed's recorded failures) is
an xfail saying how it fails. A failure prints the per-rank diagnosis and the replay command.
"""

from __future__ import annotations

import pytest

from harness.pytest_plugin import check_cell
from harness.runner.cells import NOT_EXERCISED, UNEXERCISED
from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import catalog
from harness.workloads.registry import BUILTIN_TARGETS

PLANS = {f"{p.scenario.name}-{p.target.name}": p
         for p in plan_cells(catalog(), BUILTIN_TARGETS.values(), seed=0)}


@pytest.fixture(scope="session")
def matrix_cells(request):
    wanted = [item.callspec.params["cell_id"] for item in request.session.items
              if getattr(item, "callspec", None) and "cell_id" in item.callspec.params]
    plans = [PLANS[w] for w in wanted if w in PLANS]
    matrix = run_matrix(plans)
    return {f"{c.scenario}-{c.target}": c for c in matrix.cells}


# The README's config-sync grid at seed 0 (the other workloads pin theirs in their own
# tests): a known failure that changes how it fails is a change to the headline too.
GRID = """
baseline            PASS    HANG  PASS
missing-file        ERROR   HANG  NOT-EXERCISED
partial-write       ERROR   HANG  NOT-EXERCISED
empty-file          ERROR   HANG  NOT-EXERCISED
corrupt-file        ERROR   HANG  NOT-EXERCISED
stale-leftover      FAIL    HANG  NOT-EXERCISED
isolated-tmp        ERROR   HANG  PASS
transient-eio       HANG    HANG  NOT-EXERCISED
disk-full           HANG    HANG  NOT-EXERCISED
permission-denied   HANG    HANG  NOT-EXERCISED
read-only-fs        HANG    HANG  NOT-EXERCISED
slow-writer         PASS    HANG  NOT-EXERCISED
visibility-delay    ERROR   HANG  NOT-EXERCISED
writer-killed       HANG    HANG  ERROR
rank0-raises        HANG    HANG  ERROR
divergent-slugs     PASS    HANG  PASS
divergent-input     PASS    HANG  PASS
concurrent-jobs     FAIL    HANG  NOT-EXERCISED
api-drift           ERROR   ERROR PASS
"""
OUTCOMES = {f"{row.split()[0]}-{target}": outcome
            for row in GRID.strip().splitlines()
            for target, outcome in zip(("naive-sync", "seed-fix-sync", "robust-sync"),
                                       row.split()[1:])}
# The trainer workload's grid (docs/reference/preemption.md), and what each failing cell
# and each cell a hard stop or a cut-short save touched must say.
TRAINER = """
preempt-notice                PASS    PASS
preempt-notice-one-host       HANG    PASS
preempt-no-notice             ERROR   PASS
preempt-save-outlasts-grace   ERROR   PASS
preempt-during-warmup         PASS    PASS
baseline-train                PASS    PASS
"""
OUTCOMES.update({f"{row.split()[0]}-{target}": outcome
                 for row in TRAINER.strip().splitlines()
                 for target, outcome in zip(("naive-trainer", "robust-trainer"), row.split()[1:])})
# The spmd-trainer workload's grid (docs/reference/targets.md).
SPMD_TRAINER = """
checkpoint-host-local          PASS    ERROR
spmd-notice-one-host   PASS    HANG
async-save-pending             PASS    ERROR
gcsfuse-checkpoint             PASS    ERROR
checkpoint-disk-full           ERROR   ERROR
baseline-spmd-train            PASS    PASS
"""
OUTCOMES.update({f"{row.split()[0]}-{target}": outcome
                 for row in SPMD_TRAINER.strip().splitlines()
                 for target, outcome in zip(("managed-trainer", "naive-spmd-trainer"),
                                            row.split()[1:])})
SAYS = {
    "checkpoint-host-local-naive-spmd-trainer": (
        "'/tmp/checkpoints/step-6/.metadata' is per host on v4-16-spmd: rank 1 on host 1",),
    "spmd-notice-one-host-naive-spmd-trainer": ("rank 0 waits in sync",
                                                        "rank 1 was killed by SIGKILL"),
    "checkpoint-disk-full-managed-trainer": (
        "ranks 0-1 raised torch.distributed.checkpoint.api.CheckpointException: rank 0: "
        "OSError: [Errno 28] No space left on device",),
    "async-save-pending-managed-trainer": (
        "/mnt/checkpoints/run/8/__0_0.distcp by rank 0 half-written: it was not loaded",),
    "preempt-notice-one-host-naive-trainer": ("ranks 0-1 wait in all_reduce", "ranks 2-3"),
    "preempt-notice-one-host-robust-trainer": ("every rank resumed from step 6",),
    "preempt-save-outlasts-grace-naive-trainer": (
        "the pre-empted life left /tmp/checkpoints/step-7/state.pt by ranks 0,2 half-written",
        "still ran when its 5 s grace ended: SIGKILLed (the hard stop)"),
    "preempt-save-outlasts-grace-robust-trainer": (
        "resumed from step 4 after the job had reached step 7 (3 steps lost",
        "/mnt/checkpoints/run/step-7/state.pt by rank 0 half-written: it was not loaded"),
    "preempt-no-notice-naive-trainer": ("/tmp/checkpoints/step-8/state.pt",),
    "preempt-no-notice-robust-trainer": ("resumed from step 4 after the job had reached step 8",),
}


@pytest.mark.faults
@pytest.mark.parametrize("cell_id", list(PLANS))
def test_matrix(cell_id, matrix_cells):
    if OUTCOMES.get(cell_id) == NOT_EXERCISED:  # robust-sync shares no file: nothing to tear
        cell = matrix_cells[cell_id]
        assert (cell.outcome, cell.verdict) == (NOT_EXERCISED, UNEXERCISED), cell.detail
        return
    cell = matrix_cells[cell_id]
    if cell_id in OUTCOMES:  # before check_cell: a known failure ends the test as an xfail
        assert cell.outcome == OUTCOMES[cell_id], cell.detail
    for words in SAYS.get(cell_id, ()):
        assert words in cell.detail, cell.detail
    check_cell(cell)


def test_the_readme_shows_this_grid():
    """The README's grid is the one this file pins: a headline that drifted would lie."""
    from support import REPO

    readme = (REPO / "README.md").read_text()
    grid = {}
    for row in readme.splitlines():
        words = row.split()
        if words and f"{words[0]}-naive-sync" in OUTCOMES:
            outcomes = [w for w in words[1:] if w not in "✓~✗○"]
            grid.update({f"{words[0]}-{t}": o for t, o in
                         zip(("naive-sync", "seed-fix-sync", "robust-sync"), outcomes)})
    assert grid == {cell: o for cell, o in OUTCOMES.items() if not cell.endswith("-trainer")}


def test_the_catalogs_html_report_weighs_at_most_420_kb(matrix_cells):
    """The whole catalog's HTML page (2.0 MB once): its histories, tracebacks and values are
    cut to what a person reads, and every event is in matrix.json. The catalog's cells come
    from the matrix the other tests here run; a selection without all of them skips. (300 KB
    until each cell named its races: about 17 KB of the catalog's, issue 45; 320 KB for the
    89 cells before the trainer workload's 12, which weigh 46 KB; 360 KB until the
    spmd-trainer workload's 10, which weigh 41 KB: 401 KB with them.)"""
    from harness.reports.html import to_html
    from harness.runner.cells import Matrix

    if len(matrix_cells) < len(PLANS):
        pytest.skip(f"{len(matrix_cells)} of the catalog's {len(PLANS)} cells were run")
    matrix = Matrix(cells=list(matrix_cells.values()), seed=0,
                    created="2026-11-27T00:00:00+00:00", harness_version="0")
    size = len(to_html(matrix).encode())
    assert size <= 420_000, f"the catalog's HTML report is {size:,} bytes"
