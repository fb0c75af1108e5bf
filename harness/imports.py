"""Act on a module as soon as the rank imports it, or now if it already has.

The shim keeps a copy of this (``torch_xla/_internal/imports.py``) on purpose:
it imports nothing of the harness, so that it can be read, tested and shipped
on its own.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any


def when_imported(name: str, action: Callable[[Any], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        action(module)
        return
    sys.meta_path.insert(0, _PostImport(name, action))


class _PostImport:
    """A meta-path hook that runs ``action`` right after ``name``'s first import."""

    def __init__(self, name: str, action: Callable[[Any], None]) -> None:
        self.name, self.action = name, action

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, action = spec.loader, self.action

        class _Loader:
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                action(module)

        spec.loader = _Loader()  # type: ignore[assignment]
        return spec
