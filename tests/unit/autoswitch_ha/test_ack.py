"""Put ack rules (docs/reference-behaviour.md §15) and the master's confirmOffset (docs/reference-behaviour.md
§10.5, §14)."""

import pytest

from mqha.autoswitch_ha.ack import (
    ALL_IN_SYNC_STATE_SET,
    AckPolicy,
    AckStatus,
    check_in_sync_replicas,
    compute_confirm_offset,
    master_confirm_offset,
    replica_ack_status,
)

OK, WAIT, NOT_ENOUGH, TIMEOUT = (
    AckStatus.OK,
    AckStatus.WAIT,
    AckStatus.IN_SYNC_REPLICAS_NOT_ENOUGH,
    AckStatus.FLUSH_SLAVE_TIMEOUT,
)
ALL = AckPolicy(all_ack_in_sync_state_set=True)


def numeric(n: int) -> AckPolicy:
    return AckPolicy(in_sync_replicas=n)


def test_status_values_are_put_message_status_names() -> None:
    assert OK.value == "PUT_OK"
    assert NOT_ENOUGH.value == "IN_SYNC_REPLICAS_NOT_ENOUGH"
    assert TIMEOUT.value == "FLUSH_SLAVE_TIMEOUT"


@pytest.mark.parametrize(
    ("policy", "required", "waits"),
    [
        (AckPolicy(), 1, False),
        (numeric(0), 0, False),
        (numeric(2), 2, True),
        (ALL, ALL_IN_SYNC_STATE_SET, True),
        (AckPolicy(all_ack_in_sync_state_set=True, in_sync_replicas=1), ALL_IN_SYNC_STATE_SET, True),
    ],
)
def test_required_acks_spec_15_step_2(policy: AckPolicy, required: int, waits: bool) -> None:
    assert policy.required_acks == required
    assert policy.needs_replica_wait is waits


@pytest.mark.parametrize(
    ("min_in_sync", "in_sync_nums", "expected"),
    [(1, 1, OK), (1, 0, NOT_ENOUGH), (2, 1, NOT_ENOUGH), (2, 2, OK), (2, 3, OK), (3, 2, NOT_ENOUGH)],
)
def test_in_sync_replicas_checked_before_appending_spec_15_step_1(
    min_in_sync, in_sync_nums, expected
) -> None:
    assert check_in_sync_replicas(AckPolicy(min_in_sync_replicas=min_in_sync), in_sync_nums) is expected


# (policy, SyncStateSet (effective), slave acks, expected) for a message ending at offset 100.
ACK_TABLE = {
    # required acks 0 or 1: the master's write is enough
    "numeric 1, nobody acked": (numeric(1), {1, 2}, {}, OK),
    "numeric 0": (numeric(0), {1, 2}, {}, OK),
    # numeric N counts any slave, in the SSS or not (learners included)
    "numeric 2, one slave acked": (numeric(2), {1}, {2: 100}, OK),
    "numeric 2, slave short": (numeric(2), {1, 2}, {2: 99}, WAIT),
    "numeric 2, non-SSS slave counts": (numeric(2), {1, 2}, {2: 0, 3: 150}, OK),
    "numeric 3, two acked": (numeric(3), {1}, {2: 100, 3: 100}, OK),
    "numeric 3, one acked": (numeric(3), {1, 2, 3}, {2: 100, 3: 50}, WAIT),
    # all of the SyncStateSet
    "all, master alone": (ALL, {1}, {}, OK),
    "all, empty set": (ALL, set(), {}, OK),
    "all, both slaves acked": (ALL, {1, 2, 3}, {2: 100, 3: 120}, OK),
    "all, one slave short": (ALL, {1, 2, 3}, {2: 100, 3: 99}, WAIT),
    "all, member not connected": (ALL, {1, 2, 3}, {2: 100}, WAIT),
    "all, non-member ack does not count": (ALL, {1, 2}, {3: 500}, WAIT),
    "all, non-member ack plus member": (ALL, {1, 2}, {2: 100, 3: 500}, OK),
    # union while a change is in flight: local {1,2} ∪ remote {1,3} must all ack
    "all, union needs both": (ALL, {1, 2, 3}, {2: 100}, WAIT),
}


@pytest.mark.parametrize(("policy", "sss", "acks", "expected"), ACK_TABLE.values(), ids=ACK_TABLE.keys())
def test_replica_ack_rules_spec_15_step_3(policy, sss, acks, expected) -> None:
    assert (
        replica_ack_status(policy, next_offset=100, sync_state_set=frozenset(sss), slave_acks=acks)
        is expected
    )


def test_deadline_turns_wait_into_flush_slave_timeout() -> None:
    kwargs = {"next_offset": 100, "sync_state_set": {1, 2}, "slave_acks": {2: 50}, "deadline_ms": 3000}
    assert replica_ack_status(ALL, now_ms=2999, **kwargs) is WAIT
    assert replica_ack_status(ALL, now_ms=3000, **kwargs) is TIMEOUT
    assert replica_ack_status(ALL, **kwargs) is WAIT  # no clock given: undecided
    done = {**kwargs, "slave_acks": {2: 100}}
    assert replica_ack_status(ALL, now_ms=9999, **done) is OK  # an ack in time wins over the deadline


# -- confirmOffset ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sss", "acks", "stored", "expected"),
    [
        ({1}, {}, 10, 500),  # master alone: its max offset
        ({1, 2, 3}, {2: 300, 3: 400}, 10, 300),  # minimum over members
        ({1, 2}, {2: 300, 3: 100}, 10, 300),  # a non-member's ack does not hold it back
        ({1, 2, 3}, {2: 300}, 10, 10),  # member 3 has no live connection: stored value stands
        ({1, 2}, {2: 0}, 10, 500),  # no ack yet (0) is skipped, as in the reference
        ({1, 2}, {2: -1}, 10, 500),
        ({1, 2}, {2: 700}, 10, 500),  # a slave cannot push it past the master's max
    ],
)
def test_compute_confirm_offset_spec_10_5(sss, acks, stored, expected) -> None:
    got = compute_confirm_offset(
        master_max_offset=500, sync_state_set=sss, local_id=1, slave_acks=acks, stored_confirm_offset=stored
    )
    assert got == expected


@pytest.mark.parametrize(
    ("all_ack", "local_set", "stored", "expected"),
    [
        (False, {1, 2}, 100, 900),  # no all-ack: puts never waited, so the max offset
        (True, {1}, 100, 900),  # single member: the max offset
        (True, {1, 2}, 100, 100),  # maintained value
        (True, {1, 2}, -1, 400),  # first read initialises from computeConfirmOffset
    ],
)
def test_master_confirm_offset_spec_14(all_ack, local_set, stored, expected) -> None:
    got = master_confirm_offset(
        all_ack_in_sync_state_set=all_ack,
        local_sync_state_set=local_set,
        master_max_offset=900,
        stored_confirm_offset=stored,
        computed_confirm_offset=400,
    )
    assert got == expected
