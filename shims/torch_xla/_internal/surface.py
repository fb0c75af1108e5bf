"""Every public module and name of the real torch_xla 2.9, under the shim.

``real_surface`` lists them (read from the real wheel). What the shim models
lives in its own modules; whatever else the real package has is still there,
so that a script's imports and attribute lookups succeed as on a TPU VM, and
raises ``NotModelledError`` naming itself when used. One helper, one message:
never an ``AttributeError`` or ``ModuleNotFoundError`` from the shim's insides.

A meta-path finder gives every shim module of the list a module
``__getattr__`` for the real names it does not define, and makes the modules
the shim has no file for (``torch_xla.distributed.fsdp``, ``torch_xla.stablehlo``, ...).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

from torch_xla._internal import real_surface

MODULES = real_surface.MODULES
_PACKAGES = frozenset(m.rsplit(".", 1)[0] for m in MODULES if "." in m)


class NotModelledError(NotImplementedError):
    """A real torch_xla API that the harness does not model."""


def message(qualname: str, why: str | None = None) -> str:
    text = (f"{qualname} is not modelled by the harness: its torch_xla shim emulates "
            f"torch_xla {real_surface.VERSION}'s ranks, collectives, step markers, device "
            "helpers, loaders and save/load on CPU tensors")
    return f"{text} ({why})" if why else text


def not_modelled(qualname: str, why: str | None = None) -> NoReturn:
    """Raise the one error every unmodelled torch_xla API raises."""
    raise NotModelledError(message(qualname, why))


class _Unmodelled(type):
    """The type of a stand-in: calling it, or a public attribute of it, raises
    ``NotModelledError``; subclassing it and ``isinstance`` checks work, as a
    script's class definitions need at import."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        not_modelled(cls._torch_xla_name)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_"):  # introspection (hasattr, inspect, pickle) sees a plain miss
            raise AttributeError(name)
        not_modelled(f"{cls._torch_xla_name}.{name}")


def stand_in(qualname: str) -> Any:
    """The stand-in for the real ``qualname`` (``module.name``)."""
    module, _, name = qualname.rpartition(".")
    return _Unmodelled(name, (), {"_torch_xla_name": qualname, "__module__": module,
                                  "__doc__": message(qualname)})


def is_stand_in(value: Any) -> bool:
    return isinstance(value, _Unmodelled)


def module_getattr(module: str, own: Callable[[str], Any] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__``: the module's own first (``own``), then the real
    package's names (a stand-in, or the module a name is), then its submodules."""
    names = MODULES.get(module, {})

    def __getattr__(name: str) -> Any:
        if own is not None:
            try:
                return own(name)
            except AttributeError:
                pass
        if not name.startswith("__"):
            alias = real_surface.ALIASES.get(f"{module}.{name}")
            if alias is not None:
                return importlib.import_module(alias)
            if name in names:
                value = stand_in(f"{module}.{name}")
                setattr(sys.modules[module], name, value)
                return value
            if f"{module}.{name}" in MODULES:  # the real package imports every submodule
                return importlib.import_module(f"{module}.{name}")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    __getattr__._torch_xla_surface = True  # type: ignore[attr-defined]
    return __getattr__


def complete(module: Any) -> None:
    """Give ``module`` the real names it lacks (idempotent)."""
    own = module.__dict__.get("__getattr__")
    if not getattr(own, "_torch_xla_surface", False):
        module.__getattr__ = module_getattr(module.__name__, own)


class _Completing:  # a loader (importlib.abc is not imported: it costs every rank ~8 ms)
    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        complete(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader, ...
        return getattr(self.loader, name)


class _Absent:  # a loader
    """Makes a real module the shim has no file for: all stand-ins."""

    def create_module(self, spec: Any) -> Any:
        return None

    def exec_module(self, module: Any) -> None:
        module.__doc__ = message(module.__name__)
        complete(module)


_SHIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _under_shim(module: Any) -> bool:
    """Is ``module`` a package of this shim (a file of it, or a module made here)?"""
    if isinstance(getattr(module, "__loader__", None), _Absent):
        return True
    return (getattr(module, "__file__", None) or "").startswith(_SHIM_DIR + os.sep)


class SurfaceFinder:  # a meta-path finder
    """First on ``sys.meta_path``; answers only for the real package's modules."""

    _torch_xla_surface = True

    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MODULES and fullname not in _PACKAGES:
            return None
        busy = self._busy.__dict__.setdefault("names", set())
        if fullname in busy:  # another finder asked the import system again
            return None
        busy.add(fullname)
        try:
            spec = self._others(fullname, path, target)
        finally:
            busy.discard(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Completing(spec.loader)
            return spec
        if not _under_shim(sys.modules.get(fullname.rpartition(".")[0])):
            return None  # only under the shim's own package, never in place of a missing one
        return importlib.util.spec_from_loader(fullname, _Absent(),
                                               is_package=fullname in _PACKAGES)

    def _others(self, fullname: str, path: Any, target: Any) -> Any:
        for finder in list(sys.meta_path):
            if finder is self or getattr(finder, "_torch_xla_surface", False):
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                return spec
        return None


def install() -> None:
    """Put this copy of the finder first (a re-imported shim replaces the old one)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "_torch_xla_surface", False)]
    sys.meta_path.insert(0, SurfaceFinder())
