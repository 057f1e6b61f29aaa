"""HA wire codec (docs/reference-behaviour.md §11.1): exact byte layouts, round trips, rejections, incremental
reading."""

import dataclasses
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.autoswitch_ha.events import (
    EpochHistoryOffer,
    HandshakeRequest,
    OffsetReport,
    SlaveIncarnation,
    TransferBatch,
)
from mqha.autoswitch_ha.frames import (
    CODE_HANDSHAKE,
    CODE_TRANSFER,
    MAX_HANDSHAKE_ENTRIES,
    RECEIVES_PER_BUFFER,
    SLAVE_INCARNATION_SIZE,
    FrameReader,
    decode_frame,
    encode_frame,
    transfer_frames,
)
from mqha.autoswitch_ha.state import Role
from mqha.epoch.history import EpochHistory
from mqha.errors import LocalProtocolError, RemoteProtocolError

SLAVE, MASTER = Role.SLAVE, Role.MASTER


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


# -- exact layouts: hand-written expected bytes ----------------------------------------------

HANDSHAKE = HandshakeRequest(slave_id=2, sync_from_last_file=True, async_learner=False)
HANDSHAKE_BYTES = hexbytes("00000001 | 0001 | 0000 | 0000000000000002")

LEARNER = HandshakeRequest(slave_id=0x0102030405060708, async_learner=True)
LEARNER_BYTES = hexbytes("00000001 | 0000 | 0001 | 0102030405060708")

ACK = OffsetReport(max_offset=0x0102030405060708)
ACK_BYTES = hexbytes("00000002 | 0102030405060708")

OFFER = EpochHistoryOffer(max_offset=2500, last_epoch=3, entries=((1, 0), (2, 1000), (3, 2000)))
OFFER_BYTES = hexbytes(
    "00000001 | 00000024 | 00000000000009c4 | 00000003"
    "| 00000001 0000000000000000 | 00000002 00000000000003e8 | 00000003 00000000000007d0"
)

EMPTY_OFFER = EpochHistoryOffer(max_offset=0, last_epoch=-1)
EMPTY_OFFER_BYTES = hexbytes("00000001 | 00000000 | 0000000000000000 | ffffffff")

BATCH = TransferBatch(offset=1800, epoch=2, epoch_start_offset=1000, confirm_offset=1700, data=b"abc")
BATCH_BYTES = hexbytes(
    "00000002 | 00000003 | 0000000000000708 | 00000002 | 00000000000003e8 | 00000000000006a4 | 616263"
)

FIRST_HEARTBEAT = TransferBatch(offset=-1, epoch=-1, epoch_start_offset=-1, confirm_offset=-1)
FIRST_HEARTBEAT_BYTES = hexbytes("00000002 | 00000000 | " + "ff" * 8 + "|" + "ff" * 4 + "|" + "ff" * 16)

LAYOUTS = [
    (HANDSHAKE, HANDSHAKE_BYTES, SLAVE, 16),
    (LEARNER, LEARNER_BYTES, SLAVE, 16),
    (ACK, ACK_BYTES, SLAVE, 12),
    (OFFER, OFFER_BYTES, MASTER, 20 + 36),
    (EMPTY_OFFER, EMPTY_OFFER_BYTES, MASTER, 20),
    (BATCH, BATCH_BYTES, MASTER, 36 + 3),
    (FIRST_HEARTBEAT, FIRST_HEARTBEAT_BYTES, MASTER, 36),
]


@pytest.mark.parametrize(("frame", "wire", "sender", "size"), LAYOUTS)
def test_exact_layout_and_round_trip_spec_11_1(frame, wire: bytes, sender: Role, size: int) -> None:
    assert encode_frame(frame) == wire
    assert len(wire) == size
    assert decode_frame(wire, sender) == frame


def test_state_codes_are_the_reference_numbers_spec_11() -> None:
    assert (CODE_HANDSHAKE, CODE_TRANSFER) == (1, 2)
    assert encode_frame(HANDSHAKE)[:4] == encode_frame(OFFER)[:4] == b"\x00\x00\x00\x01"
    assert encode_frame(ACK)[:4] == encode_frame(BATCH)[:4] == b"\x00\x00\x00\x02"


def test_offer_from_history_keeps_the_newest_entries() -> None:
    history = EpochHistory.from_pairs([(e, e * 10) for e in range(1, 1006)])
    offer = EpochHistoryOffer.from_history(history, 20_000, MAX_HANDSHAKE_ENTRIES)
    assert len(offer.entries) == 1000
    assert offer.entries[0] == (6, 60) and offer.last_epoch == 1005
    assert len(encode_frame(offer)) == 20 + 12 * 1000
    assert EpochHistoryOffer.from_history(EpochHistory(), 0, 1000) == EMPTY_OFFER


# -- rejections -------------------------------------------------------------------------------


def offer_bytes(body_size: int, max_offset: int, last_epoch: int, entries: list[tuple[int, int]]) -> bytes:
    return struct.pack(">iiqi", 1, body_size, max_offset, last_epoch) + b"".join(
        struct.pack(">iq", e, s) for e, s in entries
    )


def transfer_bytes(
    body_size: int, offset: int, epoch: int, start: int, confirm: int, *, data: bytes = b""
) -> bytes:
    return struct.pack(">iiqiqq", 2, body_size, offset, epoch, start, confirm) + data


REJECTED = {
    # short
    "empty": (b"", SLAVE),
    "three bytes": (b"\x00\x00\x00", MASTER),
    "short handshake": (HANDSHAKE_BYTES[:15], SLAVE),
    "short ack": (ACK_BYTES[:11], SLAVE),
    "short offer header": (OFFER_BYTES[:19], MASTER),
    "offer body cut": (OFFER_BYTES[:-1], MASTER),
    "short transfer header": (BATCH_BYTES[:35], MASTER),
    "transfer body cut": (BATCH_BYTES[:-1], MASTER),
    # trailing bytes
    "ack plus a byte": (ACK_BYTES + b"\x00", SLAVE),
    "offer plus a byte": (OFFER_BYTES + b"\x00", MASTER),
    # bad state codes
    "slave READY code": (struct.pack(">iq", 0, 5), SLAVE),
    "slave SUSPEND code": (struct.pack(">iq", 3, 5), SLAVE),
    "slave SHUTDOWN code": (struct.pack(">iq", 4, 5), SLAVE),
    "slave code 7": (struct.pack(">ihhq", 7, 0, 0, 1), SLAVE),
    "slave code -1": (struct.pack(">iq", -1, 5), SLAVE),
    "master READY code": (struct.pack(">iiqiqq", 0, 0, 0, 1, 0, 0), MASTER),
    "master code 3": (b"\x00\x00\x00\x03" + BATCH_BYTES[4:], MASTER),
    "master code 9": (b"\x00\x00\x00\x09" + OFFER_BYTES[4:], MASTER),
    # impossible lengths
    "offer body not a multiple of 12": (offer_bytes(13, 10, 1, [(1, 0)]) + b"\x00", MASTER),
    "offer body negative": (offer_bytes(-12, 10, -1, []), MASTER),
    "offer with 1001 entries": (
        offer_bytes(12 * 1001, 10**6, 1001, [(e, e) for e in range(1, 1002)]),
        MASTER,
    ),
    "transfer body negative": (transfer_bytes(-1, 0, 1, 0, 0), MASTER),
    "transfer body over the limit": (transfer_bytes(2**31 - 1, 0, 1, 0, 0), MASTER),
    # entries count mismatch
    "offer announces 2 entries, carries 1": (offer_bytes(24, 10, 1, [(1, 0)]), MASTER),
    "offer announces 1 entry, carries 2": (offer_bytes(12, 10, 2, [(1, 0), (2, 5)]), MASTER),
    "last epoch is not the last entry's": (offer_bytes(24, 10, 3, [(1, 0), (2, 5)]), MASTER),
    "no entries but a last epoch": (offer_bytes(0, 10, 4, []), MASTER),
    # impossible field values
    "flag 2": (struct.pack(">ihhq", 1, 2, 0, 1), SLAVE),
    "learner flag -1": (struct.pack(">ihhq", 1, 0, -1, 1), SLAVE),
    "slave id 0": (struct.pack(">ihhq", 1, 0, 0, 0), SLAVE),
    "negative ack": (struct.pack(">iq", 2, -5), SLAVE),
    "entries out of order": (offer_bytes(24, 10, 1, [(2, 0), (1, 5)]), MASTER),
    "entries with equal starts": (offer_bytes(24, 10, 2, [(1, 5), (2, 5)]), MASTER),
    "last epoch starts past max": (offer_bytes(12, 10, 1, [(1, 11)]), MASTER),
    "negative master max": (offer_bytes(0, -1, -1, []), MASTER),
    "data at offset -1": (transfer_bytes(1, -1, 1, 0, 0, data=b"x"), MASTER),
    "data before its epoch": (transfer_bytes(1, 5, 1, 6, 0, data=b"x"), MASTER),
    "heartbeat offset -2": (transfer_bytes(0, -2, 1, 0, 0), MASTER),
}


@pytest.mark.parametrize(("wire", "sender"), REJECTED.values(), ids=REJECTED.keys())
def test_decode_rejects_with_remote_protocol_error(wire: bytes, sender: Role) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_frame(wire, sender)


# A stream reader waits on a short frame and reads trailing bytes as the next frame's start.
INCOMPLETE = {k for k in REJECTED if k.startswith(("short", "empty", "three"))} | {
    "offer body cut",
    "transfer body cut",
    "ack plus a byte",
    "offer plus a byte",
    "offer announces 2 entries, carries 1",
}


@pytest.mark.parametrize(
    ("wire", "sender"),
    [v for k, v in REJECTED.items() if k not in INCOMPLETE],
    ids=[k for k in REJECTED if k not in INCOMPLETE],
)
def test_reader_rejects_every_corrupt_frame(wire: bytes, sender: Role) -> None:
    reader = FrameReader(sender)
    reader.feed(wire)
    with pytest.raises(RemoteProtocolError):
        list(reader.frames())


@pytest.mark.parametrize(
    ("wire", "sender"),
    [REJECTED[k] for k in sorted(INCOMPLETE)],
    ids=sorted(INCOMPLETE),
)
def test_reader_waits_on_incomplete_input(wire: bytes, sender: Role) -> None:
    reader = FrameReader(sender)
    reader.feed(wire)
    frames = list(reader.frames())
    assert len(frames) <= 1
    assert reader.buffered == len(wire) - sum(len(encode_frame(f)) for f in frames)
    assert reader.buffered > 0 or not wire


def test_reader_waits_for_more_on_short_input() -> None:
    reader = FrameReader(MASTER)
    reader.feed(BATCH_BYTES[:-1])
    assert reader.next_frame() is None
    reader.feed(BATCH_BYTES[-1:])
    assert reader.next_frame() == BATCH
    assert reader.buffered == 0


def test_bad_state_code_is_rejected_as_soon_as_four_bytes_arrive() -> None:
    reader = FrameReader(SLAVE)
    reader.feed(b"\x00\x00\x00")
    assert reader.next_frame() is None
    reader.feed(b"\x05")
    with pytest.raises(RemoteProtocolError, match="bad state code 5"):
        reader.next_frame()


def test_impossible_transfer_size_rejected_from_the_header_alone() -> None:
    reader = FrameReader(MASTER, max_body_size=1024)
    reader.feed(transfer_bytes(1025, 0, 1, 0, 0)[:8])
    with pytest.raises(RemoteProtocolError, match="impossible transfer body size 1025"):
        reader.next_frame()


def test_reader_is_poisoned_after_an_error() -> None:
    reader = FrameReader(SLAVE)
    reader.feed(struct.pack(">iq", 9, 0))
    with pytest.raises(RemoteProtocolError) as first:
        reader.next_frame()
    with pytest.raises(RemoteProtocolError) as again:
        reader.feed(ACK_BYTES)
    assert again.value is first.value
    with pytest.raises(RemoteProtocolError):
        reader.next_frame()


def test_out_of_order_frame_is_rejected_before_its_body_arrives() -> None:
    reader = FrameReader(MASTER)
    reader.feed(BATCH_BYTES[:4])
    with pytest.raises(
        RemoteProtocolError, match="out-of-order TRANSFER frame from the master: expected HANDSHAKE"
    ):
        reader.next_frame(expected={CODE_HANDSHAKE})


def test_no_frame_expected_rejects_any_frame() -> None:
    reader = FrameReader(MASTER)
    reader.feed(OFFER_BYTES)
    with pytest.raises(RemoteProtocolError, match="expected no frame"):
        reader.next_frame(expected=set())


def test_expected_frames_pass() -> None:
    reader = FrameReader(SLAVE)
    reader.feed(HANDSHAKE_BYTES + ACK_BYTES)
    assert reader.next_frame(expected={CODE_HANDSHAKE}) == HANDSHAKE
    assert reader.next_frame(expected={CODE_TRANSFER}) == ACK


STREAMS = {
    SLAVE: [HANDSHAKE, ACK, OffsetReport(max_offset=0), OffsetReport(max_offset=99), LEARNER],
    MASTER: [OFFER, BATCH, FIRST_HEARTBEAT, EMPTY_OFFER, BATCH],
}


@pytest.mark.parametrize("sender", [SLAVE, MASTER])
def test_reader_fed_one_byte_at_a_time_gives_the_same_frames(sender: Role) -> None:
    wire = b"".join(encode_frame(f) for f in STREAMS[sender])
    whole = FrameReader(sender)
    whole.feed(wire)
    at_once = list(whole.frames())
    trickle = FrameReader(sender)
    one_by_one = []
    for i in range(len(wire)):
        trickle.feed(wire[i : i + 1])
        one_by_one.extend(trickle.frames())
    assert at_once == one_by_one == STREAMS[sender]
    assert whole.buffered == trickle.buffered == 0


# -- encoding refusals -------------------------------------------------------------------------


def test_encode_refuses_non_frames_and_oversized_offers() -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame("hello")  # type: ignore[arg-type]
    big = EpochHistoryOffer(max_offset=10**6, last_epoch=1001, entries=tuple((e, e) for e in range(1, 1002)))
    with pytest.raises(LocalProtocolError, match="at most 1000"):
        encode_frame(big)


@pytest.mark.parametrize(
    "build",
    [
        lambda: HandshakeRequest(slave_id=0),
        lambda: HandshakeRequest(slave_id=1, async_learner=1),  # type: ignore[arg-type]
        lambda: OffsetReport(max_offset=-1),
        lambda: OffsetReport(max_offset=True),  # type: ignore[arg-type]
        lambda: OffsetReport(max_offset=2**63),
        lambda: EpochHistoryOffer(max_offset=5, last_epoch=1, entries=((1, 6),)),
        lambda: EpochHistoryOffer(max_offset=5, last_epoch=2, entries=((1, 0),)),
        lambda: EpochHistoryOffer(max_offset=5, last_epoch=1, entries=((1, 0, 3),)),  # type: ignore[arg-type]
        lambda: TransferBatch(offset=-1, epoch=1, epoch_start_offset=0, confirm_offset=0, data=b"x"),
        lambda: TransferBatch(offset=3, epoch=1, epoch_start_offset=4, confirm_offset=0, data=b"x"),
        lambda: TransferBatch(offset=3, epoch=2**31, epoch_start_offset=0, confirm_offset=0),
        lambda: TransferBatch(offset=3, epoch=1, epoch_start_offset=0, confirm_offset=-2),
    ],
)
def test_events_validate_their_fields(build) -> None:
    with pytest.raises(LocalProtocolError):
        build()


def test_events_normalise_containers() -> None:
    offer = EpochHistoryOffer(max_offset=9, last_epoch=2, entries=[(1, 0), [2, 5]])  # type: ignore[arg-type]
    assert offer.entries == ((1, 0), (2, 5))
    assert offer.history().pairs() == [(1, 0), (2, 5)]
    batch = TransferBatch(offset=0, epoch=1, epoch_start_offset=0, confirm_offset=0, data=bytearray(b"xy"))
    assert batch.data == b"xy" and batch.end_offset == 2 and not batch.is_heartbeat
    assert "len(data)=2" in repr(batch)


# -- properties --------------------------------------------------------------------------------

offsets = st.integers(0, 2**63 - 1)
slave_frames = st.one_of(
    st.builds(
        HandshakeRequest,
        slave_id=st.integers(1, 2**63 - 1),
        sync_from_last_file=st.booleans(),
        async_learner=st.booleans(),
    ),
    st.builds(OffsetReport, max_offset=offsets),
)


@st.composite
def offers(draw: st.DrawFn) -> EpochHistoryOffer:
    count = draw(st.integers(0, 6))
    epoch, start, entries = draw(st.integers(0, 10)), draw(st.integers(0, 100)), []
    for _ in range(count):
        entries.append((epoch, start))
        epoch += draw(st.integers(1, 5))
        start += draw(st.integers(1, 10_000))
    top = draw(st.integers(entries[-1][1] if entries else 0, 2**40))
    return EpochHistoryOffer(
        max_offset=top, last_epoch=entries[-1][0] if entries else -1, entries=tuple(entries)
    )


@st.composite
def batches(draw: st.DrawFn) -> TransferBatch:
    data = draw(st.binary(max_size=64))
    if not data and draw(st.booleans()):
        return TransferBatch(
            offset=-1, epoch=-1, epoch_start_offset=-1, confirm_offset=draw(st.integers(-1, 99))
        )
    start = draw(st.integers(0, 2**40))
    return TransferBatch(
        offset=start + draw(st.integers(0, 2**20)),
        epoch=draw(st.integers(0, 2**31 - 1)),
        epoch_start_offset=start,
        confirm_offset=draw(st.integers(-1, 2**62)),
        data=data,
    )


master_frames = st.one_of(offers(), batches())


@given(st.lists(slave_frames, max_size=8), st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_slave_stream_round_trips_through_any_chunking(frames, cuts) -> None:
    check_stream(SLAVE, frames, cuts)


@given(st.lists(master_frames, max_size=8), st.lists(st.integers(1, 80), min_size=1, max_size=20))
def test_master_stream_round_trips_through_any_chunking(frames, cuts) -> None:
    check_stream(MASTER, frames, cuts)


def check_stream(sender: Role, frames: list, cuts: list[int]) -> None:
    wire = b"".join(encode_frame(f) for f in frames)
    for frame in frames:
        assert decode_frame(encode_frame(frame), sender) == frame
    reader = FrameReader(sender)
    got, position, i = [], 0, 0
    while position < len(wire):
        step = cuts[i % len(cuts)]
        reader.feed(wire[position : position + step])
        got.extend(reader.frames())
        position += step
        i += 1
    assert got == frames
    assert reader.buffered == 0


# -- receiving into the reader's own buffer (recv_into) and borrowed batch data -----------------


def receive_in_place(reader: FrameReader, wire: bytes, cuts: list[int]) -> list:
    """Fill the reader as a socket would (``recv_into`` its free space), taking each frame's copy
    before the next receive: what the HA client does with borrowed batches."""
    got, position, i = [], 0, 0
    while position < len(wire):
        space = reader.receive_buffer(1)
        step = min(cuts[i % len(cuts)], len(space), len(wire) - position)
        space[:step] = wire[position : position + step]
        reader.buffer_updated(step)
        for frame in reader.frames():
            if isinstance(frame, TransferBatch) and isinstance(frame.data, memoryview):
                assert frame.data.readonly
                got.append(dataclasses.replace(frame, data=bytes(frame.data)))
            else:
                got.append(frame)
        position += step
        i += 1
    return got


@given(
    st.lists(master_frames, max_size=8),
    st.lists(st.integers(1, 200), min_size=1, max_size=20),
    st.booleans(),
)
def test_receiving_in_place_gives_the_same_frames(frames, cuts, borrow) -> None:
    wire = b"".join(encode_frame(f) for f in frames)
    reader = FrameReader(MASTER, borrow=borrow)
    assert receive_in_place(reader, wire, cuts) == frames
    assert reader.buffered == 0


def test_borrowed_batch_is_a_view_of_the_buffer_and_frames_larger_than_it_grow_it() -> None:
    big = TransferBatch(
        offset=0, epoch=1, epoch_start_offset=0, confirm_offset=-1, data=bytes(range(256)) * 1024
    )
    wire = encode_frame(BATCH) + encode_frame(big) + encode_frame(BATCH)
    reader = FrameReader(MASTER, borrow=True)
    got = receive_in_place(reader, wire, [50_000])  # the 256 KiB frame exceeds the 64 KiB start size
    assert got == [BATCH, big, BATCH]
    reader.feed(encode_frame(BATCH))
    frame = reader.next_frame()
    assert isinstance(frame, TransferBatch) and isinstance(frame.data, memoryview)
    assert frame == BATCH


def test_a_grown_buffer_holds_several_receives() -> None:
    reader = FrameReader(MASTER)
    reader.feed(encode_frame(BATCH)[:10])  # a partial frame
    space = reader.receive_buffer(100_000)
    assert reader.buffered == 10 and len(space) + 10 >= RECEIVES_PER_BUFFER * 100_000


def test_buffer_updated_refuses_more_than_the_free_space() -> None:
    reader = FrameReader(MASTER)
    space = reader.receive_buffer(10)
    with pytest.raises(ValueError, match="cannot have been written"):
        reader.buffer_updated(len(space) + 1)


def test_transfer_frames_are_the_frames_of_consecutive_batches() -> None:
    batches = [b"a" * 5, memoryview(b"bc"), b"d"]
    pieces = transfer_frames(100, 3, 90, 95, batches)
    expected = [
        encode_frame(
            TransferBatch(offset=offset, epoch=3, epoch_start_offset=90, confirm_offset=95, data=data)
        )
        for offset, data in ((100, b"a" * 5), (105, b"bc"), (107, b"d"))
    ]
    assert [b"".join(map(bytes, pieces[i : i + 2])) for i in range(0, 6, 2)] == expected
    assert pieces[3] is batches[1]  # the data itself, not a copy
    assert transfer_frames(100, 3, 90, 95, []) == []


def test_transfer_frames_check_the_shared_fields_like_a_batch() -> None:
    with pytest.raises(LocalProtocolError, match="starting later at 101"):
        transfer_frames(100, 3, 101, 95, [b"x"])
    with pytest.raises(LocalProtocolError, match="confirm_offset"):
        transfer_frames(100, 3, 90, -2, [b"x"])


# -- mqha's INCARNATION frame (docs/architecture.md §8.5) -------------------------------------

INCARNATION = "00112233445566778899aabbccddeeff"
INCARNATION_BYTES = hexbytes("4D514931 | 00112233445566778899aabbccddeeff")


def test_incarnation_frame_layout() -> None:
    assert encode_frame(SlaveIncarnation(incarnation=INCARNATION)) == INCARNATION_BYTES
    assert len(INCARNATION_BYTES) == SLAVE_INCARNATION_SIZE == 20
    assert decode_frame(INCARNATION_BYTES, SLAVE) == SlaveIncarnation(incarnation=INCARNATION)
    # A handshake that carries an incarnation goes out as the two frames, incarnation first.
    with_incarnation = dataclasses.replace(HANDSHAKE, incarnation=INCARNATION)
    assert encode_frame(with_incarnation) == INCARNATION_BYTES + HANDSHAKE_BYTES
    assert encode_frame(HANDSHAKE) == HANDSHAKE_BYTES  # without one: the reference's 16 bytes


@given(st.binary(min_size=16, max_size=16))
def test_incarnation_round_trip(raw: bytes) -> None:
    frame = SlaveIncarnation(incarnation=raw.hex())
    assert decode_frame(encode_frame(frame), SLAVE) == frame
    reader = FrameReader(SLAVE)
    reader.feed(encode_frame(HandshakeRequest(slave_id=7, incarnation=raw.hex())))
    assert list(reader.frames()) == [frame, HandshakeRequest(slave_id=7)]


@pytest.mark.parametrize("value", ["", "0" * 31, "0" * 33, "G" * 32, "A" * 32, 16 * "0f" + " "])
def test_an_incarnation_is_32_lowercase_hex_digits(value: str) -> None:
    with pytest.raises(LocalProtocolError):
        SlaveIncarnation(incarnation=value)
    with pytest.raises(LocalProtocolError):
        HandshakeRequest(slave_id=1, incarnation=value)


def test_a_master_never_sends_the_incarnation_code() -> None:
    with pytest.raises(RemoteProtocolError):
        decode_frame(INCARNATION_BYTES, MASTER)
