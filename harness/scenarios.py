"""Scenarios: the declarative files users edit, and the catalog shipped with
the harness. A file is validated against a schema; a bad one is refused with
the file, the line and the field, never a traceback.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import os
import posixpath
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.faults.kinds import FaultSpec, explain
from harness.faults.plan import PlanError, check_fits
from harness.filesystem.mounts import (
    KERNEL_TREES,
    MAX_DELAY_MS,
    MAX_MOUNT_PATH,
    MAX_WRITE_MB_S,
    Mount,
    is_under,
)
from harness.rank.validator import Validator
from harness.rank.validator import validator as read_checker
from harness.roles import MEANING, Roles
from harness.scenario_yaml import ScenarioError, read_yaml
from harness.scenario_yaml import node_at as _node_at
from harness.topology import PROFILES, get_topology
from harness.vocabulary import DEFAULT_TIMEOUT, MAX_TIMEOUT, Expect  # noqa: F401 - re-exported
from harness.workloads import registry
from harness.workloads.base import WorkloadInputs

#: Catalog order, as each workload declares it; files not named here follow by name.
CATALOG_ORDER = registry.catalog_order()


class MountSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = Field(default=None, max_length=MAX_MOUNT_PATH)
    #: a directory role instead of a path: mounted where the target keeps that role
    role: Literal["handoff-dir"] | None = None
    scope: Literal["shared", "host", "rank"] = "host"
    mode: Literal["rw", "ro"] = "rw"
    base: Literal["fresh", "overlay"] = "fresh"
    consistency: Literal["local", "close-to-open", "delayed", "object"] = "local"
    delay_ms: int = Field(default=0, ge=0, le=MAX_DELAY_MS, strict=True)
    #: the mount's write bandwidth in MB (10^6 bytes) per world second: what a write costs
    #: in world time (0: nothing), so a save can outlast a grace
    write_mb_s: float = Field(default=0.0, ge=0, le=MAX_WRITE_MB_S, allow_inf_nan=False,
                              strict=True)

    @field_validator("path")
    @classmethod
    def _mountable(cls, value: str | None) -> str | None:
        """A path the sandbox can mount: absolute (or under ~), plain, not the kernel's."""
        if value is None:
            return None
        if not (value.startswith("/") or value == "~" or value.startswith("~/")):
            raise ValueError("must be an absolute path (or ~ or start with ~/)")
        if any(ord(c) < 0x20 or c == "\x7f" for c in value):
            raise ValueError("must not contain a NUL or another control character")
        if ".." in value.split("/"):
            raise ValueError("must not contain '..'")
        if any(is_under(_normalized(value), tree) for tree in KERNEL_TREES):
            raise ValueError(f"cannot mount over the kernel's {', '.join(KERNEL_TREES)}")
        return value

    @model_validator(mode="after")
    def _somewhere(self) -> MountSpec:
        if (self.path is None) == (self.role is None):
            raise ValueError("a mount needs a path or a role (one of them)")
        return self

    def normalized(self) -> str:
        """The path as the mount table will hold it (``~`` kept: home is known at run time)."""
        return _normalized(self.path or "")

    @classmethod
    def parse_option(cls, text: str) -> MountSpec:
        """``--mount PATH=KIND[,CONSISTENCY]``: what a path is on the user's pod, spelled as
        ``harness pod run --mount`` spells it. ``ValueError`` saying what is wrong."""
        path, sep, rest = text.rpartition("=")
        kind, _, consistency = rest.partition(",")
        if not sep or not path:
            raise ValueError(f"{text!r} is not PATH=KIND[,CONSISTENCY] (KIND: "
                             f"{', '.join(MOUNT_KINDS)})")
        if kind not in MOUNT_KINDS:
            raise ValueError(f"{text!r}: {kind!r} is not a kind of mount (one of "
                             + "; ".join(f"{k}: {what}" for k, (_, what) in MOUNT_KINDS.items())
                             + ")")
        fields = dict(MOUNT_KINDS[kind][0])
        if consistency:
            allowed = cls.model_fields["consistency"].annotation.__args__  # type: ignore[union-attr]
            if consistency not in allowed or kind in ("ro", "gcsfuse"):
                raise ValueError(f"{text!r}: {consistency!r} is not a consistency a {kind} mount "
                                 f"takes ({', '.join(allowed) if kind in ('shared', 'host') else 'none'})")
            fields["consistency"] = consistency
        try:
            return cls(path=path, **fields)
        except ValidationError as exc:
            why = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise ValueError(f"{text!r}: the path {why}") from None

    def option(self) -> str:
        """This mount as ``--mount`` spells it (the inverse of ``parse_option``)."""
        for kind, (fields, _) in MOUNT_KINDS.items():
            if kind in ("ro", "gcsfuse") and all(getattr(self, k) == v for k, v in fields.items()):
                return f"{self.path}={kind}"
        suffix = "" if self.consistency == "local" else f",{self.consistency}"
        return f"{self.path}={self.scope}{suffix}"


#: ``--mount``'s kinds: what each makes of a path, and what it stands for on a pod.
MOUNT_KINDS: dict[str, tuple[dict[str, str], str]] = {
    "shared": ({"scope": "shared"},
               "one filesystem every host mounts read-write (NFS, Filestore), empty at the start"),
    "host": ({"scope": "host", "base": "overlay"},
             "each host's own disk, holding what this machine holds there (what a path no "
             "scenario mounts is)"),
    "ro": ({"scope": "shared", "mode": "ro", "base": "overlay"},
           "a disk every host mounts read-only, holding what this machine holds there"),
    "gcsfuse": ({"scope": "shared", "consistency": "object"},
                "a bucket every host mounts through Cloud Storage FUSE"),
}


def _everyones(path: str, home: str) -> bool:
    """``/`` or a home itself: a directory no mount replaces for one job."""
    path = posixpath.normpath(path)
    return path in ("/", posixpath.normpath(home)) or \
        posixpath.dirname(path) == "/home"


def _normalized(path: str) -> str:
    return posixpath.normpath(path).replace("//", "/")  # normpath keeps a leading "//"


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    workload: str
    description: str
    #: The seed finding the scenario tests: it documents the catalog (whose files all name
    #: one); a team's own scenario need not come from a seed.
    finding: str = ""
    topology: str
    expect: Expect
    profile: Literal[PROFILES] = "legacy"  # type: ignore[valid-type]
    # Strict: a bool or a quoted "3" is a mistake, not a number; nan and inf are refused.
    #: the world's deadline, in seconds of its own clock (``harness.world.clock``)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=MAX_TIMEOUT, strict=True,
                           allow_inf_nan=False)
    mounts: list[MountSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(default_factory=list)  # typed at load, used as they are
    inputs: dict[str, Any] = Field(default_factory=dict)
    #: host -> inputs merged over ``inputs`` for that host's ranks (mappings merged key by key)
    host_inputs: dict[int, dict[str, Any]] = Field(default_factory=dict)
    #: judges each rank's value of a user's target (``harness.rank.validator``): a
    #: ``file.py:Model`` (relative to this file), ``module:check`` or ``schema.json``
    checker: str | None = Field(default=None, min_length=1, max_length=4096)
    #: the user's own dataset: ``DIR`` (relative to this file) or ``DIR:PATH`` (mounted at
    #: PATH, where the code reads it): see ``with_data``
    data: str | None = Field(default=None, min_length=1, max_length=4096)

    @field_validator("workload")
    @classmethod
    def _workload(cls, value: str) -> str:
        registry.check_workload(value)  # raises ValueError naming the workloads there are
        return value

    @field_validator("topology")
    @classmethod
    def _topology(cls, value: str) -> str:
        get_topology(value)  # raises ValueError with the known names
        return value

    # Set by the loader, not by the file.
    _source: str | None = None
    _workload_inputs: WorkloadInputs | None = None
    _host_inputs: dict[int, WorkloadInputs] | None = None
    _validator: Validator | None = None
    _data_in_file: bool = False
    _config_given: str | None = None  # --config: the user's own config file
    _mounts_given: tuple[str, ...] = ()  # --mount: what paths are on the user's pod

    @property
    def validator(self) -> Validator | None:
        """``checker``, read and checked at load."""
        return self._validator

    @property
    def source(self) -> str | None:
        return self._source

    @property
    def workload_inputs(self) -> WorkloadInputs:
        """``inputs`` merged over the workload's defaults, validated at load."""
        if self._workload_inputs is None:
            raise ValueError(f"scenario {self.name}: inputs not validated (use load_scenario)")
        return self._workload_inputs

    @property
    def host_workload_inputs(self) -> dict[int, WorkloadInputs]:
        """``host_inputs``: each host's merged inputs, validated at load (empty if none)."""
        return self._host_inputs or {}

    def mount_list(self, home: str, roles: Roles | None = None) -> list[Mount]:
        """The scenario's mounts, a role's at each directory ``roles`` resolved it to."""
        out = []
        for m in self.mounts:
            paths = [m.path] if m.path is not None else \
                [p for p in (roles or Roles()).paths(m.role or "") if not _everyones(p, home)]
            out += [Mount(path=home + p[1:] if p.startswith("~") else p, scope=m.scope,
                          mode=m.mode, base=m.base, consistency=m.consistency,
                          delay_ms=m.delay_ms, write_mb_s=m.write_mb_s) for p in paths]
        return out

    @property
    def uses_roles(self) -> bool:
        return any(f.role is not None for f in self.faults) or \
            any(m.role is not None for m in self.mounts)

    @property
    def needs_another_run(self) -> bool:
        """Whether a fault places what another run of the target writes."""
        return any(f.role is not None and "content" not in f.model_fields_set
                   and "content" in type(f).model_fields for f in self.faults)

    def with_data(self, spec: str, base: str = ".") -> Scenario:
        """This scenario on the user's own dataset: ``spec`` is ``DIR`` or ``DIR:PATH``
        (``DIR`` relative to ``base``). The directory is copied to PATH (default: DIR's own
        absolute path, where the code already reads it) on every host: its mounts over the
        workload's data directory move to PATH, and without one PATH is a host's own
        read-only disk. ``ValueError`` saying what is wrong with ``spec``."""
        source, at = parse_data(spec, base)
        try:
            MountSpec(path=at)  # a path a mount may take (not the kernel's, no '..')
        except ValidationError as exc:
            why = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise ValueError(f"the data cannot be mounted at {at}: {why}") from None
        model = registry.WORKLOADS[self.workload].inputs_model
        if "data" not in model.model_fields:
            raise ValueError(f"scenario {self.name} is the {self.workload} workload's, which "
                             "reads no dataset of yours (--data is data-sharding's)")
        old = _normalized(self.workload_inputs.data_dir)  # type: ignore[attr-defined]
        mounts = [m.model_copy(update={"path": at}) if m.path and is_under(old, m.normalized())
                  else m for m in self.mounts]
        if not any(m.path and is_under(at, m.normalized()) for m in mounts):
            mounts.append(MountSpec(path=at, scope="host", mode="ro"))
        where = self.source or self.name
        new = self.model_copy(update={"mounts": mounts, "data": source if at == source else f"{source}:{at}",
                                      "inputs": {**self.inputs, "data": source, "data_dir": at}})
        try:
            new._workload_inputs = validate_inputs(new, new.topology, where)
            new._host_inputs = validate_host_inputs(new, new.topology, where)
        except ScenarioError as exc:
            raise ValueError(exc.message) from None
        new._data_in_file = False
        return new

    def moved(self, old: str, new: str) -> Scenario:
        """This scenario with what it keeps at or under ``old`` kept under ``new`` instead:
        its mounts there, and every workload input naming a path there (``bucket``,
        ``data_dir``, whether the file gave it or it is the workload's default). A pod whose
        bucket is at /mnt/checkpoints runs the scenarios written for /mnt/bucket so."""
        old, new = _normalized(old), _normalized(new)

        def rebased(path: str) -> str:
            return new + path[len(old):] if is_under(path, old) else path

        mounts = [m.model_copy(update={"path": rebased(m.normalized())}) if m.path else m
                  for m in self.mounts]
        inputs = dict(self.inputs)
        for name, value in self.workload_inputs.model_dump().items():
            if isinstance(value, str) and value.startswith("/") and is_under(_normalized(value), old):
                inputs[name] = rebased(_normalized(value))
        moved = self.model_copy(update={"mounts": mounts, "inputs": inputs})
        where = self.source or self.name
        try:
            moved._workload_inputs = validate_inputs(moved, moved.topology, where)
            moved._host_inputs = validate_host_inputs(moved, moved.topology, where)
        except ScenarioError as exc:
            raise ValueError(exc.message) from None
        return moved

    def with_mounts(self, given: list[MountSpec]) -> Scenario:
        """This scenario on the user's pod: each of ``given`` (``--mount``) mounted where the
        scenario mounts nothing at that path (a scenario's own mount there is its fault:
        it stays). A replay is given them again (``mounts_given``)."""
        own = {m.normalized() for m in self.mounts if m.path}
        new = self.model_copy(update={"mounts": [*self.mounts, *(
            m for m in given if m.normalized() not in own)]})
        new._mounts_given = tuple(m.option() for m in given)
        return new

    @property
    def mounts_given(self) -> tuple[str, ...]:
        """The ``--mount`` options a replay of this scenario must be given."""
        return self._mounts_given

    def with_config(self, path: str) -> Scenario:
        """This scenario handing every rank the user's own config (a YAML or JSON mapping at
        ``path``) instead of the workload's sample; a scenario's own changes (another host's
        learning rate) apply to it as to the sample. ``ValueError`` saying what is wrong."""
        model = registry.WORKLOADS[self.workload].inputs_model
        if "config" not in model.model_fields:
            raise ValueError(f"scenario {self.name} is the {self.workload} workload's, which "
                             "hands no config over (--config is config-sync's)")
        config = read_config(path)
        where = self.source or self.name
        new = self.model_copy(update={"inputs": {**self.inputs, "config": config}})
        try:
            new._workload_inputs = validate_inputs(new, new.topology, where)
            new._host_inputs = validate_host_inputs(new, new.topology, where)
        except ScenarioError as exc:
            raise ValueError(exc.message) from None
        new._config_given = os.path.abspath(path)
        return new

    @property
    def config_given(self) -> str | None:
        """The config file a replay of this scenario must be given (None: the sample's)."""
        return self._config_given

    @property
    def data_given(self) -> str | None:
        """The dataset a replay of this scenario must be given (None: its file names it)."""
        return None if self._data_in_file else self.data

    def unresolved_mounts(self, home: str, roles: Roles | None) -> list[str]:
        """Why a mount aimed at a role mounts nothing for this target."""
        return [f"mount on role {m.role} resolved to nothing: the target has no "
                f"{MEANING[m.role]}" for m in self.mounts
                if m.role is not None and not self.mount_list(home, roles)]


def read_config(path: str) -> dict[str, Any]:
    """A user's own config: a YAML or JSON mapping, read as a scenario file is (a regular
    file, bounded); ``ValueError`` naming the file, the line and what is wrong."""
    try:
        root, data = read_yaml(path, "a config file")
    except ScenarioError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        raise ValueError(f"{path}: a config must be a mapping of keys to values, not {what}")
    return data


def parse_data(spec: str, base: str = ".") -> tuple[str, str]:
    """``DIR`` or ``DIR:PATH`` as (the directory's absolute path, where it is mounted)."""
    source, sep, at = spec.rpartition(":")
    if not sep or not at.startswith("/"):
        source, at = spec, ""
    source = os.path.abspath(os.path.join(base, os.path.expanduser(source)))
    if not os.path.isdir(source):
        raise ValueError(f"{source} is not a directory" + (
            "" if os.path.exists(source) else " (it does not exist)"))
    return source, _normalized(at or source)


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    path = os.fspath(path)
    root, data = read_yaml(path)
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        raise ScenarioError(path, f"a scenario file must be a mapping of fields, not {what}",
                            line=root.start_mark.line + 1 if root else None)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if loc[:1] == ("faults",) and len(loc) > 1:  # in one fault: as its kind explains it
            message, within = explain({**err, "loc": loc[2:]})
            loc = loc[:2] + within
        elif err["type"] == "extra_forbidden":
            message = f"unknown key; allowed keys are {_allowed(loc)}"
        elif err["type"] == "missing":
            message = "required field is missing"
        node = _node_at(root, loc)
        raise ScenarioError(path, message, line=node.start_mark.line + 1 if node else None,
                            field=".".join(str(p) for p in loc)) from None
    stem = Path(path).stem
    if scenario.name != stem:
        node = _node_at(root, ("name",))
        raise ScenarioError(path, f"name {scenario.name!r} must match the file name {stem!r}",
                            line=node.start_mark.line + 1 if node else None, field="name")
    _check_mounts(path, root, scenario)
    try:
        _check_faults(path, root, scenario)
    except (TypeError, ValueError, LookupError, OverflowError) as exc:
        # A parameter the fault's own checks let through (``op: 5`` where a name or a
        # list belongs): refused with the faults' line, not as an internal error.
        node = _node_at(root, ("faults",))
        raise ScenarioError(path, f"a fault cannot be planned: {type(exc).__name__}: {exc}",
                            line=node.start_mark.line + 1 if node else None,
                            field="faults") from None
    scenario._workload_inputs = validate_inputs(scenario, scenario.topology, path, root)
    scenario._host_inputs = validate_host_inputs(scenario, scenario.topology, path, root)
    if scenario.checker is not None:
        try:
            scenario._validator = read_checker(scenario.checker, base=os.path.dirname(os.path.abspath(path)))
        except ValueError as exc:
            node = _node_at(root, ("checker",))
            raise ScenarioError(path, str(exc), line=node.start_mark.line + 1 if node else None,
                                field="checker") from None
    scenario._source = path
    if scenario.data is not None:
        try:
            scenario = scenario.with_data(scenario.data, os.path.dirname(os.path.abspath(path)))
            scenario._data_in_file = True
        except ValueError as exc:
            node = _node_at(root, ("data",))
            raise ScenarioError(path, str(exc), line=node.start_mark.line + 1 if node else None,
                                field="data") from None
    return scenario


def validate_inputs(scenario: Scenario, topology: str, path: str,
                    root: yaml.Node | None = None) -> WorkloadInputs:
    """The scenario's ``inputs`` against its workload's model and ``topology``.

    Run once at load; again only when a run replaces the scenario's topology.
    """
    workload = registry.WORKLOADS[scenario.workload]
    try:
        return workload.inputs(scenario.inputs, get_topology(topology))
    except ValidationError as exc:
        raise _inputs_error(exc, ("inputs",), workload, path, root) from None


def _inputs_error(exc: ValidationError, where: tuple[Any, ...], workload: Any, path: str,
                  root: yaml.Node | None) -> ScenarioError:
    """A workload's inputs refused: the first error, at its key under ``where``."""
    err = exc.errors()[0]
    loc = (*where, *err["loc"])
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = (f"unknown input of workload {workload.name}; its inputs are "
                   f"{', '.join(workload.inputs_model.model_fields)}")
    node = _node_at(root, loc)
    return ScenarioError(path, message, line=node.start_mark.line + 1 if node else None,
                         field=".".join(str(p) for p in loc))


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def validate_host_inputs(scenario: Scenario, topology: str, path: str,
                         root: yaml.Node | None = None) -> dict[int, WorkloadInputs]:
    """``host_inputs``: each host one of ``topology``'s, its inputs merged over the
    scenario's (mappings key by key, e.g. one key of ``config``) and validated.
    """
    workload = registry.WORKLOADS[scenario.workload]
    topo = get_topology(topology)
    base = validate_inputs(scenario, topology, path, root).for_target()
    out: dict[int, WorkloadInputs] = {}
    for host, override in scenario.host_inputs.items():
        if not 0 <= host < topo.hosts:
            node = _node_at(root, ("host_inputs",))  # the host's own key, not its value
            if isinstance(node, yaml.MappingNode):
                node = next((k for k, _ in node.value if k.value in (host, str(host))), node)
            raise ScenarioError(path, f"{host} is not a host of {topo.name} "
                                f"(hosts 0-{topo.hosts - 1})",
                                line=node.start_mark.line + 1 if node else None,
                                field=f"host_inputs.{host}")
        try:
            out[host] = workload.inputs(_deep_merge(base, override), topo)
        except ValidationError as exc:
            raise _inputs_error(exc, ("host_inputs", host), workload, path, root) from None
    return out


def _allowed(loc: tuple[Any, ...]) -> str:
    model: Any = Scenario
    for key in loc[:-1]:
        if key == "mounts":
            model = MountSpec
    return ", ".join(model.model_fields)


def _check_mounts(path: str, root: yaml.Node | None, scenario: Scenario) -> None:
    """What one mount cannot tell alone: a path written twice, a delay with no delay."""
    seen: dict[str, int] = {}
    for index, mount in enumerate(scenario.mounts):
        problem, field = None, "path" if mount.path is not None else "role"
        key = mount.normalized() if mount.path is not None else f"role {mount.role}"
        if key in seen:
            what = f"path {mount.path!r}" if mount.path is not None else f"role {mount.role}"
            problem = f"mount {what} is already mounts.{seen[key]}"
        elif "delay_ms" in mount.model_fields_set and mount.consistency != "delayed":
            problem, field = (f"delay_ms applies to consistency 'delayed' only, not "
                              f"{mount.consistency!r}"), "delay_ms"
        if problem:
            loc = ("mounts", index, field)
            node = _node_at(root, loc)
            raise ScenarioError(path, problem, line=node.start_mark.line + 1 if node else None,
                                field=".".join(str(p) for p in loc))
        seen[key] = index


def _check_faults(path: str, root: yaml.Node, scenario: Scenario) -> None:
    """Plan the faults in the scenario's topology: a rank or host outside it is
    reported with its line."""
    topo = get_topology(scenario.topology)
    try:
        check_fits(scenario.faults, world_size=topo.world_size, hosts=topo.hosts, home="/root")
    except PlanError as exc:
        node = _node_at(root, exc.loc)
        raise ScenarioError(path, str(exc), line=node.start_mark.line + 1 if node else None,
                            field=".".join(str(p) for p in exc.loc)) from None


@functools.cache
def catalog_dir() -> Path:
    """The built-in scenarios: installed with the package, or the checkout's folder (asked
    for every cell's replay command: found once)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_scenarios", here.parent / "scenarios"):
        if candidate.is_dir() and any(candidate.glob("*.yaml")):
            return candidate
    raise ScenarioError(str(here), "the built-in scenario catalog is missing")


def catalog_names() -> list[str]:
    """The catalog's names in its order, read from the file names alone (nothing loaded)."""
    names = [p.stem for p in catalog_dir().glob("*.yaml")]
    rank = {name: i for i, name in enumerate(CATALOG_ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def catalog() -> list[Scenario]:
    return [load_scenario(catalog_dir() / f"{name}.yaml") for name in catalog_names()]


class UnknownScenario(ScenarioError):
    """A name or a glob that is not in the catalog: a usage error, with what was meant."""

    def __str__(self) -> str:
        return self.message


def _is_path(name_or_path: str) -> bool:
    return name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def find(name_or_path: str) -> Scenario:
    """A catalog name, or the path of a scenario file."""
    if _is_path(name_or_path):
        return load_scenario(name_or_path)
    path = catalog_dir() / f"{name_or_path}.yaml"
    if not path.exists():
        names = catalog_names()
        near = difflib.get_close_matches(name_or_path, names, n=3)
        hint = f"did you mean {', '.join(near)}?" if near else f"the catalog has: {', '.join(names)}"
        raise UnknownScenario(name_or_path, f"unknown scenario {name_or_path!r}; {hint}")
    return load_scenario(path)


def select(names: Iterable[str]) -> list[Scenario]:
    """Catalog names, globs over them (``divergent-*``) and scenario files, in the order
    given and each once: what ``--scenario`` accepts. A glob that matches nothing is as
    much a mistake as a name that is not there."""
    chosen: dict[str, Scenario] = {}
    for name in names:
        if _is_glob(name) and not _is_path(name):
            matched = fnmatch.filter(catalog_names(), name)
            if not matched:
                raise UnknownScenario(name, f"no scenario matches {name!r}; the catalog has: "
                                            f"{', '.join(catalog_names())}")
            found = [find(m) for m in matched]
        else:
            found = [find(name)]
        for scenario in found:
            chosen.setdefault(scenario.source or scenario.name, scenario)
    return list(chosen.values())


def base_scenario(workload: str) -> Scenario:
    """A workload's plain setting (its topology, mounts, inputs and deadline): its own
    ``baseline`` if the catalog has one, else its first catalog scenario, faults removed.
    Its fault-free run is learned there, and a search and its crash states start there."""
    order = registry.WORKLOADS[workload].catalog_order
    names = (["baseline"] if "baseline" in order else []) + list(order)
    for name in names:
        path = catalog_dir() / f"{name}.yaml"
        if path.exists():
            return without_faults(load_scenario(path))
    raise ScenarioError(workload, f"workload {workload} has no catalog scenario to start from: "
                                  "give one with --scenario")


def without_faults(scenario: Scenario) -> Scenario:
    """The same scenario with no fault: what a plan adds its own to."""
    bare = scenario.model_copy(update={"faults": []})
    for attr in ("_source", "_workload_inputs", "_host_inputs", "_validator"):
        setattr(bare, attr, getattr(scenario, attr))
    return bare
