"""The trainer workload: its inputs, checker and known failures (see ``__init__``)."""

from __future__ import annotations

from pydantic import Field

from harness.checkers import resume
from harness.checkers.common import Baseline, Judgement
from harness.workloads.base import AbsolutePath, Workload, WorkloadInputs
from harness.workloads.trainer import PRELOAD, TARGETS
from harness.world.result import WorldResult


class TrainerInputs(WorkloadInputs):
    """What a trainer cell starts from; a scenario's ``inputs`` replace keys of it."""

    checkpoint_dir: AbsolutePath = "/mnt/checkpoints/run"
    steps: int = Field(default=12, ge=1, le=100_000)
    save_every: int = Field(default=4, ge=1, le=100_000)
    seed: int = Field(default=0, ge=0, lt=2**32)
    #: the cost model: world seconds a step costs at its marker (the harness's, not the
    #: trainer's to read)
    step_seconds: float = Field(default=1.0, ge=0, le=3600)


def check(result: WorldResult, baseline: Baseline | None = None,
          inputs: TrainerInputs | None = None) -> Judgement:
    return resume.check(result, (inputs or TrainerInputs()).save_every, baseline)


# The flag each process reads alone leaves the others in the next all-reduce when one host
# is noticed; a save the grace cuts short, or the hard stop, is loaded on the next start.
_NAIVE_TRAINER_KNOWN = frozenset({"preempt-notice-one-host", "preempt-save-outlasts-grace",
                                  "preempt-no-notice"})

WORKLOAD = Workload(
    "trainer", TrainerInputs, check, targets=TARGETS,
    known_failures={"naive-trainer": _NAIVE_TRAINER_KNOWN}, preload=PRELOAD,
    catalog_order=("preempt-notice", "preempt-notice-one-host", "preempt-no-notice",
                   "preempt-save-outlasts-grace", "preempt-during-warmup", "baseline-train"),
    restarts_job=True, step_seconds=lambda inputs: inputs.step_seconds,
    explore_kinds=("preempt",),
    # every file operation told: the checker names a save the stop cut short
    record_files=lambda inputs: True,
    contract="def train(inputs: dict) -> dict, called on every rank, every life")
