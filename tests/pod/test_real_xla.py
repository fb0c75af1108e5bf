"""The pod's recorder and fault engine against the REAL torch_xla 2.9 (opt-in: ``-m real_xla``).

The default test run deselects this group (pyproject's addopts). It needs an interpreter with
the real torch_xla 2.9 and this repository installed (the README's "Real torch_xla (opt-in)"
builds one); ``HARNESS_REAL_XLA_PYTHON`` names it, else the one running pytest. Each case runs
tests/targets/real_xla_target.py in a subprocess in isolated mode (``-I``: no PYTHONPATH, no
current directory), so that the shim can never stand in for torch_xla, with ``PJRT_DEVICE=CPU``
and one device, and checks what the recorder saw, what the fault engine did, and what the
real collectives returned.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import REPO, TARGETS_DIR

pytestmark = pytest.mark.real_xla

TARGET = TARGETS_DIR / "real_xla_target.py"
PYTHON = os.environ.get("HARNESS_REAL_XLA_PYTHON", sys.executable)
ENV = {"PJRT_DEVICE": "CPU", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
       "HOME": os.environ.get("HOME", "/root")}


@functools.cache
def unavailable() -> str | None:
    """Why the real torch_xla 2.9 cannot be used here, or None."""
    done = subprocess.run([PYTHON, "-I", "-c", "import torch_xla; print(torch_xla.__file__); "
                           # the machine's time: a bound, so a stuck run fails the test instead of hanging it
                           "print(torch_xla.__version__)"], capture_output=True, text=True,
                          env=ENV, cwd="/", timeout=300)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the real torch_xla is not importable by {PYTHON}: {last}"
    path, version = done.stdout.split()[-2:]
    if Path(path).resolve().is_relative_to(REPO / "shims"):
        return f"{PYTHON} imports the harness's shim as torch_xla ({path}), not the real one"
    if not version.startswith("2.9"):
        return f"{PYTHON} has torch_xla {version}, not 2.9"
    return None


@pytest.fixture(autouse=True)
def real_torch_xla() -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)


def run(mode: str, faults: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    done = subprocess.run([PYTHON, "-I", str(TARGET), mode, json.dumps(faults or [])],
                          capture_output=True, text=True, env=ENV, cwd="/", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert not Path(out["torch_xla"]).resolve().is_relative_to(REPO / "shims")
    assert out["version"].startswith("2.9")
    return out


@functools.cache
def lines() -> dict[str, int]:
    """The line of each ``# call: NAME`` in the target."""
    found = {}
    for number, text in enumerate(TARGET.read_text().splitlines(), 1):
        if m := re.search(r"# call: (\S+)$", text):
            found[m.group(1)] = number
    return found


def site(name: str) -> str:
    return f"real_xla_target.py:{lines()[name]} in body"


def expected_calls() -> list[list[Any]]:
    return [
        ["call", "rendezvous", "first", site("rendezvous"), {"payload_bytes": 3}],
        ["call", "all_reduce", None, site("all_reduce"), {"tensors": ["float32[3]"]}],
        # mesh_reduce is one rendezvous (2.9 runs it as rendezvous -> xla_rendezvous ->
        # all_gather -> all_reduce, none of them recorded again); its bytes are torch.save's
        ["call", "rendezvous", "metrics", site("mesh_reduce"), {"payload_bytes": 1261}],
        ["call", "all_gather", None, site("all_gather"), {"tensors": ["float32[2]"]}],
        ["call", "reduce_scatter", None, site("reduce_scatter"), {"tensors": ["float32[4]"]}],
        ["call", "all_to_all", None, site("all_to_all"), {"tensors": ["float32[4]"]}],
        ["call", "collective_permute", None, site("collective_permute"), {"tensors": ["float32[2]"]}],
        # 2.9's collective_broadcast is an all_reduce: recorded once, as what the user called
        ["call", "collective_broadcast", None, site("collective_broadcast"),
         {"tensors": ["float32[2]"]}],
        # init_process_group has no store handshake in a world of one process (as in the shim),
        # dist.all_reduce is the xm.all_reduce the backend makes, dist.barrier() is a no-op
        ["call", "all_reduce", None, site("dist.all_reduce"), {"tensors": ["float32[2]"]}],
    ]


#: What the target's collectives return on one device (the real 2.9's, and the shim's).
RESULTS = {
    "rendezvous": "[b'abc']", "all_reduce": "[1.0, 1.0, 1.0]", "mesh_reduce": "2.5",
    "all_gather": "[0.0, 1.0]", "reduce_scatter": "[1.0, 1.0, 1.0, 1.0]",
    "all_to_all": "[0.0, 1.0, 2.0, 3.0]", "collective_permute": "[0.0, 1.0]",
    "collective_broadcast": "[3.0, 3.0]", "dist_all_reduce": "[4.0, 4.0]", "backend": "'xla'"}

#: What the recorder wraps: the collectives only; torch_xla.runtime is untouched; xla:// is
#: registered wrapped, whether torch_xla was imported before the recorder was installed or not.
WRAPPED = {"xm": sorted(["all_gather", "all_reduce", "all_to_all", "collective_broadcast",
                         "collective_permute", "mesh_reduce", "recv", "reduce_scatter",
                         "rendezvous", "send", "xla_rendezvous"]),
           "xr": [], "xla://": True}


def assert_clean_run(out: dict[str, Any]) -> None:
    """The target ran through: every call recorded as expected, returned, and right."""
    assert out["error"] is None
    calls = [e for e in out["events"] if e[0] == "call"]
    assert calls == expected_calls()
    returns = [e for e in out["events"] if e[0] == "return"]
    assert returns == [["return", c[1], c[2]] for c in calls]
    assert out["results"] == RESULTS
    assert out["reports"] == []
    assert out["wrapped"] == WRAPPED


@pytest.mark.parametrize("mode", ["plain", "spawn", "plain-late"])
def test_the_recorder_sees_the_real_collectives_under_the_simulators_names(mode):
    assert_clean_run(run(mode))


@pytest.mark.parametrize("mode", ["plain", "spawn"])
def test_a_raise_fault_stops_the_real_mesh_reduce_before_it_runs(mode):
    fault = {"kind": "raise", "rank": 0, "op": "collective", "tag": "metrics",
             "exception": "RuntimeError", "message": "injected at the metrics rendezvous"}
    out = run(mode, [fault])
    assert out["error"] == {"type": "RuntimeError", "message": "injected at the metrics rendezvous",
                            "line": lines()["mesh_reduce"]}
    assert out["events"][-1] == ["call", "rendezvous", "metrics", site("mesh_reduce"),
                                 {"payload_bytes": 1261}], "the call is recorded, never returns"
    assert [e[:3] for e in out["events"]] == [
        ["call", "rendezvous", "first"], ["return", "rendezvous", "first"],
        ["call", "all_reduce", None], ["return", "all_reduce", None],
        ["call", "rendezvous", "metrics"]]
    assert "mesh_reduce" not in out["results"] and out["results"]["all_reduce"] == "[1.0, 1.0, 1.0]"
    assert len(out["reports"]) == 1 and "raises RuntimeError" in out["reports"][0]


def test_a_fault_at_the_second_all_reduce_fires_at_the_backends_all_reduce():
    fault = {"kind": "raise", "rank": 0, "op": "collective", "tag": "all_reduce", "occurrence": 2,
             "exception": "ValueError", "message": "second all_reduce"}
    out = run("plain", [fault])
    assert out["error"] == {"type": "ValueError", "message": "second all_reduce",
                            "line": lines()["dist.all_reduce"]}
    assert "dist_all_reduce" not in out["results"] and out["results"]["all_gather"] == "[0.0, 1.0]"
