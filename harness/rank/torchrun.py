"""``torchrun`` on every host: the worker a launch starts, and the environment it gives it.

``harness exec -- torchrun --nproc_per_node=1 train.py ...`` runs, on every host of the
world, what torchrun would start there: the script, in the host's launcher process, with
the variables torch's elastic agent sets for a worker (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, ``TORCHELASTIC_*``...).
As the real one: ``--nnodes`` defaults to 1, so every host's torchrun is a job of its own
(``env://`` then gives each host a group of one, on its own ``127.0.0.1``), and a
multi-node launch names its nodes with ``--node_rank`` (static) or gets them from the
rendezvous (``--rdzv_backend=c10d``: here, in host order). Departures: one worker per
host only (``--nproc_per_node=1``: the SPMD way); the agent's restarts
(``--max_restarts``) are not run, only told to the worker.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

COMMANDS = ("torchrun",)
MODULES = ("torch.distributed.run", "torch.distributed.launch")


class TorchrunError(ValueError):
    """A torchrun command line the harness cannot launch, with why."""


@dataclass(frozen=True)
class Launch:
    """A parsed torchrun command line."""

    nnodes: int
    nproc_per_node: int
    node_rank: int | None
    master_addr: str
    master_port: int
    rdzv_backend: str
    rdzv_endpoint: str
    rdzv_id: str
    max_restarts: int
    standalone: bool
    module: bool
    program: tuple[str, ...]  # the script (or module) and its arguments


def is_torchrun(argv: list[str] | tuple[str, ...]) -> bool:
    """Is this command a torchrun launch (``torchrun ...``, ``python -m torch.distributed.run``)?"""
    if not argv:
        return False
    if os.path.basename(argv[0]) in COMMANDS:
        return True
    return len(argv) >= 2 and argv[0] == "-m" and argv[1] in MODULES


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchrun", allow_abbrev=False, add_help=False,
                                exit_on_error=False)

    def option(*names: str, **kw: object) -> None:
        both = []
        for name in names:  # torchrun takes --nproc_per_node and --nproc-per-node alike
            both += [name, name.replace("_", "-")] if "_" in name else [name]
        p.add_argument(*dict.fromkeys(both), **kw)  # type: ignore[arg-type]

    option("--nnodes", default="1")
    option("--nproc_per_node", default="1")
    option("--node_rank", type=int, default=None)
    option("--master_addr", default="127.0.0.1")
    option("--master_port", type=int, default=29500)
    option("--rdzv_backend", default="static")
    option("--rdzv_endpoint", default="")
    option("--rdzv_id", default="none")
    option("--rdzv_conf", default="")
    option("--standalone", action="store_true")
    option("--max_restarts", type=int, default=0)
    option("--monitor_interval", default="0.1")
    option("--start_method", default="spawn")
    option("--role", default="default")
    option("--log_dir", default=None)
    option("--redirects", "-r", default="0")
    option("--tee", "-t", default="0")
    option("--local_addr", default=None)
    option("--logs_specs", default=None)
    option("--run_path", action="store_true")
    option("--module", "-m", action="store_true")
    option("--no_python", action="store_true")
    p.add_argument("program", nargs=argparse.REMAINDER)
    return p


def parse(argv: list[str] | tuple[str, ...]) -> Launch:
    """Read a torchrun command line (with the ``torchrun`` or ``-m MODULE`` in front)."""
    args = list(argv)[1:] if os.path.basename(argv[0]) in COMMANDS else list(argv)[2:]
    try:
        ns, unknown = _parser().parse_known_args(args)
    except (argparse.ArgumentError, SystemExit) as exc:
        raise TorchrunError(f"torchrun: {exc}") from None
    program = list(ns.program)
    if program[:1] == ["--"]:
        program = program[1:]
    if unknown and not program:
        raise TorchrunError(f"torchrun: unrecognised arguments {unknown}")
    if not program:
        raise TorchrunError("torchrun: no training script given")
    if ns.no_python:
        raise TorchrunError("torchrun --no_python is not modelled: the harness runs Python "
                            "scripts (drop --no_python)")
    nnodes = str(ns.nnodes)
    low, _, high = nnodes.partition(":")
    try:
        nodes = int(high or low)
        nproc = int(ns.nproc_per_node)
    except ValueError:
        raise TorchrunError(f"torchrun: --nnodes={nnodes!r} and --nproc_per_node="
                            f"{ns.nproc_per_node!r} must be numbers (an elastic range N:M "
                            f"runs M nodes here)") from None
    if ns.standalone:
        nodes = 1
    return Launch(nnodes=nodes, nproc_per_node=nproc, node_rank=ns.node_rank,
                  master_addr=ns.master_addr, master_port=ns.master_port,
                  rdzv_backend="c10d" if ns.standalone else ns.rdzv_backend,
                  rdzv_endpoint=ns.rdzv_endpoint, rdzv_id=ns.rdzv_id,
                  max_restarts=ns.max_restarts, standalone=ns.standalone, module=ns.module,
                  program=tuple(program))


def check(launch: Launch, hosts: int, ranks_per_host: int) -> None:
    """Can a world of ``hosts`` hosts run this launch on each of them?"""
    if launch.nproc_per_node != 1 or ranks_per_host != 1:
        raise TorchrunError(
            f"torchrun --nproc_per_node={launch.nproc_per_node} on a topology of "
            f"{ranks_per_host} process(es) per host: the harness launches one worker per "
            f"host (--nproc_per_node=1, as SPMD trainers run); use an SPMD topology such as "
            f"v4-64-spmd, or xmp.spawn for a process per chip")
    if launch.nnodes not in (1, hosts):
        raise TorchrunError(f"torchrun --nnodes={launch.nnodes} on a world of {hosts} hosts: "
                            f"give 1 (a job per host) or {hosts}")


def worker(launch: Launch, host: int, hostnames: list[str]) -> tuple[list[str], dict[str, str]]:
    """What torchrun on ``host`` starts: the program's argv (as ``python`` takes it) and
    the variables its agent sets for its one worker."""
    nodes = launch.nnodes
    node_rank = 0 if nodes == 1 else (launch.node_rank if launch.node_rank is not None
                                      and launch.rdzv_backend == "static" else host)
    if launch.rdzv_backend == "static":
        master_addr, master_port = launch.master_addr, launch.master_port
    else:  # the rendezvous's rank-0 agent names its own host and a port of its choosing
        master_addr = "localhost" if launch.standalone or nodes == 1 else hostnames[0]
        master_port = 29400 + 1
    world = nodes * launch.nproc_per_node
    env = {
        "LOCAL_RANK": "0", "RANK": str(node_rank), "GROUP_RANK": str(node_rank),
        "ROLE_RANK": str(node_rank), "ROLE_NAME": "default", "LOCAL_WORLD_SIZE": "1",
        "WORLD_SIZE": str(world), "GROUP_WORLD_SIZE": str(nodes), "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": str(launch.max_restarts),
        "TORCHELASTIC_RUN_ID": launch.rdzv_id,
        "TORCHELASTIC_USE_AGENT_STORE": str(launch.rdzv_backend != "static"),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    argv = (["-m"] if launch.module else []) + list(launch.program)
    return argv, env
