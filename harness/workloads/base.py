"""What a workload is: its inputs, its reference targets, its checker, the
files its worlds start with and watch, and the order of its catalog scenarios.

One ``Workload`` value per workload package (``<package>/workload.py``), found
by ``registry`` through the ``harness.workloads`` entry-point group, so that a
new workload is one package and one entry-point line, not an edit of the harness.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo

from harness import refs
from harness.checkers.common import Baseline, Judgement
from harness.filesystem.mounts import Mount
from harness.filesystem.sandbox import Leftover
from harness.rank.validator import Validator, validator
from harness.topology import Topology
from harness.world import pool
from harness.world.result import WorldResult


class WorkloadInputs(BaseModel):
    """A workload's ``inputs``: every key declared, every number bounded.

    Strict (YAML already gives the right types: ``"12"`` is not a size) and
    frozen (validated once, at load, then used as it is). A scenario's topology
    reaches host-naming validators as the validation context ``{"topology": ...}``.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    def for_target(self) -> dict[str, Any]:
        """The plain dict a target's ``run(inputs)`` receives (the calling convention)."""
        return self.model_dump()


def topology_of(info: ValidationInfo) -> Topology | None:
    """The topology a scenario is validated against, if any (see ``Workload.inputs``)."""
    return (info.context or {}).get("topology")


def check_hosts(hosts: list[int], info: ValidationInfo) -> list[int]:
    """A validator for a list of host indices: each one a host of the scenario's topology."""
    topology = topology_of(info)
    if topology is not None:
        for h in hosts:
            if h >= topology.hosts:
                raise ValueError(f"{h} is not a host of {topology.name} "
                                 f"(hosts 0-{topology.hosts - 1})")
    return hosts


#: An absolute path in the world's filesystem view.
AbsolutePath = Annotated[str, Field(pattern=r"^/[^\x00]*$", max_length=4096)]
def _one_host_as_list(value: Any) -> Any:
    return [value] if isinstance(value, int) and not isinstance(value, bool) else value


#: Host indices (each checked against the scenario's topology when there is one);
#: a single index may be written without the brackets.
HostList = Annotated[list[Annotated[int, Field(ge=0, lt=4096)]], Field(max_length=4096),
                     BeforeValidator(_one_host_as_list), AfterValidator(check_hosts)]


@dataclass(frozen=True)
class Target:
    name: str  # what reports call it
    ref: str  # module.path:function or path/to/file.py:function
    workload: str | None = None  # built-ins belong to one workload
    known_failures: frozenset[str] = field(default_factory=frozenset)
    builtin: bool = False
    preload: tuple[str, ...] | None = None  # None: read from the target's imports
    checker: Validator | None = None  # the user's own, judging each rank's value

    @property
    def reads(self) -> tuple[str, ...]:
        """The machine's directories its ranks read by path whatever runs them (a
        workload's adapter, too): a file target's own directory."""
        module = refs.module_of(self.name)
        if module and refs.is_file(module):
            return (os.path.dirname(os.path.abspath(module)),)
        return ()

    def modules(self, learned: tuple[str, ...] = ()) -> tuple[str, ...]:
        """What the fork server imports for its worlds: ``preload``, else the installed
        modules its source imports; then ``learned`` (what its fault-free run imported)."""
        own = self.preload if self.preload is not None else pool.preload_for(self.ref, None,
                                                                              os.getcwd())
        return tuple(dict.fromkeys((*own, *learned)))


def takes_inputs(signature: inspect.Signature, is_class: bool, declared: object = None
                 ) -> str | None:
    """Why a target cannot be called as ``run(inputs)`` (None: it can): every rank passes
    it one argument, the scenario's inputs."""
    try:
        signature.bind(None)
    except TypeError as exc:
        said = ("it takes no argument" if "too many positional" in str(exc) and not any(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in
            signature.parameters.values()) else str(exc))
        return f"every rank calls it with one argument, the scenario's inputs ({said})"
    return None


def _positional_arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


@dataclass(frozen=True)
class Learning:
    """The fault-free world a target is learned from for some scenarios (its roles, imports
    and baseline), where the workload's defaults would not do: the user's own data."""

    topology: str
    inputs: WorkloadInputs
    mounts: tuple[Mount, ...] = ()
    #: what changes when the world would (the data's names, sizes and times): part of the cache key
    fingerprint: str = ""
    #: its rank 0's value judges every cell learned from it, whatever the cell's inputs
    reference: bool = False

    @property
    def key(self) -> str:
        return json.dumps([self.topology, self.inputs.model_dump(mode="json"),
                           [repr(m) for m in self.mounts], self.fingerprint], sort_keys=True)


@dataclass(frozen=True)
class Workload:
    """Everything the harness needs to run and judge a workload's cells."""

    name: str
    inputs_model: type[WorkloadInputs]
    #: (result) -> the cell's judgement; a checker that takes a second argument also gets
    #: what the target returned in its fault-free runs (``common.Baseline``), a third the
    #: cell's inputs (see ``judge``)
    checker: Callable[..., Judgement]
    #: reference target name -> ``module:function``
    targets: Mapping[str, str] = field(default_factory=dict)
    #: reference target name -> the catalog scenarios it is known to fail (strict xfails)
    known_failures: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: modules the warm fork server imports for the reference targets
    preload: tuple[str, ...] | None = None
    #: (inputs, topology, seed, roles) -> files placed in the sandbox before the world
    #: starts (``roles``: what the target's fault-free run did with files, None in that run)
    setup: Callable[[Any, Topology, int, Any], list[Leftover]] | None = None
    #: (inputs) -> virtual globs whose content the history records at every exit
    watch: Callable[[Any], list[str]] | None = None
    #: this workload's catalog scenarios in the order reports list them
    catalog_order: tuple[str, ...] = ()
    #: its ranks are independent workers: one that dies may come back alone (a pre-empted
    #: VM restarted), which a rank of an SPMD job joined by collectives never does
    restarts_alone: bool = False
    #: its ranks are one job: a pre-emption restarts the job whole, once every rank has
    #: ended (``WorldConfig.restart_job``), as a training job is resubmitted
    restarts_job: bool = False
    #: (inputs) -> the world seconds a training step costs at its marker (the cost model,
    #: ``WorldConfig.step_seconds``); None: steps cost nothing
    step_seconds: Callable[[Any], float] | None = None
    #: the fault kinds ``harness explore`` draws for it unless told (None: every kind):
    #: what its ranks meet where they run
    explore_kinds: tuple[str, ...] | None = None
    #: (inputs) -> the inputs of another run of the same job (another run name, another
    #: learning rate): what it writes is what a stale leftover or another job's file holds
    another_run: Callable[[Any], WorkloadInputs] | None = None
    #: a user's target ref -> the ref its ranks run: a workload's adapter that calls the
    #: user's code in the shape it has (e.g. a loader factory); None: the ref itself
    user_ref: Callable[[str], str] | None = None
    #: the reference targets' validator of a rank's value (``module:Model``), run in the
    #: ranks; a user's target has its own (``--checker``) or none: the seed's schema is
    #: not the user's
    validator: str | None = None
    #: (signature, is a class, its declared harness_contract) -> why a user's target cannot
    #: be called as this workload calls it (None: it can); read from its source, before
    #: any world (``registry.target``)
    call_error: Callable[[inspect.Signature, bool, object], str | None] = takes_inputs
    #: how this workload calls a user's target, as an error refusing one says it
    contract: str = "def run(inputs: dict) -> dict, called on every rank"
    #: (a scenario's inputs) -> the fault-free world its target is learned from, when the
    #: workload's defaults on its base scenario's setting would not do (None: they do)
    learning: Callable[[Any], Learning | None] | None = None
    #: (a cell's inputs) -> whether its world records every file operation, for a checker
    #: that must know who read what (a host's changed copy that no rank of it read)
    record_files: Callable[[Any], bool] | None = None

    def learning_for(self, inputs: WorkloadInputs) -> Learning | None:
        return self.learning(inputs) if self.learning is not None else None

    def records_files(self, inputs: WorkloadInputs) -> bool:
        return bool(self.record_files(inputs)) if self.record_files is not None else False

    def judge(self, result: WorldResult, baseline: Baseline | None = None,
              inputs: WorkloadInputs | None = None) -> Judgement:
        """The checker's judgement of ``result``, given ``baseline`` and the cell's
        ``inputs`` if it takes them."""
        arity = _positional_arity(self.checker)
        if arity >= 3:
            return self.checker(result, baseline, inputs)
        if arity >= 2:
            return self.checker(result, baseline)
        return self.checker(result)

    def world_settings(self, inputs: WorkloadInputs) -> dict[str, Any]:
        """What this workload's cells ask of their world beyond the scenario's: how a
        pre-emption restarts it, what a training step costs."""
        out: dict[str, Any] = {}
        if self.restarts_job:
            out["restart_job"] = True
        if self.step_seconds is not None:
            out["step_seconds"] = float(self.step_seconds(inputs))
        return out

    def validator_for(self, target: Target) -> Validator | None:
        """What judges each rank's value of ``target``: its own checker, else (a built-in)
        the workload's validator."""
        if target.checker is not None:
            return target.checker
        return validator(self.validator) if target.builtin and self.validator else None

    def inputs(self, overrides: Mapping[str, Any] | None = None,
               topology: Topology | None = None) -> WorkloadInputs:
        """``overrides`` over the model's defaults, validated (against ``topology`` if given).

        Raises pydantic's ``ValidationError``; the scenario loader turns it into a
        ``file:line`` message.
        """
        return self.inputs_model.model_validate(dict(overrides or {}),
                                                context={"topology": topology})

    def reference_targets(self) -> list[Target]:
        """The workload's built-in targets, sharing one preload set (one warm fork server)."""
        return [Target(name, ref, self.name, self.known_failures.get(name, frozenset()),
                       builtin=True, preload=self.preload) for name, ref in self.targets.items()]
