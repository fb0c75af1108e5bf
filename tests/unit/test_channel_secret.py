"""The world's secret and its socket's path, without a world (issue 47)."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from harness.rank import wire
from harness.world import protocol

SECRET = "ab" * 32


def hello(**extra: object) -> protocol.Hello:
    return protocol.Hello(role="rank", id=0, channel="call", **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("said,known", [
    (SECRET, True), ("", False), ("ab" * 31, False), (SECRET + "0", False),
    ("\udc80" * 64, False), ("é" * 64, False),  # what JSON may hand over: never a TypeError
])
def test_only_the_worlds_own_secret_is_known(said, known):
    assert protocol.knows_secret(hello(secret=said), SECRET) is known


def test_a_world_without_a_secret_knows_nobody():
    assert not protocol.knows_secret(hello(secret=""), "")


def test_the_secret_is_never_in_a_repr():
    assert SECRET not in repr(hello(secret=SECRET))


def test_a_hello_without_a_secret_decodes_to_one_that_knows_none():
    msg = protocol.decode(b'{"type": "hello", "role": "rank", "id": 0, "channel": "call"}')
    assert isinstance(msg, protocol.Hello) and not protocol.knows_secret(msg, SECRET)


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="the 0700 directory is Linux's")
def test_a_path_too_long_for_sun_path_is_bound_and_reached_through_its_directory(tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    address = wire.new_address("x", str(deep))
    assert len(os.fsencode(address)) > 107
    assert stat.S_IMODE(os.stat(os.path.dirname(address)).st_mode) == 0o700
    cwd = os.getcwd()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        wire.bind(listener, address)
        listener.listen(1)
        client = wire.connect(address)
        server, _ = listener.accept()
        with client, server:
            wire.send_frame(client, {"type": "x"})
            assert wire.recv_frame(server)[0] == {"type": "x"}
        assert stat.S_ISSOCK(os.stat(address).st_mode) and os.getcwd() == cwd
    finally:
        listener.close()
        wire.remove_address(address)
    assert not os.path.exists(os.path.dirname(address))
