"""What makes a small world cheap must leave it the same world: a rank's torch seeded as
``torch.manual_seed`` seeds it, its tracebacks with their source lines (read from the
machine, never through the view or the fault plan), the shim whatever a preload
imported, and a world's end that leaves nothing and stops nothing it need not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness import PASS, run_world
from harness.rank import namespaces, sweep
from harness.rank.environment import seed_torch
from harness.reports.diagnosis import describe

from support import REPO, TARGETS_DIR, processes_of_world

TARGETS = TARGETS_DIR / "speed_targets.py"


def test_seed_torch_draws_what_manual_seed_draws():
    import torch

    seed_torch(torch, 1234)
    ours = torch.rand(6)
    torch.manual_seed(1234)
    assert torch.equal(ours, torch.rand(6))


def test_a_rank_is_seeded_without_queueing_seeds_for_devices_the_machine_lacks():
    import torch

    if any(getattr(torch, n).is_available() for n in ("cuda", "xpu", "mps", "mtia")):
        pytest.skip("an accelerator is available: torch.manual_seed runs as it is")
    first = run_world(f"{TARGETS}:torch_draws", topology="v4-8", timeout=30, seed=7)
    again = run_world(f"{TARGETS}:torch_draws", topology="v4-8", timeout=30, seed=7)
    assert first.outcome == PASS, describe(first)
    values = [r.value for r in first.ranks]
    assert all(v["queued"] == {"cuda": 0, "xpu": 0} for v in values), values
    # Every rank draws its own, as fresh processes do, and the same seed draws them again.
    assert len({tuple(v["draws"]) for v in values}) == len(values)
    assert [r.value["draws"] for r in again.ranks] == [v["draws"] for v in values]


def test_a_traceback_shows_its_source_read_from_the_machine_not_through_the_view():
    result = run_world(f"{TARGETS}:fails_with_a_traceback", topology="v4-8", timeout=30,
                       record_files=True)
    assert result.outcome != PASS
    for rank in result.ranks:
        assert rank.error is not None and "the config is torn" in rank.error["message"]
        # linecache found the line: the traceback quotes it
        assert 'raise ValueError("the config is torn")' in rank.error["traceback"]
        assert rank.stderr.count("Traceback (most recent call last)") == 1
    looked_at = {e.detail["path"] for e in result.history if e.kind == "file"}
    assert not any(p.endswith(".py") for p in looked_at), sorted(looked_at)


def test_a_preloaded_foreign_torch_xla_is_dropped_and_every_rank_gets_the_shim(tmp_path,
                                                                                monkeypatch):
    fake = tmp_path / "torch_xla"
    (fake / "core").mkdir(parents=True)
    (fake / "__init__.py").write_text("FOREIGN = True\n")
    (fake / "core" / "__init__.py").write_text("")
    (tmp_path / "uses_foreign_xla.py").write_text("import torch_xla.core\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p))
    result = run_world(f"{TARGETS}:which_torch_xla", topology="v4-8", timeout=30,
                       preload=("uses_foreign_xla",))
    assert result.outcome == PASS, describe(result)
    for rank in result.ranks:
        files = [f for f in rank.value.values() if f]
        assert files and all(str(tmp_path) not in f for f in files), rank.value


_HEAP_IN_HUGE_PAGES = """
from harness.rank.process import share_in_huge_pages

def huge_kb():
    with open("/proc/self/smaps_rollup") as f:
        return int(next(line for line in f if line.startswith("AnonHugePages:")).split()[1])

objects = [str(i) * 3 for i in range(1_500_000)]  # ~100 MB of Python objects
before = huge_kb()
asked = share_in_huge_pages()
print(before, huge_kb(), asked)
"""


def test_the_fork_servers_python_heap_is_mapped_in_huge_pages():
    """A fork of a server that holds torch copies a page table entry for each of its
    pages, and an exit frees them: in 2 MB pages, far fewer (bench_throughput's CPU)."""
    done = subprocess.run([sys.executable, "-c", _HEAP_IN_HUGE_PAGES], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "GLIBC_TUNABLES": ""})
    assert done.returncode == 0, done.stderr
    before, after, asked = map(int, done.stdout.split())
    if asked == 0:
        pytest.skip("this kernel maps no heap in huge pages on request (before Linux 6.1)")
    assert after - before >= 64 << 10, (before, after, asked)  # kB: most of the 100 MB


def test_a_world_that_ended_cleanly_needs_no_sweep_and_leaves_nothing(monkeypatch):
    """Its leader said it has no child left: the harness does not read every process's
    /proc for the world's mark (3 ms a world), and nothing of the world runs after it, the
    leader included (let exit after its "done", not found running, stopped and killed)."""
    swept: list[str] = []
    monkeypatch.setattr(sweep, "end_world", swept.append)
    for _ in range(4):
        result = run_world(f"{TARGETS}:torch_draws", topology="v4-8", timeout=30)
        assert result.outcome == PASS, describe(result)
        assert processes_of_world(result.world_id) == []
    assert swept == []


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_wait_gone_returns_once_the_processes_have_ended():
    procs = [_sleeper() for _ in range(3)]
    try:
        for p in procs:
            p.kill()
        assert sweep.wait_gone([p.pid for p in procs], limit=30)  # zombies count as gone
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert sweep.wait_gone([p.pid for p in procs], limit=30)  # reaped: gone already


def test_wait_gone_says_so_when_a_process_still_runs_at_its_limit():
    p = _sleeper()
    try:
        assert not sweep.wait_gone([p.pid], limit=0.05)
        assert sweep.running(p.pid)
    finally:
        p.kill()
        p.wait()


def test_the_benchmark_runs_and_prints_the_ratio_to_the_floor():
    bench = REPO / "benchmarks" / "bench_throughput.py"
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    done = subprocess.run([sys.executable, str(bench), "--worlds", "1", "--rounds", "1",
                           "--no-baseline"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "floor: fork 8 children, reap" in out and "x floor" in out
    assert "before the throughput work (5c1d321" in out
    assert textwrap.dedent("outcomes: ERROR x1") in out


@pytest.mark.parametrize("isolation", ["python", "kernel"])
def test_a_rank_is_handed_the_shim_the_fork_server_executed_and_its_import_acts_in_the_rank(
        isolation):
    """The fork server executes the shim's modules once (``warm.prepare``), the ``xla``
    backend's too when it holds torch.distributed; a rank's import is handed them, and does
    there what importing torch_xla does to a process: the environment it reads is the
    rank's, the ``xla`` backend and the shim's ``dist.new_group`` are the rank's torch's
    (never before it imports torch_xla), its locks wait on the world's clock."""
    if isolation == "kernel" and namespaces.unavailable():
        pytest.skip(f"no kernel isolation here: {namespaces.unavailable()}")
    # What a server prepares is fixed by its first preload ("a server's later preloads
    # change nothing of it"): a server an earlier test of this process started may have
    # prepared less. This asks what a server started for this world hands out.
    from harness.world import pool

    pool.shutdown()
    result = run_world(f"{TARGETS}:shim_loaders", topology="v4-8", timeout=30,
                       env={"XLA_METRICS_SAMPLES": "77"}, isolation=isolation)
    assert result.outcome == PASS, describe(result)
    assert sorted(r.value["ordinal"] for r in result.ranks) == [0, 1, 2, 3]
    for rank in result.ranks:
        value = rank.value
        assert value["before"] == {"torch_xla": False, "xla backend": False,
                                   "xla new_group": False}
        # (the shim's runtime module is handed out too, through the harness's hook that
        # installs the world's runtime in it: the ordinals above could not be read otherwise)
        assert {"torch_xla", "torch_xla.core.xla_model", "torch_xla.debug.metrics",
                "torch_xla.runtime"} <= set(value["handed"]), value["handed"]
        assert {"torch_xla.distributed.xla_backend",
                "torch_xla._internal.rendezvous"} <= set(value["handed"])  # torch.distributed's
        assert "torch_xla._internal.ops" not in value["handed"]  # it acts on torch: the rank's
        assert value["loaders"]["torch_xla.core.xla_model"] == "HeldCodeLoader"
        assert value["metrics_samples"] == 77
        assert value["xla backend"] and value["xla new_group"]
        assert value["locks"] == ["WorldLock", "WorldLock"]
        assert value["store lock"] == "WorldLock"


_HELD_TARGET = """
import sys

from harness.rank import warm


def run():
    module = sys.modules[__name__]
    return {"loader": type(module.__loader__).__name__, "version": VERSION,
            "held": module.__file__ in warm._held}  # by the fork server this rank came from
"""


_TWO_WORLDS = """
import json
import os
import sys

from harness import run_world

path, target = sys.argv[1:]
first = run_world(target + ":run", topology="v4-8", timeout=30)
pycache = os.path.join(os.path.dirname(path), "__pycache__")
compiled = [n for n in os.listdir(pycache) if n.startswith("held_target.")] \\
    if os.path.isdir(pycache) else []
with open(path) as f:
    text = f.read()
with open(path, "w") as f:
    f.write(text.replace("VERSION = 1\\n", "VERSION = 22  # edited after it was held\\n"))
again = run_world(target + ":run", topology="v4-8", timeout=30)
print(json.dumps({"first": [r.value for r in first.ranks], "compiled": compiled,
                  "again": [r.value for r in again.ranks]}))
"""


@pytest.mark.parametrize("given_as", ["file", "module"])
def test_a_target_is_compiled_once_by_the_fork_server_and_read_again_once_edited(tmp_path,
                                                                                 given_as):
    """Each rank compiled the target's code again (no ``.pyc`` is written back where the
    next rank reads it: kernel isolation keeps it in the host's copy, and none is written
    at all under ``PYTHONDONTWRITEBYTECODE``). The fork server, which compiles it now,
    writes no ``.pyc`` of it into the user's tree either: it runs here where Python would
    write one. A target named by its module (``pkg.mod:fn``, found from the working
    directory) is held as one given by its file is."""
    package = tmp_path / "heldtargets"
    package.mkdir()
    (package / "__init__.py").write_text("")
    path = package / "held_target.py"
    path.write_text("VERSION = 1\n" + _HELD_TARGET)
    target = str(path) if given_as == "file" else "heldtargets.held_target"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", _TWO_WORLDS, str(path), target],
                          capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=300)  # a guard: two small worlds take seconds, never this
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["first"] == [{"loader": "HeldCodeLoader", "version": 1, "held": True}] * 4
    assert seen["compiled"] == []
    assert [v["version"] for v in seen["again"]] == [22] * 4, seen["again"]


@pytest.fixture
def held_tree(tmp_path, monkeypatch):
    """A package held by ``warm.hold``, on ``sys.path``; forgotten afterwards."""
    from harness.rank import warm

    pkg = tmp_path / "heldpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text("VALUE = 1\n")
    before = dict(sys.path_importer_cache)
    assert warm.hold(str(tmp_path)) >= 3
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [n for n in sys.modules if n == "heldpkg" or n.startswith("heldpkg.")]:
        del sys.modules[name]
    sys.path_importer_cache.clear()
    sys.path_importer_cache.update(before)
    for path in [p for p in warm._held if p.startswith(str(tmp_path))]:
        del warm._held[path]


def test_held_code_is_what_an_unchanged_module_runs(held_tree):
    import heldpkg.sub.mod as mod

    from harness.rank import warm

    assert mod.VALUE == 1
    assert type(mod.__loader__) is warm.HeldCodeLoader
    assert mod.__file__ == str(held_tree / "sub" / "mod.py")
    assert mod.__loader__.get_code("heldpkg.sub.mod") is warm._held[mod.__file__][0]


def test_a_module_changed_since_it_was_held_is_read_from_its_file(held_tree):
    (held_tree / "sub" / "mod.py").write_text("VALUE = 22  # edited after the fork server held it\n")
    import heldpkg.sub.mod as mod

    assert mod.VALUE == 22


def test_wait_gone_works_with_descriptors_past_1024():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if max(soft, hard) < 1200:
        pytest.skip("this machine allows fewer than 1200 open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    null = os.open(os.devnull, os.O_RDONLY)
    held = [os.dup(null) for _ in range(1100)]  # a harness serving many worlds at once
    p = _sleeper()
    try:
        p.kill()
        assert sweep.wait_gone([p.pid], limit=30)
    finally:
        p.wait()
        for fd in (null, *held):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
