"""AckGate's confirm offset while a SyncStateSet change is in flight (found by mqha.sim, seed 212)."""

from __future__ import annotations

from mqha.autoswitch_ha.ack import AckPolicy
from mqha.autoswitch_ha.gate import AckGate
from mqha.autoswitch_ha.keeper import SyncStateSetKeeper
from mqha.autoswitch_ha.links import SlaveLinks
from mqha.role import BrokerRole
from mqha.sim.storage import Disk, SimStore

INCARNATION = "0" * 31 + "1"


def _master(log_bytes: int) -> tuple[AckGate, SyncStateSetKeeper, SimStore]:
    store = SimStore(Disk("s", log=bytearray(log_bytes)))
    role = BrokerRole()
    role.set_broker_id(1)
    role.to_master(1, 1, "m:1", "m:2")
    role.set_fenced(False)
    keeper = SyncStateSetKeeper(lambda: 0, 1_000, None)
    keeper.start_master(1, frozenset({1}), was_master=False)
    gate = AckGate(
        store,
        role,
        keeper,
        SlaveLinks(),
        policy=AckPolicy(all_ack_in_sync_state_set=True),
        slave_timeout_ms=1,
    )
    return gate, keeper, store


def test_a_one_member_set_confirms_its_log_end() -> None:
    gate, _, store = _master(16)
    assert gate.confirm_offset() == store.max_offset == 16


def test_an_expansion_in_flight_stops_the_one_member_rule() -> None:
    """The controller may have committed {1, 2} (its reply lost): 2 can be elected, so what 2 does not
    hold must not be served as confirmed."""
    gate, keeper, store = _master(16)
    keeper.expand(
        2, 16, incarnation=INCARNATION, confirm_offset=16, last_epoch_start_offset=0, async_learner=False
    )
    assert keeper.sync_state_set() == {1, 2}  # proposed, not confirmed
    store.append(b"x" * 8, fsync=True)  # a put the new member does not have
    gate.recompute_confirm_offset()
    assert gate.confirm_offset() < store.max_offset


def test_in_sync_replicas_stored_value_does_not_take_the_log_end_of_a_lone_master() -> None:
    """inSyncReplicas=2: with the set shrunk to the master, fewer than 2 copies can exist; readers keep
    the stored value (mqha.sim seed 22: they were served the log end, then a failover replaced it)."""
    gate, _, store = _master(16)
    gate.policy = AckPolicy(all_ack_in_sync_state_set=False, in_sync_replicas=2, min_in_sync_replicas=1)
    store.set_stored_confirm_offset(8)
    store.append(b"x" * 8, fsync=True)
    gate.recompute_confirm_offset()
    assert gate.confirm_offset() == 8
