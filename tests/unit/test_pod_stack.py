"""What each pod worker runs (``harness.pod.stack``): read from its probe line, and what
stops the pod, each naming its worker."""

from __future__ import annotations

from harness.pod.stack import Stack, problems

BASE = {"python": "3.11.7", "torch": "2.9.0", "torch_xla": "2.9.0", "libtpu": "0.0.21"}


def test_the_probe_line_is_found_after_whatever_a_login_prints():
    out = 'Welcome to the TPU VM\nHARNESS-STACK {"missing": [], "versions": {"python": "3.10.12"}}\n'
    assert Stack.parse(out) == Stack({"python": "3.10.12"})
    assert Stack.parse("no line here") is None
    assert Stack.parse("HARNESS-STACK {not json") is None


def test_the_workers_that_differ_from_most_are_named_with_what_most_hold():
    stacks = {w: Stack(BASE) for w in range(4)}
    stacks[2] = Stack({**BASE, "libtpu": "0.0.17"})
    assert problems(stacks, "python3", tpu=True) == {
        2: "its libtpu is 0.0.17, the other workers' 0.0.21 (workers 0-1,3): a pod's workers "
           "must run one stack"}


def test_a_missing_module_and_a_torch_xla_that_does_not_import_name_their_fix():
    stacks = {0: Stack(BASE, missing=("yaml", "coolname")),
              1: Stack(BASE, torch_xla_error="ImportError: libtpu.so: cannot open shared object")}
    said = problems(stacks, "/opt/py/bin/python", tpu=True)
    assert said[0].startswith("its Python (/opt/py/bin/python) lacks yaml coolname: run harness "
                              "pod setup (or harness pod run --setup)")
    assert said[1] == (
        "its Python (/opt/py/bin/python) cannot import torch_xla with PJRT_DEVICE=TPU "
        "(ImportError: libtpu.so: cannot open shared object): run harness pod setup, or "
        "install it there: "
        "/opt/py/bin/python -m pip install 'torch==2.9.0' 'torch_xla[tpu]==2.9.0' "
        "-f https://storage.googleapis.com/libtpu-releases/index.html")
    assert problems(stacks, "python3", tpu=False).keys() == {0}  # the shim needs no torch_xla
