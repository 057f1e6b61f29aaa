"""The master's SyncStateSet shrink / expand decisions with injected time (docs/reference-behaviour.md §10.1,
§10.4)."""

import pytest

from mqha.autoswitch_ha.sync_state_set import InSyncState, caught_up_time

MASTER = 1
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
    state = THREE.with_caught_up(2, 1000).with_caught_up(2, 500)
    assert state.caught_up_ms == {2: 1000}
    assert state.with_caught_up(2, 1000) is state
    assert state.with_caught_up(2, 1500).caught_up_ms == {2: 1500}


# -- shrink -------------------------------------------------------------------------------------


def test_shrink_drops_slaves_behind_for_longer_than_the_limit() -> None:
    state = THREE.with_caught_up(2, 10_000).with_caught_up(3, 4_000)
    shrunk, proposal = state.maybe_shrink(now_ms=20_000, max_time_not_catchup_ms=15_000)
    assert proposal == {1, 2}
    assert shrunk.remote_set == {1, 2} and shrunk.local_set == {1, 2, 3}
    assert shrunk.sync_state_set == {1, 2, 3}  # union until the controller confirms


def test_shrink_limit_is_strictly_greater() -> None:
    state = THREE.with_caught_up(2, 4_000).with_caught_up(3, 4_000)
    assert state.maybe_shrink(now_ms=19_000, max_time_not_catchup_ms=15_000) == (state, None)
    assert state.maybe_shrink(now_ms=19_001, max_time_not_catchup_ms=15_000)[1] == {1}


def test_shrink_drops_members_that_never_connected() -> None:
    state = THREE.with_caught_up(2, 100)
    assert state.maybe_shrink(now_ms=200)[1] == {1, 2}


def test_shrink_keeps_the_master_and_proposes_nothing_when_all_are_fresh() -> None:
    state = THREE.with_caught_up(2, 100).with_caught_up(3, 100)
    assert state.maybe_shrink(now_ms=200) == (state, None)
    alone = InSyncState.for_master(MASTER, {1})
    assert alone.maybe_shrink(now_ms=10**9) == (alone, None)


def test_shrink_starts_from_the_local_set_not_the_union() -> None:
    state = InSyncState(local_id=1, local_set={1, 2}, remote_set={1, 2, 3}).with_caught_up(2, 0)
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
        3, ack, confirm_offset=confirm, last_epoch_start_offset=epoch_start, async_learner=learner
    )
    if joins:
        assert proposal == {1, 2, 3}
        assert state.remote_set == {1, 2, 3} and state.local_set == {1, 2}
        assert state.in_sync_replicas_nums == 3
    else:
        assert (state, proposal) == (LAGGING, None)


def test_expand_ignores_members_of_the_local_set() -> None:
    assert LAGGING.maybe_expand(2, 10**6, confirm_offset=0, last_epoch_start_offset=0) == (LAGGING, None)


def test_expand_reproposes_until_confirmed_then_stops() -> None:
    state, first = LAGGING.maybe_expand(3, 500, confirm_offset=500, last_epoch_start_offset=0)
    state, again = state.maybe_expand(3, 600, confirm_offset=500, last_epoch_start_offset=0)
    assert first == again == {1, 2, 3}
    state = state.with_confirmed_set({1, 2, 3})
    assert state.maybe_expand(3, 700, confirm_offset=500, last_epoch_start_offset=0) == (state, None)


# -- connection loss ----------------------------------------------------------------------------


def test_connection_loss_shrinks_at_once_and_keeps_the_caught_up_time() -> None:
    state = THREE.with_caught_up(3, 777)
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
