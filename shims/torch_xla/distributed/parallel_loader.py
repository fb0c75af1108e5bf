"""``torch_xla.distributed.parallel_loader``: ParallelLoader, PerDeviceLoader, MpDeviceLoader.

The semantics are torch_xla 2.9's, observable step by step:

- sample i of the CPU loader goes to ``devices[i % len(devices)]``; a last
  group smaller than the device count is dropped, and ``len()`` of a
  per-device loader is ``len(cpu_loader) // len(devices)``;
- every batch is moved to the device the way ``xm.send_cpu_data_to_device``
  moves it: each plain CPU ``torch.Tensor`` in the (nested) batch becomes a
  new tensor (a copy, outside autograd), tuples become lists, dicts and sets
  are rebuilt, an object met twice is converted once, any other object with a
  ``__dict__`` (a Parameter too) is shallow-copied, anything else (a number,
  a string) passes through unchanged (it is ``xm.send_cpu_data_to_device``);
- ``next()`` calls ``torch_xla.sync()`` once every ``batches_per_execution``
  batches with the real counter (with 1, before every batch, the first one
  included), and once more when the loader is exhausted;
- an exception raised by the CPU loader ends the epoch early and silently for
  the consumer: the real loader thread dies, its traceback is reported (here
  through logging), and the batches read before it are still delivered, then
  ``StopIteration``. Only an error while moving a batch to the device (e.g.
  an ``input_sharding`` dict that misses a key) reaches the consumer, after the
  batches before it;
- ``MpDeviceLoader`` builds a new ParallelLoader (closing the previous one)
  each time it is iterated, and its ``len()`` is ``len(loader)``.

Departures: our device is the CPU, so there are no background threads. The
real ParallelLoader starts reading the CPU loader at construction and keeps up
to ``loader_prefetch_size`` + ``device_prefetch_size`` batches ahead of the
consumer; here ``iter(cpu_loader)`` is called at construction as well, but each
batch is read when a device asks for it, so a dataset's side effects happen
later than on a pod, and with several devices a device that is never consumed
does not stall the others (on a pod its full queue would block the loader
thread). An ``xla`` device (``'xla'``, ``'xla:0'``) names this rank's device,
which is the CPU here. ``input_sharding`` is accepted; only a dict of specs is
checked (as the real loader checks it), since the harness has no SPMD.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterator
from typing import Any

import torch
import torch_xla
import torch_xla.core.xla_model as xm

logger = logging.getLogger(__name__)

_END = object()  # a closed queue, as the real keyd_queue returns None


def _device_key(device: Any) -> Any:
    """The device as a key: an XLA device is this rank's device, the CPU here."""
    dev = torch.device(device)
    if dev.type == "xla" and dev.index in (None, 0):
        return torch_xla.device()
    return dev


class PerDeviceLoader:
    """One device's iterator over a ParallelLoader; syncs as the real one does."""

    def __init__(self, loader: ParallelLoader, device: Any) -> None:
        self._loader = loader
        self._device = device
        self._sync_batch_count = loader.batches_per_execution - 1
        self._batches_yielded = 0

    def __iter__(self) -> PerDeviceLoader:
        return self

    def __next__(self) -> Any:
        return self.next()

    def __len__(self) -> int:
        return self._loader.per_device_samples()

    def next(self) -> Any:
        """The next batch on the device; sync every ``batches_per_execution`` and at the end."""
        if self._sync_batch_count <= self._batches_yielded:
            self._batches_yielded = 0
            torch_xla.sync()
        else:
            self._batches_yielded += 1

        item = self._loader.next_item(self._device)
        if item is _END:
            error = self._loader._take_exception()
            if error is not None:
                raise error
            torch_xla.sync()
            raise StopIteration
        return item


class ParallelLoader:
    """Wraps a DataLoader and hands each device its share of the batches, on the device.

    Args as the real one: ``cpu_loader``, ``devices`` (sample i goes to
    ``devices[i % len(devices)]``), ``batchdim``, ``batches_per_execution``,
    ``loader_prefetch_size``, ``device_prefetch_size``,
    ``host_to_device_transfer_threads``, ``input_sharding``. The prefetch and
    thread counts have no effect here (see the module docstring).
    """

    def __init__(self, cpu_loader: Any, devices: Any, batchdim: int = 0,
                 batches_per_execution: int = 1, loader_prefetch_size: int = 16,
                 device_prefetch_size: int = 8, host_to_device_transfer_threads: int = 1,
                 input_sharding: Any = None) -> None:
        self._cpu_loader = cpu_loader
        self._devices = [_device_key(x) for x in devices]
        self._batchdim = batchdim
        self._batches_per_execution = batches_per_execution
        self._loader_prefetch_size = loader_prefetch_size
        self._device_prefetch_size = device_prefetch_size
        self._host_to_device_transfer_threads = host_to_device_transfer_threads
        self._input_sharding = input_sharding
        self._done = False
        self._queues: dict[Any, collections.deque[Any]] = {d: collections.deque()
                                                           for d in self._devices}
        self._errors: dict[Any, BaseException] = {}
        self._data_iter: Iterator[Any] | None = None
        # The real loader thread calls iter() on the CPU loader right away.
        try:
            self._data_iter = iter(self._cpu_loader)
        except Exception:
            self._loader_died()

    def per_device_loader(self, device: Any) -> PerDeviceLoader:
        """The iterator of ``device``'s batches (a plain iterator, not a DataLoader)."""
        return PerDeviceLoader(self, _device_key(device))

    def per_device_samples(self) -> int:
        return len(self._cpu_loader) // len(self._devices)

    @property
    def batches_per_execution(self) -> int:
        return self._batches_per_execution

    def next_item(self, device: Any) -> Any:
        """The device's next batch, or the end marker when the loader is done."""
        dqueue = self._queues[device]
        if not dqueue and not self._done:
            self._read_group()
        return dqueue.popleft() if dqueue else _END

    def close(self) -> None:
        """Stop: every per-device iterator ends at its next ``next()``."""
        self._done = True
        self._data_iter = None
        for dqueue in self._queues.values():
            dqueue.clear()

    def send_cpu_data_to_device(self, batches: list[Any], device: Any) -> list[Any]:
        """Move a list of batches to ``device``, checking a dict ``input_sharding``."""
        if isinstance(self._input_sharding, dict):
            if not isinstance(batches[0], dict):
                raise ValueError("input batch should be a dict when input sharding is a dict.")
            result = []
            for batch in batches:
                missing = [k for k in batch if k not in self._input_sharding]
                if self._input_sharding and missing:
                    raise KeyError(f"Keys: {missing} are missing from input_sharding.")
                result.extend(xm.send_cpu_data_to_device([batch], device))
            return result
        return xm.send_cpu_data_to_device(batches, device)

    # -- internals -----------------------------------------------------------
    def _take_exception(self) -> BaseException | None:
        for device, error in list(self._errors.items()):
            del self._errors[device]
            return error
        return None

    def _loader_died(self) -> None:
        """The CPU loader raised: the real thread dies, the consumers see the epoch end."""
        logger.error("Exception in the ParallelLoader's loader thread: the epoch ends here",
                     exc_info=True)
        self._done = True
        self._data_iter = None

    def _read_group(self) -> None:
        """Read one sample per device from the CPU loader; a short last group is dropped."""
        if self._data_iter is None:
            self._done = True
            return
        group = []
        try:
            while len(group) < len(self._devices):
                group.append(next(self._data_iter))
        except StopIteration:
            self._done = True
            return
        except Exception:
            self._loader_died()
            return
        for device, data in zip(self._devices, group):
            try:
                (moved,) = self.send_cpu_data_to_device([data], device)
            except Exception as exc:
                # The real transfer thread stores the error and stops this device's queue.
                self._errors[device] = exc
                self._done = True
                continue
            self._queues[device].append(moved)


class MpDeviceLoader:
    """A ParallelLoader for one device, rebuilt each time it is iterated.

    Args: ``loader`` (the DataLoader), ``device``, and ``kwargs`` for ParallelLoader.
    """

    def __init__(self, loader: Any, device: Any, **kwargs: Any) -> None:
        self._loader = loader
        self._device = device
        self._parallel_loader_kwargs = kwargs
        self._parallel_loader: ParallelLoader | None = None

    def __iter__(self) -> PerDeviceLoader:
        if self._parallel_loader is not None:
            self._parallel_loader.close()
            self._parallel_loader = None
        self._parallel_loader = ParallelLoader(self._loader, [self._device],
                                               **self._parallel_loader_kwargs)
        return self._parallel_loader.per_device_loader(self._device)

    def __len__(self) -> int:
        return len(self._loader)
