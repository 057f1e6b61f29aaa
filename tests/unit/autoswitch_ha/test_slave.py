"""The sans-IO slave connection and its truncation decision (docs/reference-behaviour.md §11.3, §13, §14)."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.autoswitch_ha.events import (
    AppendData,
    AppendEpoch,
    ConnectionClosed,
    EpochHistoryOffer,
    HandshakeRequest,
    OffsetReport,
    ResetLog,
    SetConfirmOffset,
    TransferBatch,
    TruncateTo,
)
from mqha.autoswitch_ha.frames import FrameReader, encode_frame
from mqha.autoswitch_ha.slave import SlaveConfig, SlaveConnection, TruncationDecision, decide_truncation
from mqha.autoswitch_ha.state import ERROR, HANDSHAKE, READY, SHUTDOWN, SUSPEND, TRANSFER, Role
from mqha.epoch.history import EpochHistory
from mqha.errors import LocalProtocolError, NotAlignedError, RemoteProtocolError


def h(*pairs: tuple[int, int]) -> EpochHistory:
    return EpochHistory.from_pairs(pairs)


# -- the truncation decision (docs/reference-behaviour.md §13)
# ---------------------------------------------------------

CASES = {
    # docs/reference-behaviour.md §13 worked examples: (master epochs, master max, slave epochs, slave max) ->
    # (point, kept epochs)
    "A nothing cut": (
        h((1, 0), (2, 1000), (3, 2000)),
        2500,
        h((1, 0), (2, 1000)),
        1800,
        (1800, h((1, 0), (2, 1000))),
    ),
    "B unreplicated tail": (
        h((1, 0), (2, 1000), (3, 1200)),
        2000,
        h((1, 0), (2, 1000)),
        1500,
        (1200, h((1, 0), (2, 1000))),
    ),
    "C epoch unknown to master": (
        h((1, 0), (2, 400), (4, 700)),
        900,
        h((1, 0), (3, 500)),
        800,
        (400, h((1, 0))),
    ),
    # the reference fails this handshake (repair by hand); mqha empties the replica and re-syncs it
    "D no common epoch": (h((1, 200), (2, 500)), 700, h((1, 100), (2, 300), (3, 500)), 600, "reset"),
    "E zero-length local epoch": (h((1, 0), (3, 1000)), 1500, h((1, 0), (2, 1000)), 1000, (1000, h((1, 0)))),
    # EpochFileCacheTest examples (docs/reference-behaviour.md §13)
    "different start of epoch 3": (
        h((1, 100), (2, 300), (3, 450)),
        600,
        h((1, 100), (2, 300), (3, 500)),
        700,
        (450, h((1, 100), (2, 300))),
    ),
    "same starts, master shorter": (
        h((1, 100), (2, 300), (3, 500)),
        600,
        h((1, 100), (2, 300), (3, 500)),
        700,
        (600, h((1, 100), (2, 300), (3, 500))),
    ),
    "local has a newer epoch": (
        h((1, 100), (2, 300), (3, 500)),
        700,
        h((1, 100), (2, 300), (3, 500), (4, 800)),
        900,
        (700, h((1, 100), (2, 300), (3, 500))),
    ),
    # fresh and degenerate replicas
    "new replica": (h((1, 0)), 500, h(), 0, (0, h())),
    "empty log with epochs": (h((2, 0)), 500, h((1, 0)), 0, (0, h())),
    "data without an epoch file": (h((1, 0)), 500, h(), 300, (0, h())),
    "slave ahead in the same epoch": (h((1, 0)), 500, h((1, 0)), 800, (500, h((1, 0)))),
    "local entry past its own log end": (
        h((1, 0), (2, 900)),
        1000,
        h((1, 0), (2, 900)),
        800,
        (800, h((1, 0))),
    ),
}


@pytest.mark.parametrize(
    ("master", "master_max", "local", "local_max", "expected"), CASES.values(), ids=CASES.keys()
)
def test_decide_truncation_spec_13(master, master_max, local, local_max, expected) -> None:
    decision = decide_truncation(local, local_max, master, master_max)
    if expected == "reset":
        assert decision == TruncationDecision(offset=0, epochs=h(), reset=True)
        assert decision is not None and "no consistent point" in decision.reason
    else:
        assert decision == TruncationDecision(offset=expected[0], epochs=expected[1])


@pytest.mark.parametrize(
    ("local", "local_min", "local_max", "expected"),
    [
        # the agreement point (1000) precedes everything retained: keep nothing, cut at the min
        (h((1, 0), (2, 1000)), 1500, 2000, (1500, h())),
        (h(), 500, 900, (500, h())),  # data without epochs
        (h((1, 0)), 700, 700, (700, h())),  # empty log based at 700: nothing to verify
        (h((1, 0), (2, 1000)), 800, 1800, (1000, h((1, 0)))),  # agreement inside the retained range
    ],
)
def test_decide_truncation_never_cuts_below_the_local_min_offset(
    local, local_min, local_max, expected
) -> None:
    master = h((1, 0), (3, 1000))
    decision = decide_truncation(local, local_max, master, 3000, local_min)
    assert decision == TruncationDecision(offset=expected[0], epochs=expected[1])


def test_slave_with_retained_data_past_the_agreement_point_is_cut_to_its_min() -> None:
    conn = SlaveConnection(broker_id=3, epochs=h((1, 0), (2, 1000)), max_offset=2000, min_offset=1500)
    conn.connection_made(0)
    conn.receive_data(
        encode_frame(EpochHistoryOffer(max_offset=3000, last_epoch=3, entries=((1, 0), (3, 1000)))), 1
    )
    assert drain(conn) == [TruncateTo(offset=1500, epochs=h())]
    conn.data_to_send()
    conn.truncation_done(2)
    assert sent(conn) == [OffsetReport(max_offset=1500)]


# -- helpers ------------------------------------------------------------------------------------

LOCAL = h((1, 0), (2, 1000))
OFFER_A = EpochHistoryOffer(max_offset=2500, last_epoch=3, entries=((1, 0), (2, 1000), (3, 2000)))


def drain(conn: SlaveConnection) -> list:
    events = []
    while (event := conn.next_event()) is not None:
        events.append(event)
    return events


def sent(conn: SlaveConnection) -> list:
    reader = FrameReader(Role.SLAVE)
    reader.feed(conn.data_to_send())
    frames = list(reader.frames())
    assert reader.buffered == 0
    return frames


def batch(offset: int, epoch: int, start: int, data: bytes = b"", confirm: int = 0) -> bytes:
    return encode_frame(
        TransferBatch(offset=offset, epoch=epoch, epoch_start_offset=start, confirm_offset=confirm, data=data)
    )


def transferring(epochs: EpochHistory = LOCAL, max_offset: int = 1800, offer=OFFER_A) -> SlaveConnection:
    conn = SlaveConnection(broker_id=3, epochs=epochs, max_offset=max_offset)
    conn.connection_made(0)
    conn.data_to_send()
    conn.receive_data(encode_frame(offer), 1)
    assert isinstance(drain(conn)[-1], TruncateTo)
    conn.truncation_done(2)
    conn.data_to_send()
    assert conn.state is TRANSFER
    return conn


# -- handshake ----------------------------------------------------------------------------------


def test_handshake_carries_the_broker_id_and_flags_spec_11_1() -> None:
    conn = SlaveConnection(
        broker_id=3,
        epochs=LOCAL,
        max_offset=1800,
        config=SlaveConfig(sync_from_last_file=True, async_learner=True),
    )
    assert conn.state is READY and conn.data_to_send() == b""
    conn.connection_made(0)
    assert conn.state is HANDSHAKE
    assert sent(conn) == [HandshakeRequest(slave_id=3, sync_from_last_file=True, async_learner=True)]
    with pytest.raises(LocalProtocolError):
        conn.connection_made(1)


def test_offer_yields_one_truncation_decision_then_an_immediate_ack() -> None:
    conn = SlaveConnection(broker_id=3, epochs=h((1, 0), (2, 1000)), max_offset=1500)
    conn.connection_made(0)
    conn.data_to_send()
    conn.receive_data(
        encode_frame(
            EpochHistoryOffer(max_offset=2000, last_epoch=3, entries=((1, 0), (2, 1000), (3, 1200)))
        ),
        1,
    )
    assert conn.state is SUSPEND
    assert drain(conn) == [TruncateTo(offset=1200, epochs=h((1, 0), (2, 1000)))]
    assert conn.data_to_send() == b""  # nothing is acked before the shell truncated
    assert conn.master_max_offset == 2000
    conn.truncation_done(5)
    assert conn.state is TRANSFER
    # docs/reference-behaviour.md §17 item 13 fixed: the first ACK goes out at once, not with the next
    # heartbeat.
    assert sent(conn) == [OffsetReport(max_offset=1200)]
    assert (conn.reported_offset, conn.expected_offset) == (1200, 1200)


def test_no_consistent_point_empties_the_replica_and_resyncs_case_d() -> None:
    conn = SlaveConnection(broker_id=3, epochs=h((1, 100), (2, 300), (3, 500)), max_offset=600)
    conn.connection_made(0)
    conn.data_to_send()
    conn.receive_data(
        encode_frame(EpochHistoryOffer(max_offset=700, last_epoch=2, entries=((1, 200), (2, 500)))), 1
    )
    assert conn.state is SUSPEND
    reset, truncate = drain(conn)
    assert isinstance(reset, ResetLog) and "no consistent point" in reset.reason
    assert truncate == TruncateTo(offset=0, epochs=h())
    assert conn.data_to_send() == b""  # nothing is acked before the shell emptied the replica
    conn.truncation_done(5)
    assert conn.state is TRANSFER and sent(conn) == [OffsetReport(max_offset=0)]  # an empty replica
    assert conn.epochs == h() and conn.expected_offset == 0


def test_a_master_without_epoch_history_fails_the_handshake_and_touches_nothing() -> None:
    conn = SlaveConnection(broker_id=3, epochs=h((1, 100)), max_offset=600)
    conn.connection_made(0)
    conn.data_to_send()
    conn.receive_data(encode_frame(EpochHistoryOffer(max_offset=0, last_epoch=-1, entries=())), 1)
    assert conn.state is ERROR
    (closed,) = drain(conn)
    assert isinstance(closed, ConnectionClosed) and "no epoch history" in closed.reason
    assert conn.epochs == h((1, 100)) and conn.expected_offset == 600


def test_truncation_failure_fails_the_connection() -> None:
    conn = SlaveConnection(broker_id=3, epochs=LOCAL, max_offset=1800)
    conn.connection_made(0)
    conn.receive_data(encode_frame(OFFER_A), 1)
    drain(conn)
    error = NotAlignedError("commitlog", "1800 is not a message boundary")
    conn.truncation_failed(error)
    assert conn.state is ERROR
    assert drain(conn) == [ConnectionClosed(reason=str(error))]
    conn.truncation_done(3)  # a late answer after the end is ignored
    assert conn.state is ERROR and conn.data_to_send() == b""


@pytest.mark.parametrize(
    ("wire", "where"),
    [
        (batch(1800, 2, 1000), "HANDSHAKE"),  # data before the offer
        (encode_frame(OFFER_A) + batch(1800, 2, 1000), "SUSPEND"),  # data while truncating
        (encode_frame(OFFER_A) + encode_frame(OFFER_A), "SUSPEND"),  # a second offer
    ],
)
def test_out_of_order_frames_fail_the_connection(wire: bytes, where: str) -> None:
    conn = SlaveConnection(broker_id=3, epochs=LOCAL, max_offset=1800)
    conn.connection_made(0)
    conn.receive_data(wire, 1)
    assert conn.state is ERROR
    closed = drain(conn)[-1]
    assert isinstance(closed, ConnectionClosed) and "out-of-order" in closed.reason


def test_misuse_by_the_shell_raises() -> None:
    conn = SlaveConnection(broker_id=3, epochs=LOCAL, max_offset=1800)
    conn.connection_made(0)
    with pytest.raises(LocalProtocolError, match="truncation done when role=slave and state=HANDSHAKE"):
        conn.truncation_done(1)
    with pytest.raises(LocalProtocolError, match="no data was asked for"):
        conn.log_appended(1800, 1)
    live = transferring()
    with pytest.raises(LocalProtocolError, match="beyond the data handed out"):
        live.log_appended(1801, 3)


# -- transfer -------------------------------------------------------------------------------------


def test_batches_become_append_actions_and_acks_follow_the_shell_spec_11_3() -> None:
    conn = transferring()
    conn.receive_data(
        batch(1800, 2, 1000, b"a" * 200, confirm=1900) + batch(2000, 3, 2000, b"b" * 300, confirm=2100), 3
    )
    assert drain(conn) == [
        AppendData(offset=1800, epoch=2, parts=(b"a" * 200,)),
        SetConfirmOffset(offset=1900),
        AppendEpoch(epoch=3, start_offset=2000, epochs=h((1, 0), (2, 1000), (3, 2000))),
        AppendData(offset=2000, epoch=3, parts=(b"b" * 300,)),
        SetConfirmOffset(offset=2100),
    ]
    assert conn.data_to_send() == b""  # nothing acked until the shell wrote it
    two = AppendData(offset=1800, epoch=2, parts=(b"ab", b"c"))
    assert conn.is_open and repr(two) == "AppendData(offset=1800, epoch=2, 2 parts of 3 bytes)"
    assert two.end_offset == 1803
    conn.log_appended(2000, 4)
    conn.log_appended(2300, 4)
    conn.log_appended(2300, 4)  # no progress, no ack
    assert sent(conn) == [OffsetReport(max_offset=2000), OffsetReport(max_offset=2300)]
    assert conn.epochs == h((1, 0), (2, 1000), (3, 2000)) and conn.expected_offset == 2300


def test_confirm_offset_is_capped_by_the_local_log_spec_14() -> None:
    conn = transferring()
    conn.receive_data(batch(1800, 2, 1000, b"a" * 100, confirm=2500), 3)
    assert drain(conn)[-1] == SetConfirmOffset(offset=1900)
    conn.receive_data(batch(1900, 2, 1000, confirm=2500), 4)  # heartbeat: same cap, no change
    assert drain(conn) == []
    conn.receive_data(batch(1900, 2, 1000, confirm=-1), 5)  # unknown confirm offset: ignored
    assert drain(conn) == [] and conn.confirm_offset == 1900


def test_new_replica_takes_the_stream_wherever_the_master_starts_it() -> None:
    offer = EpochHistoryOffer(max_offset=5000, last_epoch=4, entries=((2, 1000), (4, 3000)))
    conn = transferring(h(), 0, offer)
    conn.receive_data(batch(4096, 4, 3000, b"z" * 10, confirm=4000), 3)
    assert drain(conn) == [
        AppendEpoch(epoch=4, start_offset=3000, epochs=h((4, 3000))),
        AppendData(offset=4096, epoch=4, parts=(b"z" * 10,)),
        SetConfirmOffset(offset=4000),
    ]
    conn.receive_data(batch(4106, 4, 3000, b"y", confirm=4000), 4)
    assert drain(conn) == [AppendData(offset=4106, epoch=4, parts=(b"y",))]


@st.composite
def transfer_streams(draw: st.DrawFn) -> list[bytes]:
    """TRANSFER frames a master could send after OFFER_A's handshake (data, heartbeats, new epochs,
    unknown confirm offsets), sometimes with one frame that breaks the stream somewhere."""
    frames, offset, epoch, start, confirm = [], 1800, 2, 1000, 1500
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["data", "data", "data", "heartbeat", "new epoch"]))
        if kind == "new epoch":
            epoch, start = epoch + 1, offset
        confirm += draw(st.integers(0, 300))
        told = draw(st.sampled_from([confirm, confirm, -1]))
        if kind == "heartbeat":
            frames.append(batch(offset, epoch, start, confirm=told))
            continue
        data = draw(st.binary(min_size=1, max_size=200))
        frames.append(batch(offset, epoch, start, data, confirm=told))
        offset += len(data)
    if draw(st.booleans()):
        bad = draw(
            st.sampled_from(
                [batch(offset + 1, epoch, start, b"x"), batch(offset, epoch, start + 1, b"x"), b"\0" * 40]
            )
        )
        frames.insert(draw(st.integers(0, len(frames))), bad)
    return frames


def outcome(chunks: list[bytes], *, fast: bool = True) -> tuple[object, ...]:
    """What a shell would do with the actions: the bytes appended per epoch (contiguous stretches
    merged), the epoch history saved, the confirm offset last set, how the connection ended.
    ``fast=False`` turns the reader's batch run off: every frame is a decoded ``TransferBatch``."""
    conn = transferring()
    if not fast:
        conn._reader.transfer_run = list  # type: ignore[method-assign] # an empty run, always
    events = []
    for i, chunk in enumerate(chunks):
        conn.receive_data(chunk, 3 + i)
        events += drain(conn)
    stretches: list[list] = []  # [epoch, start, bytes]
    epochs, confirm, closed = LOCAL, None, None
    for event in events:
        if closed is not None:
            break
        if isinstance(event, AppendEpoch):
            epochs = event.epochs
        elif isinstance(event, AppendData):
            assert event.epoch == epochs.last().epoch  # data is saved under its epoch entry
            data = b"".join(map(bytes, event.parts))
            if (
                stretches
                and stretches[-1][0] == event.epoch
                and stretches[-1][1] + len(stretches[-1][2]) == event.offset
            ):
                stretches[-1][2] += data
            else:
                stretches.append([event.epoch, event.offset, data])
        elif isinstance(event, SetConfirmOffset):
            confirm = event.offset
        else:
            assert isinstance(event, ConnectionClosed)
            closed = event.reason
    return stretches, epochs, confirm, closed


@settings(max_examples=200, deadline=None)
@given(frames=transfer_streams(), cuts=st.lists(st.integers(0, 4000), max_size=8))
def test_the_same_stream_gives_the_same_actions_however_it_arrives(
    frames: list[bytes], cuts: list[int]
) -> None:
    wire = b"".join(frames)
    at_once = outcome([wire])
    assert outcome([wire], fast=False) == at_once  # the rule for one decoded batch is the definition
    assert outcome(frames) == at_once
    bounds = sorted({0, len(wire), *(c % (len(wire) + 1) for c in cuts)})
    assert outcome([wire[a:b] for a, b in itertools.pairwise(bounds)]) == at_once


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (batch(1700, 2, 1000, b"x"), "batch at offset 1700 but the local log ends at 1800"),
        (batch(1900, 2, 1000, b"x"), "batch at offset 1900 but the local log ends at 1800"),
        (batch(1800, 1, 0, b"x"), "conflicts with the local last epoch 2"),  # older epoch
        (batch(1800, 2, 900, b"x"), "conflicts with the local last epoch 2"),  # same epoch, other start
        (batch(1800, 3, 1700, b"x"), "epoch 3 starts at 1700"),  # new epoch not starting here
        (batch(1700, 2, 1000), "heartbeat says the next offset is 1700"),
    ],
)
def test_batches_that_do_not_continue_the_local_log_fail(wire: bytes, message: str) -> None:
    conn = transferring()
    conn.receive_data(wire, 3)
    assert conn.state is ERROR
    closed = drain(conn)[-1]
    assert isinstance(closed, ConnectionClosed) and isinstance(closed.error, RemoteProtocolError)
    assert message in closed.reason


def test_heartbeat_without_a_chosen_offset_is_accepted() -> None:
    conn = transferring()
    conn.receive_data(batch(-1, -1, -1, confirm=1000), 3)
    assert drain(conn) == [SetConfirmOffset(offset=1000)] and conn.state is TRANSFER


def test_corrupt_frame_mid_transfer_keeps_the_good_batches_and_ends_the_connection() -> None:
    conn = transferring()
    good = batch(1800, 2, 1000, b"a" * 100, confirm=1800)
    corrupt = bytearray(batch(1900, 2, 1000, b"b" * 100))
    corrupt[4:8] = (-5).to_bytes(4, "big", signed=True)  # impossible body size
    conn.receive_data(good + bytes(corrupt) + batch(1900, 2, 1000, b"c" * 10), 3)
    assert conn.state is ERROR
    events = drain(conn)
    assert events[:2] == [
        AppendData(offset=1800, epoch=2, parts=(b"a" * 100,)),
        SetConfirmOffset(offset=1800),
    ]
    assert (
        isinstance(events[-1], ConnectionClosed) and "impossible transfer body size -5" in events[-1].reason
    )
    assert len(events) == 3
    conn.receive_data(batch(1900, 2, 1000, b"d"), 4)
    conn.log_appended(1900, 4)  # the shell may still report the append it did; nothing goes out
    assert conn.next_event() is None and conn.data_to_send() == b""


def test_oversized_body_is_rejected_by_the_configured_limit() -> None:
    conn = SlaveConnection(broker_id=3, epochs=LOCAL, max_offset=1800, config=SlaveConfig(max_body_size=64))
    conn.connection_made(0)
    conn.receive_data(encode_frame(OFFER_A), 1)
    conn.truncation_done(2)
    conn.receive_data(batch(1800, 2, 1000, b"x" * 65)[:36], 3)
    assert conn.state is ERROR


# -- time and endings -----------------------------------------------------------------------------


def test_heartbeat_ack_resends_the_reported_offset_spec_10_6() -> None:
    conn = transferring()  # acked 1800 at t=2
    conn.tick(5_001)
    assert conn.data_to_send() == b""
    conn.receive_data(batch(1800, 2, 1000), 5_001)
    conn.tick(5_002)
    assert sent(conn) == [OffsetReport(max_offset=1800)]
    conn.tick(10_001)
    assert conn.data_to_send() == b""
    conn.tick(10_002)
    assert sent(conn) == [OffsetReport(max_offset=1800)]


def test_housekeeping_closes_when_the_master_is_silent() -> None:
    conn = transferring()  # last read at t=1
    conn.tick(20_001)
    assert conn.state is TRANSFER
    conn.tick(20_002)
    assert conn.state is SHUTDOWN
    assert drain(conn)[-1] == ConnectionClosed(reason="nothing received from the master for 20001 ms")


def test_handshake_timeout_uses_the_same_rule() -> None:
    conn = SlaveConnection(broker_id=3, epochs=LOCAL, max_offset=1800)
    conn.tick(10**6)  # not connected yet: time does not matter
    assert conn.state is READY
    conn.connection_made(100)
    conn.tick(20_101)
    assert conn.state is SHUTDOWN


def test_master_eof_and_local_close() -> None:
    conn = transferring()
    conn.receive_data(b"", 3)
    assert conn.state is SHUTDOWN
    assert drain(conn) == [ConnectionClosed(reason="the master closed the connection")]
    other = transferring()
    other.close("role changed")
    other.close()
    assert other.state is SHUTDOWN and not other.is_open
    assert drain(other) == [ConnectionClosed(reason="role changed")]
    other.receive_data(batch(1800, 2, 1000, b"x"), 9)
    other.tick(10**6)
    assert other.next_event() is None and other.data_to_send() == b""


# -- behind the master's log start (retention; docs/architecture.md §4.2) -----------------------------


def past_handshake(offer: EpochHistoryOffer) -> SlaveConnection:
    """A slave with LOCAL up to 1800 and 1 KiB segments, in TRANSFER after ``offer``."""
    conn = SlaveConnection(
        broker_id=3, epochs=LOCAL, max_offset=1800, config=SlaveConfig(mapped_file_size=1024)
    )
    conn.connection_made(0)
    conn.receive_data(encode_frame(offer), 1)
    drain(conn)
    conn.truncation_done(2)
    return conn


def test_a_slave_streamed_from_beyond_its_end_empties_itself_and_takes_the_stream() -> None:
    """The master clamped the start to its log start (4096): the first batch jumps past the local end."""
    conn = past_handshake(EpochHistoryOffer(max_offset=5000, last_epoch=2, entries=((1, 0), (2, 1000))))
    conn.receive_data(batch(4096, 2, 1000, b"z" * 10, confirm=4000), 3)
    events = drain(conn)
    assert isinstance(events[0], ResetLog) and events[0].master_start == 4096
    assert events[1:] == [
        AppendEpoch(epoch=2, start_offset=1000, epochs=h((2, 1000))),
        AppendData(offset=4096, epoch=2, parts=(b"z" * 10,)),
        SetConfirmOffset(offset=4000),
    ]


@pytest.mark.parametrize(
    ("first", "why"),
    [
        (batch(4100, 2, 1000, b"z"), "not a segment base"),
        (batch(4096, 2, 1000), "a heartbeat, no data"),
    ],
)
def test_only_a_data_batch_at_a_segment_base_may_empty_the_slave(first: bytes, why: str) -> None:
    conn = past_handshake(EpochHistoryOffer(max_offset=5000, last_epoch=2, entries=((1, 0), (2, 1000))))
    conn.receive_data(first, 3)
    events = drain(conn)
    assert not any(isinstance(e, ResetLog) for e in events), why
    assert isinstance(events[-1], ConnectionClosed) and conn.state is ERROR


def test_a_later_jump_never_empties_the_slave() -> None:
    conn = past_handshake(OFFER_A)
    conn.receive_data(batch(1800, 2, 1000, b"a") + batch(4096, 2, 1000, b"b"), 3)
    events = drain(conn)
    assert not any(isinstance(e, ResetLog) for e in events)
    assert isinstance(events[-1], ConnectionClosed)


def test_a_slave_entirely_before_the_masters_oldest_epoch_is_emptied_at_the_handshake() -> None:
    """The master's retention dropped its epoch prefix with the segments: nothing to compare, so the
    slave is emptied and reports 0 (an empty replica) instead of needing repair by hand."""
    assert decide_truncation(h((1, 0)), 900, h((3, 5000)), 9000) == TruncationDecision(
        offset=0, epochs=h(), reset=True
    )
    overlapping = decide_truncation(h((1, 0)), 5001, h((3, 5000)), 9000)  # case D: emptied as well
    assert overlapping is not None and overlapping.reset and "no consistent point" in overlapping.reason
    conn = SlaveConnection(broker_id=3, epochs=h((1, 0)), max_offset=900)
    conn.connection_made(0)
    conn.data_to_send()
    conn.receive_data(encode_frame(EpochHistoryOffer(max_offset=9000, last_epoch=3, entries=((3, 5000),))), 1)
    events = drain(conn)
    assert [type(e) for e in events] == [ResetLog, TruncateTo]
    assert events[1] == TruncateTo(offset=0, epochs=h())
    conn.truncation_done(2)
    assert sent(conn) == [OffsetReport(max_offset=0)] and conn.expected_offset == 0
