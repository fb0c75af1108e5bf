"""Workloads and targets by name, found through the ``harness.workloads`` entry points.

A workload package registers itself with one line in its distribution's
``pyproject.toml``::

    [project.entry-points."harness.workloads"]
    my-workload = "mypkg.workload:WORKLOAD"      # a harness.workloads.base.Workload

The built-in workloads are registered the same way in the harness's own
``pyproject.toml``. When the harness's package metadata is missing (a checkout
run from its directory or ``PYTHONPATH``, never installed) the built-ins are
still found, from ``BUILTIN_ENTRY_POINTS`` below (a test keeps the two lists
equal); a third-party workload is found only once its own package is installed.
A third-party entry point that does not load, is not a ``Workload``, or reuses a
name already registered is skipped with a warning: it cannot break the built-ins.
"""

from __future__ import annotations

import importlib
import logging
import os
from importlib import metadata
from typing import Any

from harness import refs, source
from harness.rank.validator import validator
from harness.vocabulary import DEFAULT_WORKLOAD  # noqa: F401 - re-exported
from harness.workloads.base import Target, Workload

log = logging.getLogger(__name__)

GROUP = "harness.workloads"

#: The built-ins, in catalog order (the same lines as the harness's pyproject.toml).
BUILTIN_ENTRY_POINTS = {
    "config-sync": "harness.workloads.config_sync.workload:WORKLOAD",
    "data-sharding": "harness.workloads.data_sharding.workload:WORKLOAD",
    "checkpoint-resume": "harness.workloads.checkpoint_resume.workload:WORKLOAD",
    "trainer": "harness.workloads.trainer.workload:WORKLOAD",
    "spmd-trainer": "harness.workloads.spmd_trainer.workload:WORKLOAD",
}


def _resolve(ref: str) -> object:
    entry = refs.parse(ref, "workload")
    obj: object = importlib.import_module(entry.module)
    for part in entry.attr.split("."):
        obj = getattr(obj, part)
    return obj


def discover() -> dict[str, Workload]:
    """Every registered workload: the built-ins first, then the entry points' others by name."""
    found: dict[str, Workload] = {}
    for name, ref in BUILTIN_ENTRY_POINTS.items():
        workload = _resolve(ref)
        if not isinstance(workload, Workload) or workload.name != name:
            raise TypeError(f"built-in workload {ref} is not a Workload named {name!r}")
        found[name] = workload
    builtin_refs = set(BUILTIN_ENTRY_POINTS.values())
    for ep in sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name):
        if ep.value in builtin_refs:
            continue  # the harness's own metadata: already registered
        try:
            workload = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the others
            log.warning("workload entry point %s = %s does not load: %s", ep.name, ep.value, exc)
            continue
        if not isinstance(workload, Workload):
            log.warning("workload entry point %s = %s is not a harness Workload", ep.name, ep.value)
        elif workload.name in found:
            log.warning("workload entry point %s = %s: the name %r is already registered",
                        ep.name, ep.value, workload.name)
        else:
            found[workload.name] = workload
    return found


def _targets(workloads: dict[str, Workload]) -> dict[str, Target]:
    targets: dict[str, Target] = {}
    for workload in workloads.values():
        for t in workload.reference_targets():
            if t.name in targets:
                log.warning("workload %s: target name %r is already taken by workload %s; skipped",
                            workload.name, t.name, targets[t.name].workload)
            else:
                targets[t.name] = t
    return targets


WORKLOADS: dict[str, Workload] = discover()
BUILTIN_TARGETS: dict[str, Target] = _targets(WORKLOADS)


def catalog_order() -> tuple[str, ...]:
    """Every workload's catalog scenarios, workload by workload, in registry order."""
    return tuple(name for w in WORKLOADS.values() for name in w.catalog_order)


#: The workload a user's target belongs to unless told otherwise (CLI and pytest alike).


def check_workload(name: str) -> Workload:
    """The workload called ``name``, or a ValueError naming the ones there are: the one check
    of a workload's name (the command line, scenario files, explore)."""
    workload = WORKLOADS.get(name)
    if workload is None:
        raise ValueError(f"unknown workload {name!r}: use one of {', '.join(WORKLOADS)}")
    return workload


def check_call(spec: str, path: str, name: str, workload: Workload) -> None:
    """A ValueError if the source of ``name`` in ``path`` says it cannot be called as
    ``workload`` calls a target (``def load_config():``, a required second parameter, an
    ``async def``): refused before any world, rather than a TypeError in every cell, the
    fault-free one included. Silent where the source cannot say (a decorated function, an
    assignment, a class whose ``__init__`` it inherits): the ranks will."""
    callee = source.callee(path, name)
    if callee is None:
        return
    why = ("it is an async function: a rank would get a coroutine, never its value"
           if callee.is_async else workload.call_error(callee.signature, callee.is_class,
                                                       callee.declared))
    if why:
        fits = [] if callee.is_async else [
            other.name for other in WORKLOADS.values() if other is not workload and not
            other.call_error(callee.signature, callee.is_class, callee.declared)]
        hint = f" It fits the {fits[0]} workload: add --workload {fits[0]}." if fits else ""
        raise ValueError(f"target {spec!r}: {name}{callee.signature} ({path}:{callee.line}) "
                         f"does not fit the {workload.name} workload: {why}. "
                         f"It expects {workload.contract}.{hint}")


def target(spec: str, workload: str = DEFAULT_WORKLOAD, checker: Any = None) -> Target:
    """A built-in name, or a user's ``module:function`` / ``file.py:function``, which
    runs only the scenarios of ``workload`` (a built-in keeps its own); ``checker``
    (anything ``harness.rank.validator.validator`` reads) judges each rank's value."""
    if spec in BUILTIN_TARGETS:
        if checker is not None:
            raise ValueError(f"{spec} is a built-in target, judged by its workload's checker: "
                             "a checker of your own judges your own target")
        return BUILTIN_TARGETS[spec]
    check_workload(workload)
    if ":" not in spec:
        names = ", ".join(BUILTIN_TARGETS)
        raise ValueError(f"unknown target {spec!r}: use a built-in ({names}), "
                         "module.path:function or path/to/file.py:function")
    ref = refs.parse(spec)
    if ref.is_file:
        source.check_defines(f"target {spec!r}", ref.module, ref.attr.split(".")[0])
        check_call(spec, ref.module, ref.attr, WORKLOADS[workload])
    adapt = WORKLOADS[workload].user_ref
    ref, preload = spec, None
    if adapt:
        # the adapter imports the user's module inside the rank: what the fork server
        # preloads is read from both sources (else every rank imports torch itself)
        from harness.world.pool import preload_for

        ref = adapt(spec)
        preload = tuple(dict.fromkeys((*preload_for(ref, None, os.getcwd()),
                                       *preload_for(spec, None, os.getcwd()))))
    return Target(spec, ref, workload, preload=preload,
                  checker=validator(checker) if checker is not None else None)
