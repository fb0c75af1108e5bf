"""References to a user's code, as every face takes them: ``pkg.module:function`` or
``path/to/file.py:function`` (a target, a checker, a workload's entry point). One reader,
so that every process agrees on which references name a file.

Reading a reference never imports anything: the code it names runs only in a rank.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Ref:
    #: ``pkg.module`` or ``path/to/file.py`` (as given: relative paths stay relative)
    module: str
    #: ``function``, or ``Class.method``: attributes looked up one after the other
    attr: str

    @property
    def is_file(self) -> bool:
        """A path to a file, not a module's dotted name."""
        return is_file(self.module)

    @property
    def module_name(self) -> str:
        """The name the module has in ``sys.modules`` once loaded (a file's: its stem)."""
        if self.is_file:
            return os.path.splitext(os.path.basename(self.module))[0]
        return self.module

    def __str__(self) -> str:
        return f"{self.module}:{self.attr}"


def is_file(module: str) -> bool:
    """``path/to/file.py`` or ``dir/file`` rather than ``pkg.module``."""
    return module.endswith(".py") or os.sep in module


def parse(ref: str, kind: str = "target") -> Ref:
    """``ref`` read, or a ValueError that says how a ``kind`` is written."""
    module, sep, attr = ref.rpartition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{kind} {ref!r}: expected module.path:function or path/to/file.py:function")
    return Ref(module, attr)


def absolute(ref: str) -> str:
    """``ref`` with a file's path made absolute (a module's dotted name, a built-in's name,
    as they are): what reruns it from any directory."""
    module, sep, attr = ref.rpartition(":")
    if not sep or not module or not is_file(module) or os.path.isabs(module):
        return ref
    return f"{os.path.abspath(module)}:{attr}"


def same_target(given: str, named: str) -> bool:
    """Does the reference ``given`` (a replay's, perhaps made ``absolute``) name the target
    a report calls ``named`` (as the user gave it, from wherever the run was)?"""
    if given == named:
        return True
    module, sep, attr = named.rpartition(":")
    if not sep or not is_file(module) or os.path.isabs(module):
        return False
    return given.endswith(f"{os.sep}{os.path.normpath(module)}:{attr}")


def module_of(ref: str | None) -> str | None:
    """The module part of a reference (None for none, or a reference without one)."""
    module = (ref or "").rpartition(":")[0]
    return module or None


def name_of(target: str | Callable[..., Any]) -> str:
    """A target (a reference, or a module-level function or class) as the reference every
    process can resolve on its own."""
    if isinstance(target, str):
        return target
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
    if not module or "<" in qualname:
        raise ValueError(
            f"target {target!r} cannot be found by name in a rank process; define it at module "
            "level, or pass 'module.path:function' / 'path/to/file.py:function'")
    if module == "__main__":
        path = getattr(sys.modules["__main__"], "__file__", None)
        if not path:
            raise ValueError("a target defined in an interactive __main__ has no file to load from")
        return f"{os.path.abspath(path)}:{qualname}"
    return f"{module}:{qualname}"
