"""Whose an exception that ends a rank is: the target's, or a bug of the harness's own.

Harness code runs inside every rank around the target (the bootstrap, a workload's
adapter, the world's checker). An exception that passed through no frame but the
harness's own was raised by that code, not by anything the target did: reported as
the target's ERROR it would be a verdict on code that never failed (and, where a
scenario expects a loud failure, a false green). Such an exception is the harness's
bug, and the run says so (exit 3).

A frame is the target's when its code is outside the harness (the target, the
libraries it calls, the torch_xla shim that stands in for the real one) or is a
built-in reference target's module (``TARGET_MODULES``); a module that runs in the
rank on the harness's side of a target it calls (an adapter) says so with
``HARNESS_SIDE = True``. Harness code that refuses the target on purpose (a target
ref that names nothing) marks its exception with ``blame_target``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import FrameType
from typing import Any

_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_MARK = "_harness_blames_target"


def blame_target(exc: BaseException) -> BaseException:
    """``exc``, raised by harness code on purpose about the target: the target's error."""
    try:
        setattr(exc, _MARK, True)
    except AttributeError:  # an exception type without a __dict__: counted as the target's anyway
        pass
    return exc


def call_target(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, ``fn`` being the target's (or ``len``, ``iter`` of its
    object): what the call itself raises, before any frame of the target's runs (arguments
    its signature does not take, a ``__len__`` that returns a str), is the target's too."""
    try:
        return fn(*args, **kwargs)
    except BaseException as exc:
        tb = exc.__traceback__
        if tb is not None and tb.tb_next is None:  # raised in this frame: by the call itself
            blame_target(exc)
        raise


def harness_own(exc: BaseException) -> bool:
    """Was ``exc`` raised by the harness's own code with no frame of the target's on its way?"""
    from harness.rank.channel import TARGET_MODULES

    if getattr(exc, _MARK, False) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb is not None:
        if not _harness_frame(tb.tb_frame, TARGET_MODULES):
            return False
        tb = tb.tb_next
    return True


def _harness_frame(frame: FrameType, targets: set[str]) -> bool:
    if not frame.f_code.co_filename.startswith(_HARNESS_DIR):
        return False
    module = frame.f_globals.get("__name__")
    return module not in targets or bool(frame.f_globals.get("HARNESS_SIDE"))
