"""What a rank imported during its life that the fork server had not: the
modules a later world of the same target can preload (``record_files``).

The fork server preloads the target file's own top-level imports; a module
imported inside the function, or transitively (hydra, torch, transformers), is
imported again by every rank after the fork. A discovery world learns those
names here, and the runner passes them as ``preload=`` to later worlds.
Only installed packages (site-packages) are named, at most ``LIMIT`` of them:
the user's own modules (the model code, a helper beside the target) are never
preloaded, because the fork server imports outside any world's sandbox and
their import-time code (a ``makedirs``, a log file) must run inside it.
"""

from __future__ import annotations

import os
import sys

#: at most this many module names per rank
LIMIT = 2_000

_at_fork: frozenset[str] = frozenset()
#: modules the rank's code asked for by name since ``mark``, even those the fork server
#: had imported already (one server serves every world: what another target preloaded is
#: there, but this target needs it all the same)
_asked: set[str] = set()


def mark() -> None:
    """The rank was just forked: what it has now, it did not import itself; from now on
    every ``import`` statement's module is noted, whether it runs or is found loaded."""
    global _at_fork
    import builtins

    _at_fork = frozenset(sys.modules)
    real = builtins.__import__

    def noting(name: str, globals: object = None, locals: object = None,
               fromlist: tuple[str, ...] | list[str] | None = (), level: int = 0) -> object:
        module = real(name, globals, locals, fromlist, level)
        if level == 0 and name:
            _asked.add(name)
            for entry in fromlist or ():
                if isinstance(entry, str) and f"{name}.{entry}" in sys.modules:
                    _asked.add(f"{name}.{entry}")
        return module

    builtins.__import__ = noting


def learned(exclude: tuple[str, ...] = ()) -> list[str]:
    """The installed modules imported since ``mark`` (or asked for by name, found loaded),
    outside the harness and the directories in ``exclude``, sorted, bounded."""
    import harness

    skip = tuple(os.path.join(os.path.abspath(p), "")
                 for p in (*exclude, os.path.dirname(harness.__file__)))
    names = []
    for name, module in list(sys.modules.items()):
        if (name in _at_fork and name not in _asked) or name == "__main__" or module is None:
            continue
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        real = os.path.abspath(path)  # a string operation: no stat through the view
        if not _installed(real) or real.startswith(skip):
            continue
        names.append(name)
    return sorted(names)[:LIMIT]


def _installed(real: str) -> bool:
    """An installed package's file (site-packages, dist-packages), wherever those live."""
    parts = real.split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts
