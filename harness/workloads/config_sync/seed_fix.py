"""seed-fix-sync: the "Fixed Version" that seed 001 proposes, written as the seed writes it.

Seed 001 (docs/seeds.md) proposes one fix per issue of ``load_synced_config``; here they are
combined into the one function they all patch, and NOT repaired, so that the
harness finds what is still wrong with them:

- Issue 1 (001:26-54): the readers retry 5 times with exponential backoff
  (0.1 * 2**n s) on FileNotFoundError, yaml.YAMLError and ValueError (pydantic's
  ValidationError is a ValueError), then raise RuntimeError.
- Issue 2 (001:98-127): fsync, a flag file ``temp_config.yaml.ready`` and a
  100 x 10 ms polling loop. The seed calls ``os.fsync(f.fileno())`` AFTER the
  ``with`` block has closed ``f`` (001:105): that raises ValueError (I/O
  operation on closed file) on rank 0 every time, before the rendezvous, so
  the other ranks wait at ``xm.rendezvous("config_save")`` forever.
- Issue 3 (001:151-174): ``get_sync_directory()`` tries ``~/.cache/trm_distributed``
  ("guaranteed shared": it is not, every TPU VM has its own home) then ``/tmp``,
  probing each with a ``.test_write`` file that every rank writes and removes.
- Issue 4 (001:203-214): the run name from an md5 of arch, seed and batch size.
- Issue 5 (001:249-262): compute the names, then apply them ("immutable config").
- Issue 6 (001:290-334): asserts, rank 0 checks that the data paths exist, and
  every rank all-reduces ``int(md5, 16)`` as an int64 tensor: a 128-bit md5 does
  not fit an int64, so ``torch.tensor`` raises on every rank (ValueError "Overflow
  when unpacking long long" in torch 2.x, which the seed's ``except (AssertionError,
  RuntimeError)`` does not even catch to print its message).

Departures, each a choice of reading, none a repair of the seed's logic:
- The seed's function-local imports (``import os`` 001:104, ``import time``
  001:45/118, ``import hashlib`` 001:203/308) are module-level here. Inside the
  one function, ``import os`` would make ``os`` a local name and every rank would
  raise UnboundLocalError at its first ``os.`` (001:253 on rank 0) even at world
  size 1: a bug anyone meets on the first run and removes, which would hide the
  ones that only a multi-rank world shows.
- The flag file stays at ``/tmp/temp_config.yaml.ready`` as Issue 2 writes it
  (001:108, 119): Issue 3 replaces only ``temp_config_path`` (001:174).
- Issue 4's ``if config.run_name is None`` block (001:207-213) replaces the
  coolname fallback of Issue 5's ``run_name = ...`` line (001:254).
"""

from __future__ import annotations

import hashlib  # 001:203, 308 (function-local in the seed: see the module docstring)
import os  # 001:104 (function-local in the seed)
import time  # 001:45, 118 (function-local in the seed)
from typing import Any

import torch
import torch.distributed as dist
import yaml

from harness.workloads.config_sync.model import PretrainConfig, hydra_config_of

# The seed's module imports torch_xla in a try block and records whether it worked.
try:
    import torch_xla.core.xla_model as xm

    TPU_AVAILABLE = True
except ImportError:
    TPU_AVAILABLE = False


def get_sync_directory() -> str:  # 001:151
    """Get a directory that's guaranteed to be shared across workers"""
    # Try in order of preference
    candidates = [
        os.path.expanduser("~/.cache/trm_distributed"),  # Home directory (guaranteed shared)
        "/tmp",                                           # Temp (usually shared but not guaranteed)
    ]

    for candidate in candidates:
        try:
            os.makedirs(candidate, exist_ok=True)
            # Test write access
            test_file = os.path.join(candidate, ".test_write")
            with open(test_file, 'w') as f:
                f.write("test")
            os.remove(test_file)
            return candidate
        except (OSError, PermissionError):  # 001:168
            continue

    raise RuntimeError("Cannot find a shared writable directory for config sync")


def load_synced_config(hydra_config: dict[str, Any], rank: int, world_size: int,
                       use_tpu: bool) -> PretrainConfig:
    """The seed's function with every fix of seed 001 applied as written."""
    objects: list[Any] = [None]
    if rank == 0:
        config = PretrainConfig(**hydra_config)  # 001:250

        # Issue 4 (001:205-214): generate run_name based on config + seed, deterministically
        if config.run_name is None:
            # Combine all deterministic config elements
            seed_str = f"{config.arch.name}_{config.seed}_{config.global_batch_size}"
            seed_hash = hashlib.md5(seed_str.encode()).hexdigest()[:6]

            arch_name = config.arch.name.split('@')[-1]
            config.run_name = f"{arch_name}_{seed_hash}"
            # Now all workers will compute the same name!

        # Issue 5 (001:252-262): compute auto-generated values
        project_name = config.project_name or f"{os.path.basename(config.data_paths[0]).capitalize()}-TRM-TPU"
        run_name = config.run_name  # 001:254 with Issue 4's name in place of the coolname slug
        checkpoint_path = config.checkpoint_path or os.path.join("kellen", "checkpoints", project_name,
                                                                 run_name)

        # Apply computed values
        config.project_name = project_name
        config.run_name = run_name
        config.checkpoint_path = checkpoint_path

        objects = [config]

    if world_size > 1 and use_tpu and TPU_AVAILABLE:
        # Issue 3 (001:173-174): replaces "/tmp/temp_config.yaml" at lines 615 and 621
        sync_dir = get_sync_directory()
        temp_config_path = os.path.join(sync_dir, "temp_config.yaml")

        # Issue 2 (001:98-111)
        if rank == 0:
            with open(temp_config_path, 'w') as f:
                yaml.dump(objects[0].model_dump(), f)

            # Explicit filesystem sync to ensure data is written to disk
            os.fsync(f.fileno()) if hasattr(f, 'fileno') else None  # 001:105: f is closed here

            # Additional: use a flag file to signal completion
            flag_path = "/tmp/temp_config.yaml.ready"
            with open(flag_path, 'w') as flag_f:
                flag_f.write("ready")
            os.fsync(flag_f.fileno())  # 001:111: closed here too

        # Process barrier (001:113-114)
        xm.rendezvous("config_save")

        if rank != 0:
            # Wait for flag file to ensure rank 0 has finished (001:117-123)
            flag_path = "/tmp/temp_config.yaml.ready"
            for attempt in range(100):  # noqa: B007 - 001:120
                if os.path.exists(flag_path):
                    break
                time.sleep(0.01)

            # Issue 1 (001:26-54): the read, with retries and exponential backoff
            max_retries = 5
            retry_count = 0

            while retry_count < max_retries:
                try:
                    with open(temp_config_path, 'r') as f:  # noqa: UP015 - 001:33
                        config_dict = yaml.safe_load(f)

                    if config_dict is None:
                        raise ValueError("Config YAML is empty")

                    objects = [PretrainConfig(**config_dict)]
                    print(f"[Rank {rank}] Config loaded successfully")
                    break

                except (FileNotFoundError, yaml.YAMLError, ValueError) as e:
                    if retry_count < max_retries - 1:
                        print(f"[Rank {rank}] Retrying config load "
                              f"(attempt {retry_count + 1}/{max_retries}): {e}")
                        time.sleep(0.1 * (2 ** retry_count))  # Exponential backoff
                        retry_count += 1
                    else:
                        print(f"[Rank {rank}] FATAL: Failed to load config after {max_retries} attempts")
                        raise RuntimeError(f"Failed to sync config on rank {rank}: {e}") from e
                except Exception as e:
                    print(f"[Rank {rank}] FATAL: Unexpected error loading config: {e}")
                    raise
    elif world_size > 1:
        dist.broadcast_object_list(objects, src=0)

    # Issue 6 (001:290-334): validate the config
    config = objects[0]

    try:
        assert config is not None, "Config is None"
        assert config.data_paths, "No data paths specified"
        assert config.global_batch_size > 0, "Invalid batch size"
        assert config.epochs > 0, "Invalid epochs"

        if rank == 0:
            # Rank 0 validates data paths
            for path in config.data_paths:
                assert os.path.exists(path), f"Data path not found: {path}"

        # All workers verify they have the same config
        if world_size > 1 and use_tpu and TPU_AVAILABLE:
            config_hash = hashlib.md5(
                str(sorted(config.model_dump().items())).encode()
            ).hexdigest()

            # All-reduce to check for mismatches
            hashes = torch.tensor([int(config_hash, 16)], dtype=torch.int64)
            xm.all_reduce(xm.REDUCE_SUM, [hashes])

            expected_sum = int(config_hash, 16) * world_size
            if hashes[0].item() != expected_sum:
                raise RuntimeError(
                    f"Config mismatch on rank {rank}! "
                    f"Expected sum {expected_sum}, got {hashes[0].item()}"
                )

        if rank == 0:
            print("Config validation passed")
            print(f"  Project: {config.project_name}")
            print(f"  Run: {config.run_name}")
            print(f"  Checkpoint: {config.checkpoint_path}")

    except (AssertionError, RuntimeError) as e:
        print(f"[Rank {rank}] Config validation FAILED: {e}")
        raise

    return config


def run(inputs: dict[str, Any]) -> dict[str, Any]:
    """The harness's calling convention (see the package docstring) around the seed's code."""
    hydra_config = hydra_config_of(inputs)
    rank = xm.get_ordinal()
    world_size = xm.xrt_world_size()
    config = load_synced_config(hydra_config, rank, world_size, use_tpu=True)
    return config.model_dump()
