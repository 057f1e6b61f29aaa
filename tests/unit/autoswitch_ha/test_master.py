"""The sans-IO master connection (docs/reference-behaviour.md §10.4, §10.6, §11.2), fed bytes and time by
hand."""

import pytest

from mqha.autoswitch_ha.events import (
    CaughtUp,
    ConnectionClosed,
    EpochHistoryOffer,
    HandshakeRequest,
    OffsetReport,
    ReadLog,
    SlaveAck,
    SlaveIncarnation,
    TransferBatch,
)
from mqha.autoswitch_ha.frames import FrameReader, encode_frame
from mqha.autoswitch_ha.master import LogView, MasterConfig, MasterConnection
from mqha.autoswitch_ha.state import ERROR, HANDSHAKE, READY, SHUTDOWN, TRANSFER, Role
from mqha.epoch.history import EpochHistory
from mqha.errors import LocalProtocolError, RemoteProtocolError

EPOCHS = EpochHistory.from_pairs([(1, 0), (2, 1000), (3, 2000)])
LOG = LogView(min_offset=0, max_offset=2500, confirm_offset=2000, epochs=EPOCHS)
SLAVE_ID = 2


def hello(slave_id: int = SLAVE_ID, **flags: bool) -> bytes:
    return encode_frame(HandshakeRequest(slave_id=slave_id, **flags))


def ack(offset: int) -> bytes:
    return encode_frame(OffsetReport(max_offset=offset))


def drain(conn: MasterConnection) -> list:
    events = []
    while (event := conn.next_event()) is not None:
        events.append(event)
    return events


def sent(conn: MasterConnection) -> list:
    reader = FrameReader(Role.MASTER)
    reader.feed(conn.data_to_send())
    frames = list(reader.frames())
    assert reader.buffered == 0
    return frames


def transferring(request: int, log: LogView = LOG, config: MasterConfig | None = None, **flags: bool):
    """A connection past its handshake whose slave asked for ``request``; events and output drained."""
    conn = MasterConnection(log, 0, config)
    conn.receive_data(hello(**flags), 0)
    conn.receive_data(ack(request), 0)
    assert conn.state is TRANSFER
    events = drain_until_read(conn)
    conn.data_to_send()  # the offer; a read is only asked for once the socket took it
    events += drain_until_read(conn)
    return conn, events


def drain_until_read(conn: MasterConnection) -> list:
    # Stops after a ReadLog so tests can answer it themselves.
    events = []
    while (event := conn.next_event()) is not None:
        events.append(event)
        if isinstance(event, ReadLog):
            break
    return events


# -- handshake ------------------------------------------------------------------------------


def test_slave_handshake_is_answered_with_the_epoch_offer_spec_11_2() -> None:
    conn = MasterConnection(LOG, 0)
    assert conn.state is READY
    conn.receive_data(hello(sync_from_last_file=True), 0)
    assert conn.state is HANDSHAKE
    assert drain(conn) == [HandshakeRequest(slave_id=SLAVE_ID, sync_from_last_file=True)]
    assert conn.data_to_send() == encode_frame(
        EpochHistoryOffer(max_offset=2500, last_epoch=3, entries=((1, 0), (2, 1000), (3, 2000)))
    )
    assert (conn.slave_id, conn.sync_from_last_file, conn.async_learner) == (SLAVE_ID, True, False)


def test_offer_holds_the_newest_entries_only() -> None:
    conn = MasterConnection(LOG, 0, MasterConfig(max_handshake_entries=2))
    conn.receive_data(hello(), 0)
    assert sent(conn) == [EpochHistoryOffer(max_offset=2500, last_epoch=3, entries=((2, 1000), (3, 2000)))]


def test_master_waits_silently_for_the_first_ack() -> None:
    conn = MasterConnection(LOG, 0)
    conn.receive_data(hello(), 0)
    conn.data_to_send()
    conn.tick(10_000)  # no heartbeats before TRANSFER (docs/reference-behaviour.md §11.2)
    assert conn.data_to_send() == b"" and drain(conn) == [HandshakeRequest(slave_id=SLAVE_ID)]


def test_handshake_split_across_reads() -> None:
    conn = MasterConnection(LOG, 0)
    wire = hello() + ack(1800)
    for i in range(len(wire)):
        conn.receive_data(wire[i : i + 1], 0)
    assert conn.state is TRANSFER and conn.request_offset == 1800


# -- first ack: where streaming starts --------------------------------------------------------


def test_first_ack_starts_transfer_at_the_slave_offset() -> None:
    conn = MasterConnection(LOG, 0)
    conn.receive_data(hello() + ack(1800), 5)
    events = drain(conn)
    assert not any(isinstance(e, ReadLog) for e in events)  # the offer is still unsent
    conn.data_to_send()
    events += drain_until_read(conn)
    assert events[0] == HandshakeRequest(slave_id=SLAVE_ID)
    assert SlaveAck(slave_id=SLAVE_ID, offset=1800, async_learner=False) in events
    assert events[-1] == ReadLog(
        offset=1800, max_bytes=200, batch_bytes=32 * 1024
    )  # cut at the end of epoch 2
    assert (conn.request_offset, conn.transfer_from, conn.ack_offset) == (1800, 1800, 1800)


@pytest.mark.parametrize(
    ("log", "asked", "from_last_file", "start"),
    [
        (LOG, 0, False, 0),  # a new replica starts at the master's min offset
        (LogView(min_offset=300, max_offset=2500, confirm_offset=0, epochs=EPOCHS), 0, False, 300),
        (LOG, 0, True, 2048),  # syncFromLastFile: start of the last commit-log file (size 1024)
        (
            LogView(min_offset=0, max_offset=500, confirm_offset=0, epochs=EpochHistory.from_pairs([(1, 0)])),
            0,
            True,
            0,
        ),
        (LOG, 2500, True, 2500),  # a non-zero request wins
    ],
)
def test_start_offset_selection_spec_11_2(log, asked, from_last_file, start) -> None:
    conn = MasterConnection(log, 0, MasterConfig(mapped_file_size=1024))
    conn.receive_data(hello(sync_from_last_file=from_last_file) + ack(asked), 0)
    assert conn.transfer_from == conn.next_offset == start


def test_slave_claiming_more_than_the_master_has_fails() -> None:
    conn = MasterConnection(LOG, 0)
    conn.receive_data(hello() + ack(2501), 0)
    assert conn.state is ERROR
    closed = drain(conn)[-1]
    assert isinstance(closed, ConnectionClosed) and isinstance(closed.error, RemoteProtocolError)
    assert "beyond the master's max 2500" in closed.reason


def test_slave_needing_deleted_data_starts_at_the_log_start() -> None:
    """Retention deleted [0, 1000): the slave is streamed from the log start (it empties itself on the
    jump, test_slave.py), as the reference clamps the start into [minOffset, maxOffset]."""
    log = LogView(min_offset=1000, max_offset=2500, confirm_offset=0, epochs=EPOCHS)
    conn, events = transferring(400, log)
    assert conn.transfer_from == 1000 and conn.request_offset == 400
    assert isinstance(events[-1], ReadLog) and events[-1].offset == 1000


def test_a_slave_overtaken_by_retention_mid_stream_is_closed_to_re_sync() -> None:
    conn, events = transferring(400, LogView(min_offset=0, max_offset=2500, confirm_offset=0, epochs=EPOCHS))
    assert isinstance(events[-1], ReadLog)
    conn.supply_batches(400, [], 0)  # nothing read yet
    conn.update_log(LogView(min_offset=1000, max_offset=2500, confirm_offset=0, epochs=EPOCHS))
    closed = drain(conn)[-1]
    assert isinstance(closed, ConnectionClosed) and isinstance(closed.error, LocalProtocolError)
    assert "re-syncs" in closed.reason


# -- out of order, corrupt, closed -----------------------------------------------------------


@pytest.mark.parametrize(
    "wire",
    [
        ack(0),  # an ack before any handshake
        hello() + hello(),  # a second handshake on the same connection
        hello() + ack(0) + hello(),  # a handshake mid-TRANSFER
    ],
)
def test_out_of_order_frames_fail_the_connection(wire: bytes) -> None:
    conn = MasterConnection(LOG, 0)
    conn.receive_data(wire, 0)
    assert conn.state is ERROR
    closed = [e for e in drain(conn) if isinstance(e, ConnectionClosed)]
    assert len(closed) == 1 and isinstance(closed[0].error, RemoteProtocolError)
    assert "out-of-order HANDSHAKE" in closed[0].reason or "out-of-order TRANSFER" in closed[0].reason


def test_corrupt_frame_mid_transfer_ends_the_connection_after_the_good_frames() -> None:
    conn, _ = transferring(1800)
    conn.supply_log(1800, b"m" * 200, 1)
    conn.receive_data(ack(1900) + b"\x00\x00\x00\x07" + bytes(8) + ack(2000), 2)
    assert conn.state is ERROR
    events = drain(conn)
    assert SlaveAck(slave_id=SLAVE_ID, offset=1900, async_learner=False) in events
    assert isinstance(events[-1], ConnectionClosed) and "bad state code 7" in events[-1].reason
    assert conn.data_to_send() == b""  # the batch queued before the error is dropped with the connection
    assert conn.ack_offset == 1900
    conn.receive_data(ack(2000), 3)  # late bytes are ignored
    conn.tick(10**6)
    assert conn.next_event() is None and conn.ack_offset == 1900


def test_ack_beyond_what_was_sent_fails() -> None:
    conn, _ = transferring(1800)
    conn.supply_log(1800, b"m" * 200, 1)
    conn.receive_data(ack(2001), 2)
    assert conn.state is ERROR and "beyond what was sent (2000)" in drain(conn)[-1].reason


def test_slave_eof_is_an_orderly_shutdown() -> None:
    conn, _ = transferring(1800)
    conn.receive_data(b"", 1)
    assert conn.state is SHUTDOWN
    assert drain(conn) == [ConnectionClosed(reason="the slave closed the connection")]


def test_local_close_is_idempotent_and_discards_late_reads() -> None:
    conn, events = transferring(1800)
    assert isinstance(events[-1], ReadLog)
    conn.close("role changed")
    conn.close("again")
    conn.supply_log(1800, b"late", 1)  # a read racing the close is dropped
    assert conn.state is SHUTDOWN and not conn.is_open
    assert drain(conn) == [ConnectionClosed(reason="role changed")]
    assert conn.data_to_send() == b""


# -- streaming -------------------------------------------------------------------------------


def test_batches_follow_back_pressure_and_epoch_boundaries() -> None:
    conn, _ = transferring(1800)
    conn.supply_log(1800, b"a" * 200, 7)
    assert conn.next_event() is None  # nothing more is read until the socket took the batch
    assert sent(conn) == [
        TransferBatch(offset=1800, epoch=2, epoch_start_offset=1000, confirm_offset=2000, data=b"a" * 200)
    ]
    assert conn.next_event() == READ_AHEAD_FROM_2000
    conn.supply_log(2000, b"b" * 500, 8)
    assert sent(conn) == [
        TransferBatch(offset=2000, epoch=3, epoch_start_offset=2000, confirm_offset=2000, data=b"b" * 500)
    ]
    assert conn.next_event() is None  # caught up with the log view (max 2500)
    assert conn.next_offset == 2500


READ_AHEAD_FROM_2000 = ReadLog(offset=2000, max_bytes=1024 * 1024, batch_bytes=32 * 1024)


def test_one_read_supplies_several_batches_each_one_frame() -> None:
    conn, _ = transferring(1800)
    conn.supply_log(1800, b"a" * 200, 7)
    sent(conn)
    assert conn.next_event() == READ_AHEAD_FROM_2000
    conn.supply_batches(2000, [b"b" * 300, memoryview(b"c" * 150), b"d" * 50], 8)
    assert [(b.offset, bytes(b.data)) for b in sent(conn)] == [
        (2000, b"b" * 300),
        (2300, b"c" * 150),
        (2450, b"d" * 50),
    ]
    assert conn.next_offset == 2500 and conn.next_event() is None


def test_batches_past_an_epoch_end_are_cut_there_and_read_again() -> None:
    conn, _ = transferring(1800)
    conn.supply_batches(1800, [b"a" * 150, b"b" * 100, b"c" * 100], 7)  # epoch 2 ends at 2000
    assert [(b.offset, b.epoch, len(b.data)) for b in sent(conn)] == [(1800, 2, 150), (1950, 2, 50)]
    assert conn.next_offset == 2000 and conn.next_event() == READ_AHEAD_FROM_2000


def test_supply_must_answer_the_outstanding_read() -> None:
    conn, _ = transferring(1800)
    with pytest.raises(LocalProtocolError, match="answers no outstanding ReadLog"):
        conn.supply_log(1700, b"x", 1)
    conn.supply_log(1800, b"x" * 200, 1)
    with pytest.raises(LocalProtocolError):
        conn.supply_log(2000, b"x", 1)


def test_empty_read_waits_for_new_data_or_a_tick() -> None:
    conn, _ = transferring(2400)
    conn.supply_log(2400, b"", 10)  # the view said 2500 but the log had nothing (yet)
    assert conn.next_event() is None  # no busy loop, and not caught up either
    conn.tick(20)
    assert drain(conn)[-1] == ReadLog(offset=2400, max_bytes=1024 * 1024, batch_bytes=32 * 1024)
    conn.supply_log(2400, b"", 30)
    drain(conn)
    conn.update_log(LogView(min_offset=0, max_offset=2600, confirm_offset=2000, epochs=EPOCHS))
    assert conn.next_event() == ReadLog(offset=2400, max_bytes=1024 * 1024, batch_bytes=32 * 1024)


def test_log_growth_wakes_an_idle_connection() -> None:
    conn, _ = transferring(2500)
    assert conn.next_event() is None
    conn.update_log(LogView(min_offset=0, max_offset=2600, confirm_offset=2600, epochs=EPOCHS))
    assert conn.next_event() == ReadLog(offset=2500, max_bytes=1024 * 1024, batch_bytes=32 * 1024)
    conn.supply_log(2500, b"c" * 100, 3)
    assert sent(conn)[0].confirm_offset == 2600


def test_confirm_offset_that_moved_reaches_an_idle_slave_at_the_next_tick_spec_14() -> None:
    # A caught-up slave learns a new confirmOffset without waiting for the heartbeat interval.
    conn, _ = transferring(2500)
    conn.update_log(LogView(min_offset=0, max_offset=2500, confirm_offset=2400, epochs=EPOCHS))
    assert conn.data_to_send() == b""  # not at once: under load the next batch is about to carry it
    conn.tick(100)
    assert sent(conn) == [TransferBatch(offset=2500, epoch=3, epoch_start_offset=2000, confirm_offset=2400)]
    conn.tick(200)
    assert conn.data_to_send() == b""  # told already
    conn.update_log(LogView(min_offset=0, max_offset=2500, confirm_offset=2400, epochs=EPOCHS))
    conn.tick(300)
    assert conn.data_to_send() == b""  # unchanged: nothing to tell


def test_confirm_offset_travels_with_the_data_when_there_is_data_to_send() -> None:
    conn, _ = transferring(2500)
    conn.update_log(LogView(min_offset=0, max_offset=2600, confirm_offset=2500, epochs=EPOCHS))
    assert conn.next_event() == ReadLog(offset=2500, max_bytes=1024 * 1024, batch_bytes=32 * 1024)
    conn.supply_log(2500, b"c" * 100, 3)
    assert sent(conn)[0].confirm_offset == 2500
    conn.tick(100)
    assert conn.data_to_send() == b""  # the batch carried it: no extra heartbeat


def test_new_epoch_between_read_and_answer_cuts_the_batch_at_the_boundary() -> None:
    # A master re-elected in place appends an epoch without closing connections (docs/reference-behaviour.md
    # §10.3).
    conn, events = transferring(2400)
    assert events[-1] == ReadLog(offset=2400, max_bytes=1024 * 1024, batch_bytes=32 * 1024)
    grown = EpochHistory.from_pairs([(1, 0), (2, 1000), (3, 2000), (4, 2500)])
    conn.update_log(LogView(min_offset=0, max_offset=2700, confirm_offset=2000, epochs=grown))
    conn.supply_log(2400, b"d" * 100 + b"e" * 200, 4)  # the read ran past 2500 into epoch 4
    assert sent(conn) == [
        TransferBatch(offset=2400, epoch=3, epoch_start_offset=2000, confirm_offset=2000, data=b"d" * 100)
    ]
    assert conn.next_event() == ReadLog(offset=2500, max_bytes=1024 * 1024, batch_bytes=32 * 1024)
    conn.supply_log(2500, b"e" * 200, 5)
    assert sent(conn)[0].epoch == 4


def test_epoch_history_losing_the_read_offset_fails_the_connection() -> None:
    conn, events = transferring(1800)
    assert events[-1] == ReadLog(offset=1800, max_bytes=200, batch_bytes=32 * 1024)
    later = EpochHistory.from_pairs([(5, 2000)])
    conn.update_log(LogView(min_offset=0, max_offset=2500, confirm_offset=0, epochs=later))
    conn.supply_log(1800, b"x" * 200, 1)
    assert conn.state is ERROR and "no epoch entry containing offset 1800" in drain(conn)[-1].reason


def test_offset_outside_every_epoch_fails_the_connection() -> None:
    late = LogView(min_offset=0, max_offset=900, confirm_offset=0, epochs=EpochHistory.from_pairs([(3, 500)]))
    conn = MasterConnection(late, 0)
    conn.receive_data(hello() + ack(100), 0)
    conn.data_to_send()
    closed = drain(conn)[-1]
    assert conn.state is ERROR and "no epoch entry containing offset 100" in closed.reason


def test_data_deleted_under_a_lagging_slave_fails_the_connection() -> None:
    conn, _ = transferring(1800)
    conn.supply_log(1800, b"a" * 200, 1)
    conn.data_to_send()
    conn.update_log(LogView(min_offset=2100, max_offset=2500, confirm_offset=2000, epochs=EPOCHS))
    closed = drain(conn)[-1]
    assert conn.state is ERROR and "deleted from the master" in closed.reason


# -- time ---------------------------------------------------------------------------------------


def test_heartbeat_after_the_interval_without_writes_spec_10_6() -> None:
    conn, _ = transferring(2500)
    conn.tick(4_999)
    assert conn.data_to_send() == b""
    conn.tick(5_000)
    assert sent(conn) == [TransferBatch(offset=2500, epoch=3, epoch_start_offset=2000, confirm_offset=2000)]
    conn.tick(9_999)
    assert conn.data_to_send() == b""
    conn.receive_data(ack(2500), 9_999)
    conn.tick(10_000)
    assert len(sent(conn)) == 1


def test_heartbeat_without_any_epoch_entry() -> None:
    empty = LogView(min_offset=0, max_offset=0, confirm_offset=0, epochs=EpochHistory())
    conn, _ = transferring(0, empty)
    conn.tick(5_000)
    assert sent(conn) == [TransferBatch(offset=0, epoch=-1, epoch_start_offset=-1, confirm_offset=0)]


def test_housekeeping_closes_a_silent_connection_spec_10_6() -> None:
    conn, _ = transferring(2500)
    conn.receive_data(ack(2500), 1_000)
    conn.tick(21_000)
    assert conn.state is TRANSFER
    conn.tick(21_001)
    assert conn.state is SHUTDOWN
    assert drain(conn)[-1] == ConnectionClosed(reason="nothing received from the slave for 20001 ms")


def test_housekeeping_also_applies_before_the_handshake() -> None:
    conn = MasterConnection(LOG, 100)
    conn.tick(20_101)
    assert conn.state is SHUTDOWN


# -- caught-up tracking (docs/reference-behaviour.md §10.4)
# ----------------------------------------------------------


def test_ack_of_the_master_end_is_caught_up_now() -> None:
    conn = MasterConnection(LOG, 0)
    conn.receive_data(hello() + ack(2500), 42)
    events = drain(conn)
    assert events[1:] == [
        CaughtUp(slave_id=SLAVE_ID, at_ms=42),
        SlaveAck(slave_id=SLAVE_ID, offset=2500, async_learner=False),
    ]


def test_ack_of_the_last_batch_is_caught_up_as_of_that_batch() -> None:
    conn, _ = transferring(1800)
    conn.supply_log(1800, b"a" * 200, 100)
    conn.data_to_send()
    drain(conn)  # ReadLog(2000)
    conn.supply_log(2000, b"b" * 100, 200)
    conn.update_log(LogView(min_offset=0, max_offset=2600, confirm_offset=2000, epochs=EPOCHS))
    conn.receive_data(ack(2000), 300)  # behind the view of the last batch (2500)
    assert [e for e in drain(conn) if isinstance(e, CaughtUp)] == []
    conn.receive_data(ack(2100), 400)  # all that was sent, but short of 2500, the view at send time
    assert [e for e in drain(conn) if isinstance(e, CaughtUp)] == []


def test_ack_reaching_the_view_of_the_last_batch_uses_its_send_time() -> None:
    conn, _ = transferring(2400)
    conn.supply_log(2400, b"a" * 100, 100)  # sent when the master held 2500
    conn.data_to_send()
    conn.update_log(LogView(min_offset=0, max_offset=2600, confirm_offset=2000, epochs=EPOCHS))
    conn.receive_data(ack(2500), 300)
    assert drain(conn)[0] == CaughtUp(slave_id=SLAVE_ID, at_ms=100)


def test_idle_tick_records_caught_up_now_but_not_for_learners() -> None:
    conn, _ = transferring(2500)
    conn.tick(77)
    assert CaughtUp(slave_id=SLAVE_ID, at_ms=77) in drain(conn)
    learner, events = transferring(2500, async_learner=True)
    assert SlaveAck(slave_id=SLAVE_ID, offset=2500, async_learner=True) in events
    assert not [e for e in events if isinstance(e, CaughtUp)]
    learner.tick(77)
    assert not [e for e in drain(learner) if isinstance(e, CaughtUp)]


def test_config_is_checked() -> None:
    with pytest.raises(ValueError):
        MasterConfig(transfer_batch_size=0)
    with pytest.raises(ValueError):
        MasterConfig(max_handshake_entries=1001)


# -- the slave's incarnation (docs/architecture.md §8.5) ----------------------------------------

INCARNATION = "0123456789abcdef" * 2


def test_incarnation_frame_before_the_handshake_names_the_slave_process() -> None:
    conn = MasterConnection(LOG, 0)
    wire = encode_frame(HandshakeRequest(slave_id=SLAVE_ID, incarnation=INCARNATION)) + ack(1800)
    for i in range(len(wire)):  # byte by byte: the 20-byte frame is reassembled like any other
        conn.receive_data(wire[i : i + 1], 0)
    assert conn.state is TRANSFER and conn.incarnation == INCARNATION
    events = drain(conn)
    assert events[0] == HandshakeRequest(slave_id=SLAVE_ID, incarnation=INCARNATION)
    acks = [e for e in events if isinstance(e, SlaveAck | CaughtUp)]
    assert acks and all(e.incarnation == INCARNATION for e in acks)


def test_a_handshake_without_incarnation_is_accepted_as_unknown() -> None:
    conn = MasterConnection(LOG, 0)
    conn.receive_data(hello() + ack(1800), 0)
    events = drain(conn)
    assert events[0] == HandshakeRequest(slave_id=SLAVE_ID) and conn.incarnation is None
    assert all(e.incarnation is None for e in events if isinstance(e, SlaveAck | CaughtUp))


@pytest.mark.parametrize(
    "wire",
    [
        # twice
        encode_frame(SlaveIncarnation(incarnation=INCARNATION)) * 2 + hello(),
        # after the handshake
        hello() + encode_frame(SlaveIncarnation(incarnation=INCARNATION)),
        # mid-stream
        hello() + ack(1800) + encode_frame(SlaveIncarnation(incarnation=INCARNATION)),
    ],
    ids=["twice", "after the handshake", "mid-stream"],
)
def test_an_incarnation_frame_anywhere_but_first_fails_the_connection(wire: bytes) -> None:
    conn = MasterConnection(LOG, 0)
    conn.receive_data(wire, 0)
    closed = [e for e in drain(conn) if isinstance(e, ConnectionClosed)]
    assert conn.state is ERROR and len(closed) == 1 and isinstance(closed[0].error, RemoteProtocolError)
