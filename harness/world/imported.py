"""What a rank imported during its life that the fork server had not: the
modules a later world of the same target can preload (``record_files``).

The fork server preloads the target file's own top-level imports; a module
imported inside the function, or transitively (hydra, the model code), is
imported again by every rank after the fork. A discovery world learns those
names here, and the runner passes them as ``preload=`` to later worlds.
Only modules loaded from files outside the harness, its shim and the
standard library are named; at most ``LIMIT`` of them.
"""

from __future__ import annotations

import os
import sys

#: at most this many module names per rank
LIMIT = 2_000

_at_fork: frozenset[str] = frozenset()


def mark() -> None:
    """The rank was just forked: what it has now, it did not import itself."""
    global _at_fork
    _at_fork = frozenset(sys.modules)


def learned(exclude: tuple[str, ...] = ()) -> list[str]:
    """The modules imported since ``mark``, from files outside the harness, the
    directories in ``exclude`` and the standard library, sorted, bounded."""
    skip = tuple(os.path.join(os.path.abspath(p), "") for p in (*exclude, *_own_roots()))
    names = []
    for name, module in list(sys.modules.items()):
        if name in _at_fork or name == "__main__" or module is None:
            continue
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        real = os.path.abspath(path)  # a string operation: no stat through the view
        if real.startswith(skip) and not _installed(real):
            continue
        names.append(name)
    return sorted(names)[:LIMIT]


def _own_roots() -> tuple[str, ...]:
    import sysconfig  # only when recording: nothing more to import in every rank

    import harness

    paths = sysconfig.get_paths()
    return (os.path.dirname(harness.__file__), paths["stdlib"], paths["platstdlib"])


def _installed(real: str) -> bool:
    """Inside the stdlib's directory but installed (site-packages): interesting."""
    parts = real.split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts
