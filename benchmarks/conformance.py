"""Upstream's multi-process tests, unmodified, against the shim: a conformance table.

    python benchmarks/conformance.py --upstream PATH [--ref v2.9.0] [--wider]
        [-t single-host-8 -t 1x2 -t 1x1] [--timeout 90] [--only NAME] [--write-docs]

``PATH`` is a clone of pytorch/xla (a bare git dir or a checkout; nothing is fetched
here, nothing is vendored): the files of ``--ref`` under ``test/`` are extracted to a
temporary directory and each chosen file runs as ``harness exec -t TOPOLOGY --profile
current -- python test/FILE`` from there, once per topology (world sizes 8, 2 and 1 by
default; add ``-t 2x4`` for two hosts). The first set is the one issue 11 names
(``test/test_mp_*.py`` and ``test/pjrt/test_mesh_service.py``); ``--wider`` adds the
other multi-process files that can mean something on CPU.

Each run is one of: ``pass`` (the world passed and at least one test ran), ``as 2.9``
(failed exactly as the real torch_xla 2.9 fails: counts as a pass of fidelity),
``skipped`` (every test skipped itself, or the script started no rank: on a CPU that
proves nothing), ``fail`` (with the first error line and its cause), ``hang``. The table
is printed, written as Markdown with ``--markdown PATH``, and with ``--write-docs``
replaces the table between the conformance markers of the documentation's page on the
shim (``docs/reference/shim.md``, "The shim: where it departs from torch_xla 2.9"). Not
part of the test suite: it needs the upstream sources, and ``absl-py`` in the harness's
environment (``pip install .[conformance]``: most upstream files are absltests).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

from harness.topology import Topology, get_topology
from harness.world.fates import CAUGHT

REPO = Path(__file__).resolve().parent.parent
SHIM_PAGE = REPO / "docs" / "reference" / "shim.md"
BEGIN, END = "<!-- conformance:begin -->", "<!-- conformance:end -->"
DEFAULT_REF = "v2.9.0"
DEFAULT_TOPOLOGIES = ("single-host-8", "1x2", "1x1")

#: The files issue 11 names first: globs over upstream's tree at the ref.
FIRST = ("test/test_mp_*.py", "test/pjrt/test_mesh_service.py")
#: The other multi-process files (xmp.spawn, torch_xla.launch, run_multiprocess) that
#: can run on a CPU host: no TPU-only compilation, no dataset download, no SPMD.
WIDER = (
    "test/torch_distributed/test_torch_distributed_all_gather_xla_backend.py",
    "test/torch_distributed/test_torch_distributed_all_reduce_xla_backend.py",
    "test/torch_distributed/test_torch_distributed_bucketed_all_reduce_xla_backend.py",
    "test/torch_distributed/test_torch_distributed_multi_all_reduce_xla_backend.py",
    "test/torch_distributed/test_torch_distributed_reduce_scatter_xla_backend.py",
    "test/torch_distributed/test_ddp.py",
    "test/pjrt/test_ddp.py",
    "test/pjrt/test_runtime_multi_cpu.py",
    "test/pjrt/test_collective_ops_tpu.py",
    "test/eager/test_eager_all_reduce_in_place.py",
    "test/dynamo/test_traceable_collectives.py",
    "test/test_zero1.py",
)

#: Failures that are the real runtime's own: the test fails on torch_xla 2.9 the same way.
def _one_rank(topology: Topology) -> bool:
    return topology.world_size == 1


def _several_hosts(topology: Topology) -> bool:
    return topology.hosts > 1


#: Failures the real runtime has too: the file, the error its first line shows, and on
#: which topologies (None: all).
AS_REAL: dict[str, tuple[str, Callable[[Topology], bool] | None]] = {
    # rendezvous(replicas=) of a subgroup: xla_model.rendezvous raises this since PJRT
    "test/test_mp_rendezvous.py": ("ValueError: Only global rendezvous is supported", None),
    # all_reduce is a no-op in a world of one (the scale too: xla_model.all_reduce returns
    # its inputs), so the test's `t == j * world_size * scale` fails on a single TPU chip
    "test/torch_distributed/test_torch_distributed_bucketed_all_reduce_xla_backend.py":
        ("AssertionError", _one_rank),
    # the same no-op at world size one: no op executes, so EagerOpExecuteTime has no data
    "test/eager/test_eager_all_reduce_in_place.py":
        ("TypeError: 'NoneType' object is not subscriptable", _one_rank),
    # run_multiprocess returns this host's processes' values while rendezvous and
    # mesh_reduce see every host's: the test's expectation holds on one host only
    "test/pjrt/test_mesh_service.py": ("AssertionError", _several_hosts),
}

#: Why a run failed, by the first error line, so a re-run after a fix is read at a glance.
#: The first pattern that matches names the cause.
CAUSES: tuple[tuple[str, str], ...] = (
    (r"No module named 'absl'", "environment: absl-py is not installed (pip install harness[conformance])"),
    (r"No module named '(torch_xla[\w.]*)'", r"shim: module \1 is missing"),
    (r"cannot import name '(\w+)' from '(torch_xla[\w.]*)'", r"shim: \2.\1 is missing"),
    (r"module '(torch_xla[\w.]*)' has no attribute '(\w+)'", r"shim: \1.\2 is missing"),
    (r"backend='openxla' raised: ImportError",
     "shim: torch_xla.core.dynamo_bridge, which torch.compile's openxla backend imports, is "
     "missing"),
    (r"Rendezvous handler for xla:// already registered",
     "shim: torch_xla is imported a second time in the rank (bug 1)"),
    (r"Runtime is already initialized", "shim: a second spawn, or spawn after the device is "
                                        "used, is refused (bugs 2, 5)"),
    (r"uses the XLA runtime without xmp\.spawn",
     "harness: the launcher used the runtime before spawn on a host of several ranks"),
    (r"FileNotFoundError: .*site-packages",
     "harness: the rank's filesystem view hides installed code under /tmp"),
    (r"initialize the default process group twice",
     "shim: on one rank per host the function runs in the launcher, so a second launch "
     "finds the first one's process group (bug 5)"),
    (r"must be launched with torchrun", "upstream: the test runs only under torchrun"),
    (r"NotImplementedError", "shim: not modelled"),
)

#: A cause known from a diagnosis for a failure whose first error line does not say it:
#: used only when no pattern of CAUSES matches.
FILE_CAUSES: dict[str, str] = {
    "test/test_zero1.py":
        "shim: torch_xla.distributed.zero_redundancy_optimizer is not modelled: each test "
        "meets NotModelledError",
    "test/pjrt/test_mesh_service.py":
        "its tests expect every host's values from run_multiprocess, which returns this "
        "host's: on two hosts torch_xla 2.9 fails them too (AssertionError), and the first "
        "error shown is a TypeError its other tests expect",
    "test/pjrt/test_runtime_multi_cpu.py":
        "shim: PJRT's CPU client (PJRT_DEVICE=CPU, CPU_NUM_DEVICES=4 processes) is not "
        "modelled: the world's topology decides how many processes run",
    "test/test_mp_save.py":
        "shim: a device's random numbers come from the rank's CPU generator, seeded per "
        "process as a fresh one is; torch_xla 2.9's device generator starts from one seed on "
        "every device, so each host's master saves the same tensors (a listed departure)",
}

PASSED, AS_2_9, SKIPPED, FAILED, HANG = "pass", "as 2.9", "skipped", "fail", "hang"
_SUMMARY = re.compile(r"^(PASS|FAIL|ERROR|HANG|CRASH): (.*)$", re.M)
_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)
_OK = re.compile(r"^OK(?: \((.*)\))?\s*$", re.M)
_FAILED = re.compile(r"^FAILED \((.*)\)\s*$", re.M)
#: A failing test's block: its name (absltest names it again), a rule, its traceback.
_TEST_ERROR = re.compile(r"^(?:ERROR|FAIL): \S+[^\n]*\n(?:[^\n]*\n){0,2}?-{20,}\n"
                         r"(.*?)(?=\n(?:={20,}|-{20,})\n|\Z)", re.M | re.S)
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*$", re.M)


@dataclass
class Run:
    """One file at one topology: what the harness said, and how it reads."""

    file: str
    topology: str
    status: str
    why: str = ""  # the first error line, or what skipped
    cause: str = ""  # the failure's cause, from CAUSES
    note: str = ""  # e.g. "2 of 5 tests skipped themselves"
    seconds: float = 0.0


@dataclass
class Unittest:
    """What a unittest/absltest runner printed at its end, if anything."""

    ran: int | None = None
    ok: bool | None = None
    skipped: int = 0
    counts: dict[str, int] = field(default_factory=dict)


def read_unittest(output: str) -> Unittest:
    """The runner's closing lines: ``Ran 5 tests in 1.2s`` then ``OK (skipped=5)`` or
    ``FAILED (errors=1, skipped=2)``. The last runner's, if the output holds several."""
    ran = _RAN.findall(output)
    if not ran:
        return Unittest()
    tail = output[output.rfind("\nRan ") + 1:] if "\nRan " in output else output
    result = Unittest(ran=int(ran[-1]))
    ok, failed = _OK.search(tail), _FAILED.search(tail)
    if ok:
        result.ok, detail = True, ok.group(1) or ""
    elif failed:
        result.ok, detail = False, failed.group(1)
    else:
        return result
    for part in filter(None, (p.strip() for p in detail.split(","))):
        key, _, value = part.partition("=")
        if value.isdigit():
            result.counts[key] = int(value)
    result.skipped = result.counts.get("skipped", 0)
    return result


def first_test_error(output: str) -> str:
    """The last line of the first failing test's traceback, as unittest printed it."""
    block = _TEST_ERROR.search(output)
    if not block:
        return ""
    lines = _ERROR_LINE.findall(block.group(1))
    return lines[-1].strip() if lines else ""


def cause_of(why: str) -> str:
    for pattern, label in CAUSES:
        match = re.search(pattern, why)
        if match:
            return match.expand(label)
    return ""


def classify(file: str, topology: str, output: str, returncode: int | None,
             seconds: float = 0.0) -> Run:
    """One run from ``harness exec --output``'s text and exit code (``None``: it outlived
    its bound and was killed)."""
    run = Run(file, topology, FAILED, seconds=round(seconds, 1))
    summary = _SUMMARY.search(output)
    tests = read_unittest(output)
    if returncode is None or (summary and summary.group(1) == "HANG"):
        run.status = HANG
        run.why = summary.group(2) if summary else "outlived its bound; killed"
        return run
    if summary is None:
        run.why = _last_line(output) or f"harness exec exited {returncode} with no summary"
        run.cause = "harness: no summary line"
        return run
    outcome, detail = summary.groups()
    if outcome == "PASS":
        if detail.startswith("no rank started"):
            run.status, run.why = SKIPPED, "started no rank: " + (
                _skip_reason(output) or "the script ended before xmp.spawn")
        elif tests.ran == 0 or (tests.ran and tests.skipped >= tests.ran):
            run.status, run.why = SKIPPED, f"all {tests.ran} tests skipped themselves"
        else:
            run.status = PASSED
            if tests.skipped:
                run.note = f"{tests.skipped} of {tests.ran} tests skipped themselves"
        return run
    if CAUGHT in detail and tests.ok:
        # Ranks raised, and the tests that made them raise caught it (upstream's
        # assertRaises around run_multiprocess): the runner's verdict is the file's.
        run.status, run.note = PASSED, ("ranks raised as its tests expected: "
                                        + _trim(_unwrap(detail.split("; ")[0])))
        return run
    run.why = _trim((first_test_error(output) if "SystemExit" in detail or tests.ok is False
                     else "") or _unwrap(detail))
    expected, applies = AS_REAL.get(file, ("", None))
    if expected and expected in run.why and (applies is None or applies(get_topology(topology))):
        run.status, run.cause = AS_2_9, "fails as torch_xla 2.9 fails"
    else:
        run.cause = cause_of(run.why) or cause_of(output)
        run.cause = run.cause or FILE_CAUSES.get(file, "")
    return run


def _trim(why: str) -> str:
    """The error without what only this machine or torch's advice adds to it (dynamo's
    user-code frames, the path of the module an ImportError names)."""
    why = re.split(r"\s+(?:from user code:|Set TORCHDYNAMO_VERBOSE=1)", why, maxsplit=1)[0]
    return re.sub(r" \(/[^()]*\)$", "", why)  # an ImportError's file: this machine's path


def _unwrap(detail: str) -> str:
    """``launcher 0 raised X: m before starting its ranks (...)`` -> ``X: m``: the error."""
    match = re.match(r"(?:launchers?|ranks?) [\d,-]+ raised (.*?)"
                     r"(?: (?:before starting|after) (?:its|their) (?:ranks?).*)?$", detail)
    return match.group(1) if match else detail


def _skip_reason(output: str) -> str:
    """What a script that ended before spawning printed last (its own skip message)."""
    for line in reversed(output.splitlines()):
        text = line.strip()
        if text and not text.startswith(("─", "PASS:", "┃", "│", "└", "┏", "┡", "world ")):
            return text
    return ""


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


# -- the table ------------------------------------------------------------------------

def render_markdown(runs: list[Run], topologies: list[str], ref: str) -> str:
    """The table: one row per file, one column per topology, then why each run that did
    not pass failed (said once for the topologies it shares) and its cause."""
    files = list(dict.fromkeys(r.file for r in runs))
    at = {(r.file, r.topology): r for r in runs}
    head = ["file", *(_column(t) for t in topologies), "why (and cause)"]
    lines = [f"Upstream's multi-process tests at `{ref}`, unmodified, under "
             "`harness exec --profile current` (`python benchmarks/conformance.py`). `skipped`: "
             "the test skipped itself (not a TPU) or started no rank, which proves nothing; "
             "`as 2.9`: fails as the real runtime fails.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for file in files:
        cells = []
        for t in topologies:
            run = at.get((file, t))
            cells.append("-" if run is None else run.status + (" *" if run.note else ""))
        lines.append(f"| `{file.removeprefix('test/')}` | " + " | ".join(cells) + " | "
                     + _whys([at[(file, t)] for t in topologies if (file, t) in at]) + " |")
    first = [r for r in runs if is_first(r.file)]
    wider = [r for r in runs if not is_first(r.file)]
    lines += ["", f"The {len({r.file for r in first})} files named first: "
              + summary_line(first, topologies)] if first else [""]
    if wider:
        lines += ["", f"The {len({r.file for r in wider})} wider ones: "
                  + summary_line(wider, topologies)]
    notes = sorted({f"`{r.file.removeprefix('test/')}`: {r.note}" for r in runs if r.note})
    lines += [f"\\* {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _column(topology: str) -> str:
    size = get_topology(topology).world_size
    return f"{size} (`{topology}`)"


def _whys(runs: list[Run]) -> str:
    groups: dict[str, tuple[str, str, list[str]]] = {}
    for run in runs:  # one cause is said once, with its first error line (values may differ)
        if run.status != PASSED and run.why:
            groups.setdefault(run.cause or run.why, (run.why, run.cause, []))[2].append(
                run.topology)
    parts = []
    for why, cause, tops in groups.values():
        where = "" if len(tops) == len(runs) else f"{', '.join(tops)}: "
        parts.append(where + _cell(why) + (f" ({cause})" if cause else ""))
    return "; ".join(parts)


def _cell(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def summary_line(runs: list[Run], topologies: list[str]) -> str:
    parts = []
    for t in topologies:
        mine = [r for r in runs if r.topology == t]
        counts = {s: sum(r.status == s for r in mine) for s in (PASSED, AS_2_9, SKIPPED, FAILED,
                                                                 HANG)}
        parts.append(f"`{t}`: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
                     + f" of {len(mine)}")
    return "; ".join(parts) + "."


def replace_between_markers(text: str, table: str) -> str:
    """``text`` with what lies between the conformance markers replaced by ``table``."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} in {SHIM_PAGE.relative_to(REPO)}")
    return text[:start + len(BEGIN)] + "\n" + table + text[end:]


def render_terminal(runs: list[Run], topologies: list[str]) -> str:
    width = max(len(r.file) for r in runs)
    lines = [f"{'file':<{width}}  " + "  ".join(f"{t:>13}" for t in topologies)]
    at = {(r.file, r.topology): r for r in runs}
    for file in dict.fromkeys(r.file for r in runs):
        lines.append(f"{file:<{width}}  " + "  ".join(
            f"{at[(file, t)].status if (file, t) in at else '-':>13}" for t in topologies))
    lines.append("")
    for run in runs:
        if run.status != PASSED:
            lines.append(f"{run.file} @ {run.topology}: {run.status}: {run.why}"
                         + (f"  [{run.cause}]" if run.cause else ""))
    return "\n".join(lines)


# -- running ---------------------------------------------------------------------------

def extract(upstream: str, ref: str, dest: str) -> list[str]:
    """Upstream's ``test/`` at ``ref`` into ``dest``; the test files' paths (``test/...``).
    A git dir (bare or ``.git``) or a checkout; a tree without git is copied as it is."""
    git = _git_dir(upstream)
    if git is None:
        if ref != DEFAULT_REF:
            raise SystemExit(f"{upstream} is not a git repository: --ref cannot be applied")
        shutil.copytree(os.path.join(upstream, "test"), os.path.join(dest, "test"))
    else:
        tar = subprocess.run(["git", "--git-dir", git, "archive", "--format=tar", ref, "test"],
                             capture_output=True, check=False)
        if tar.returncode != 0:
            raise SystemExit(f"git archive {ref} test in {git}: "
                             f"{tar.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=BytesIO(tar.stdout)) as archive:
            archive.extractall(dest, filter="data")
    return sorted(str(p.relative_to(dest)) for p in Path(dest, "test").rglob("*.py"))


def _git_dir(path: str) -> str | None:
    for candidate in (os.path.join(path, ".git"), path):
        if os.path.isdir(os.path.join(candidate, "objects")) and \
                os.path.exists(os.path.join(candidate, "HEAD")):
            return candidate
    return None


def is_first(file: str) -> bool:
    """One of the files issue 11 names first."""
    return any(fnmatch.fnmatch(file, pattern) for pattern in FIRST)


def choose(tree: list[str], wider: bool, only: list[str]) -> list[str]:
    """The files to run, in a stable order: the first set, then the wider one."""
    first = sorted(f for f in tree if is_first(f))
    chosen = first + ([f for f in WIDER if f in tree and f not in first] if wider else [])
    if only:
        chosen = [f for f in chosen if any(fnmatch.fnmatch(f, f"*{o}*") for o in only)]
    return chosen


def run_one(root: str, file: str, topology: str, timeout: float) -> Run:
    """``harness exec`` of one file; bounded by the world's deadline plus a margin for
    the fork server's cold start."""
    env = dict(os.environ, COLUMNS="1000")  # one summary line, never wrapped
    argv = [sys.executable, "-m", "harness", "exec", "-t", topology, "--profile", "current",
            "--timeout", str(timeout), "--output", "--", "python", file]
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True,
                              timeout=timeout + 120, check=False)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = _text(exc.stdout) + _text(exc.stderr), None
    return classify(file, topology, output, code, time.monotonic() - start)


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True,
                        help="a clone of pytorch/xla: a git dir or a checkout")
    parser.add_argument("--ref", default=DEFAULT_REF, help="tag, branch or commit of upstream")
    parser.add_argument("-t", "--topology", action="append", dest="topologies",
                        help="repeatable; default: " + ", ".join(DEFAULT_TOPOLOGIES))
    parser.add_argument("--timeout", type=float, default=90.0,
                        help="each world's deadline (harness exec --timeout)")
    parser.add_argument("--wider", action="store_true",
                        help="also the other multi-process files that make sense on CPU")
    parser.add_argument("--only", action="append", default=[], help="files whose path has this")
    parser.add_argument("--markdown", help="write the Markdown table here")
    parser.add_argument("--write-docs", action="store_true",
                        help="replace the table between the conformance markers of "
                             "docs/reference/shim.md")
    args = parser.parse_args(argv)
    topologies = args.topologies or list(DEFAULT_TOPOLOGIES)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="conformance-") as root:
        files = choose(extract(args.upstream, args.ref, root), args.wider, args.only)
        if not files:
            print("no upstream file matched", file=sys.stderr)
            return 2
        for file in files:
            for topology in topologies:
                run = run_one(root, file, topology, args.timeout)
                runs.append(run)
                print(f"{run.status:>8}  {file} @ {topology} ({run.seconds} s)"
                      + (f": {run.why}" if run.why else ""), flush=True)
    print()
    print(render_terminal(runs, topologies))
    table = render_markdown(runs, topologies, args.ref)
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.write_docs:
        SHIM_PAGE.write_text(replace_between_markers(SHIM_PAGE.read_text(), table))
        print(f"\nwrote the table into {SHIM_PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
