"""References to the machine's functions that modules took before a unit's fork.

A rank replaces some of the machine's functions with its world's (``open`` with
its filesystem view, ``time.sleep`` with its world clock). A module imported
before the fork may hold the old function itself: a global (``tarfile.bltn_open``,
``queue.time``, ``from time import sleep``), a value of a module-level dict or of
a module-level instance's attributes, or a function's default argument
(``tempfile``'s ``unlink=_os.unlink``). ``scan_modules`` finds them once, in the
fork server; ``rebind`` points each at its replacement in every unit.
"""

from __future__ import annotations

import builtins
import sys
import types
import warnings
from typing import Any

#: (owner, key, what it held): owner a module's dict... or a function with key
#: ``__defaults__``/``__kwdefaults__``
Site = tuple[Any, Any, Any]


def scan_modules(real: set[int], keep: tuple[str, ...], scanned: set[str] | None = None
                 ) -> list[Site]:
    """Every site where a loaded module (outside the packages ``keep`` names) holds one
    of the objects whose ids are ``real``; with ``scanned``, only in the modules it does not
    name, which it then names too (a fork server's later preloads: the modules they
    imported, not ~1,300 again)."""
    scan = _Scan(real, {id(vars(builtins))} | {id(getattr(m, "__dict__", None))
                                              for m in list(sys.modules.values())})
    modules = list(sys.modules.items())
    if scanned is not None:
        modules = [(name, module) for name, module in modules if name not in scanned]
        scanned.update(name for name, _ in modules)
    with warnings.catch_warnings():  # a deprecated object may warn when looked at
        warnings.simplefilter("ignore")
        for module_name, module in modules:
            if module is not None and module_name.split(".")[0] not in keep:
                try:
                    scan.module(module_name, module)
                except Exception:  # noqa: BLE001 - an odd module (a lazy proxy) keeps its own
                    continue
    return scan.found


def rebind(sites: list[Site], replaced: dict[int, Any], saved: list[tuple[Any, Any, Any]]) -> None:
    """Point each site that still holds an object of ``replaced`` (by id) at its
    replacement; what it held is appended to ``saved`` (owner, key, old) for undoing."""
    for owner, key, old in sites:
        if key in ("__defaults__", "__kwdefaults__") and type(owner) is types.FunctionType:
            new = {k: replaced.get(id(v), v) for k, v in old.items()} if isinstance(old, dict) \
                else tuple(replaced.get(id(v), v) for v in old)
            replace(owner, key, new, saved)
        elif id(old) in replaced and held(owner, key) is old:
            replace(owner, key, replaced[id(old)], saved)


def held(owner: Any, key: Any) -> Any:
    """What ``owner`` holds at ``key``: an item of a dict, else an attribute."""
    return owner.get(key) if type(owner) is dict else getattr(owner, key, None)


def _put(owner: Any, key: Any, value: Any) -> None:
    if type(owner) is dict:
        owner[key] = value
    else:
        setattr(owner, key, value)


def replace(owner: Any, key: Any, value: Any, saved: list[tuple[Any, Any, Any]]) -> None:
    """``owner.key = value`` (an item when ``owner`` is a dict), what it held appended to
    ``saved`` for ``undo``."""
    saved.append((owner, key, held(owner, key)))
    _put(owner, key, value)


def undo(saved: list[tuple[Any, Any, Any]]) -> None:
    """Put back, latest first, what ``replace`` changed."""
    while saved:
        owner, key, value = saved.pop()
        _put(owner, key, value)


class _Scan:
    def __init__(self, real: set[int], namespaces: set[int]) -> None:
        self.real, self.namespaces = real, namespaces  # ids: nothing is compared by ==
        self.found: list[Site] = []

    def module(self, name: str, module: Any) -> None:
        self.values_of(module, vars(module).items())
        for value in list(vars(module).values()):
            kind = type(value)  # type(), not isinstance: a lazy proxy's __class__ may warn
            if kind is dict:
                self.values_of(value, value.items())
            elif kind is types.FunctionType and value.__module__ == name:
                self.defaults(value)
            elif issubclass(kind, type) and value.__module__ == name:
                for member in list(vars(value).values()):
                    self.defaults(getattr(member, "__func__", member))  # class/static methods
            elif kind.__module__ == name and type(getattr(value, "__dict__", None)) is dict:
                attrs = value.__dict__  # numpy's _file_openers holds {None: open}
                self.values_of(attrs, attrs.items())
                for held in list(attrs.values()):
                    if type(held) is dict:
                        self.values_of(held, held.items())

    def values_of(self, owner: Any, items: Any) -> None:
        if type(owner) is dict and id(owner) in self.namespaces:
            return  # __builtins__, or another module's globals: looked at as that module
        for key, value in list(items):
            if id(value) in self.real:
                self.found.append((owner, key, value))

    def defaults(self, fn: Any) -> None:
        if type(fn) is not types.FunctionType:
            return
        for attr in ("__defaults__", "__kwdefaults__"):
            values = getattr(fn, attr)
            items = values.values() if isinstance(values, dict) else values or ()
            if any(id(v) in self.real for v in items):
                self.found.append((fn, attr, values))
