"""The world's process groups and stores as pure state machines (``world/groups.py``,
``world/stores.py``) and through the coordinator: gloo's answers to a peer's exit and to
a peer that never calls, TCPStore's answers to every operation."""

from __future__ import annotations

import pytest

from harness.world.coordinator import Coordinator
from harness.world.groups import ProcessGroups
from harness.world.protocol import Collective, StoreOp
from harness.world.stores import StoreError, Stores


def call(op: str = "all_reduce", members: tuple[int, ...] = (0, 1, 2), group: str = "0",
         timeout_ms: int | None = None, payload: bytes = b"") -> Collective:
    return Collective(op=op, kind="gather_bytes", group=group, groups=[list(members)],
                      timeout_ms=timeout_ms, payload=payload)


def connect(groups: ProcessGroups, members: tuple[int, ...] = (0, 1, 2)) -> None:
    for r in members:
        groups.arrive(r, call("init_process_group", members))


def test_a_step_completes_when_every_member_arrived_and_not_before() -> None:
    groups = ProcessGroups()
    connect(groups)
    assert groups.arrive(0, call()).complete is None
    assert groups.arrive(2, call()).complete is None
    done = groups.arrive(1, call())
    assert done.seq == 1 and sorted(done.complete or {}) == [0, 1, 2]


def test_groups_have_sequences_of_their_own() -> None:
    groups = ProcessGroups()
    connect(groups)
    connect(groups, (0, 1))
    groups.arrive(0, call(members=(0, 1), group="1"))
    assert groups.arrive(1, call(members=(0, 1), group="1")).complete is not None
    assert groups.arrive(0, call()).seq == 1  # the world group's first call still


def test_an_exit_closes_the_groups_the_process_joined_for_waiters_and_later_callers() -> None:
    groups = ProcessGroups()
    connect(groups)
    groups.arrive(0, call())
    assert [(r, seq) for r, _, seq in groups.gone(2)] == [(0, 1)]  # rank 0 waited in step 1
    assert groups.arrive(1, call()).closed == 2  # a later caller fails at once
    assert groups.arrive(0, call()).closed == 2


def test_an_exit_before_the_group_was_created_closes_nothing() -> None:
    groups = ProcessGroups()
    groups.arrive(0, call("init_process_group"))
    assert groups.gone(2) == []
    assert groups.waiting_in(0) == ("0", 0)  # still waits for rank 2 to connect
    assert groups.missing("0", 0) == [1, 2]


def test_a_group_created_again_starts_afresh_whatever_each_member_called_before() -> None:
    groups = ProcessGroups()
    connect(groups)
    groups.arrive(0, call())
    groups.arrive(0, call())  # rank 0 is two calls ahead of the others
    groups.gone(1)
    groups.forget(1)  # rank 1 comes back; every member creates the group again
    connect(groups)
    done = [groups.arrive(r, call()) for r in (0, 1, 2)]
    assert [a.seq for a in done] == [1, 1, 1] and done[-1].complete is not None


def test_the_coordinator_answers_a_closed_group_with_the_peer_that_left() -> None:
    coord = Coordinator(3)
    for r in range(3):
        coord.collective(r, call("init_process_group"))
    assert coord.collective(0, call()) == []
    coord.gone(2)
    assert coord.take_outbox() == []  # other exits of this instant may still come
    coord.settle()
    assert coord.take_outbox() == [(0, {"closed": 2}, b"")]
    assert coord.collective(1, call()) == [(1, {"closed": 2}, b"")]
    assert 0 not in coord.waiting


def _exits_at_one_instant(order: list[int]) -> tuple[list, list]:
    coord = Coordinator(4)
    for r in range(4):
        coord.collective(r, call("init_process_group"))
    coord.collective(0, call())
    coord.collective(1, call())  # ranks 0 and 1 wait for 2 and 3
    for r in order:
        coord.gone(r)
    coord.settle()
    warnings = [e.detail["message"] for e in coord.history if e.kind == "warning"]
    return coord.take_outbox(), warnings


def test_exits_at_one_instant_are_answered_the_same_in_every_order_the_machine_tells_them() -> None:
    # Ranks 1, 2 and 3 killed at one world instant: the harness hears their exits in the
    # machine's order. Rank 0 is told of the lowest member gone; rank 1, dying itself, of none.
    outcomes = [_exits_at_one_instant(order) for order in ([1, 2, 3], [3, 2, 1], [2, 1, 3])]
    assert outcomes[0] == outcomes[1] == outcomes[2]
    replies, warnings = outcomes[0]
    assert replies == [(0, {"closed": 1}, b"")]
    assert len(warnings) == 1 and "rank 1, a member" in warnings[0]


def test_a_wait_times_out_at_its_limit_on_the_world_clock_and_names_who_never_came() -> None:
    now = [0.0]
    coord = Coordinator(3, now=lambda: now[0])
    for r in range(3):
        coord.collective(r, call("init_process_group"))
    coord.collective(0, call(timeout_ms=1500))
    coord.collective(1, call(timeout_ms=1500))
    assert coord.next_deadline() == 1.5
    now[0] = 1.4
    coord.expire()
    assert coord.take_outbox() == []
    now[0] = 1.5
    coord.expire()
    assert coord.take_outbox() == [(0, {"timed_out": 1500, "missing": [2]}, b""),
                                   (1, {"timed_out": 1500, "missing": [2]}, b"")]
    assert coord.next_deadline() is None
    messages = [e.detail["message"] for e in coord.history if e.kind == "warning"]
    assert any("rank 2 never called it" in m for m in messages)


def test_a_call_naming_members_outside_the_world_is_refused() -> None:
    coord = Coordinator(2)
    (reply,) = coord.collective(0, call(members=(0, 5)))
    assert reply[1]["error"] == "ValueError" and "not one list of this world's ranks" in \
        reply[1]["message"]


# -- stores ---------------------------------------------------------------------------

def op(kind: str, *keys: str, payload: bytes = b"", amount: int = 0, split: int = 0,
       store: str = "xla://") -> StoreOp:
    return StoreOp(store=store, op=kind, keys=list(keys), payload=payload, amount=amount,
                   split=split)


def test_a_get_of_a_missing_key_waits_until_a_set_answers_it() -> None:
    stores = Stores()
    assert stores.apply(1, op("get", "k")) == []
    answers = stores.apply(0, op("set", "k", payload=b"v"))
    assert [(a.rank, a.data) for a in answers] == [(0, b""), (1, b"v")]


def test_a_wait_returns_only_once_every_key_is_set() -> None:
    stores = Stores()
    assert stores.apply(1, op("wait", "a", "b")) == []
    assert [a.rank for a in stores.apply(0, op("set", "a", payload=b"1"))] == [0]
    assert [a.rank for a in stores.apply(0, op("set", "b", payload=b"1"))] == [0, 1]


def test_stores_at_other_addresses_hold_other_keys() -> None:
    stores = Stores()
    stores.apply(0, op("set", "k", payload=b"here", store="tcp://w-0:29500"))
    assert stores.apply(1, op("check", "k", store="tcp://w-1:29500"))[0].value == 0
    assert stores.apply(1, op("check", "k", store="tcp://w-0:29500"))[0].value == 1


@pytest.mark.parametrize("current, expected, desired, returned, after", [
    (None, b"", b"v", b"v", b"v"),  # missing and expected empty: set
    (None, b"a", b"b", b"a", None),  # missing, expected given: the expected comes back
    (b"v", b"v", b"w", b"w", b"w"),  # matches: set
    (b"v", b"zz", b"w", b"v", b"v"),  # differs: the current value comes back
])
def test_compare_set_follows_tcpstore(current, expected, desired, returned, after) -> None:
    stores = Stores()
    if current is not None:
        stores.apply(0, op("set", "k", payload=current))
    (answer,) = stores.apply(0, op("compare_set", "k", payload=expected + desired,
                                   split=len(expected)))
    assert answer.data == returned
    assert stores.apply(0, op("check", "k"))[0].value == (after is not None)


def test_add_counts_from_zero_and_refuses_a_value_that_is_no_integer() -> None:
    stores = Stores()
    assert stores.apply(0, op("add", "n", amount=2))[0].value == 2
    assert stores.apply(0, op("add", "n", amount=-5))[0].value == -3
    stores.apply(0, op("set", "s", payload=b"text"))
    with pytest.raises(StoreError, match="'s', whose value is not an integer"):
        stores.apply(0, op("add", "s", amount=1))
    assert stores.apply(0, op("num_keys"))[0].value == 2
    assert stores.apply(0, op("delete", "n"))[0].value == 1
    assert stores.apply(0, op("delete", "n"))[0].value == 0


def test_an_unknown_store_operation_is_refused_by_name() -> None:
    with pytest.raises(StoreError, match="'append', not one of"):
        Stores().apply(0, op("append", "k"))


def test_the_coordinator_times_out_a_store_read() -> None:
    now = [0.0]
    coord = Coordinator(2, now=lambda: now[0])
    read = op("get", "k")
    read.timeout_ms = 300_000
    assert coord.store(1, read) == []
    assert coord.waiting[1].describe() == "store get 'k'"
    now[0] = 300.0
    coord.expire()
    assert coord.take_outbox() == [(1, {"timed_out": 300_000, "missing": []}, b"")]
    assert coord.store(0, op("set", "k", payload=b"late")) == [(0, {}, b"")]  # no reader left
