"""What each worker runs: its Python and the packages a cell needs, checked before any cell.

A pod's workers must run one stack: a cell whose ranks import another torch on one host
is a cell of another program. ``probe_command`` prints, as one JSON line, the modules a
worker's Python lacks, the versions it holds and, on a TPU pod, whether the real
torch_xla imports with ``PJRT_DEVICE=TPU``; ``problems`` reads every worker's answer
into what stops the pod, each naming its worker and the command that fixes it. Pure but
for the command's text: the controller runs it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.history import format_ranks

#: What a worker's Python must import to run a cell (the harness's own dependencies).
NEEDED = ("yaml", "pydantic", "numpy", "click", "rich", "coolname", "torch")
#: The distributions whose versions a report lists; the first four must agree on every worker.
LISTED = ("torch", "torch_xla", "libtpu", "libtpu-nightly", "numpy", "pydantic")
AGREE = ("python", "torch", "torch_xla", "libtpu")
#: Where libtpu's wheels are, as Google documents it for TPU VMs.
LIBTPU_INDEX = "https://storage.googleapis.com/libtpu-releases/index.html"

_PROBE = """
import importlib.metadata as m, importlib.util as u, json, os, platform, sys
out = {"missing": [x for x in NEEDED if u.find_spec(x) is None],
       "versions": {"python": platform.python_version()}}
for dist in LISTED:
    try:
        out["versions"][dist.replace("-nightly", "")] = m.version(dist)
    except m.PackageNotFoundError:
        pass
try:
    with open("/etc/os-release") as f:
        os_release = dict(line.strip().split("=", 1) for line in f if "=" in line)
    out["versions"]["os"] = os_release.get("PRETTY_NAME", "").strip('"')
except OSError:
    pass
if TPU:
    os.environ.setdefault("PJRT_DEVICE", "TPU")
    try:
        import torch_xla, torch_xla.runtime
    except BaseException as exc:
        out["torch_xla_error"] = (type(exc).__name__ + ": " + str(exc))[:300]
print("HARNESS-STACK " + json.dumps(out))
"""


def probe_command(python: str, tpu: bool) -> str:
    """The shell command a worker runs: one ``HARNESS-STACK {...}`` line on stdout."""
    code = f"NEEDED = {NEEDED!r}\nLISTED = {LISTED!r}\nTPU = {tpu!r}\n{_PROBE}"
    return f"cd ~ && {shlex.quote(python)} -c {shlex.quote(code)}"


@dataclass(frozen=True)
class Stack:
    """One worker's answer."""

    versions: Mapping[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    torch_xla_error: str | None = None

    @classmethod
    def parse(cls, stdout: str) -> Stack | None:
        """The probe's line in ``stdout`` (None: the worker printed no such line)."""
        for line in reversed(stdout.splitlines()):
            if line.startswith("HARNESS-STACK "):
                try:
                    data = json.loads(line[len("HARNESS-STACK "):])
                    return cls({str(k): str(v) for k, v in data["versions"].items()},
                               tuple(map(str, data["missing"])), data.get("torch_xla_error"))
                except (ValueError, KeyError, TypeError, AttributeError):
                    return None
        return None

    def describe(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.versions.items())


def fix_command(python: str, torch: str | None) -> str:
    """What installs the real torch_xla stack beside ``torch`` on a TPU VM."""
    pin = f"=={torch.split('+')[0]}" if torch else ""
    return (f"{python} -m pip install 'torch{pin}' 'torch_xla[tpu]{pin}' -f {LIBTPU_INDEX}")


def problems(stacks: Mapping[int, Stack | None], python: str, tpu: bool) -> dict[int, str]:
    """What stops the pod, by worker: no answer, a module missing, torch_xla that does not
    import on a TPU pod, or a version of ``AGREE`` other than most workers hold."""
    out: dict[int, str] = {}
    for w, stack in sorted(stacks.items()):
        if stack is None:
            out[w] = f"its Python ({python}) did not say what it holds (is it Python 3?)"
        elif stack.missing:
            out[w] = (f"its Python ({python}) lacks {' '.join(stack.missing)}: run harness "
                      "pod setup (or harness pod run --setup), which installs them in a "
                      f"virtualenv of its own, or install them there ({python} -m pip install "
                      "pyyaml pydantic numpy click rich coolname torch)")
        elif tpu and stack.torch_xla_error:
            out[w] = (f"its Python ({python}) cannot import torch_xla with PJRT_DEVICE=TPU "
                      f"({stack.torch_xla_error}): run harness pod setup, or install it there: "
                      f"{fix_command(python, stack.versions.get('torch'))}")
    answered = {w: s for w, s in stacks.items() if s is not None and w not in out}
    for key in AGREE:
        held: dict[str, list[int]] = {}
        for w, s in sorted(answered.items()):
            held.setdefault(s.versions.get(key, "none"), []).append(w)
        if len(held) < 2:
            continue
        usual, _ = max(held.items(), key=lambda kv: (len(kv[1]), -kv[1][0]))
        for value, workers in held.items():
            if value == usual:
                continue
            for w in workers:
                out.setdefault(w, f"its {key} is {value}, the other workers' "
                                  f"{usual} (workers {format_ranks(held[usual])}): a pod's "
                                  "workers must run one stack")
    return dict(sorted(out.items()))


def as_report(stacks: Mapping[int, Stack | None]) -> dict[str, Any]:
    """Every worker's versions, for the pod report: ``{"0": {"python": ...}, ...}``."""
    return {str(w): dict(s.versions) for w, s in sorted(stacks.items()) if s is not None}
