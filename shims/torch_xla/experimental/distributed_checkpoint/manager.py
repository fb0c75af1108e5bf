"""``CheckpointManager``: torch_xla 2.9's, step by step (its ``manager.py``).

Checkpoints go to ``<path>/<step>/`` through the real ``torch.distributed.checkpoint``
(``FsspecWriter``/``FsspecReader``, the SPMD planners) on the manager's process group,
and rank 0 of that group then writes the step's ``.manager_metadata``, the commit
marker: a step directory without a readable one is ignored when a manager starts.
What the real one does, kept because trainers meet it:

- every process lists the base path at construction (it expects storage all share);
  the steps it tracks are the committed ones it found, ordered by the marker's time;
- rank 0 deletes an existing ``<path>/<step>`` before a save, with no barrier before
  the others write; only rank 0 releases old checkpoints (``max_to_keep``), so other
  processes keep tracking steps it deleted;
- ``save_async`` copies the state dict to the CPU on the caller's thread and saves it on
  one worker thread; ``join`` waits for it; a process that exits first loses the save;
- with ``chkpt_on_preemption`` (the default) the constructor connects every process to
  the XLA coordinator and activates its preemption sync manager, whose C++ handler
  catches SIGTERM from then on (the process no longer dies of it; a handler the target
  sets afterwards replaces it); ``should_save`` is true at the sync point every process
  agreed on once a notice came (``reached_preemption``).
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import fsspec
import torch.distributed as dist
import torch.distributed.checkpoint as dist_cp
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from fsspec.core import url_to_fs
from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter
from torch.distributed.checkpoint.metadata import STATE_DICT_TYPE
from torch_xla.experimental.distributed_checkpoint._helpers import _sharded_cpu_state_dict
from torch_xla.experimental.distributed_checkpoint.planners import SPMDLoadPlanner, SPMDSavePlanner

_MANAGER_METADATA_FILE = ".manager_metadata"


@dataclass
class _CheckpointMetadata:
    step: int  # the step the checkpoint was taken at
    ts: datetime  # when


class CheckpointManager:
    """Per-step checkpoints under one base path, async saves, a save at pre-emption."""

    def __init__(self, path: str, save_interval: int, max_to_keep: int | None = 0,
                 max_pending_async: int | None = 1, num_of_threads: int | None = 1,
                 process_group: Any = None, chkpt_on_preemption: bool = True) -> None:
        assert dist.is_initialized(), "A process group is required."
        assert save_interval > 0, "save_interval must be positive"
        assert max_pending_async > 0, "max_pending_async must be positive"
        assert max_to_keep >= 0, "max_to_keep must be non-negative"

        self.base_path = os.path.join(path, "")
        self.save_interval = save_interval
        self.max_to_keep = max_to_keep
        self.num_of_threads = num_of_threads
        self.chkpt_on_preemption = chkpt_on_preemption

        self.pg = process_group or dist.new_group()

        self._async_worker_pool = ThreadPoolExecutor(max_workers=1)
        self._async_sem = threading.Semaphore(max_pending_async)
        self._async_futures: list[Any] = []
        self._save_mutex = threading.Lock()

        self._tracked_chkpts = self._load_tracked_chkpts()

        if self.chkpt_on_preemption:
            torch_xla._XLAC._ensure_xla_coordinator_initialized(
                xr.process_index(), xr.process_count(), xr.get_master_ip())
            torch_xla._XLAC._activate_preemption_sync_manager()

    def _load_tracked_chkpts(self) -> deque[_CheckpointMetadata]:
        """The committed checkpoints under the base path, oldest first."""
        all_chkpts = []
        invalid_paths = []
        fs, raw_path = url_to_fs(self.base_path)
        if not fs.exists(raw_path):
            fs.mkdir(raw_path)
        else:
            for path in fs.ls(raw_path, detail=False):
                try:
                    with fs.open(os.path.join(path, _MANAGER_METADATA_FILE), "rb") as f:
                        all_chkpts.append(pickle.load(f))
                except:  # noqa: E722 - as torch_xla: whatever fails, the directory is ignored
                    invalid_paths.append(path)
        if invalid_paths:
            logging.warning(f"Ignoring invalid checkpoints: {invalid_paths}")
        return deque(sorted(all_chkpts, key=lambda m: m.ts))

    def _get_path(self, step: int) -> str:
        return os.path.join(self.base_path, str(step))

    def _delete_chkpt_at_step(self, step: int) -> None:
        if dist.get_rank(self.pg) == 0:
            path = self._get_path(step)
            fs, raw_path = url_to_fs(path)
            if fs.exists(raw_path):
                fs.rm(raw_path, recursive=True)

    def _release_oldest_checkpoints(self) -> None:
        if self.max_to_keep > 0:
            while len(self._tracked_chkpts) > self.max_to_keep:
                oldest = self._tracked_chkpts.popleft()
                self._delete_chkpt_at_step(oldest.step)

    def _wait_for_data(self) -> None:
        # torch_xla.sync() right after the trainer's own step marker: no graph is pending, so
        # the real one runs nothing; here it is no training step (no step time, not counted)
        torch_xla.torch_xla._marker(step=False)
        xm.wait_device_ops()

    def _save(self, step: int, state_dict: STATE_DICT_TYPE) -> None:
        with self._save_mutex:
            path = self._get_path(step)
            self._delete_chkpt_at_step(step)
            dist_cp.save(
                state_dict=state_dict,
                storage_writer=FsspecWriter(path, thread_count=self.num_of_threads,
                                            per_thread_copy_ahead=0),
                planner=SPMDSavePlanner(),
                process_group=self.pg,
            )
            metadata = _CheckpointMetadata(step=step, ts=datetime.now())
            self._tracked_chkpts.append(metadata)
            if dist.get_rank(self.pg) == 0:
                with fsspec.open(os.path.join(path, _MANAGER_METADATA_FILE), "wb") as f:
                    pickle.dump(metadata, f)
                self._release_oldest_checkpoints()

    def should_save(self, step: int) -> bool:
        """At every ``save_interval`` step, and at the pre-emption sync point."""
        preemption_detected = False
        if self.chkpt_on_preemption and self.reached_preemption(step):
            logging.warning(
                f"Preemption sync point reached at step {step}. Triggering a checkpoint.")
            preemption_detected = True
        return step % self.save_interval == 0 or preemption_detected

    def save(self, step: int, state_dict: STATE_DICT_TYPE, force: bool | None = False) -> bool:
        if self.should_save(step) or force:
            self._wait_for_data()
            self._save(step, state_dict)
            return True
        return False

    def save_async(self, step: int, state_dict: STATE_DICT_TYPE,
                   force: bool | None = False) -> bool:
        if self.should_save(step) or force:
            self._wait_for_data()
            cpu_state_dict = _sharded_cpu_state_dict(state_dict)
            self._async_sem.acquire()
            future = self._async_worker_pool.submit(self._save, step, cpu_state_dict)
            future.add_done_callback(lambda _: self._async_sem.release())
            self._async_futures.append(future)
            return True
        return False

    def restore(self, step: int, state_dict: STATE_DICT_TYPE) -> None:
        tracked_steps = {x.step for x in self._tracked_chkpts}
        assert step in tracked_steps, \
            f"Cannot restore from untracked step {step}. Valid steps are: {tracked_steps}"
        dist_cp.load(state_dict=state_dict, storage_reader=FsspecReader(self._get_path(step)),
                     planner=SPMDLoadPlanner(), process_group=self.pg)

    def all_steps(self) -> list[int]:
        return sorted(x.step for x in self._tracked_chkpts)

    def join(self) -> None:
        wait(self._async_futures)

    def reached_preemption(self, step: int) -> bool:
        assert self.chkpt_on_preemption, (
            "Preemption detection not enabled. Please set `chkpt_on_preemption` "
            " when creating the CheckpointManager")
        return torch_xla._XLAC._sync_point_reached(step)
