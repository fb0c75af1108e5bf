"""The coordinator on its own: no processes, no sockets, calls fed in by hand."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.world.coordinator import Coordinator
from harness.world.protocol import Collective, Recv, Send

from support import all_reduce, rendezvous


def test_a_step_completes_when_the_last_rank_arrives_and_answers_every_rank():
    c = Coordinator(3)
    assert c.collective(0, all_reduce(1)) == []
    assert c.collective(2, all_reduce(3)) == []
    assert set(c.waiting) == {0, 2}
    replies = c.collective(1, all_reduce(5))
    assert sorted((r, bytes(p)) for r, _, p in replies) == [(r, struct.pack("<i", 9)) for r in range(3)]
    assert c.waiting == {} and [e.kind for e in c.history][-1] == "complete"


def test_a_mismatch_never_completes_and_is_named_by_every_group():
    c = Coordinator(2)
    c.collective(0, all_reduce(1))
    assert c.collective(1, rendezvous("x", b"")) == []
    assert c.findings() == ["collective mismatch at step 0: rank 0: all_reduce(int32[1]); "
                            "rank 1: rendezvous 'x' (a real pod hangs or fails here)"]


def test_different_rendezvous_tags_pair_up_with_a_warning():
    c = Coordinator(2)
    c.collective(0, rendezvous("a", b"0"))
    replies = c.collective(1, rendezvous("b", b"1"))
    assert [(h["sizes"], bytes(p)) for _, h, p in replies] == [([1, 1], b"01")] * 2
    assert c.mismatches == ["rendezvous tags differ at step 0: rank 0 'a'; rank 1 'b'; "
                            "the real runtime pairs them up anyway"]


def test_groups_naming_ranks_outside_the_world_are_an_error_for_the_step_not_the_harness():
    c = Coordinator(2)
    c.collective(0, all_reduce(1, groups=[[0, 7]]))
    replies = c.collective(1, all_reduce(1, groups=[[0, 7]]))
    assert {r for r, _, _ in replies} == {0, 1}
    assert all(h["error"] == "TypeError" and "outside the world" in h["message"]
               for _, h, _ in replies)


def test_a_message_waits_in_its_mailbox_until_received_in_order():
    c = Coordinator(2)
    assert c.recv(1, Recv(box='["dist",0,1]', peer=0)) == []
    assert 1 in c.waiting
    assert c.send(0, Send(box='["dist",0,1]', peer=1, payload=b"a")) == [(0, {}, b""), (1, {}, b"a")]
    c.send(0, Send(box='["dist",0,1]', peer=1, payload=b"b"))
    c.send(0, Send(box='["dist",0,1]', peer=1, payload=b"c"))
    assert [c.recv(1, Recv(box='["dist",0,1]', peer=0))[0][2] for _ in range(2)] == [b"b", b"c"]


def test_a_recv_from_a_rank_that_is_gone_is_a_warning():
    c = Coordinator(2)
    c.rank_exited(0, "returned")
    c.recv(1, Recv(box="b", peer=0))
    assert "which returned" in c.history[-1].detail["message"]


def test_a_forgotten_rank_starts_the_sequence_afresh():
    c = Coordinator(2)
    c.collective(0, all_reduce(1))
    c.forget(0)  # pre-empted inside step 0: its arrival must not count for the next life
    assert c.collective(1, all_reduce(2)) == []
    replies = c.collective(0, all_reduce(3))
    assert {bytes(p) for _, _, p in replies} == {struct.pack("<i", 5)}


# -- any interleaving of the same calls ------------------------------------------------

def _call(step: int, rank: int, kind: str) -> Collective:
    if kind == "reduce":
        return all_reduce(10 * step + rank)
    if kind == "tag":  # the tag differs by rank: pairs up, with a warning
        return rendezvous(f"t{step}-{rank % 2}", bytes([rank, step]))
    return rendezvous(f"r{step}", bytes([rank] * (rank + 1)))


def _run(world: int, calls: dict[int, list[Collective]], pick) -> tuple:
    """Feed every rank's calls, a rank calling again only once answered (as it blocks);
    ``pick`` chooses which ready rank calls next."""
    c = Coordinator(world)
    next_call = dict.fromkeys(calls, 0)
    blocked: set[int] = set()
    replies: dict[int, list[tuple]] = {r: [] for r in calls}
    while ready := sorted(r for r in calls if r not in blocked and next_call[r] < len(calls[r])):
        rank = pick(ready)
        call = calls[rank][next_call[rank]]
        next_call[rank] += 1
        blocked.add(rank)
        for r, header, payload in c.collective(rank, call):
            blocked.discard(r)
            replies[r].append((sorted(header.items()), bytes(payload)))
    steps = sorted(e.step for e in c.history if e.kind == "complete")
    return replies, steps, sorted(c.mismatches), c.findings(), sorted(c.waiting)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_interleaving_of_the_same_calls_gives_the_same_steps_and_results(data):
    world = data.draw(st.integers(2, 4), label="world")
    kinds = data.draw(st.lists(st.sampled_from(["reduce", "gather", "tag"]), min_size=1,
                               max_size=4), label="steps")
    # Some ranks may diverge at one step (a mismatch) or stop early (a rank that left).
    diverge = data.draw(st.none() | st.tuples(st.integers(0, world - 1),
                                              st.integers(0, len(kinds) - 1)), label="diverge")
    lengths = {r: data.draw(st.integers(0, len(kinds)), label=f"calls of rank {r}")
               for r in range(world)}
    calls = {}
    for r in range(world):
        seq = [_call(s, r, k) for s, k in enumerate(kinds)]
        if diverge is not None and diverge[0] == r:
            s = diverge[1]
            seq[s] = _call(s, r, "gather" if kinds[s] == "reduce" else "reduce")
        calls[r] = seq[:lengths[r]]
    anyhow = _run(world, calls, lambda ready: data.draw(st.sampled_from(ready)))
    assert anyhow == _run(world, calls, min)
