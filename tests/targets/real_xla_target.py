"""Run by tests/pod/test_real_xla.py under the REAL torch_xla 2.9 (PJRT_DEVICE=CPU, one device).

``python -I real_xla_target.py MODE [FAULT_JSON]``: installs the pod's recorder with the
harness's own fault engine behind ``on_call`` (as a pod rank does), then makes the collectives
below, in this process (MODE ``plain``) or in ``xmp.spawn(nprocs=1)`` (MODE ``spawn``); with
``-late`` (``plain-late``) torch_xla is imported before the recorder is installed.
Prints one JSON object: torch_xla's file and version, every call and return the recorder
saw, the engine's reports, and the exception that ended the run, if one did. Each call is on
a line marked ``# call: NAME`` so that the test can check the recorded sites.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from typing import Any

from harness.faults.engine import FaultEngine
from harness.faults.plan import make_plan
from harness.pod import recorder

events: list[list[Any]] = []
reports: list[Any] = []
faults = json.loads(sys.argv[2]) if len(sys.argv) > 2 else []
engine = FaultEngine(make_plan(faults, seed=0, world_size=1, hosts=1, home=os.path.expanduser("~")),
                     rank=0, host=0, notify=reports.append)


def on_call(op: str, tag: str | None, site: str | None, detail: dict[str, Any]) -> None:
    events.append(["call", op, tag, site, detail])
    if op not in recorder.POINT_TO_POINT:
        engine.before_collective(op, tag)


def on_return(op: str, tag: str | None) -> None:
    events.append(["return", op, tag])


# MODE plain-late: torch_xla imported before the recorder is installed; else after, as a pod
# rank does it.
LATE = sys.argv[1].endswith("-late")
if not LATE:
    recorder.install(on_call, on_return)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.distributed.xla_backend  # noqa: E402, F401 - registers the xla backend
import torch_xla.distributed.xla_multiprocessing as xmp  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402

if LATE:
    recorder.install(on_call, on_return)

results: dict[str, Any] = {}


def body(index: int = 0) -> None:
    device = torch_xla.device()
    results["rendezvous"] = xm.rendezvous("first", b"abc")  # call: rendezvous
    reduced = xm.all_reduce(xm.REDUCE_SUM, torch.ones(3, device=device))  # call: all_reduce
    results["all_reduce"] = reduced.cpu().tolist()
    results["mesh_reduce"] = xm.mesh_reduce("metrics", 2.5, sum)  # call: mesh_reduce
    gathered = xm.all_gather(torch.arange(2.0, device=device))  # call: all_gather
    results["all_gather"] = gathered.cpu().tolist()
    four = torch.ones(4, device=device)
    scattered = xm.reduce_scatter(xm.REDUCE_SUM, four, 1.0, 0, 1)  # call: reduce_scatter
    results["reduce_scatter"] = scattered.cpu().tolist()
    exchanged = xm.all_to_all(torch.arange(4.0, device=device), 0, 0, 1)  # call: all_to_all
    results["all_to_all"] = exchanged.cpu().tolist()
    permuted = xm.collective_permute(torch.arange(2.0, device=device), [[0, 0]])  # call: collective_permute
    results["collective_permute"] = permuted.cpu().tolist()
    broadcast = [torch.full((2,), 3.0, device=device)]
    xm.collective_broadcast(broadcast)  # call: collective_broadcast
    results["collective_broadcast"] = broadcast[0].cpu().tolist()
    dist.init_process_group("xla", init_method="xla://")  # call: init_process_group
    t = torch.full((2,), 4.0, device=device)
    dist.all_reduce(t)  # call: dist.all_reduce
    results["dist_all_reduce"] = t.cpu().tolist()
    dist.barrier()  # call: dist.barrier
    results["backend"] = dist.get_backend()
    dist.destroy_process_group()


def main() -> None:
    with socket.socket() as s:  # the xla:// store's port: a free one, not the fixed default
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    error = None
    try:
        if sys.argv[1].startswith("spawn"):
            xmp.spawn(body, nprocs=1)
        else:
            body()
    except Exception as exc:  # noqa: BLE001 - the exception is the observation
        frames = traceback.extract_tb(exc.__traceback__)
        error = {"type": type(exc).__name__, "message": str(exc),
                 "line": next((f.lineno for f in reversed(frames) if f.filename == __file__
                               and f.name == "body"), None)}
    handlers = sys.modules["torch.distributed.rendezvous"]._rendezvous_handlers
    wrapped = {"xm": sorted(n for n in dir(xm) if getattr(getattr(xm, n), "__harness_recorded__", False)),
               "xr": sorted(n for n in dir(xr) if getattr(getattr(xr, n), "__harness_recorded__", False)),
               "xla://": getattr(handlers["xla"], "__harness_recorded__", False)}
    print(json.dumps({"torch_xla": torch_xla.__file__, "version": torch_xla.__version__,
                      "wrapped": wrapped,
                      "events": events, "reports": [str(r) for r in reports],
                      "results": {k: repr(v) for k, v in results.items()}, "error": error}))


if __name__ == "__main__":
    main()
