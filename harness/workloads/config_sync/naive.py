"""naive-sync: the seed's current ``load_synced_config`` (train_tpu.py lines 592-628).

Reproduced as seeds 000 and 001 show it, bugs included, so that the harness can
show which faults it does not survive: rank 0 builds the config and gives it a
random run name (coolname), writes it to ``/tmp/temp_config.yaml``, every rank
meets at ``xm.rendezvous("config_save")`` (a process barrier, not a filesystem
one) and the other ranks read the file back. It assumes every rank sees rank 0's
``/tmp``: true on one host, false on a real v4-64 (8 hosts, 8 ``/tmp``).

Where the seeds leave a gap, the most literal reading is taken; each line says which seed
line it comes from ("000:"/"001:": seed files, mapped in docs/seeds.md; "line NNN": train_tpu.py).
"""

from __future__ import annotations

import os
from typing import Any

import coolname
import torch.distributed as dist
import yaml

from harness.workloads.config_sync.model import PretrainConfig, hydra_config_of

# The seed's module imports torch_xla in a try block and records whether it worked.
try:
    import torch_xla.core.xla_model as xm

    TPU_AVAILABLE = True
except ImportError:
    TPU_AVAILABLE = False


def load_synced_config(hydra_config: dict[str, Any], rank: int, world_size: int,
                       use_tpu: bool) -> PretrainConfig:
    """Rank 0 builds and names the config; the others read it from /tmp (seed lines 592-628)."""
    objects: list[Any] = [None]
    if rank == 0:
        config = PretrainConfig(**hydra_config)  # 001:226

        # Generate names (001:228-234; line 602 is the random run name, 001:186)
        if config.project_name is None:
            config.project_name = f"{os.path.basename(config.data_paths[0]).capitalize()}-TRM-TPU"
        if config.run_name is None:
            config.run_name = f"{config.arch.name.split('@')[-1]}_{coolname.generate_slug(2)}"
        if config.checkpoint_path is None:
            config.checkpoint_path = os.path.join("kellen", "checkpoints", config.project_name,
                                                  config.run_name)

        objects = [config]  # 001:236

    # Gap: the seeds show the TPU branch (001:65-76) and say it replaced torch.distributed's
    # broadcast_object_list, which does not work on XLA (issue #5492); both need world_size > 1.
    if world_size > 1 and use_tpu and TPU_AVAILABLE:
        if rank == 0:
            temp_config_path = "/tmp/temp_config.yaml"  # 001:66, line 615
            with open(temp_config_path, "w") as f:
                yaml.dump(objects[0].model_dump(), f)  # 001:68

        # Barrier to ensure file is written (001:70-71, line 619)
        xm.rendezvous("config_save")

        if rank != 0:
            temp_config_path = "/tmp/temp_config.yaml"  # 001:10, line 621
            with open(temp_config_path, "r") as f:  # noqa: UP015 - 001:11
                config_dict = yaml.safe_load(f)
            objects = [PretrainConfig(**config_dict)]  # 001:13
    elif world_size > 1:
        dist.broadcast_object_list(objects, src=0)

    return objects[0]  # 001:275, line 628


def run(inputs: dict[str, Any]) -> dict[str, Any]:
    """The harness's calling convention (see the package docstring) around the seed's code."""
    hydra_config = hydra_config_of(inputs)
    rank = xm.get_ordinal()
    world_size = xm.xrt_world_size()
    config = load_synced_config(hydra_config, rank, world_size, use_tpu=True)
    return config.model_dump()
