"""Fault kinds: one module each, typed once at load. A scenario's fault that
cannot work (an unknown key, a number out of bounds, a bool for a number, an
op its kind never fires at) is refused with its file, line and field."""

from __future__ import annotations

import importlib.util
import pickle
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.faults.engine import FaultEngine
from harness.faults.kinds import KINDS, FaultKind, kind_of
from harness.faults.kinds.eio import Eio
from harness.faults.kinds.kill import Kill
from harness.faults.plan import PlanError, make_plan
from harness.scenarios import ScenarioError, load_scenario

from support import REPO, SCENARIO_HEAD

KINDS_DIR = REPO / "harness" / "faults" / "kinds"

HEAD = SCENARIO_HEAD.format(name="mine") + "faults:\n"


def load_with(tmp_path: Path, fault: str) -> ScenarioError:
    """Load a file whose only fault is ``fault`` (YAML flow mapping, line 8)."""
    path = tmp_path / "mine.yaml"
    path.write_text(HEAD + f"  - {fault}\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert err.file == str(path) and err.line == 8, str(err)
    assert str(err).startswith(f"{path}:8: "), str(err)
    return err


# -- the registry ------------------------------------------------------------------

def test_every_kind_module_registers_one_kind_under_its_name():
    modules = sorted(p.stem for p in KINDS_DIR.glob("*.py") if not p.stem.startswith("_"))
    assert sorted(k.replace("-", "_") for k in KINDS) == sorted(m.rstrip("_") for m in modules)
    for name, kind in KINDS.items():
        assert kind_of(name) is kind and kind.model_fields["kind"].default == name
        assert kind.__doc__, f"{name} says what it does"


def test_the_docs_faults_table_has_one_row_per_kind():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = (REPO / "docs" / "reference" / "faults.md").read_text()
    assert page.count("<!-- harness: fault-kinds -->") == 1
    text = hooks.on_page_markdown(page, page=None, config=None, files=None)
    rows = re.findall(r"^\| `([a-z-]+)` \|", text, flags=re.M)
    assert sorted(rows) == sorted(KINDS), set(KINDS) ^ set(rows)
    for name, kind in KINDS.items():  # its parameters, each with its bounds
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        own = set(kind.model_fields) - set(FaultKind.model_fields)
        assert all(f"`{field}`: " in row for field in own), (name, own, row)
    assert "`count`: int (1..1,000), default `1`" in text


def test_the_facts_the_world_asks_of_a_kind():
    assert {k for k, c in KINDS.items() if c.ends_life} == {"kill", "preempt", "host-crash"}
    assert {k for k, c in KINDS.items() if c.restarts} == {"preempt", "host-crash"}
    assert {k for k, c in KINDS.items() if c.holds_forever} == {"never-arrive"}
    assert {k for k, c in KINDS.items() if c.watched_path} == \
        {"hold-write", "empty-window", "stale-leftover"}
    assert not any(KINDS[k].needs_sandbox for k in
                   ("kill", "preempt", "raise", "straggle", "never-arrive", "divergent-rng",
                    "env-skew"))
    with pytest.raises(KeyError, match="unknown fault kind 'meteor'"):
        kind_of("meteor")


def test_a_typed_fault_plans_as_its_mapping_does_and_pickles():
    typed = make_plan([Eio(count=2, rank=1, path="~/x")], seed=3, world_size=4, hosts=2,
                      home="/root")
    mapped = make_plan([{"kind": "eio", "count": 2, "rank": 1, "path": "~/x"}], seed=3,
                       world_size=4, hosts=2, home="/root")
    assert typed == mapped and typed.faults[0].trigger.path == "/root/x"
    assert pickle.loads(pickle.dumps(typed)) == typed  # it travels to every rank


def test_a_mapping_through_the_python_api_is_refused_naming_the_field():
    with pytest.raises(PlanError, match=r"fault 1: .*less than or equal to 1000.*'count'") as info:
        make_plan([{"kind": "kill"}, {"kind": "eio", "count": 5000}], seed=0, world_size=2,
                  hosts=1, home="/root")
    assert info.value.field == "count" and info.value.loc == ("faults", 1, "count")
    assert isinstance(info.value, ValueError)


def test_a_typed_fault_refuses_an_unknown_key_and_a_bad_value():
    with pytest.raises(ValueError, match="rnak"):
        Kill(rnak=0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="count"):
        Eio(count=True)


# -- refused at load, with file, line and field ------------------------------------------

@pytest.mark.parametrize("fault, field, message", [
    # unknown keys: a typo never silently widens a fault (rnak would kill every rank)
    ("{kind: eio, cout: 3}", "faults.0.cout", "unknown key; allowed keys are kind, rank"),
    ("{kind: kill, rnak: 0}", "faults.0.rnak", "unknown key"),
    ("{kind: torn-write, path: /tmp/x, bytes: 3}", "faults.0.bytes", "unknown key"),
    # numbers out of their bounds
    ("{kind: eio, count: 10000000}", "faults.0.count", "less than or equal to 1000"),
    ("{kind: eio, count: 0}", "faults.0.count", "greater than or equal to 1"),
    ("{kind: enospc, at_byte: 1125899906842624}", "faults.0.at_byte", "less than or equal"),
    ("{kind: latency, delay_ms: 86400001}", "faults.0.delay_ms", "less than or equal to 86400000"),
    ("{kind: corrupt, bytes: 1000001}", "faults.0.bytes", "less than or equal to 1000000"),
    ("{kind: kill, occurrence: 1000001}", "faults.0.occurrence.0", "less than or equal"),
    ("{kind: kill, after_ms: 86400001}", "faults.0.after_ms", "less than or equal"),
    ("{kind: kill, ranks: [0, 8]}", "faults.0.ranks", "rank 8 is outside a world of 8"),
    ("{kind: preempt, lives: [0, 1001]}", "faults.0.lives.1", "less than or equal to 1000"),
    ("{kind: raise, exception: OSError, errno: 0}", "faults.0.errno", "greater than or equal"),
    # a bool, a string or a float where a number is expected
    ("{kind: eio, count: true}", "faults.0.count", "valid integer"),
    ("{kind: kill, rank: true}", "faults.0.rank.0", "valid integer"),
    ("{kind: straggle, delay_ms: '5'}", "faults.0.delay_ms", "valid integer"),
    ("{kind: latency, delay_ms: 1.5}", "faults.0.delay_ms", "valid integer"),
    ("{kind: permission-denied, path: /tmp/x, directory: 1}", "faults.0.directory",
     "valid boolean"),
    # an op a kind never fires at, or an op that does not exist
    ("{kind: straggle, op: write}", "faults.0.op", "straggle never fires at 'write'"),
    ("{kind: enospc, op: [write, read]}", "faults.0.op", "never fires at 'read'"),
    ("{kind: env-skew, op: start, env: {A: '1'}}", "faults.0.op", "fires at no operation"),
    ("{kind: eio, op: 5}", "faults.0.op.0", "Input should be 'open-read'"),
    # trigger keys that could never match for this kind
    ("{kind: eio, tag: 'step-*'}", "faults.0.tag", "eio never fires at a collective"),
    ("{kind: straggle, path: /tmp/x}", "faults.0.path", "never fires at a file"),
    ("{kind: divergent-rng, occurrence: 2}", "faults.0.occurrence", "nothing to count"),
    # paths: absolute, no NUL, no climbing
    ("{kind: eio, path: relative/x}", "faults.0.path", "must be absolute"),
    ("{kind: eio, path: ~other/x}", "faults.0.path", "must be absolute"),
    ('{kind: eio, path: "/tmp/a\\0b"}', "faults.0.path", "NUL"),
    ("{kind: stale-leftover, path: /tmp/../../proc/x}", "faults.0.path", "climb"),
    ("{kind: stale-leftover, path: /proc/x}", "faults.0.path", "under /proc: it is the machine's"),
    ("{kind: permission-denied, path: /dev}", "faults.0.path", "under /dev"),
    # the rest of a kind's parameters
    ("{kind: env-skew, env: {'A=B': '1'}}", "faults.0.env.A=B.[key]", "should match pattern"),
    ("{kind: env-skew, env: {}}", "faults.0.env", "at least 1 item"),
    ("{kind: hold-write, path: /tmp/x, until: never}", "faults.0.until", "'read' or 'done'"),
    ("{kind: raise, exception: SystemExit}", "faults.0.exception", "Input should be"),
    ("{kind: kill, rank: 0, ranks: [1]}", "faults.0.ranks", "give rank or ranks, not both"),
    ("{rank: 0}", "faults.0.kind", "a fault needs a kind"),
])
def test_a_fault_that_cannot_work_is_refused_at_load(tmp_path, fault, field, message):
    err = load_with(tmp_path, fault)
    assert err.field == field, str(err)
    assert message in err.message, str(err)


def test_a_refused_fault_is_a_usage_error_from_the_command_line(tmp_path, cli):
    path = tmp_path / "mine.yaml"
    path.write_text(HEAD + "  - {kind: kill, rnak: 0}\n")
    done = cli("run", "--scenario", str(path), "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert f"{path}:8: unknown key" in done.stderr and "(field 'faults.0.rnak')" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_loaded_faults_are_typed_and_used_as_they_are(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(HEAD + textwrap.indent("- {kind: eio, count: 3, rank: 1, op: open-read}\n",
                                           "  "))
    [fault] = load_scenario(path).faults
    assert isinstance(fault, FaultKind) and isinstance(fault, Eio)
    assert (fault.count, fault.rank, fault.op) == (3, [1], ["open-read"])


# -- properties ----------------------------------------------------------------------

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                    st.text(max_size=8), st.binary(max_size=8),
                    st.lists(st.integers(-3, 10), max_size=3), st.dictionaries(st.text(max_size=3),
                                                                               st.text(max_size=3),
                                                                               max_size=2))
_KEYS = st.sampled_from(sorted({name for kind in KINDS.values() for name in kind.model_fields}
                               | {"cout", "rnak"}))


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([*KINDS, "nope"]), rest=st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_any_mapping_is_planned_or_refused_as_a_plan_error(kind, rest):
    """Never another exception: whatever a scenario or a caller writes."""
    spec = {**rest, "kind": kind}
    try:
        plan = make_plan([spec], seed=0, world_size=4, hosts=2, home="/root")
    except PlanError as exc:
        assert exc.loc[:2] == ("faults", 0)
        return
    [fault] = plan.faults
    assert fault.kind == kind and set(spec) <= set(type(fault.spec).model_fields)


@settings(max_examples=200, deadline=None)
@given(wanted=st.sets(st.integers(1, 12), min_size=1, max_size=5), calls=st.integers(0, 15))
def test_a_trigger_fires_exactly_on_its_occurrences(wanted, calls):
    engine = _engine({"kind": "latency", "delay_ms": 0, "op": "stat", "occurrence": sorted(wanted)})
    [fault] = engine.faults
    fired = [n for n in range(1, calls + 1) if engine.fires(fault, "stat", "/x")]
    assert fired == sorted(w for w in wanted if w <= calls)
    assert not engine.fires(fault, "listdir", "/x")  # another op is not counted


@settings(max_examples=100, deadline=None)
@given(count=st.integers(1, 1000), calls=st.integers(0, 30))
def test_an_eio_without_occurrences_fails_the_first_count_attempts(count, calls):
    engine = _engine({"kind": "eio", "count": count})
    [fault] = engine.faults
    fired = [engine.fires(fault, "read", "/x") for _ in range(calls)]
    assert fired == [n <= count for n in range(1, calls + 1)]


def _engine(spec: dict) -> FaultEngine:
    plan = make_plan([spec], seed=0, world_size=1, hosts=1, home="/root")
    return FaultEngine(plan, rank=0, host=0, notify=lambda message: None)


@pytest.mark.parametrize("written, left_out", [
    ("{kind: empty-window, rank: 0, path: null}", "{kind: empty-window, rank: 0}"),
    ("{kind: preempt, ranks: [0], op: null, occurrence: 3}", "{kind: preempt, ranks: [0], occurrence: 3}"),
    ("{kind: permission-denied, path: /tmp/x, mode: null}", "{kind: permission-denied, path: /tmp/x}"),
    ("{kind: raise, exception: RuntimeError, errno: null}", "{kind: raise, exception: RuntimeError}"),
])
def test_a_null_field_is_the_field_left_out(tmp_path, written, left_out):
    """YAML writes an absent value as null; it must mean what leaving the key out means."""
    path = tmp_path / "mine.yaml"
    path.write_text(HEAD + f"  - {written}\n")
    [with_null] = load_scenario(path).faults
    path.write_text(HEAD + f"  - {left_out}\n")
    assert with_null == load_scenario(path).faults[0]


def test_a_required_field_written_null_is_missing(tmp_path):
    err = load_with(tmp_path, "{kind: stale-leftover, path: null}")
    assert err.field == "faults.0.path" and "needs a path or a role" in err.message, str(err)
    err = load_with(tmp_path, "{kind: raise, exception: OSError, errno: null}")
    assert err.field == "faults.0.errno" and "needs an errno" in err.message, str(err)
