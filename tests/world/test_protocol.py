"""The protocol between units and the harness: every frame is checked, a bad one refused."""

from __future__ import annotations

import socket
import struct

import pytest

from harness import ERROR, PASS, run_world
from harness.rank import wire
from harness.world import protocol

from support import TARGETS_DIR

TARGETS = TARGETS_DIR / "protocol_targets.py"


def decode(header: object, payload: bytes = b"") -> protocol.Message:
    import json
    return protocol.decode(json.dumps(header).encode(), payload)


def test_a_well_formed_message_becomes_its_dataclass_with_its_payload():
    msg = decode({"type": "collective", "op": "all_reduce", "kind": "reduce",
                  "tensors": [["float32", [2, 2], 16]], "reduce": "sum",
                  "idle": {"seen": 3, "wake": None}, "api": "xm"}, b"x" * 16)
    assert msg == protocol.Collective(op="all_reduce", kind="reduce",
                                      idle={"seen": 3, "wake": None},
                                      tensors=[["float32", [2, 2], 16]], reduce="sum",
                                      payload=b"x" * 16)
    assert decode({"type": "idle", "seen": 2, "wake": 1_800_000_000_000}) == \
        protocol.Idle(seen=2, wake=1_800_000_000_000)
    assert decode({"type": "result", "ok": True, "value_repr": "3"}, b"p") == \
        protocol.Result(ok=True, value_repr="3", payload=b"p")


@pytest.mark.parametrize("head,message", [
    (b"\x80\x05N.", "not JSON"),  # a pickle: never unpickled
    (b"{", "not JSON"),
    (b"[1, 2]", "not a JSON object but list"),
    (b'{"type": "launch-missiles"}', "unknown type 'launch-missiles'"),
    (b'{"op": "x"}', "unknown type None"),
    (b'{"type": "hello", "role": "rank", "id": "0", "channel": "call"}', "'id' is str '0'"),
    (b'{"type": "hello", "role": "rank", "id": true, "channel": "call"}', "'id' is bool True"),
    (b'{"type": "hello", "role": "rank", "channel": "call"}', "a hello message without id"),
    (b'{"type": "collective", "op": "x", "kind": "reduce", "tensors": [["f", [2], -1]]}',
     "'tensors'"),
    (b'{"type": "collective", "op": "x", "kind": "reduce", "groups": [[0, "1"]]}', "'groups'"),
    (b'{"type": "send", "box": ["dist", 0, 1], "peer": 1}', "'box' is list"),
    (b'{"type": "result", "ok": false, "error": {"type": 1}}', "'error'"),
    (b'{"type": "idle", "seen": 1, "wake": 2.5}', "'wake' is float 2.5"),
    (b'{"type": "idle", "wake": 3}', "message without seen"),
    (b'{"type": "recv", "box": "b", "peer": 0, "idle": {"seen": -1}}', "'idle'"),
    (b'{"type": "collective", "op": "x", "kind": "reduce", "idle": {"seen": 0, "x": 1, "y": 2}}',
     "'idle'"),
])
def test_a_malformed_header_is_refused_by_name(head, message):
    with pytest.raises(protocol.ProtocolError, match=message.replace("(", r"\(")):
        protocol.decode(head)


@pytest.mark.parametrize("prefix,message", [
    (struct.pack("!IQ", wire.MAX_HEADER + 1, 0), "a header of"),
    (struct.pack("!IQ", 2, 2**62), "a payload of 4611686018427387904 bytes"),
])
def test_a_frame_beyond_its_bounds_is_refused_before_it_is_read(prefix, message):
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(prefix)  # nothing follows: reading on would block, allocating would fail
        ours.settimeout(1)
        with pytest.raises(wire.FrameError, match=message):
            wire.recv_raw(ours)


def test_a_header_round_trips_as_json_with_tuples_as_lists():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        wire.send_frame(theirs, {"type": "x", "pair": (1, 2)}, b"payload")
        assert wire.recv_frame(ours) == ({"type": "x", "pair": [1, 2]}, bytearray(b"payload"))


@pytest.mark.parametrize("kind,why", [
    ("huge", "a payload of 4611686018427387904 bytes"),
    ("array", "not a JSON object but list"),
    ("pickle", "not JSON"),
])
def test_a_rank_that_forges_a_frame_is_dropped_and_named_and_the_world_still_ends(kind, why):
    result = run_world(f"{TARGETS}:forged_frame", topology="4x1", timeout=20, args=(kind,))
    assert [r.outcome for r in result.ranks] == [PASS, ERROR, PASS, PASS]
    error = result.ranks[1].error
    assert error["type"] == "ProtocolError"
    assert error["message"].startswith("rank 1 sent a frame the harness refuses: ")
    assert why in error["message"]
    refused = [e for e in result.history if e.kind == "protocol"]
    assert [e.rank for e in refused] == [1] and why in refused[0].detail["message"]
