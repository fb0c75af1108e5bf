"""The pod's history recorder (harness/pod/recorder.py), checked against the simulator.

On a pod there is no coordinator: each rank wraps torch_xla's collectives and records its own
calls. The strongest check is that, installed in the ranks of a simulated world, the recorder
sees exactly the calls the coordinator records (op, tag, site and detail, in order, per rank)
for the reference targets and the xla backend's collectives: then a scenario's fault triggers
fire at the same calls on a pod. The helpers at the bottom run on the ranks, loaded as
``tests/pod/test_pod_recorder.py:name``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import ERROR, HANG, PASS, run_world
from harness.reports.diagnosis import describe
from harness.scenarios import find
from harness.topology import get_topology
from harness.workloads.config_sync import PRELOAD
from harness.workloads.config_sync import TARGETS as CONFIG_SYNC
from harness.workloads.config_sync.model import default_config
from harness.workloads.data_sharding import PRELOAD as SHARDING
from harness.workloads.data_sharding import TARGETS as SHARDING_TARGETS
from harness.workloads.registry import WORKLOADS

from support import REPO, TARGETS_DIR

HERE = Path(__file__).resolve()
DIST = str(TARGETS_DIR / "dist_targets.py")


def recorded_world(target: str, *args: Any, topology: str = "2x1", **kwargs: Any):
    return run_world(f"{HERE}:recorded", topology=topology, timeout=60, cwd=str(REPO),
                     args=(target, *args), preload=PRELOAD, **kwargs)


def coordinator_calls(result, rank: int) -> list[tuple]:
    return [("call", e.op, e.tag, e.site, e.detail) for e in result.history
            if e.kind == "call" and e.rank == rank]


def recorder_calls(result, rank: int) -> list[tuple]:
    return [tuple(c) for c in result.values[rank]["calls"] if c[0] == "call"]


def assert_same_history(result) -> int:
    """Every rank's recorded calls are the coordinator's; returns how many there were."""
    assert result.outcome == PASS, describe(result)
    total = 0
    for rank in range(len(result.ranks)):
        seen, recorded = coordinator_calls(result, rank), recorder_calls(result, rank)
        assert recorded == seen, f"rank {rank}"
        returns = [c for c in result.values[rank]["calls"] if c[0] == "return"]
        assert [(op, tag) for _, op, tag in returns] == [(c[1], c[2]) for c in seen], \
            "every call returned, once, in order"
        total += len(seen)
    return total


@pytest.mark.parametrize("name,topology", [("naive-sync", "single-host-8"),
                                           ("robust-sync", "v4-64")])
def test_the_recorder_sees_the_coordinators_calls_for_the_config_sync_targets(name, topology):
    inputs = {"config": default_config(), "sync_timeout_s": 5.0}
    result = recorded_world(CONFIG_SYNC[name], inputs, topology=topology)
    assert assert_same_history(result) >= 8
    ops = {c[1] for c in recorder_calls(result, 0)}
    assert "rendezvous" in ops


def test_the_recorder_sees_the_coordinators_calls_for_the_data_sharding_target():
    workload = WORKLOADS["data-sharding"]
    scenario = find("uneven-shards")
    topology = get_topology(scenario.topology)
    inputs = workload.inputs(scenario.inputs, topology)
    result = run_world(f"{HERE}:recorded", topology=topology, timeout=60, cwd=str(REPO),
                       args=(SHARDING_TARGETS["robust-loader"], inputs.for_target()),
                       preload=SHARDING, files=workload.setup(inputs, topology, 0))
    assert assert_same_history(result) >= 8
    assert "all_reduce" in {c[1] for c in recorder_calls(result, 0)}


def test_the_recorder_sees_the_coordinators_calls_for_every_xla_backend_collective():
    result = recorded_world(f"{DIST}:collectives", topology="2x2")
    assert assert_same_history(result) > 40
    ops = [c[1] for c in recorder_calls(result, 1)]
    assert ops[0] == "init_process_group"
    assert {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
            "collective_broadcast"} <= set(ops)


def test_the_recorder_sees_send_and_recv_as_the_coordinator_does():
    result = recorded_world(f"{DIST}:send_recv_ring", topology="4x1")
    assert_same_history(result)
    assert [c[1] for c in recorder_calls(result, 0)] == ["init_process_group", "send", "recv"]
    assert [c[1] for c in recorder_calls(result, 1)] == ["init_process_group", "recv", "send"]


def test_mesh_reduce_is_one_rendezvous_and_its_reduce_fn_records_its_own():
    result = recorded_world(f"{HERE}:mesh_reduce_then_more", topology="2x1")
    assert_same_history(result)
    calls = result.values[0]["calls"]
    assert [(c[0], c[1], c[2]) for c in calls] == [
        ("call", "rendezvous", "scores"), ("return", "rendezvous", "scores"),
        ("call", "all_reduce", None), ("return", "all_reduce", None),
        ("call", "rendezvous", "torch_xla.core.xla_model.do_on_ordinals"),
        ("return", "rendezvous", "torch_xla.core.xla_model.do_on_ordinals")]
    assert calls[0][3].startswith("test_pod_recorder.py:") and calls[0][3].endswith(
        "in mesh_reduce_then_more")
    assert calls[2][4] == {"tensors": ["float32[2]"]}


def test_on_call_raising_stops_the_collective_on_that_rank():
    result = recorded_world(f"{HERE}:raise_at", "second", topology="2x1")
    # rank 0 waits for rank 1 in 'second' for ever, as at a real rendezvous
    assert result.outcome == HANG and result.ranks[1].outcome == ERROR
    error = result.ranks[1].error
    assert error is not None and error["type"] == "RuntimeError"
    assert "refused rendezvous 'second'" in error["message"]
    # rank 1 never reached the coordinator with 'second'; rank 0 did and waits there alone
    tags = [(e.rank, e.tag) for e in result.history if e.kind == "call"]
    assert (0, "second") in tags and (1, "second") not in tags
    assert (1, "first") in tags


# -- the real group's target, under the shim ----------------------------------------

@pytest.mark.parametrize("mode", ["plain", "spawn", "plain-late"])
def test_the_shim_under_the_recorder_records_what_the_real_torch_xla_records(mode):
    """tests/pod/test_real_xla.py runs this script under the real torch_xla 2.9 and checks the
    same calls, results and wrappers: what a pod of real ranks records, a pod of shim ranks
    (``harness pod run --local``) records too."""
    from test_real_xla import TARGET, assert_clean_run

    result = run_world(argv=(str(TARGET), mode), topology="1x1", profile="current", timeout=60)
    assert result.outcome == PASS, describe(result)
    out = json.loads(result.hosts[0].stdout.strip().splitlines()[-1])
    assert Path(out["torch_xla"]).is_relative_to(REPO / "shims")
    assert_clean_run(out)


# -- one rank: install order, idempotence, a refusing hook, what is left alone ----

def one_rank(name: str, *args: Any) -> Any:
    result = run_world(f"{HERE}:{name}", topology="1x1", timeout=60, cwd=str(REPO), args=args,
                       preload=())
    assert result.outcome == PASS, describe(result)
    return result.values[0]


@pytest.mark.parametrize("order", ["import-first", "install-first"])
def test_install_works_whether_torch_xla_is_imported_before_or_after(order):
    seen = one_rank("install_in_order", order)
    assert seen["imported_at_install"] is (order == "import-first")
    assert seen["calls"] == [["rendezvous", "here", "test_pod_recorder.py:LINE in install_in_order",
                              {"payload_bytes": 3}], ["returned", "rendezvous"]]
    assert seen["payloads"] == [b"abc"]
    assert seen["marked"] == [True, True, True]


def test_install_twice_wraps_once_and_the_last_callbacks_win():
    seen = one_rank("install_twice")
    assert seen == {"same_wrapper": True, "wrapped_once": True, "first": [],
                    "second": [["rendezvous", "once"], ["returned", "rendezvous"]]}


def test_an_on_call_that_raises_keeps_the_wrapped_function_from_running():
    seen = one_rank("refused")
    assert seen == {"raised": "TimeoutError: rendezvous 'never'", "inner_ran": False,
                    "returned": []}


def test_a_forked_child_keeps_the_wrappers_and_records_through_its_own_callbacks():
    seen = one_rank("forked")
    assert seen == {"parent": [["rendezvous", "before"], ["rendezvous", "after"]],
                    "child": {"same_wrapper": True, "calls": [["rendezvous", "in-child"]]}}


def test_functions_that_are_not_collectives_are_left_alone():
    assert one_rank("left_alone") == {"xm": [], "xr": [], "wrapped": sorted(
        ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
         "collective_broadcast", "rendezvous", "xla_rendezvous", "mesh_reduce", "send", "recv"])}


# -- run on the ranks ------------------------------------------------------------

def recorded(target: str, *args: Any) -> dict[str, Any]:
    """Install the recorder, then run ``target``; return its calls as the recorder saw them."""
    from harness.pod import recorder
    from harness.rank.bootstrap import resolve_target

    calls: list[list[Any]] = []
    recorder.install(lambda op, tag, site, detail: calls.append(["call", op, tag, site, detail]),
                     lambda op, tag: calls.append(["return", op, tag]))
    resolve_target(target)(*args)
    return {"calls": calls}


def mesh_reduce_then_more() -> None:
    import torch
    import torch_xla.core.xla_model as xm

    def total(values: list[float]) -> float:
        return float(xm.all_reduce(xm.REDUCE_SUM, torch.tensor([sum(values), 1.0]))[0])

    xm.mesh_reduce("scores", 1.5, total)
    xm.do_on_ordinals(lambda: None)


def raise_at(tag: str) -> None:
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    from harness.pod import recorder

    def refuse(op: str, tag_: str | None, site: str | None, detail: dict[str, Any]) -> None:
        if xr.global_ordinal() == 1 and tag_ == tag:
            raise RuntimeError(f"refused {op} {tag_!r}")

    recorder.install(refuse, lambda op, tag: None)
    xm.rendezvous("first")
    xm.rendezvous("second")


def _log() -> tuple[list[list[Any]], Any, Any]:
    calls: list[list[Any]] = []
    return (calls, lambda op, tag, site, detail: calls.append([op, tag, site, detail]),
            lambda op, tag: calls.append(["returned", op]))


def install_in_order(order: str) -> dict[str, Any]:
    import sys

    from harness.pod import recorder

    if order == "import-first":
        import torch_xla.core.xla_model  # noqa: F401
        import torch_xla.distributed.xla_backend  # noqa: F401
    imported = "torch_xla.core.xla_model" in sys.modules
    calls, on_call, on_return = _log()
    recorder.install(on_call, on_return)
    import torch_xla.core.xla_model as xm
    from torch_xla.distributed.xla_backend import ProcessGroupXla
    from torch_xla._internal import rendezvous  # isort: skip - after the backend, which imports it

    payloads = xm.rendezvous("here", b"abc")
    line = sys._getframe().f_lineno - 1
    for call in calls:
        if len(call) == 4 and call[2]:
            call[2] = call[2].replace(f":{line} ", ":LINE ")
    return {"imported_at_install": imported, "calls": calls, "payloads": payloads,
            "marked": [getattr(f, "__harness_recorded__", False) for f in (
                xm.all_reduce, ProcessGroupXla.send, rendezvous.pjrt_rendezvous_handler)]}


def install_twice() -> dict[str, Any]:
    import torch_xla.core.xla_model as xm

    from harness.pod import recorder

    first, on_call, on_return = _log()
    recorder.install(on_call, on_return)
    wrapper = xm.rendezvous
    second: list[list[Any]] = []
    recorder.install(lambda op, tag, site, detail: second.append([op, tag]),
                     lambda op, tag: second.append(["returned", op]))
    xm.rendezvous("once")
    return {"same_wrapper": xm.rendezvous is wrapper,
            "wrapped_once": not hasattr(wrapper.__wrapped__, "__wrapped__"),
            "first": first, "second": second}


def refused() -> dict[str, Any]:
    import torch_xla.core.xla_model as xm

    from harness.pod import recorder

    inner = xm._exchange
    ran = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        ran.append(True)
        return inner(*args, **kwargs)

    xm._exchange = spy

    def refuse(op: str, tag: str | None, site: str | None, detail: dict[str, Any]) -> None:
        raise TimeoutError(f"{op} {tag!r}")

    returned: list[Any] = []
    recorder.install(refuse, lambda op, tag: returned.append(op))
    try:
        xm.rendezvous("never")
    except TimeoutError as exc:
        raised = f"TimeoutError: {exc}"
    return {"raised": raised, "inner_ran": bool(ran), "returned": returned}


def left_alone() -> dict[str, Any]:
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    from harness.pod import recorder

    xm_before = {n: getattr(xm, n) for n in dir(xm) if callable(getattr(xm, n, None))}
    xr_before = {n: getattr(xr, n) for n in dir(xr) if callable(getattr(xr, n, None))}
    recorder.install(lambda *a: None, lambda *a: None)
    changed = sorted(n for n, f in xm_before.items() if getattr(xm, n) is not f)
    return {"xm": [n for n in changed if not getattr(getattr(xm, n), "__harness_recorded__", False)],
            "xr": sorted(n for n, f in xr_before.items() if getattr(xr, n) is not f),
            "wrapped": changed}


def forked() -> dict[str, Any]:
    import json
    import os

    import torch_xla.core.xla_model as xm

    from harness.pod import recorder

    parent: list[list[Any]] = []
    recorder.install(lambda op, tag, site, detail: parent.append([op, tag]), lambda op, tag: None)
    xm.rendezvous("before")
    wrapper = xm.rendezvous
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a rank's own process, as a pod's launcher forks it
        try:
            child: list[list[Any]] = []
            recorder.install(lambda op, tag, site, detail: child.append([op, tag]),
                             lambda op, tag: None)
            xm.rendezvous("in-child")
            os.write(write, json.dumps({"same_wrapper": xm.rendezvous is wrapper,
                                        "calls": child}).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child_seen = json.loads(f.read())
    os.waitpid(pid, 0)
    xm.rendezvous("after")
    return {"parent": parent, "child": child_seen}
