"""The key-value stores of torch.distributed as the world keeps them.

A store (``xla://``'s, ``env://``'s, ``tcp://``'s) is the world's, named by its
address: every rank that opens it sees one set of keys, it outlives whichever
rank "serves" it, and its blocking reads (``get``, ``wait``) wait on the world's
clock until their keys are set or their timeout passes. The semantics are
TCPStore's (``add`` on a missing key starts at 0, ``compare_set``'s rules,
``num_keys`` counts every key).

Pure state: the coordinator records, replies and keeps the time.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.world.protocol import StoreOp

OPS = frozenset({"set", "get", "add", "compare_set", "wait", "check", "delete", "num_keys"})


@dataclass
class Answer:
    """A store operation's reply to its rank: ``value`` (an int) in the header, ``data``
    as the payload."""

    rank: int
    op: StoreOp  # the request it answers
    value: int | None = None
    data: bytes = b""


class StoreError(ValueError):
    """An operation the store cannot do (an unknown op, ``add`` on a value no integer)."""


class Stores:
    """Every store of a world, and the ranks blocked reading one."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, bytes]] = {}
        self._waiters: dict[int, StoreOp] = {}  # rank -> its blocked get or wait

    def apply(self, rank: int, op: StoreOp) -> list[Answer]:
        """Do ``op``; the answers it gives now (its own, and the readers it unblocks).
        No answer for ``rank`` itself: it waits (``get``, ``wait`` of a missing key)."""
        if op.op not in OPS:
            raise StoreError(f"a store operation {op.op!r}, not one of {sorted(OPS)}")
        if op.op not in ("num_keys",) and not op.keys:
            raise StoreError(f"a store {op.op} with no key")
        data = self._data.setdefault(op.store, {})
        key = op.keys[0] if op.keys else ""
        if op.op in ("get", "wait"):
            if all(k in data for k in op.keys):
                return [self._answer(rank, op, data)]
            self._waiters[rank] = op
            return []
        if op.op == "check":
            return [Answer(rank, op, value=int(all(k in data for k in op.keys)))]
        if op.op == "num_keys":
            return [Answer(rank, op, value=len(data))]
        if op.op == "delete":
            return [Answer(rank, op, value=int(data.pop(key, None) is not None))]
        if op.op == "set":
            data[key] = bytes(op.payload)
            answer = Answer(rank, op)
        elif op.op == "add":
            try:
                value = int(data.get(key, b"0")) + op.amount
            except ValueError:
                raise StoreError(f"add to {key!r}, whose value is not an integer") from None
            data[key] = str(value).encode()
            answer = Answer(rank, op, value=value)
        else:  # compare_set, as TCPStore: a missing key is set only when expected is empty
            payload = bytes(op.payload)
            expected, desired = payload[:op.split], payload[op.split:]
            current = data.get(key)
            if (current is None and expected == b"") or current == expected:
                data[key] = desired
                answer = Answer(rank, op, data=desired)
            else:
                answer = Answer(rank, op, data=expected if current is None else current)
        return [answer, *self._unblocked(op.store)]

    def _answer(self, rank: int, op: StoreOp, data: dict[str, bytes]) -> Answer:
        return Answer(rank, op, data=data[op.keys[0]] if op.op == "get" else b"")

    def _unblocked(self, store: str) -> list[Answer]:
        data = self._data[store]
        answers = []
        for rank, op in list(self._waiters.items()):
            if op.store == store and all(k in data for k in op.keys):
                del self._waiters[rank]
                answers.append(self._answer(rank, op, data))
        return answers

    def withdraw(self, rank: int) -> StoreOp | None:
        """``rank`` no longer waits (its wait timed out, or its process is gone)."""
        return self._waiters.pop(rank, None)
