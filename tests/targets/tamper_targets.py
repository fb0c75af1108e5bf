"""Targets that tamper with the harness from inside their own process (issue 24): they
change the fault engine's code, or speak the harness's protocol themselves to forge a fault
or to make the harness move a file of the machine's. Each returns what it saw, so a test
can say what the tampering changed; the disk and the history must say the truth."""

from __future__ import annotations

import os

TEXT = "".join(f"line {i}: {'x' * 20}\n" for i in range(12))
PATH = "/tmp/tamper/config.txt"


def keep_every_byte(inputs: dict | None = None) -> dict:
    """The hostile probe's forgery: ``TornWrite.at_close`` patched to report the tear but
    keep every byte; then rank 0 writes the file and every rank reads it back."""
    import torch_xla.core.xla_model as xm

    from harness.faults.kinds.torn_write import TornWrite

    honest = TornWrite.at_close

    def kept(self, engine, fault, r, data):  # noqa: ANN001 - the hook's own signature
        honest(self, engine, fault, r, data)  # the tear reported...
        return data  # ...and every byte kept

    TornWrite.at_close = kept
    if xm.get_ordinal() == 0:
        os.makedirs(os.path.dirname(PATH), exist_ok=True)
        with open(PATH, "w") as f:
            f.write(TEXT)
    xm.rendezvous("written")
    with open(PATH) as f:
        return {"size": len(f.read())}


def _channel():
    from harness.rank import runtime

    return runtime.current().channel


def forge_fault(inputs: dict | None = None) -> dict:
    """Rank 0 tells the harness a tear happened that never did, then writes every byte."""
    import torch_xla.core.xla_model as xm

    if xm.get_ordinal() == 0:
        _channel().notify({"type": "fault", "fault": "torn-write", "index": 0, "op": "close",
                           "path": PATH, "detail": {"message": f"{PATH} torn at byte 3 of 300",
                                                    "offset": 3, "size": 300}})
        os.makedirs(os.path.dirname(PATH), exist_ok=True)
        with open(PATH, "w") as f:
            f.write(TEXT)
    return {"wrote": len(TEXT)}


def deputy(inputs: dict) -> dict:
    """Rank 0 asks the harness, in the protocol's own words, to move, seal or truncate a
    file of the machine's (``inputs["victim"]``): a held write from it (or renamed to it), a
    faulted write staged at it. Each request is refused and drops the connection, so each is tried on
    its own world (``inputs["how"]``)."""
    import torch_xla.core.xla_model as xm

    if xm.get_ordinal() != 0:
        return {}
    victim, how = inputs["victim"], inputs["how"]
    channel = _channel()
    try:
        if how == "hold":
            channel.notify({"type": "hold", "src": victim, "dst": victim + ".moved",
                            "path": "/x", "until": "time", "delay_ms": 0})
        elif how == "moved":  # a held write "renamed" to the machine's file
            channel.notify({"type": "hold-moved", "path": "/x", "to": "/y",
                            "dst": victim + ".moved"})
        else:
            channel.request({"type": "seal", "path": "/tmp/x", "staging": victim,
                             "upper": victim, "faults": [0]})
    except Exception as exc:  # noqa: BLE001 - what the rank met is the answer
        return {"error": type(exc).__name__}
    return {"error": None}
