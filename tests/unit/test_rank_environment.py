"""A unit's environment is set by difference from the one it inherits."""

from __future__ import annotations

import ctypes
import os

from harness.rank.environment import set_environment

_getenv = ctypes.CDLL(None).getenv
_getenv.restype = ctypes.c_char_p


def test_the_environment_becomes_what_is_wanted_in_python_and_in_the_c_library(monkeypatch):
    monkeypatch.setattr(os, "environ", os.environ)  # undone with the keys below
    for key, value in {"HARNESS_T_GONE": "1", "HARNESS_T_SAME": "2", "HARNESS_T_CHANGED": "3"
                       }.items():
        monkeypatch.setenv(key, value)
    wanted = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_T_")}
    wanted.update({"HARNESS_T_SAME": "2", "HARNESS_T_CHANGED": "4", "HARNESS_T_NEW": "5"})
    monkeypatch.setenv("HARNESS_T_NEW", "placeholder")  # so that monkeypatch removes it after
    set_environment(wanted)
    assert dict(os.environ) == wanted
    assert _getenv(b"HARNESS_T_GONE") is None
    assert _getenv(b"HARNESS_T_CHANGED") == b"4" and _getenv(b"HARNESS_T_NEW") == b"5"
