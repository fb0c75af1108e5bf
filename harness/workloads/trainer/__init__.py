"""Training under pre-emption: a training loop that checkpoints every K steps and resumes
from what it finds (DESIGN.md, "Training under pre-emption"; docs/reference/preemption.md).

A pre-emption comes with a notice (SIGTERM to every process of a host, then a grace of
world seconds before the hard stop) or with none; the job is then resubmitted whole, and
every process starts again on the disks its host left. The checker runs the fault-free
world first (the harness's discovery run) and judges each cell against it.

Two reference targets, each a module with a ``train`` function, one process per chip
(``xmp.spawn``'s shape, with ``xm`` collectives):

- ``naive-trainer`` (``naive.py``): a SIGTERM handler sets a flag each process reads at
  its own step boundaries, a host-local checkpoint path, resume from the newest
  directory whatever its state (each flaw named where it is);
- ``robust-trainer`` (``robust.py``): the flag all-reduced every step (every process
  stops at the same step), a shared path, a commit marker written last by one process
  once every process has saved, resume from the newest committed step.

The contract a user's trainer implements
----------------------------------------

``harness run --target mypkg/train.py:train --workload trainer`` runs ``train(inputs)``
on every rank, every life (``HARNESS_LIFE`` counts them; a trainer should not need it).

**inputs** (``workload.TrainerInputs``):

- ``checkpoint_dir``: where checkpoints go (``/mnt/checkpoints/run``: shared by every
  host, with object semantics as gcsfuse gives, in the catalog's scenarios). A trainer
  may keep them elsewhere: the harness judges what it resumes, not where from;
- ``steps``: train to this step (counted from 1); ``save_every``: save every K steps;
- ``seed``: the data and the initial weights come from it;
- ``step_seconds``: the cost model's world seconds per step (the harness's, at each
  step marker: ``torch_xla.sync()``, ``xm.mark_step()``, ``xm.optimizer_step(...,
  barrier=True)``); a trainer does not read it.

**What it returns** (every rank, in the life that finishes): a dict with

- ``resumed_from``: the step whose checkpoint it loaded (``None``: it started fresh);
- ``resumed_state``: a digest of the state it loaded (any string it computes the same
  way each time from its model and optimizer), ``None`` when it started fresh;
- ``states``: ``{str(step): digest}`` for every step it completed in this life;
- ``step``: the last step it completed.

**How it is judged** (``harness.checkers.resume``): a rank that waits forever (HANG: the
collective and the rank that left) or fails is the cell's outcome; then every rank
resumed from the same step; the state it loaded is the fault-free run's at that step
(else it loaded a checkpoint that was not complete, or not that step's); no more than
``save_every`` steps were lost (the step the job had reached when it was pre-empted,
from the world's count of step markers, minus the step resumed from); and the run ends
with the fault-free run's state.
"""

from __future__ import annotations

#: Built-in target name -> ``module:function``.
TARGETS = {
    "naive-trainer": "harness.workloads.trainer.naive:train",
    "robust-trainer": "harness.workloads.trainer.robust:train",
}

#: The warm fork server imports torch once for every world, and what an optimizer's first
#: step imports (``torch._dynamo``: 800 modules, sympy among them, 1.3 s a rank otherwise).
PRELOAD = ("torch", "torch._dynamo", "harness.workloads.trainer.model")

__all__ = ["TARGETS", "PRELOAD"]
