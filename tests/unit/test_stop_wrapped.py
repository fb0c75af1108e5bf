"""A Ctrl-C that a library wraps in an error of its own is a Ctrl-C, not the harness's bug:
pydantic building a model class at import turns the KeyboardInterrupt raised inside it into
``SchemaError: ... KeyboardInterrupt`` (the soak's SIGINT during ``harness run``'s imports
exited 3, "internal error")."""

from __future__ import annotations

import signal

import pytest

import harness.cli as cli_module
from harness.cli import stop


class _SchemaError(Exception):
    pass


def _exits(monkeypatch: pytest.MonkeyPatch, received: list[int]) -> int:
    def cli_main(**_: object) -> None:
        stop._received.extend(received)
        raise _SchemaError('Error building "model" validator:\n  KeyboardInterrupt: ')

    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(stop, "_received", [])
    monkeypatch.setattr(stop, "install", lambda: None)
    monkeypatch.setattr(cli_module.cli, "main", cli_main)
    monkeypatch.setattr(cli_module.os, "_exit", exit_)
    with pytest.raises(SystemExit) as ended:
        cli_module.main()
    return int(ended.value.code)


def test_a_stop_a_library_wrapped_exits_as_a_stop(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _exits(monkeypatch, [signal.SIGINT]) == 130
    assert "internal error" not in capsys.readouterr().err


def test_the_same_error_with_no_stop_is_the_harness_bug(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert _exits(monkeypatch, []) == 3
    assert "internal error: _SchemaError" in capsys.readouterr().err
