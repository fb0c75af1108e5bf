"""The event loop never blocks on a socket whose frames a handler already read.

A frame's handler may read other sockets itself (``settle`` reads the hellos
waiting in the backlog before a rank's exit is judged). The readiness list of the
round it came in is then stale: reading a drained socket from it blocked the one
thread that serves every rank until the world's deadline, and dropped that
socket, so a world of ranks that were all connected looked like one whose ranks
never started.
"""

from __future__ import annotations

import os
import time

from harness.rank import wire
from harness.world.loop import EventLoop


def test_a_socket_drained_by_a_handler_is_not_read_again_in_the_same_round():
    frames: list[bytes] = []

    def on_frame(sock, head, payload):
        frames.append(bytes(head))
        if len(frames) == 1:
            loop.settle(0.5)  # what Lifecycle.exited does before it judges an exit

    loop = EventLoop(f"\0harness-test-loop-{os.getpid()}", on_frame, lambda s, why: None)
    clients = [wire.connect(loop.address) for _ in range(2)]
    try:
        for i, client in enumerate(clients):
            wire.send_frame(client, {"type": "hello", "n": i})
        # the machine's time: a bound, so a stuck run fails the test instead of hanging it
        deadline = time.monotonic() + 5
        while len(loop.conns) < 2 and time.monotonic() < deadline:
            loop.poll(0.1, time.monotonic() + 0.3)  # accepts; hellos may be read too
        frames.clear()
        # Both accepted, neither hello read yet: one round sees both sockets ready.
        loop.poll(1.0, time.monotonic() + 0.3)
        assert sorted(frames) == [b'{"type":"hello","n":0}', b'{"type":"hello","n":1}']
        assert len(loop.conns) == 2, "a socket whose frame was read elsewhere was dropped"
    finally:
        for client in clients:
            client.close()
        loop.close()
