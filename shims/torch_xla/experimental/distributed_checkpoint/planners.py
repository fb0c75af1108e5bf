"""``SPMDSavePlanner`` and ``SPMDLoadPlanner``: torch_xla 2.9's planners, on the path its
code takes for everything that is not a sharded XLA tensor (all of a world's tensors).

They subclass torch's abstract planners, not the default ones, and build on torch's
default plan functions as torch_xla's do: the local plans of every process, duplicates
removed (the first process's copy of an item kept), index hints not rewritten, and the
flattening's mappings merged into the checkpoint's metadata.
"""

from __future__ import annotations

import dataclasses
import io
from collections import ChainMap
from typing import Any

import torch
from torch.distributed.checkpoint.default_planner import (
    create_default_global_load_plan,
    create_default_global_save_plan,
    create_default_local_load_plan,
    create_default_local_save_plan,
)
from torch.distributed.checkpoint.metadata import STATE_DICT_TYPE, Metadata, MetadataIndex
from torch.distributed.checkpoint.planner import (
    LoadPlan,
    LoadPlanner,
    ReadItem,
    SavePlan,
    SavePlanner,
    WriteItem,
    WriteItemType,
)
from torch.distributed.checkpoint.utils import find_state_dict_object
from torch_xla.experimental.distributed_checkpoint._helpers import (
    dedup_tensors,
    flatten_state_dict,
    narrow_tensor_by_index,
    set_element,
)


class SPMDSavePlanner(SavePlanner):
    """Plans a save of a state dict whose tensors each process holds whole."""

    def __init__(self) -> None:
        self.is_coordinator = False
        self.mappings: Any = None
        self.sharded_state_dict: dict[str, Any] = {}
        self.unsharded_state_dict: dict[str, Any] = {}

    def set_up_planner(self, state_dict: STATE_DICT_TYPE, storage_meta: Any = None,
                       is_coordinator: bool = False) -> None:
        self.is_coordinator = is_coordinator
        flat, self.mappings = flatten_state_dict(state_dict)
        self.sharded_state_dict = {}  # a world's process holds no sharded tensor
        self.unsharded_state_dict = dict(flat)

    def create_local_plan(self) -> SavePlan:
        plan = create_default_local_save_plan(self.unsharded_state_dict, self.is_coordinator)
        return dataclasses.replace(plan, planner_data=self.mappings)

    def create_global_plan(self, all_plans: list[SavePlan]) -> tuple[list[SavePlan], Metadata]:
        all_plans = dedup_tensors(all_plans)
        global_plan, metadata = create_default_global_save_plan(all_plans,
                                                                rewrite_index_hints=False)
        merged = dict(ChainMap(*[p.planner_data for p in global_plan]))
        return global_plan, dataclasses.replace(metadata, planner_data=merged)

    def finish_plan(self, new_plan: SavePlan) -> SavePlan:
        return new_plan

    def resolve_data(self, write_item: WriteItem) -> torch.Tensor | io.BytesIO:
        obj = self.lookup_object(write_item.index)
        return self.transform_object(write_item, obj)

    def lookup_object(self, index: MetadataIndex) -> Any:
        return self.unsharded_state_dict[index.fqn]

    def transform_object(self, write_item: WriteItem, obj: Any) -> Any:
        if write_item.type == WriteItemType.BYTE_IO:
            buffer = io.BytesIO()
            torch.save(obj, buffer)
            return buffer
        return obj


class SPMDLoadPlanner(LoadPlanner):
    """Plans a load into a state dict whose tensors each process holds whole, in place."""

    def __init__(self) -> None:
        self.metadata: Metadata | None = None
        self.is_coordinator = False
        self.original_state_dict: Any = None
        self.mappings: Any = None
        self.sharded_state_dict: dict[str, Any] = {}
        self.unsharded_state_dict: dict[str, Any] = {}

    def set_up_planner(self, state_dict: STATE_DICT_TYPE, metadata: Metadata | None = None,
                       is_coordinator: bool = False) -> None:
        self.metadata = metadata
        self.is_coordinator = is_coordinator
        self.original_state_dict = state_dict
        flat, self.mappings = flatten_state_dict(state_dict)
        self.sharded_state_dict = {}
        self.unsharded_state_dict = dict(flat)

    def create_local_plan(self) -> LoadPlan:
        return create_default_local_load_plan(self.unsharded_state_dict, self.metadata)

    def create_global_plan(self, global_plan: list[LoadPlan]) -> list[LoadPlan]:
        return create_default_global_load_plan(global_plan)

    def finish_plan(self, central_plan: LoadPlan) -> LoadPlan:
        return central_plan

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn],
                    torch.load(value))  # weights_only, as torch_xla calls it

    def resolve_tensor(self, read_item: ReadItem) -> torch.Tensor:
        tensor = self.lookup_tensor(read_item.dest_index)
        return self.transform_tensor(read_item, tensor)

    def lookup_tensor(self, index: MetadataIndex) -> torch.Tensor:
        return find_state_dict_object(self.unsharded_state_dict, index)

    def transform_tensor(self, read_item: ReadItem, tensor: torch.Tensor) -> torch.Tensor:
        return narrow_tensor_by_index(tensor, read_item.dest_offsets, read_item.lengths)

    def commit_tensor(self, read_item: ReadItem, tensor: torch.Tensor) -> None:
        return None
