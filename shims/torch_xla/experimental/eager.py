"""``torch_xla.experimental.eager``: the eager-mode switch. The shim runs every op eagerly
whatever it says; the switch is kept so that scripts that read it back see what they set."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_eager = False


def eager_mode(enable: bool) -> None:
    global _eager
    _eager = bool(enable)


def is_eager_mode() -> bool:
    return _eager


@contextlib.contextmanager
def eager_mode_context(enable: bool) -> Iterator[None]:
    saved = is_eager_mode()
    eager_mode(enable)
    try:
        yield
    finally:
        eager_mode(saved)
