"""A master machine and a slave machine replicating between in-memory logs (docs/reference-behaviour.md §11,
§13).

Each test builds replicas, connects them with :class:`Pair` (bytes moved in 7-byte chunks, every
action executed as a shell would) and checks the end state: the slave holds exactly the master's
bytes and the same epochs, or the handshake failed without touching anything.
"""

import pytest

from mqha.autoswitch_ha.events import CaughtUp, ResetLog, SlaveAck, TruncateTo
from mqha.autoswitch_ha.master import MasterConfig
from mqha.autoswitch_ha.slave import SlaveConfig
from mqha.autoswitch_ha.state import ERROR, SHUTDOWN, TRANSFER
from mqha.epoch.history import EpochHistory
from tests.scenarios.ha.harness import Pair, Replica, assert_replica_of, message, sync


def h(*pairs: tuple[int, int]) -> EpochHistory:
    return EpochHistory.from_pairs(pairs)


def cut_bytes(replica: Replica) -> int:
    return sum(top - to for top, to in replica.truncations)


# -- docs/reference-behaviour.md §13 worked examples
# ---------------------------------------------------------------------


def test_case_a_nothing_cut_master_streams_the_rest_of_epoch_2_then_epoch_3() -> None:
    master = Replica.with_log("m", 1, [(1, 0), (2, 1000), (3, 2000)], 2500)
    slave = Replica.with_log("s", 2, [(1, 0), (2, 1000)], 1800)
    pair = sync(master, slave)
    assert pair.truncation == TruncateTo(offset=1800, epochs=h((1, 0), (2, 1000)))
    assert slave.truncations == []
    assert slave.max_offset == 2500 and slave.epochs == master.epochs
    assert_replica_of(slave, master)
    assert slave.confirm_offset == 2500
    assert pair.m.state is TRANSFER and pair.s.state is TRANSFER and not pair.closed


def test_case_b_unreplicated_tail_of_the_old_master_is_cut() -> None:
    master = Replica.with_log("m", 1, [(1, 0), (2, 1000), (3, 1200)], 2000)
    slave = Replica.with_log("s", 2, [(1, 0), (2, 1000)], 1500)
    pair = sync(master, slave)
    assert pair.truncation == TruncateTo(offset=1200, epochs=h((1, 0), (2, 1000)))
    assert slave.truncations == [(1500, 1200)]
    assert slave.epochs == h((1, 0), (2, 1000), (3, 1200))
    assert_replica_of(slave, master)
    assert slave.max_offset == master.max_offset


def test_case_c_epoch_unknown_to_the_master_is_dropped() -> None:
    master = Replica.with_log("m", 1, [(1, 0), (2, 400), (4, 700)], 900)
    slave = Replica.with_log("s", 2, [(1, 0), (3, 500)], 800)
    pair = sync(master, slave)
    assert pair.truncation == TruncateTo(offset=400, epochs=h((1, 0)))
    assert slave.truncations == [(800, 400)]
    assert slave.epochs == h((1, 0), (2, 400), (4, 700))
    assert_replica_of(slave, master)
    assert slave.max_offset == 900


def test_case_d_no_consistent_point_empties_the_slave_and_resyncs_it_from_the_master() -> None:
    # The reference fails this handshake forever (repair by hand) while the slave keeps serving its old
    # messages at offsets the master reuses; mqha empties it and re-syncs from the master's log start.
    master = Replica.with_log("m", 1, [(1, 200), (2, 500)], 700)
    slave = Replica.with_log("s", 2, [(1, 100), (2, 300), (3, 500)], 600)
    pair = sync(master, slave)
    resets = [e for e in pair.slave_events if isinstance(e, ResetLog)]
    assert len(resets) == 1 and "no consistent point" in resets[0].reason
    assert pair.slave_events.index(resets[0]) < pair.slave_events.index(pair.truncation)
    assert pair.truncation == TruncateTo(offset=0, epochs=EpochHistory())
    assert not [c for c in pair.closed if c.error is not None]
    assert slave.messages == master.messages and slave.epochs == master.epochs
    assert_replica_of(slave, master)


def test_case_e_zero_length_local_epoch_dropped_no_data_cut() -> None:
    master = Replica.with_log("m", 1, [(1, 0), (3, 1000)], 1500)
    slave = Replica.with_log("s", 2, [(1, 0), (2, 1000)], 1000)
    pair = sync(master, slave)
    assert pair.truncation == TruncateTo(offset=1000, epochs=h((1, 0)))
    assert slave.truncations == []
    assert slave.epochs == h((1, 0), (3, 1000))
    assert_replica_of(slave, master)


def test_new_replica_copies_everything() -> None:
    master = Replica.with_log("m", 1, [(1, 0), (2, 1000), (3, 2000)], 2500)
    slave = Replica("s", 2)
    pair = sync(master, slave, master_config=MasterConfig(transfer_batch_size=250))
    assert pair.truncation == TruncateTo(offset=0, epochs=h())
    assert slave.epochs == master.epochs and slave.messages == master.messages
    # small batches, none spanning an epoch: every batch boundary up to each epoch end is exact
    appended = [e for e in pair.slave_events if type(e).__name__ == "AppendData"]
    assert all(len(part) <= 250 for e in appended for part in e.parts)
    assert {e.end_offset for e in appended} >= {1000, 2000, 2500}


# -- double failovers ------------------------------------------------------------------------------


def test_old_master_rejoins_with_an_unreplicated_tail_then_leads_again() -> None:
    a, b = Replica("a", 1), Replica("b", 2)
    a.become_master(1)
    a.write(10)
    sync(a, b)
    a.write(5)  # acknowledged by nobody: lost on failover
    b.become_master(2)
    b.write(3)
    pair = sync(b, a)  # the old master rejoins as a slave
    assert pair.truncation == TruncateTo(offset=1000, epochs=h((1, 0)))
    assert a.truncations == [(1500, 1000)]
    assert_replica_of(a, b)
    assert a.max_offset == b.max_offset == 1300
    # double failover: a leads again and b follows without cutting anything
    a.become_master(3)
    a.write(2)
    pair = sync(a, b)
    assert b.truncations == []
    assert_replica_of(b, a)
    assert b.epochs == h((1, 0), (2, 1000), (3, 1300)) == a.epochs


def test_slave_holding_an_epoch_the_new_master_never_saw() -> None:
    a, b, c = Replica("a", 1), Replica("b", 2), Replica("c", 3)
    a.become_master(1)
    a.write(10)
    sync(a, b)
    sync(a, c)
    b.become_master(2)  # a is cut off; b leads epoch 2 and only c follows
    b.write(4)
    sync(b, c)
    assert c.epochs == h((1, 0), (2, 1000))
    a.become_master(3)  # b is lost too; a (which never saw epoch 2) is elected uncleanly
    a.write(2)
    for follower in (c, b):
        pair = sync(a, follower)
        assert pair.truncation == TruncateTo(offset=1000, epochs=h((1, 0)))
        assert follower.truncations == [(1400, 1000)]
        assert_replica_of(follower, a)
        assert follower.epochs == h((1, 0), (3, 1000))
    assert a.messages == b.messages == c.messages


def test_master_re_elected_without_writing_replaces_its_zero_length_epoch() -> None:
    a, b = Replica("a", 1), Replica("b", 2)
    a.become_master(1)
    a.write(5)
    sync(a, b)
    a.become_master(2)  # re-elected, writes nothing
    b.become_master(3)  # then b takes over at the same offset
    assert b.epochs == h((1, 0), (3, 500))
    b.write(2)
    pair = sync(b, a)
    assert pair.truncation == TruncateTo(offset=500, epochs=h((1, 0)))
    assert a.truncations == [] and a.epochs == h((1, 0), (3, 500))
    assert_replica_of(a, b)
    a.become_master(4)  # a re-elected at 700 after following: zero-length again
    a.become_master(5)  # and once more: epoch 4 never wrote a byte, 5 replaces it
    assert a.epochs == h((1, 0), (3, 500), (5, 700))
    a.write(1)
    sync(a, b)
    assert_replica_of(b, a) and b.epochs == a.epochs


def test_partial_replication_then_failover_then_catch_up() -> None:
    a, b, c = Replica("a", 1), Replica("b", 2), Replica("c", 3)
    a.become_master(1)
    a.write(20)
    Pair(a, b, master_config=MasterConfig(transfer_batch_size=300)).pump(until_slave_offset=1200)
    Pair(a, c, master_config=MasterConfig(transfer_batch_size=300)).pump(until_slave_offset=600)
    assert (b.max_offset, c.max_offset) == (1200, 600)
    b.become_master(2)
    b.write(3)
    for follower in (c, a):
        sync(b, follower)
        assert_replica_of(follower, b)
    assert a.truncations == [(2000, 1200)] and c.truncations == []
    assert a.messages == b.messages == c.messages


def test_master_starts_a_new_epoch_during_a_live_connection() -> None:
    # changeToMasterWhenLastRoleIsMaster appends an epoch without closing connections
    # (docs/reference-behaviour.md §10.3).
    a, b = Replica("a", 1), Replica("b", 2)
    a.become_master(1)
    a.write(3)
    pair = sync(a, b)
    a.become_master(2)
    a.write(2)
    pair.refresh()
    pair.pump()
    assert b.epochs == h((1, 0), (2, 300)) and b.messages == a.messages
    assert pair.m.state is TRANSFER and not pair.closed


# -- start offsets and heartbeats ------------------------------------------------------------------


def test_new_replica_syncing_from_the_last_file() -> None:
    master = Replica.with_log("m", 1, [(1, 0), (2, 1000)], 2500)
    slave = Replica("s", 2)
    pair = sync(
        master,
        slave,
        master_config=MasterConfig(mapped_file_size=1000),
        slave_config=SlaveConfig(sync_from_last_file=True),
    )
    assert slave.min_offset == 2000 and slave.max_offset == 2500
    assert slave.epochs == h((2, 1000))
    assert_replica_of(slave, master)
    assert pair.m.transfer_from == 2000


def test_new_replica_starts_at_the_masters_min_offset() -> None:
    master = Replica.with_log("m", 1, [(3, 700), (4, 900)], 1200)
    slave = Replica("s", 2)
    sync(master, slave)
    assert slave.min_offset == 700 and slave.messages == master.messages
    assert slave.epochs == master.epochs


def test_heartbeats_keep_an_idle_pair_alive_and_caught_up() -> None:
    a, b = Replica("a", 1), Replica("b", 2)
    a.become_master(1)
    a.write(2)
    pair = sync(a, b)
    for now in range(1_000, 60_001, 1_000):
        pair.tick(now)
        pair.pump()
    assert pair.m.state is TRANSFER and pair.s.state is TRANSFER
    caught_up = [e.at_ms for e in pair.master_events if isinstance(e, CaughtUp)]
    assert max(caught_up) == 60_000
    acks = [e for e in pair.master_events if isinstance(e, SlaveAck)]
    assert len(acks) >= 12  # one heartbeat ACK every 5 s
    a.write(1)
    pair.refresh()
    pair.pump()
    assert b.messages == a.messages


def test_a_silent_master_is_dropped_by_housekeeping() -> None:
    a, b = Replica("a", 1), Replica("b", 2)
    a.become_master(1)
    pair = sync(a, b)
    pair.s.tick(20_001)
    pair.pump()
    assert pair.s.state is SHUTDOWN and pair.m.state is SHUTDOWN


# -- corruption ------------------------------------------------------------------------------------


def test_corrupt_frame_mid_transfer_closes_the_connection_only() -> None:
    a, b = Replica("a", 1), Replica("b", 2)
    a.become_master(1)
    a.write(10)
    pair = Pair(a, b, master_config=MasterConfig(transfer_batch_size=300)).pump(until_slave_offset=300)
    assert b.max_offset == 300  # cut mid-stream; reconnect, then a corrupt frame arrives
    pair = Pair(a, b, master_config=MasterConfig(transfer_batch_size=300))
    pair.step()  # handshake and offer
    pair.step()  # truncation, first ack, first batch
    assert pair.s.state is TRANSFER and b.max_offset == 600
    pair.inject_to_slave(b"\x00\x00\x00\x02" + b"\xff" * 40)  # TRANSFER, negative body size
    pair.pump()
    assert pair.s.state is ERROR and pair.m.state is SHUTDOWN
    assert b.messages == {o: m for o, m in a.messages.items() if o < b.max_offset}
    assert_replica_of(b, a)
    # the replica is intact: a fresh connection finishes the job
    sync(a, b)
    assert b.messages == a.messages


def test_corrupt_ack_closes_the_masters_side() -> None:
    a, b = Replica("a", 1), Replica("b", 2)
    a.become_master(1)
    a.write(3)
    pair = sync(a, b)
    pair.inject_to_master(b"\x00\x00\x00\x01" + b"\x00\x07" + bytes(10))  # handshake flag 7
    pair.pump()
    assert pair.m.state is ERROR and pair.s.state is SHUTDOWN
    assert b.messages == a.messages


@pytest.mark.parametrize("size", [8, 100, 4096])
def test_message_helper_is_self_delimiting(size: int) -> None:
    data = message(1, 0, size)
    assert len(data) == size and int.from_bytes(data[:4], "big") == size
