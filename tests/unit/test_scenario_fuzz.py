"""Fuzzing the scenario loader from the real catalog: whatever a mutated file holds, loading
it gives a Scenario or a ScenarioError that starts with the file's path -- never another
exception, which the command line would report as an internal error (exit 3)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.scenarios import Scenario, ScenarioError, catalog_dir, load_scenario


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key or index path into ``data``, the root excluded."""
    found = []
    items = data.items() if isinstance(data, dict) else \
        enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found.append((*prefix, key))
        found.extend(_paths(value, (*prefix, key)))
    return found


CATALOG = {p.stem: p.read_text() for p in sorted(catalog_dir().glob("*.yaml"))}

#: Every key the catalog writes: a known key in the wrong place, or with a wrong value.
KEYS = sorted({str(p[-1]) for text in CATALOG.values() for p in _paths(yaml.safe_load(text))
               if isinstance(p[-1], str)})

#: Every fault kind the catalog uses: a real kind in the wrong fault.
KINDS = sorted({f["kind"] for text in CATALOG.values() for f in yaml.safe_load(text).get("faults", [])})

#: Values a hand-edited file might hold where another was meant.
WEIRD = st.one_of(
    st.integers(),
    st.sampled_from([-1, 0, 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 10**7, 10**30, -(2**70)]),
    st.floats(),  # nan and the infinities included
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 0.5]),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(["", "\0", "a\0b", "/tmp/../etc", "..", "/proc", "/dev/shm", "~", "~x",
                     "x\ny", "*", "A=B", "ü/日本", "/" * 300, "a" * 5000, *KINDS]),
    st.lists(st.integers() | st.text(max_size=4), max_size=4),
    st.dictionaries(st.text(max_size=6), st.integers() | st.none(), max_size=3),
)


def _mutate_data(draw: Any, text: str) -> str:
    """Drop a key, replace a value or add an unknown key, anywhere in the document."""
    data = yaml.safe_load(text)
    paths = _paths(data)
    nested = [p for p in paths if len(p) > 2]  # a fault's, a mount's or an input's field
    path = draw(st.sampled_from(nested if nested and draw(st.booleans()) else paths))
    *parents, last = path
    holder = data
    for key in parents:
        holder = holder[key]
    action = draw(st.sampled_from(["drop", "replace", "replace", "add"]))
    if action == "drop":
        del holder[last]
    elif action == "replace":
        holder[last] = draw(WEIRD)
    elif isinstance(holder, dict):
        holder[draw(st.sampled_from(KEYS) | st.text(min_size=1, max_size=8))] = draw(WEIRD)
    else:
        holder.append(draw(WEIRD))
    return yaml.safe_dump(data, sort_keys=False)


def _mutate_text(draw: Any, text: str) -> bytes:
    """Break the file as bytes: junk, a cut, a line twice, deep nesting."""
    raw = text.encode()
    at = draw(st.integers(0, len(raw)))
    action = draw(st.sampled_from(["junk", "truncate", "duplicate-line", "nest"]))
    if action == "junk":
        return raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    if action == "truncate":
        return raw[:at]
    if action == "duplicate-line":
        lines = raw.splitlines(keepends=True)
        i = draw(st.integers(0, len(lines) - 1))
        return b"".join(lines[:i + 1] + lines[i:])
    depth = draw(st.sampled_from([40, 1000, 10_000]))
    opener = draw(st.sampled_from([b"[", b"{", b"- "]))
    return raw[:at] + opener * depth + raw[at:]


@st.composite
def mutated(draw: Any) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(CATALOG)))
    text = CATALOG[name]
    if draw(st.booleans()):
        text = _mutate_data(draw, text)
        if draw(st.booleans()):  # now and then a second change
            text = _mutate_data(draw, text)
        return name, text.encode()
    return name, _mutate_text(draw, text)


#: Every field of a fault, a mount or a workload's inputs in the catalog, by file.
NESTED = [(name, path) for name, text in sorted(CATALOG.items())
          for path in _paths(yaml.safe_load(text)) if len(path) > 2 or path[0] == "inputs"]


@st.composite
def retyped(draw: Any) -> tuple[str, bytes]:
    """One catalog field of a fault, mount or input given a value of any type."""
    name, path = draw(st.sampled_from(NESTED))
    data = yaml.safe_load(CATALOG[name])
    holder = data
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = draw(WEIRD)
    return name, yaml.safe_dump(data, sort_keys=False).encode()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


FUZZ = settings(derandomize=True, max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@FUZZ
@given(case=mutated())
def test_a_mutated_catalog_file_loads_or_is_refused_naming_the_file(folder, case):
    _loads_or_is_refused(folder, *case)


@FUZZ
@given(case=retyped())
def test_a_retyped_fault_mount_or_input_field_loads_or_is_refused_naming_the_file(folder, case):
    _loads_or_is_refused(folder, *case)


def _loads_or_is_refused(folder: Path, name: str, data: bytes) -> None:
    path = folder / f"{name}.yaml"
    path.write_bytes(data)
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        assert str(exc).startswith(f"{path}:") or str(exc).startswith(f"{path} "), str(exc)
    else:
        assert isinstance(scenario, Scenario)


def test_the_catalog_itself_loads():
    for name in CATALOG:
        assert load_scenario(catalog_dir() / f"{name}.yaml").name == name


REFUSED = {
    "not-utf8": lambda t: t.encode() + b"finding: caf\xe9\n",
    "deep": lambda t: t.encode() + b"inputs: " + b"[" * 10_000 + b"\n",
    "bool-timeout": lambda t: (t + "timeout: true\n").encode(),
    "proc-mount": lambda t: (t + "mounts: [{path: /proc}]\n").encode(),
    "huge-int": lambda t: (t + "inputs: {num_samples: 99999999999999999999}\n").encode(),
    "junk": lambda t: b"\x00\xff" + t.encode(),
}


@pytest.mark.parametrize("how", REFUSED)
def test_the_cli_refuses_a_mutated_file_with_exit_2_and_no_traceback(cli, tmp_path, how):
    text = "\n".join(line for line in CATALOG["baseline"].splitlines()
                     if not line.startswith(("timeout:", "inputs:", "mounts:"))) + "\n"
    path = tmp_path / "baseline.yaml"
    path.write_bytes(REFUSED[how](text))
    done = cli("run", "--scenario", str(path), "--report-dir", str(tmp_path / "reports"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert str(path) in done.stderr and "Traceback" not in done.stderr
