"""The master's SyncStateSet shrink / expand decisions with injected time (docs/reference-behaviour.md §10.1,
§10.4)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.autoswitch_ha.ack import countable_acks
from mqha.autoswitch_ha.sync_state_set import InSyncState, caught_up_time

MASTER = 1
A, B = "a" * 32, "b" * 32  # two incarnations of one slave (two processes)
THREE = InSyncState.for_master(MASTER, {1, 2, 3})


def test_effective_set_is_the_union_while_synchronizing_spec_10_1() -> None:
    state = InSyncState(local_id=1, local_set={1, 2}, remote_set={1, 3})
    assert state.is_synchronizing
    assert state.sync_state_set == {1, 2, 3}
    assert state.in_sync_replicas_nums == 2
    grown = InSyncState(local_id=1, local_set={1}, remote_set={1, 2, 3})
    assert grown.in_sync_replicas_nums == 3
    assert not THREE.is_synchronizing and THREE.sync_state_set == {1, 2, 3}
    assert THREE.in_sync_replicas_nums == 3


def test_confirmed_set_replaces_local_and_ends_synchronizing() -> None:
    state = InSyncState(local_id=1, local_set={1, 2}, remote_set={1, 3}).with_confirmed_set({1, 3})
    assert state == InSyncState(local_id=1, local_set={1, 3})


def test_caught_up_times_only_move_forward() -> None:
    state = THREE.with_caught_up(2, 1000, A).with_caught_up(2, 500, A)
    assert state.caught_up_ms == {2: 1000}
    assert state.with_caught_up(2, 1000, A) is state
    assert state.with_caught_up(2, 1500, A).caught_up_ms == {2: 1500}


# -- shrink -------------------------------------------------------------------------------------


def test_shrink_drops_slaves_behind_for_longer_than_the_limit() -> None:
    state = THREE.with_caught_up(2, 10_000, A).with_caught_up(3, 4_000, A)
    shrunk, proposal = state.maybe_shrink(now_ms=20_000, max_time_not_catchup_ms=15_000)
    assert proposal == {1, 2}
    assert shrunk.remote_set == {1, 2} and shrunk.local_set == {1, 2, 3}
    assert shrunk.sync_state_set == {1, 2, 3}  # union until the controller confirms


def test_shrink_limit_is_strictly_greater() -> None:
    state = THREE.with_caught_up(2, 4_000, A).with_caught_up(3, 4_000, A)
    assert state.maybe_shrink(now_ms=19_000, max_time_not_catchup_ms=15_000) == (state, None)
    assert state.maybe_shrink(now_ms=19_001, max_time_not_catchup_ms=15_000)[1] == {1}


def test_shrink_drops_members_that_never_connected() -> None:
    state = THREE.with_caught_up(2, 100, A)
    assert state.maybe_shrink(now_ms=200)[1] == {1, 2}


def test_shrink_keeps_the_master_and_proposes_nothing_when_all_are_fresh() -> None:
    state = THREE.with_caught_up(2, 100, A).with_caught_up(3, 100, A)
    assert state.maybe_shrink(now_ms=200) == (state, None)
    alone = InSyncState.for_master(MASTER, {1})
    assert alone.maybe_shrink(now_ms=10**9) == (alone, None)


def test_shrink_starts_from_the_local_set_not_the_union() -> None:
    state = InSyncState(local_id=1, local_set={1, 2}, remote_set={1, 2, 3}).with_caught_up(2, 0, A)
    shrunk, proposal = state.maybe_shrink(now_ms=20_000)
    assert proposal == {1}
    assert shrunk.remote_set == {1}


# -- expand ------------------------------------------------------------------------------------


LAGGING = InSyncState.for_master(MASTER, {1, 2})


@pytest.mark.parametrize(
    ("ack", "confirm", "epoch_start", "learner", "joins"),
    [
        (500, 500, 300, False, True),  # reached confirmOffset and the current epoch
        (600, 500, 300, False, True),
        (499, 500, 300, False, False),  # below confirmOffset
        (500, 400, 501, False, False),  # below the start of the master's last epoch
        (500, 500, 300, True, False),  # async learners never join
    ],
)
def test_expand_when_the_slave_reaches_confirm_offset(ack, confirm, epoch_start, learner, joins) -> None:
    state, proposal = LAGGING.maybe_expand(
        3,
        ack,
        incarnation=A,
        confirm_offset=confirm,
        last_epoch_start_offset=epoch_start,
        async_learner=learner,
    )
    if joins:
        assert proposal == {1, 2, 3}
        assert state.remote_set == {1, 2, 3} and state.local_set == {1, 2}
        assert state.in_sync_replicas_nums == 3
    else:
        assert (state, proposal) == (LAGGING, None)


def test_expand_proposes_nothing_for_members_and_binds_an_unbound_one() -> None:
    state, proposal = LAGGING.maybe_expand(
        2, 10**6, incarnation=A, confirm_offset=0, last_epoch_start_offset=0
    )
    assert proposal is None and state.local_set == LAGGING.local_set and not state.is_synchronizing
    assert state.bound == {2: A}
    assert state.maybe_expand(2, 10**6, incarnation=A, confirm_offset=0, last_epoch_start_offset=0) == (
        state,
        None,
    )


def test_expand_reproposes_until_confirmed_then_stops() -> None:
    state, first = LAGGING.maybe_expand(3, 500, incarnation=A, confirm_offset=500, last_epoch_start_offset=0)
    state, again = state.maybe_expand(3, 600, incarnation=A, confirm_offset=500, last_epoch_start_offset=0)
    assert first == again == {1, 2, 3}
    state = state.with_confirmed_set({1, 2, 3})
    assert state.maybe_expand(3, 700, incarnation=A, confirm_offset=500, last_epoch_start_offset=0) == (
        state,
        None,
    )


# -- connection loss ----------------------------------------------------------------------------


def test_connection_loss_shrinks_at_once_and_keeps_the_caught_up_time() -> None:
    state = THREE.with_caught_up(3, 777, A)
    after, proposal = state.on_connection_lost(3)
    assert proposal == {1, 2}
    assert after.remote_set == {1, 2} and after.caught_up_ms == {3: 777}
    assert after.sync_state_set == {1, 2, 3}  # still waits on 3's acks until the controller confirms
    assert after.with_confirmed_set({1, 2}).sync_state_set == {1, 2}


def test_connection_loss_of_a_non_member_changes_nothing() -> None:
    assert LAGGING.on_connection_lost(3) == (LAGGING, None)
    assert LAGGING.on_connection_lost(MASTER) == (LAGGING, None)


# -- caught-up time of an ack -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ack", "last_master_max", "last_transfer", "master_max", "expected"),
    [
        (1000, 1000, 50, 1000, 99),  # acked the master's end: now
        (900, 900, 50, 1000, 50),  # acked everything the last batch saw: that batch's time
        (899, 900, 50, 1000, None),  # behind the last batch's view
        (0, -1, None, 0, 99),  # nothing ever sent, nothing to send
        (0, -1, None, 10, None),  # nothing sent yet, but the master has data
    ],
)
def test_caught_up_time_spec_10_4(ack, last_master_max, last_transfer, master_max, expected) -> None:
    got = caught_up_time(
        ack_offset=ack,
        last_master_max_offset=last_master_max,
        last_transfer_ms=last_transfer,
        master_max_offset=master_max,
        now_ms=99,
    )
    assert got == expected


# -- incarnations (KIP-903's lesson; docs/architecture.md §4) ------------------------------------


def test_expansion_binds_the_incarnation_that_caught_up_and_the_confirmed_set_keeps_it() -> None:
    state, proposal = LAGGING.maybe_expand(
        3, 500, incarnation=B, confirm_offset=500, last_epoch_start_offset=0
    )
    assert proposal == {1, 2, 3} and state.bound == {3: B}
    assert state.with_confirmed_set({1, 2, 3}).bound == {3: B}
    assert state.with_confirmed_set({1, 2}).bound == {}  # the controller refused: no binding kept


def test_a_member_back_as_another_process_leaves_and_rejoins_as_itself() -> None:
    joined, _ = LAGGING.maybe_expand(3, 500, incarnation=A, confirm_offset=500, last_epoch_start_offset=0)
    member = joined.with_confirmed_set({1, 2, 3}).with_caught_up(3, 1_000, A)
    # Restarted (it may have lost its unflushed tail): its new process acks everything.
    after, proposal = member.maybe_expand(
        3, 10**6, incarnation=B, confirm_offset=0, last_epoch_start_offset=0
    )
    assert proposal == {1, 2}
    assert after.sync_state_set == {1, 2, 3}  # union while in flight, but 3's acks as B never count:
    assert countable_acks({3: 10**6}, {3: B}, set(), after.bound) == {}
    assert countable_acks({3: 10**6}, {3: A}, set(), after.bound) == {3: 10**6}
    # The same proposal again on the next ack (the keeper coalesces repeats).
    assert after.maybe_expand(3, 10**6, incarnation=B, confirm_offset=0, last_epoch_start_offset=0)[1] == {
        1,
        2,
    }
    # Confirmed without it; it rejoins bound to B once it caught up again.
    out = after.with_confirmed_set({1, 2})
    again, proposal = out.maybe_expand(3, 600, incarnation=B, confirm_offset=500, last_epoch_start_offset=0)
    assert proposal == {1, 2, 3} and again.bound == {3: B}


def test_a_caught_up_time_is_never_inherited_by_another_incarnation() -> None:
    member = InSyncState(local_id=1, local_set={1, 2}, bound={2: A}).with_caught_up(2, 10_000, A)
    # B connects and catches up once at 500: the time is B's, and it does not keep A (the bound one) in.
    later = member.with_caught_up(2, 500, B)
    assert later.caught_up_ms == {2: 500} and later.caught_up_incarnation == {2: B}
    assert later.maybe_shrink(now_ms=10_001)[1] == {1}
    assert member.maybe_shrink(now_ms=10_001) == (member, None)


def test_an_unknown_incarnation_is_never_caught_up_and_never_joins() -> None:
    assert LAGGING.with_caught_up(2, 100, None) is LAGGING
    assert LAGGING.maybe_expand(3, 500, incarnation=None, confirm_offset=0, last_epoch_start_offset=0) == (
        LAGGING,
        None,
    )
    # A member whose live connection announces nothing (or is a learner) leaves.
    assert LAGGING.maybe_expand(2, 500, incarnation=None, confirm_offset=0, last_epoch_start_offset=0)[1] == {
        1
    }
    learner = LAGGING.maybe_expand(
        2, 500, incarnation=A, confirm_offset=0, last_epoch_start_offset=0, async_learner=True
    )
    assert learner[1] == {1}


incarnations = st.sampled_from([A, B, None])
events = st.lists(
    st.tuples(
        st.sampled_from(["ack", "caught_up", "lost", "confirm"]),
        st.integers(2, 4),
        incarnations,
        st.integers(0, 1_000),
    ),
    max_size=25,
)


@given(events=events)
def test_membership_and_credit_stay_bound_to_one_incarnation(events) -> None:
    """Any sequence of acks, caught-up times, losses and confirmations: a member's caught-up credit
    is its bound incarnation's only, no one is bound outside the set, and a member whose connection
    is another incarnation has a proposal without it in flight right after that connection's ack."""
    state = InSyncState.for_master(MASTER, {1, 2})
    for kind, slave, incarnation, value in events:
        if kind == "ack":
            state, proposal = state.maybe_expand(
                slave, value, incarnation=incarnation, confirm_offset=300, last_epoch_start_offset=0
            )
            bound = state.bound.get(slave)
            if slave in state.local_set and (
                incarnation is None or (bound is not None and bound != incarnation)
            ):
                assert proposal is not None and slave not in proposal
            if slave not in state.local_set and proposal is not None:
                assert incarnation is not None and state.bound[slave] == incarnation
        elif kind == "caught_up":
            state = state.with_caught_up(slave, value, incarnation)
        elif kind == "lost":
            state, _ = state.on_connection_lost(slave)
        elif state.remote_set is not None:
            state = state.with_confirmed_set(state.remote_set)
        assert set(state.bound) <= set(state.sync_state_set) - {MASTER}
        for member in state.local_set - {MASTER}:
            earned_by = state.caught_up_incarnation.get(member)
            credited = state._caught_up_time(member)
            if credited is not None:
                assert earned_by is not None and state.bound.get(member, earned_by) == earned_by
