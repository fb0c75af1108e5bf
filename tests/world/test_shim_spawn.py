"""How the shim's ``xmp.spawn`` and ``torch_xla.launch`` start processes, against
torch_xla 2.9's ``pjrt.spawn``: one copy of torch_xla per rank, a fresh set of
ranks for every spawn of a launcher, ``nprocs=1`` as a world of one in the
launcher, and a child process per device even on a host of one chip."""

from __future__ import annotations

import pytest

from harness import ERROR, HANG, PASS, run_world
from harness.reports.diagnosis import describe

ALREADY = "Runtime is already initialized. Do not use the XLA device before calling xmp.spawn."

# -- bug 1: an import inside the rank function ---------------------------------------

IMPORT_INSIDE = """
import sys
order = sys.argv[1] if len(sys.argv) > 1 else "none"
if order == "torch-first":
    import torch, torch.distributed
import torch_xla.distributed.xla_multiprocessing as xmp
if order == "dist-after":
    import torch.distributed

def _mp_fn(index):
    import torch
    import torch.distributed as dist
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.xla_backend  # noqa: F401
    assert xmp is sys.modules["torch_xla.distributed.xla_multiprocessing"], "two copies of xmp"
    assert torch_xla is sys.modules["torch_xla"]
    dist.init_process_group("xla", init_method="xla://")
    t = xm.all_reduce("sum", torch.ones(2))
    return (dist.get_backend(), t.tolist())

if __name__ == "__main__":
    xmp.spawn(_mp_fn)
"""


@pytest.mark.parametrize("order", ["torch-first", "dist-after", "none"])
def test_exec_a_rank_imports_torch_xla_inside_its_function_once(tmp_path, order):
    """Real spawn imports torch_xla once per worker: the rank keeps the launcher's modules,
    so the ``xla`` backend is not registered a second time (no "already registered")."""
    script = tmp_path / "train.py"
    script.write_text(IMPORT_INSIDE)
    result = run_world(argv=(str(script), order), topology="1x2", timeout=60)
    assert result.outcome == PASS, describe(result)
    assert [r.outcome for r in result.ranks] == [PASS, PASS]


API_TARGET = """
import sys
import torch_xla.core.xla_model as xm_outer

def fn():
    import torch
    import torch.distributed as dist
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.xla_backend  # noqa: F401
    assert xm is xm_outer
    dist.init_process_group("xla", init_method="xla://")
    return xm.all_reduce("sum", torch.ones(1)).tolist()
"""


def test_api_a_target_imports_torch_xla_again_inside_its_function(tmp_path):
    target = tmp_path / "target.py"
    target.write_text(API_TARGET)
    result = run_world(f"{target}:fn", topology="2x1", timeout=60)
    assert result.outcome == PASS, describe(result)
    assert result.values == [[2.0], [2.0]]


# -- bug 2: a launcher that spawns more than once -------------------------------------

SPAWN_AGAIN = """
import os, sys
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index, n):
    got = xm.rendezvous("round", f"{n}:{index}".encode())
    print(n, b",".join(got).decode(), os.getpid(), flush=True)

if __name__ == "__main__":
    for n in range(3):
        if n == 1:
            torch_xla.launch(_mp_fn, args=(n,))
        else:
            xmp.spawn(_mp_fn, args=(n,))
    print("launcher done", flush=True)
"""


def test_exec_each_spawn_of_a_launcher_runs_a_fresh_set_of_its_ranks(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SPAWN_AGAIN)
    result = run_world(argv=(str(script),), topology="2x2", timeout=60)
    assert result.outcome == PASS, describe(result)
    assert [h.stdout for h in result.hosts] == ["launcher done\n"] * 2
    for r in result.ranks:
        lines = [line.split() for line in r.stdout.splitlines() if not line.startswith("---")]
        # every round pairs with the same round of every other host
        assert [line[:2] for line in lines] == [
            [str(n), ",".join(f"{n}:{i}" for i in range(4))] for n in range(3)], r.stdout
        assert len({line[2] for line in lines}) == 3  # a new process each time
    spawns = [e for e in result.history if e.kind == "spawn"]
    assert sorted((e.rank, e.detail["round"]) for e in spawns) == [
        (r, n) for r in range(4) for n in (1, 2)]


ROUNDS_APART = """
import sys
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index, n):
    if n == 0 and index == 0:
        raise ValueError("rank 0 gives up before the rendezvous")
    return xm.rendezvous(f"round {n}", b"x")

if __name__ == "__main__":
    try:
        xmp.spawn(_mp_fn, args=(0,))
    except ValueError:
        xmp.spawn(_mp_fn, args=(1,))  # only host 0 gets here: host 1's rank waits in round 0
"""


def test_exec_a_later_spawn_never_completes_an_earlier_rounds_collective(tmp_path):
    """Rank 1 waits in round 0 for rank 0, which raised; rank 0's life in host 0's second
    spawn must not pair with it: a real spawn's processes join a runtime of their own."""
    script = tmp_path / "train.py"
    script.write_text(ROUNDS_APART)
    result = run_world(argv=(str(script),), topology="2x1", timeout=60)
    assert result.outcome == HANG, describe(result)
    report = result.hang_report or ""
    assert "rank 1 waits in rendezvous 'round 0'" in report, report
    assert "rank 0 waits in rendezvous 'round 1'" in report, report
    # the report shows rank 0's failed first life, not only its last
    assert result.ranks[0].outcome == ERROR
    assert result.ranks[0].error["message"] == "rank 0 gives up before the rendezvous"


# -- bug 4: nprocs=1 on a host of several ranks -----------------------------------------

SINGLE = """
import sys
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr

def _mp_fn(index):
    total = xm.all_reduce("sum", torch.ones(2)).tolist()
    print(index, xr.world_size(), xr.global_ordinal(), xr.local_ordinal(), xr.host_index(),
          total, xm.rendezvous("one", b"x"), flush=True)

if __name__ == "__main__":
    if sys.argv[1] == "launch":
        torch_xla.launch(_mp_fn, debug_single_process=True)
    else:
        xmp.spawn(_mp_fn, nprocs=1)
    xmp.spawn(_mp_fn, nprocs=1)  # the real one initialises the runtime again: fine
    try:
        xmp.spawn(_mp_fn)
    except RuntimeError as exc:  # but a spawn of every device now finds it in use
        print("refused:", exc, flush=True)
"""


@pytest.mark.parametrize("how", ["spawn", "launch"])
def test_exec_nprocs_1_runs_fn_0_in_the_launcher_as_a_world_of_one(tmp_path, how):
    script = tmp_path / "train.py"
    script.write_text(SINGLE)
    result = run_world(argv=(str(script), how), topology="2x2", timeout=60)
    assert [h.outcome for h in result.hosts] == [PASS, PASS], describe(result)
    for h in result.hosts:
        one = f"0 1 0 0 {h.rank} [1.0, 1.0] [b'x']"
        assert h.stdout.splitlines() == [one, one, f"refused: {ALREADY}"], h.stdout
    assert result.ranks == []  # no rank of the 4-rank world started
    assert result.single_hosts == [0, 1]
    assert result.detail() == ("no rank started: launchers 0-1 ran the script to its end "
                               "(exit 0), each running the function itself as a world of one "
                               "(xmp.spawn with nprocs=1)")


# -- bug 5: one rank per host ------------------------------------------------------------

DEVICE_FIRST = """
import os, sys
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index):
    print("fn", index, os.getpid(), flush=True)
    return os.getpid()

if __name__ == "__main__":
    print("launcher", os.getpid(), flush=True)
    if sys.argv[1] == "device-first":
        xm.xla_device()
    xmp.spawn(_mp_fn)
"""


def test_exec_spawn_on_a_host_of_one_chip_starts_a_child_process(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(DEVICE_FIRST)
    result = run_world(argv=(str(script), "spawn"), topology="2x1", timeout=60)
    assert result.outcome == PASS, describe(result)
    for r, h in zip(result.ranks, result.hosts):
        launcher_pid = int(h.stdout.split()[1])
        assert r.value != launcher_pid
        if result.isolation == "python":  # else r.value is the world's PID namespace's
            assert r.pid == r.value
        assert r.stdout == f"fn {r.rank} {r.value}\n"


def test_exec_using_the_device_before_spawn_is_refused_on_a_host_of_one_chip(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(DEVICE_FIRST)
    result = run_world(argv=(str(script), "device-first"), topology="2x1", timeout=60)
    assert result.outcome == ERROR
    for h in result.hosts:
        assert h.error["type"] == "RuntimeError" and h.error["message"] == ALREADY
        assert "fn" not in h.stdout


def test_exec_a_launcher_that_uses_the_device_after_its_spawn_is_told_why(tmp_path):
    """A departure, named: the launcher cannot become the rank its spawned processes were."""
    script = tmp_path / "train.py"
    script.write_text(DEVICE_FIRST + "    xm.xla_device()\n")
    result = run_world(argv=(str(script), "spawn"), topology="2x1", timeout=60)
    assert [r.outcome for r in result.ranks] == [PASS, PASS]
    for h in result.hosts:
        assert h.outcome == ERROR
        assert "uses the XLA runtime itself after its xmp.spawn" in h.error["message"]


ASKS_FIRST = """
from torch_xla._internal import tpu
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr

# upstream's skipIf decorators ask at import, in the launcher, before any spawn
print(xr.device_type(), tpu.version(), tpu.num_tpu_workers(), tpu.num_available_chips(),
      tpu.num_expected_global_devices(), tpu.worker_id(), flush=True)

def _mp_fn(index):
    pass

if __name__ == "__main__":
    xmp.spawn(_mp_fn)
"""


def test_exec_asking_about_the_host_before_spawn_does_not_initialise_the_runtime(tmp_path):
    """The real _internal.tpu reads PCI devices and the metadata server: a launcher that asks
    before its xmp.spawn may still spawn (it was refused as 'uses the XLA runtime')."""
    script = tmp_path / "train.py"
    script.write_text(ASKS_FIRST)
    result = run_world(argv=(str(script),), topology="2x2", timeout=60, profile="current")
    assert result.outcome == PASS, describe(result)
    assert [h.stdout.strip() for h in result.hosts] == ["TPU 4 2 2 4 0", "TPU 4 2 2 4 1"]
