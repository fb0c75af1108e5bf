"""Topologies: how many hosts, how many ranks per host, and what each rank's
environment looks like on a real TPU VM.

A rank's environment is built here and nowhere else, so the shim and the
target see exactly what a PJRT worker (or the legacy ``xla_dist`` launcher)
would export on that host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.vocabulary import MAX_RANKS

__all__ = ["Topology", "TOPOLOGIES", "get_topology", "PROFILES"]

#: API profiles of the shim, oldest first: ``legacy`` is what the seed's code was written
#: against (torch_xla 2.0, XRT era, ``get_ordinal``/``xrt_world_size`` present); ``2.7`` and
#: ``2.8`` are those releases; ``current`` is torch_xla 2.9. The release each one is lives
#: in the shim (``torch_xla._internal.link.RELEASES``), which answers every API difference.
PROFILES = ("legacy", "2.7", "2.8", "current")

# Variables a real TPU VM / PJRT worker may carry; a rank's environment never
# inherits them from the machine the harness runs on.
_FOREIGN_PREFIXES = ("XRT_", "PJRT_", "TPU_", "XLA_", "CLOUD_TPU_", "HARNESS_")
_FOREIGN_NAMES = ("TPUVM_MODE", "WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR",
                  "MASTER_PORT", "LOCAL_WORLD_SIZE", "X_NUM_DEVICES")


@dataclass(frozen=True)
class Topology:
    """One emulated slice: ``hosts`` x ``ranks_per_host`` processes. ``spmd``: one process
    per host addressing every chip of its host, as torch_xla's SPMD runs (``xr.use_spmd()``);
    else each process addresses one chip, as PJRT's ``xmp.spawn`` runs."""

    name: str
    hosts: int
    ranks_per_host: int
    chips_per_host: int = 4
    accelerator: str = "v4"
    spmd: bool = False

    @property
    def devices_per_process(self) -> int:
        return self.chips_per_host if self.spmd else 1

    @property
    def world_size(self) -> int:
        return self.hosts * self.ranks_per_host

    def host_of(self, rank: int) -> int:
        return rank // self.ranks_per_host

    def local_rank(self, rank: int) -> int:
        return rank % self.ranks_per_host

    def ranks_of_host(self, host: int) -> range:
        start = host * self.ranks_per_host
        return range(start, start + self.ranks_per_host)

    def hostname(self, host: int) -> str:
        return f"t1v-n-harness-w-{host}"

    def host_environment(self, host: int, profile: str) -> dict[str, str]:
        """What every process on ``host`` sees, before any rank starts.

        Under the legacy profile these are the variables ``xla_dist`` exported
        on each host; under PJRT only ``TPU_WORKER_ID`` and friends exist.
        """
        env = {
            "PJRT_DEVICE": "TPU",
            "TPU_WORKER_ID": str(host),
            "TPU_WORKER_HOSTNAMES": ",".join(self.hostname(h) for h in range(self.hosts)),
            "TPU_ACCELERATOR_TYPE": f"{self.accelerator}-{self.hosts * self.chips_per_host * 2}",
            "HOSTNAME": self.hostname(host),
        }
        if profile == "legacy":
            env.update({
                "XRT_SHARD_WORLD_SIZE": str(self.hosts),
                "XRT_SHARD_ORDINAL": str(host),
                "XRT_LOCAL_WORKER": f"c_localservice:{host}",
                "XRT_MESH_SERVICE_ADDRESS": f"{self.hostname(0)}:8477",
                "TPU_NUM_DEVICES": str(self.chips_per_host),
                "CLOUD_TPU_TASK_ID": str(host),
                "TPUVM_MODE": "1",
            })
        return env

    def rank_environment(self, rank: int, profile: str) -> dict[str, str]:
        """The environment of one rank process, as PJRT's spawn sets it (an SPMD process is
        started on its host as any program is: the host's environment, every chip its own)."""
        host, local = self.host_of(rank), self.local_rank(rank)
        env = self.host_environment(host, profile)
        if self.spmd:
            return env
        port0 = 8476
        env.update({
            "PJRT_LOCAL_PROCESS_RANK": str(local),
            "PJRT_LOCAL_PROCESS_COUNT": str(self.ranks_per_host),
            "TPU_VISIBLE_CHIPS": str(local),
            "TPU_PROCESS_BOUNDS": _process_bounds(self.ranks_per_host, self.hosts),
            "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
            "CLOUD_TPU_TASK_ID": str(host * self.ranks_per_host + local),
            "TPU_PROCESS_PORT": str(port0 + local),
            "TPU_PROCESS_ADDRESSES": ",".join(
                f"localhost:{port0 + i}" for i in range(self.ranks_per_host)),
        })
        return env


def _process_bounds(ranks_per_host: int, hosts: int) -> str:
    # A v4 host holds a 2x2x1 block of chips; hosts stack along z.
    if ranks_per_host == 4:
        return f"2,2,{hosts}"
    if ranks_per_host == 2:
        return f"2,1,{hosts}"
    return f"1,1,{hosts}"


def clean_environment(environ: dict[str, str]) -> dict[str, str]:
    """The machine's environment without anything a TPU VM would set itself."""
    return {k: v for k, v in environ.items()
            if not k.startswith(_FOREIGN_PREFIXES) and k not in _FOREIGN_NAMES}


TOPOLOGIES: dict[str, Topology] = {
    t.name: t for t in (
        Topology("single-host-8", hosts=1, ranks_per_host=8, chips_per_host=8),
        Topology("v4-8", hosts=1, ranks_per_host=4),
        Topology("v4-64", hosts=8, ranks_per_host=1),
        Topology("v4-64-pjrt", hosts=8, ranks_per_host=4),
        Topology("v6e-256", hosts=64, ranks_per_host=4, accelerator="v6e"),
        Topology("v4-16-spmd", hosts=2, ranks_per_host=1, spmd=True),
        Topology("v4-64-spmd", hosts=8, ranks_per_host=1, spmd=True),
        Topology("v6e-256-spmd", hosts=64, ranks_per_host=1, accelerator="v6e", spmd=True),
    )
}

_HOSTS_X_RANKS = re.compile(r"^(\d+)x(\d+)$")


def get_topology(name: str | Topology) -> Topology:
    """A named topology, or ``HxR`` for H hosts of R ranks each."""
    if isinstance(name, Topology):
        return name
    if name in TOPOLOGIES:
        return TOPOLOGIES[name]
    m = _HOSTS_X_RANKS.match(name)
    if m:
        hosts, ranks = int(m.group(1)), int(m.group(2))
        if hosts < 1 or ranks < 1:
            raise ValueError(f"topology {name!r}: hosts and ranks per host must be >= 1")
        if hosts * ranks > MAX_RANKS:
            raise ValueError(f"topology {name!r}: {hosts * ranks} ranks is more than {MAX_RANKS}")
        return Topology(name, hosts=hosts, ranks_per_host=ranks)
    known = ", ".join(TOPOLOGIES)
    raise ValueError(f"unknown topology {name!r}: use one of {known}, or HxR (e.g. 8x1)")
