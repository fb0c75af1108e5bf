"""The harness's side of a user's data-sharding target: it runs in every rank.

A user's target (``--target mypkg/data.py:make_loader --workload data-sharding``)
comes in one of two shapes (see the package docstring for the contract):

- a **loader factory**: a class or function taking some of ``data_dir``,
  ``rank``, ``num_replicas`` (or ``world_size``), ``seed`` and
  ``global_batch_size`` by name, and returning the rank's loader: an iterable
  of batches (an ``IterableDataset``, a ``DataLoader``, a generator) or a
  map-style dataset (``__len__`` and ``__getitem__``: this rank's samples).
  The harness builds it twice (the epoch, then a restart: a fresh loader with
  the same seed), runs one all-reducing training step per batch, reads the
  sample ids and returns the dict the checker judges;
- a **run function**, ``run(inputs: dict) -> dict``, which does all that
  itself and returns the dict (the reference targets' shape).

Which one: the target's ``harness_contract`` attribute (``"loader"`` or
``"run"``) when it has one; otherwise a class is a loader, and a function is a
run function when it takes exactly one parameter that is none of the names
above (``run(inputs)``), a loader factory when its parameters are among them.
Anything else is a contract violation, reported by name, never guessed.

A contract violation (a parameter the harness cannot supply, a batch without
sample ids, a loader that is not iterable) is returned to the checker as
``{"contract_violation": "..."}``, which it reports as a FAIL naming the
contract: it is not the loud error a fault scenario expects of a loader.

How the rank gets here: the workload's ``user_ref`` gives the runner
``harness.workloads.data_sharding.adapter:user_<hex of the user's ref>`` as the
ref to run; this module's ``__getattr__`` turns that name back into a call of
``run_user`` with the user's ref.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from numbers import Integral
from typing import Any

import numpy as np
import torch  # imported at the top so that the warm fork server preloads it

from harness.rank.blame import call_target
from harness.workloads.data_sharding import ADAPTER_PREFIX as PREFIX
from harness.workloads.data_sharding import ALIASES, content, shape

MODULE = __name__
#: Its frames are the harness's own, though it is the rank's target: an exception raised
#: in them with no frame of the user's loader on its way is a bug of the harness's
#: (``harness.rank.blame``), never the loader's ERROR.
HARNESS_SIDE = True
CONTRACT = "see the data-sharding contract (harness.workloads.data_sharding)"

ID_KEYS = ("sample_ids", "ids", "sample_id", "id")


class ContractError(Exception):
    """The target does not follow the data-sharding contract: the message says how."""


def __getattr__(name: str) -> Any:
    if name.startswith(PREFIX):
        try:
            spec = bytes.fromhex(name[len(PREFIX):]).decode()
        except ValueError:
            raise AttributeError(name) from None
        return functools.partial(run_user, spec)
    raise AttributeError(f"module {MODULE!r} has no attribute {name!r}")


def shape_of(target: Callable[..., Any]) -> str:
    """``"loader"`` or ``"run"``; raises ``ContractError`` when neither fits."""
    declared = getattr(target, "harness_contract", None)
    is_class = inspect.isclass(target)
    try:
        signature = inspect.Signature() if is_class or declared is not None \
            else inspect.signature(target)
    except (TypeError, ValueError):
        raise ContractError("its signature cannot be read: declare harness_contract = 'loader' "
                            "or 'run' on it") from None
    try:
        return shape(signature, is_class, declared)
    except ValueError as exc:
        raise ContractError(str(exc)) from None


def build_loader(factory: Callable[..., Any], values: dict[str, Any]) -> Any:
    """``factory(**the inputs it names)``; a required parameter the harness cannot give fails."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        params = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in ALIASES:
            kwargs[p.name] = values[ALIASES[p.name]]
        elif p.default is p.empty:
            raise ContractError(f"the loader factory requires {p.name!r}, which the harness does "
                                f"not give (it gives {', '.join(sorted(set(ALIASES)))})")
    return call_target(factory, **kwargs)


def ids_of(batch: Any, item: bool = False) -> list[int]:
    """The sample ids a batch (or, with ``item``, one sample) holds: column 0 of its rows,
    or its ``sample_ids``/``ids`` entry; raises ``ContractError`` otherwise."""
    if isinstance(batch, dict):
        for key in ID_KEYS:
            if key in batch:
                return ids_of_values(batch[key])
        for key in ("inputs", "input", "x", "data"):
            if key in batch:
                return ids_of(batch[key], item)
        raise ContractError(f"a batch is a dict with keys {sorted(map(str, batch))}: none of "
                            f"{', '.join(ID_KEYS)} or 'inputs' holds the sample ids")
    if isinstance(batch, (tuple, list)) and batch and not _is_number(batch[0]):
        return ids_of(batch[0], item)  # (inputs, labels): the inputs' rows
    try:
        array = np.asarray(batch)
    except Exception as exc:  # noqa: BLE001 - anything not array-like is a violation
        raise ContractError(f"a batch of type {type(batch).__name__} is not rows of sample ids "
                            f"({exc})") from None
    if array.ndim == 2:
        return ids_of_values(array[:, 0])
    if array.ndim == 1 and item:
        return ids_of_values(array[:1])
    if array.ndim == 0 and item:
        return ids_of_values(array.reshape(1))
    raise ContractError(f"a batch of shape {tuple(array.shape)} is not rows whose column 0 is "
                        "the sample id")


def _is_number(value: Any) -> bool:
    return isinstance(value, Integral) or (isinstance(value, np.ndarray) and value.ndim == 0)


def ids_of_values(values: Any) -> list[int]:
    array = np.asarray(values).reshape(-1)
    if array.dtype.kind not in "iu":
        raise ContractError(f"sample ids of dtype {array.dtype} are not integers")
    return [int(i) for i in array]


class Identity:
    """How a batch's samples are known: by the id column of the harness's own data, by the
    target's ``harness_ids(batch)``, or (the user's own data) by content (``content``)."""

    def __init__(self, by_content: bool, ids: Callable[[Any], Any] | None = None) -> None:
        self.by_content, self.user_ids = by_content and ids is None, ids
        self.padding = 0
        self.names: dict[int, str] = {}

    def of_batch(self, batch: Any) -> list[int]:
        if self.user_ids is not None:
            try:
                return ids_of_values(self.user_ids(batch))
            except ContractError as exc:
                raise ContractError(f"harness_ids(batch): {exc}") from None
        if not self.by_content:
            return ids_of(batch)
        return self._digests(batch, content.elements)

    def of_items(self, items: list[Any]) -> list[int]:
        """The samples of a map-style dataset's items (one sample each)."""
        if self.user_ids is not None:
            return [i for item in items for i in self.of_batch(item)]
        if not self.by_content:
            return [i for item in items for i in ids_of(item, item=True)]
        return self._digests(items, list)

    def _digests(self, batch: Any, split: Callable[[Any], list[Any]]) -> list[int]:
        out = []
        try:
            for element in split(batch):
                if content.is_padding(element):
                    self.padding += 1
                    continue
                d = content.digest(element)
                if len(self.names) < MAX_NAMES and d not in self.names:
                    self.names[d] = content.name(element)
                out.append(d)
        except content.ContentError as exc:
            raise ContractError(str(exc)) from None
        return out


#: Sample names a rank sends with its batches (a small dataset's every sample).
MAX_NAMES = 4096


def batches_of(loader: Any, local_batch_size: int,
               identity: Identity | None = None) -> Iterable[list[int]]:
    """The samples of every batch the loader gives, in order, as ``identity`` knows them."""
    identity = identity or Identity(False)
    if hasattr(loader, "__iter__") and not _is_map_style(loader):
        for batch in call_target(iter, loader):
            yield identity.of_batch(batch)
        return
    if _is_map_style(loader):
        # A map-style dataset built for this rank is its shard: read it in index order,
        # local batches as DataLoader(dataset, batch_size=local, shuffle=False) would.
        n = call_target(len, loader)
        for start in range(0, n, local_batch_size):
            yield identity.of_items([loader[i] for i in range(start, min(n, start + local_batch_size))])
        return
    raise ContractError(f"the factory returned a {type(loader).__name__}, which is neither "
                        "iterable (batches) nor a map-style dataset (__len__ and __getitem__)")


def _is_map_style(loader: Any) -> bool:
    """A map-style dataset (torch's ``Dataset``): ``__len__`` and ``__getitem__``, no ``__iter__``."""
    return (not hasattr(type(loader), "__iter__") and hasattr(loader, "__getitem__")
            and hasattr(loader, "__len__"))


def train_step(ids: list[int]) -> None:
    """A training step's collective: every rank all-reduces once per batch (unequal batch
    counts hang, as on a pod)."""
    import torch_xla.core.xla_model as xm

    xm.all_reduce(xm.REDUCE_SUM, torch.tensor([float(len(ids))]))


def run_loader(factory: Callable[..., Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """Two passes over fresh loaders (the epoch and a restart), one step per batch."""
    import torch_xla.runtime as xr

    from harness.workloads.data_sharding.dataset import data_dir

    rank, world_size = xr.global_ordinal(), xr.world_size()
    gbs = int(inputs["global_batch_size"])
    values = {"data_dir": data_dir(inputs), "data_dirs": [data_dir(inputs)], "rank": rank,
              "world_size": world_size, "seed": int(inputs.get("seed", 0)),
              "global_batch_size": gbs}
    local = max(1, gbs // world_size)
    identity = Identity(bool(inputs.get("data")), ids_function(factory))
    passes: list[list[list[int]]] = []
    dropped = None
    for _ in range(2):
        loader = build_loader(factory, values)
        batches = []
        for ids in batches_of(loader, local, identity):
            batches.append(ids)
            train_step(ids)
        passes.append(batches)
        reported = getattr(loader, "dropped_ids", None)
        if reported is not None and not identity.by_content:  # by content: ids mean nothing
            dropped = dropped_ids(reported)
    out: dict[str, Any] = {"batches": passes[0], "restart": passes[1]}
    if dropped is not None and not identity.by_content:
        out["dropped"] = dropped
    if identity.by_content:
        out["padding"] = identity.padding // 2  # counted over both passes
        out["names"] = {str(d): text for d, text in identity.names.items()}
    return out


def dropped_ids(reported: Any) -> list[int | str]:
    """A loader's ``dropped_ids`` as the checker compares them: ints (numpy's too) or
    strings, whatever the loader calls its samples; a ContractError naming the value else."""
    if isinstance(reported, (str, bytes)) or not isinstance(reported, Iterable):
        raise ContractError(f"the loader's dropped_ids is {_shown(reported)}: the data-sharding "
                            "contract takes a list of the sample ids it left out (ints or strings)")
    out: list[int | str] = []
    for i in reported:
        if isinstance(i, Integral) and not isinstance(i, bool):
            out.append(int(i))
        elif isinstance(i, str):
            out.append(i)
        else:
            raise ContractError(f"the loader's dropped_ids holds {_shown(i)}: the data-sharding "
                                "contract's sample ids are ints or strings")
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{text[:60]}{'…' if len(text) > 60 else ''} (a {type(value).__name__})"


def ids_function(target: Any) -> Callable[[Any], Any] | None:
    """The target's ``harness_ids(batch)`` (an attribute, or a function of its module):
    the sample ids of a batch, where content is not stable (augmentation)."""
    fn = getattr(target, "harness_ids", None)
    if fn is None:
        module = inspect.getmodule(target)
        fn = getattr(module, "harness_ids", None) if module is not None else None
    return fn if callable(fn) else None


def run_user(spec: str, inputs: dict[str, Any]) -> Any:
    """Run the user's target ``spec`` in its shape; a contract violation is returned, not raised."""
    from harness.rank.bootstrap import resolve_target

    target = resolve_target(spec)
    try:
        shape = shape_of(target)
        if shape == "run":
            return call_target(target, inputs)
        return run_loader(target, inputs)
    except ContractError as exc:
        return {"contract_violation": f"{spec}: {exc}; {CONTRACT}"}
