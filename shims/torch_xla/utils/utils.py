"""``torch_xla.utils.utils`` (xu): the real package's pure-Python helpers, as they behave
in torch_xla 2.9 (environment flags, nested-structure walks, synthetic data, timing)."""

from __future__ import annotations

import copy
import os
import sys
import time
from collections.abc import Callable
from typing import Any

# shutil, socket, tempfile and concurrent.futures are imported where used: every rank
# imports this module (through xm), few call those helpers.


class Cleaner:
    """Calls ``func`` when garbage collected."""

    def __init__(self, func: Callable[[], Any]) -> None:
        self.func = func

    def __del__(self) -> None:
        self.func()


class LazyProperty:
    """``value`` is ``gen_fn()``, computed on first use."""

    def __init__(self, gen_fn: Callable[[], Any]) -> None:
        self._gen_fn: Callable[[], Any] | None = gen_fn

    @property
    def value(self) -> Any:
        if self._gen_fn is not None:
            self._value = self._gen_fn()
            self._gen_fn = None
        return self._value


class TmpFolder:
    """A temporary directory removed when the object is collected."""

    def __init__(self) -> None:
        import shutil
        import tempfile

        self.name = tempfile.mkdtemp()
        self.cleaner = Cleaner(lambda: shutil.rmtree(self.name))


class SampleGenerator:
    """Yields ``data`` ``sample_count`` times: a stand-in for a DataLoader."""

    def __init__(self, data: Any, sample_count: int) -> None:
        self._data, self._sample_count, self._count = data, sample_count, 0

    def __iter__(self) -> SampleGenerator:
        return SampleGenerator(self._data, self._sample_count)

    def __len__(self) -> int:
        return self._sample_count

    def __next__(self) -> Any:
        return self.next()

    def next(self) -> Any:
        if self._count >= self._sample_count:
            raise StopIteration
        self._count += 1
        return self._data


class FnDataGenerator:
    """Yields ``(data, func(data))`` ``count`` times, ``data = gen_tensor(batch_size, *dims)``."""

    def __init__(self, func: Callable[[Any], Any], batch_size: int,
                 gen_tensor: Callable[..., Any], dims: Any = None, count: int = 1) -> None:
        self._func, self._batch_size, self._gen_tensor = func, batch_size, gen_tensor
        self._dims = list(dims) if dims else [1]
        self._count, self._emitted = count, 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> FnDataGenerator:
        return FnDataGenerator(self._func, self._batch_size, self._gen_tensor,
                               dims=self._dims, count=self._count)

    def __next__(self) -> Any:
        return self.next()

    def next(self) -> Any:
        if self._emitted >= self._count:
            raise StopIteration
        data = self._gen_tensor(self._batch_size, *self._dims)
        target = self._func(data)
        self._emitted += 1
        return data, target


class DataWrapper:
    """A structure to send to the device: its tensors out, and itself rebuilt from copies."""

    def __init__(self) -> None:
        pass

    def get_tensors(self) -> list[Any]:
        raise NotImplementedError("The method is missing an implementation")

    def from_tensors(self, tensors: list[Any]) -> Any:
        raise NotImplementedError("The method is missing an implementation")


def as_list(t: Any) -> Any:
    return t if isinstance(t, (tuple, list)) else [t]


def getenv_as(name: str, type: Callable[[str], Any], defval: Any = None) -> Any:  # noqa: A002
    """``type(os.environ[name])``, or ``defval``; a bool is read as ``bool(int(value))``."""
    env = os.environ.get(name)
    if type is bool:
        return defval if env is None else bool(int(env))
    return defval if env is None else type(env)


def _for_each_instance(value: Any, select_fn: Callable[[Any], bool],
                       fn: Callable[[Any], Any], seen: set[int]) -> None:
    if id(value) in seen:
        return
    seen.add(id(value))
    if select_fn(value):
        fn(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _for_each_instance(k, select_fn, fn, seen)
            _for_each_instance(v, select_fn, fn, seen)
    elif isinstance(value, (list, tuple, set)):
        for x in value:
            _for_each_instance(x, select_fn, fn, seen)
    elif isinstance(value, DataWrapper):
        for x in value.get_tensors():
            _for_each_instance(x, select_fn, fn, seen)
    elif hasattr(value, "__dict__"):
        for k in value.__dict__.keys():
            _for_each_instance(value.__dict__[k], select_fn, fn, seen)


def for_each_instance(value: Any, select_fn: Callable[[Any], bool],
                      fn: Callable[[Any], Any]) -> None:
    """``fn(x)`` for every ``x`` that ``select_fn`` picks in a nested structure (each once)."""
    _for_each_instance(value, select_fn, fn, set())


def _for_each_instance_rewrite(value: Any, select_fn: Callable[[Any], bool],
                               fn: Callable[[Any], Any], rwmap: dict[int, Any]) -> Any:
    rvalue = rwmap.get(id(value))
    if rvalue is not None:
        return rvalue
    result = value
    if select_fn(value):
        result = fn(value)
        rwmap[id(value)] = result
    elif isinstance(value, dict):
        result = rwmap[id(value)] = {}
        for k, v in value.items():
            k = _for_each_instance_rewrite(k, select_fn, fn, rwmap)
            result[k] = _for_each_instance_rewrite(v, select_fn, fn, rwmap)
    elif isinstance(value, set):
        result = rwmap[id(value)] = set()
        for x in value:
            result.add(_for_each_instance_rewrite(x, select_fn, fn, rwmap))
    elif isinstance(value, (list, tuple)):  # a tuple comes back as a list, as in the real one
        result = rwmap[id(value)] = []
        for x in value:
            result.append(_for_each_instance_rewrite(x, select_fn, fn, rwmap))
    elif isinstance(value, DataWrapper):
        new_tensors = [_for_each_instance_rewrite(x, select_fn, fn, rwmap)
                       for x in value.get_tensors()]
        result = rwmap[id(value)] = value.from_tensors(new_tensors)
    elif hasattr(value, "__dict__"):
        result = rwmap[id(value)] = copy.copy(value)
        for k in result.__dict__.keys():
            result.__dict__[k] = _for_each_instance_rewrite(result.__dict__[k], select_fn, fn,
                                                            rwmap)
    else:
        rwmap[id(value)] = result
    return result


def for_each_instance_rewrite(value: Any, select_fn: Callable[[Any], bool],
                              fn: Callable[[Any], Any]) -> Any:
    """A copy of a nested structure with every ``x`` that ``select_fn`` picks as ``fn(x)``."""
    return _for_each_instance_rewrite(value, select_fn, fn, {})


def shape(inputs: Any) -> list[int]:
    cshape: list[int] = []
    if isinstance(inputs, (list, tuple)):
        lshape = None
        for item in inputs:
            ishape = shape(item)
            if lshape is None:
                lshape = ishape
            else:
                assert lshape == ishape
        cshape.extend([len(inputs)] + (lshape or []))
    return cshape


def flatten_nested_tuple(inputs: Any) -> tuple[Any, ...]:
    flat: list[Any] = []
    if isinstance(inputs, (list, tuple)):
        for item in inputs:
            flat.extend(flatten_nested_tuple(item))
    else:
        flat.append(inputs)
    return tuple(flat)


def list_copy_append(ilist: Any, item: Any) -> list[Any]:
    return [*ilist, item]


def null_print(*args: Any, **kwargs: Any) -> None:
    return


def eprint(*args: Any, **kwargs: Any) -> None:
    print(*args, file=sys.stderr, **kwargs)


def get_print_fn(debug: Any = None) -> Callable[..., None]:
    if debug is None:
        debug = int(os.environ.get("DEBUG", "0"))
    return eprint if debug else null_print


def timed(fn: Callable[[], Any], msg: str = "", printfn: Callable[..., None] | None = eprint) -> Any:
    if printfn is None:
        printfn = get_print_fn()
    start = time.time()
    result = fn()
    printfn(f"{msg}{1000.0 * (time.time() - start):.3f}ms")
    return result


def get_free_tcp_ports(n: int = 1) -> list[int]:
    import contextlib
    import socket

    ports = []
    for _ in range(n):
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
            s.bind(("", 0))
            ports.append(s.getsockname()[1])
    return ports


def parallel_work(num_workers: int, fn: Callable[..., Any], *args: Any) -> list[Any]:
    """``fn`` over ``args`` on a thread pool; a worker's exception is re-raised."""
    from concurrent import futures

    with futures.ThreadPoolExecutor(max_workers=num_workers) as executor:
        return list(executor.map(fn, *args))


class TimedScope:
    """Prints how long the block took, unless ``set_error`` was called."""

    def __init__(self, msg: str = "", printfn: Callable[..., None] | None = eprint) -> None:
        if printfn is None:
            printfn = get_print_fn()
        self._msg, self._printfn, self._error = msg, printfn, None

    def __enter__(self) -> TimedScope:
        self._start = time.time()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._error is None:
            self._printfn(f"{self._msg}{1000.0 * (time.time() - self._start):.3f}ms")

    def set_error(self, error: Any) -> None:
        self._error = error


def check_env_flag(name: str, default: str = "") -> bool:
    flag = os.getenv(name, default)
    return flag == "true" or (flag.isdigit() and int(flag) > 0)
