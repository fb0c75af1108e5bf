"""Ranks that break the protocol: rank 1 writes a forged frame on its coordinator socket."""

import struct

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

from harness.rank import runtime


def forged_frame(kind: str) -> int:
    if xr.global_ordinal() != 1:
        return 0
    sock = runtime.current().channel.call
    if kind == "huge":
        sock.sendall(struct.pack("!IQ", 2, 2**62) + b"{}")
    elif kind == "array":
        sock.sendall(struct.pack("!IQ", 5, 0) + b"[1,2]")
    elif kind == "pickle":
        sock.sendall(struct.pack("!IQ", 3, 0) + b"\x80\x05N")
    xm.rendezvous("after the forged frame")  # the harness has hung up: this raises
    return 1
