"""Commit-log record format (docs/architecture.md §4): layout, bounds, blank marker, every rejection reason.

Records are forged here from the layout in the codec's docstring with an independent packer, so these
tests pin the byte format, not just encode/decode agreement.
"""

import struct
import zlib

import pytest

from mqha.broker.commitlog.checkpoint import (
    Checkpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from mqha.broker.commitlog.codec import (
    BLANK_MAGIC,
    BLANK_SIZE,
    BODY_CRC_POS,
    BODY_LENGTH_POS,
    BORN_TIMESTAMP_POS,
    HEADER_SIZE,
    MAGIC_POS,
    MAX_KEYS_BYTES,
    MAX_MSG_ID_BYTES,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC,
    MIN_MESSAGE_SIZE,
    MSG_ID_LENGTH_POS,
    PHYSICAL_OFFSET_POS,
    PROPERTIES_LENGTH_POS,
    RECORD_CRC_POS,
    STORE_TIMESTAMP_POS,
    TOPIC_LENGTH_POS,
    TOTAL_SIZE_POS,
    InvalidDraft,
    InvalidRecord,
    MessageDraft,
    RejectReason,
    decode_message,
    decode_properties,
    encode_blank,
    encode_message,
    encode_properties,
    fits,
)
from mqha.broker.commitlog.scanning import (
    ScanStop,
    scan_units,
)
from mqha.errors import LocalProtocolError

TS = 1_700_000_000_123
DRAFT = MessageDraft(
    "TopicTest", b"hello body", msg_id="ID-1", keys="k1 k2", properties={"TAGS": "a"}, born_ts=TS - 5
)


def forge(
    *,
    offset: int = 0,
    msg_id: bytes = b"ID",
    topic: bytes = b"T",
    keys: bytes = b"",
    props: bytes = b"",
    body: bytes = b"body",
    total: int | None = None,
    magic: int = MESSAGE_MAGIC,
    lengths: tuple[int, int, int, int, int] | None = None,
) -> bytes:
    """A record packed field by field, with correct CRCs unless the caller breaks something else."""
    fields = msg_id + topic + keys + props
    n_body, n_id, n_topic, n_keys, n_props = lengths or (
        len(body),
        len(msg_id),
        len(topic),
        len(keys),
        len(props),
    )
    size = total if total is not None else HEADER_SIZE + len(fields) + len(body)
    body_crc = zlib.crc32(body)
    after = (
        struct.pack(">IqqqIHHHH", body_crc, offset, TS, TS, n_body, n_id, n_topic, n_keys, n_props) + fields
    )
    record_crc = zlib.crc32(after, body_crc)
    return struct.pack(">III", size, magic, record_crc) + after + body


def reason_of(buf: bytes, pos: int = 0, base_offset: int | None = 0) -> RejectReason:
    with pytest.raises(InvalidRecord) as info:
        decode_message(buf, pos, base_offset=base_offset)
    return info.value.reason


# --- encode / decode -------------------------------------------------------------------------------------
def test_round_trip_keeps_every_field() -> None:
    record = encode_message(DRAFT, 4096, TS)
    message = decode_message(record, 0, base_offset=4096)
    assert (message.offset, message.size, message.msg_id, message.topic) == (
        4096,
        len(record),
        "ID-1",
        "TopicTest",
    )
    assert (message.keys, message.properties, message.body) == ("k1 k2", {"TAGS": "a"}, b"hello body")
    assert (message.born_ts, message.store_ts, message.body_crc) == (TS - 5, TS, zlib.crc32(b"hello body"))
    assert message.next_offset == 4096 + len(record)


def test_round_trip_unicode_empty_body_and_defaults() -> None:
    draft = MessageDraft("主题-topic", b"", keys="ключ", properties={"k": "v=1", "x": ""})
    message = decode_message(encode_message(draft, 0, TS, msg_id="GEN"))
    assert (message.topic, message.keys, message.body, message.msg_id) == ("主题-topic", "ключ", b"", "GEN")
    assert message.properties == {"k": "v=1", "x": ""}
    assert message.born_ts == TS  # born defaults to the store timestamp


def test_layout_matches_the_named_positions() -> None:
    record = encode_message(DRAFT, 123456789, TS)
    assert len(record) == HEADER_SIZE + 4 + 9 + 5 + len(encode_properties({"TAGS": "a"})) + 10
    assert struct.unpack_from(">I", record, TOTAL_SIZE_POS)[0] == len(record)
    assert struct.unpack_from(">I", record, MAGIC_POS)[0] == MESSAGE_MAGIC
    assert struct.unpack_from(">I", record, BODY_CRC_POS)[0] == zlib.crc32(b"hello body")
    assert struct.unpack_from(">q", record, PHYSICAL_OFFSET_POS)[0] == 123456789
    assert struct.unpack_from(">q", record, STORE_TIMESTAMP_POS)[0] == TS
    assert struct.unpack_from(">q", record, BORN_TIMESTAMP_POS)[0] == TS - 5
    assert struct.unpack_from(">I", record, BODY_LENGTH_POS)[0] == 10
    assert struct.unpack_from(">H", record, MSG_ID_LENGTH_POS)[0] == 4
    assert struct.unpack_from(">H", record, TOPIC_LENGTH_POS)[0] == 9
    assert struct.unpack_from(">H", record, PROPERTIES_LENGTH_POS)[0] == len(b"TAGS\x01a\x02")
    assert record[HEADER_SIZE : HEADER_SIZE + 4] == b"ID-1"
    body_start = len(record) - 10
    expected_crc = zlib.crc32(record[BODY_CRC_POS:body_start], zlib.crc32(b"hello body"))
    assert struct.unpack_from(">I", record, RECORD_CRC_POS)[0] == expected_crc


def test_encoder_matches_an_independent_packer() -> None:
    draft = MessageDraft(
        "TopicTest", b"hello body", msg_id="ID-1", keys="k1 k2", properties={"TAGS": "a"}, born_ts=TS
    )
    expected = forge(
        offset=123456789,
        msg_id=b"ID-1",
        topic=b"TopicTest",
        keys=b"k1 k2",
        props=b"TAGS\x01a\x02",
        body=b"hello body",
    )
    assert encode_message(draft, 123456789, TS) == expected


def test_forged_record_decodes() -> None:
    message = decode_message(forge(offset=77, body=b"xyz"), 0, base_offset=77)
    assert (message.offset, message.body, message.msg_id, message.topic) == (77, b"xyz", "ID", "T")


def test_properties_codec() -> None:
    assert encode_properties(None) == b"" and decode_properties(b"") == {}
    props = {"a": "1", "b": "", "UNIQ_KEY": "Ü"}
    assert decode_properties(encode_properties(props)) == props
    with pytest.raises(ValueError):
        decode_properties("a\x011")  # no trailing separator
    with pytest.raises(ValueError):
        decode_properties("novalue\x02")


# --- bounds ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("draft", "msg_id"),
    [
        (MessageDraft("t" * MAX_TOPIC_BYTES, b""), "i"),
        (MessageDraft("t", b""), "i" * MAX_MSG_ID_BYTES),
        (MessageDraft("t", b"", keys="k" * MAX_KEYS_BYTES), "i"),
        (MessageDraft("t", b"", properties={"p": "v" * (MAX_PROPERTIES_BYTES - 3)}), "i"),
    ],
    ids=["topic-max", "msgid-max", "keys-max", "properties-max"],
)
def test_each_field_at_its_bound_is_accepted(draft: MessageDraft, msg_id: str) -> None:
    record = encode_message(draft, 0, TS, msg_id=msg_id, max_message_size=1 << 20)
    assert decode_message(record).msg_id == msg_id


@pytest.mark.parametrize(
    ("draft", "msg_id", "words"),
    [
        (MessageDraft("", b""), "i", "topic"),
        (MessageDraft("t" * (MAX_TOPIC_BYTES + 1), b""), "i", "topic"),
        (MessageDraft("é" * 128, b""), "i", "topic"),  # 256 UTF-8 bytes
        (MessageDraft("t", b""), "i" * (MAX_MSG_ID_BYTES + 1), "msgId"),
        (MessageDraft("t", b""), "", "msgId"),
        (MessageDraft("t", b""), "é", "msgId"),
        (MessageDraft("t", b"", keys="k" * (MAX_KEYS_BYTES + 1)), "i", "keys"),
        (MessageDraft("t", b"", properties={"p": "v" * MAX_PROPERTIES_BYTES}), "i", "properties"),
        (MessageDraft("t", b"", properties={"a\x01": "v"}), "i", "property"),
        (MessageDraft("t", b"", properties={"a": "v\x02"}), "i", "property"),
        (MessageDraft("t", b"", properties={"": "v"}), "i", "property"),
    ],
)
def test_each_field_out_of_bounds_is_rejected(draft: MessageDraft, msg_id: str, words: str) -> None:
    with pytest.raises(InvalidDraft, match=words):
        encode_message(draft, 0, TS, msg_id=msg_id, max_message_size=1 << 20)


def test_max_message_size_is_the_whole_record() -> None:
    size = len(encode_message(MessageDraft("t", b"x" * 100), 0, TS, msg_id="i"))
    encode_message(MessageDraft("t", b"x" * 100), 0, TS, msg_id="i", max_message_size=size)
    with pytest.raises(InvalidDraft, match="maxMessageSize") as info:
        encode_message(MessageDraft("t", b"x" * 100), 0, TS, msg_id="i", max_message_size=size - 1)
    assert isinstance(info.value, LocalProtocolError)  # in the one error tree


def test_negative_offset_and_missing_msg_id_are_rejected() -> None:
    with pytest.raises(InvalidDraft, match="negative"):
        encode_message(MessageDraft("t", b""), -1, TS, msg_id="i")
    with pytest.raises(InvalidDraft, match="msgId"):
        encode_message(MessageDraft("t", b""), 0, TS)


# --- blank marker and placement --------------------------------------------------------------------------
def test_blank_marker_layout() -> None:
    assert encode_blank(4000) == struct.pack(">II", 4000, BLANK_MAGIC)
    assert encode_blank(BLANK_SIZE) == struct.pack(">II", 8, BLANK_MAGIC)
    with pytest.raises(ValueError):
        encode_blank(BLANK_SIZE - 1)


def test_fits_leaves_room_for_the_blank_marker() -> None:
    assert fits(100, 108) and not fits(100, 107)


def test_scan_of_a_full_segment_ends_with_its_blank_marker() -> None:
    first = encode_message(MessageDraft("t", b"a" * 50), 1024, TS, msg_id="1")
    second = encode_message(MessageDraft("t", b"b" * 60), 1024 + len(first), TS, msg_id="2")
    used = len(first) + len(second)
    segment = first + second + encode_blank(1024 - used) + bytes(1024 - used - BLANK_SIZE)
    scan = scan_units(segment, 0, 1024, 1024, 2048)
    assert scan == (1024, 2, len(first), ScanStop.BLANK, None)
    assert scan_units(segment, 0, 1024, 1024, 2048, strict=True).stop is ScanStop.BLANK


def test_scan_stops_at_zeros_and_at_max_messages() -> None:
    first = encode_message(MessageDraft("t", b"a"), 0, TS, msg_id="1")
    second = encode_message(MessageDraft("t", b"b"), len(first), TS, msg_id="2")
    buf = first + second + bytes(500)
    assert scan_units(buf, 0, len(buf), 0, 4096) == (len(first + second), 2, len(first), ScanStop.ZEROS, None)
    assert scan_units(buf, 0, len(buf), 0, 4096, max_messages=1) == (len(first), 1, 0, ScanStop.LIMIT, None)
    assert scan_units(buf, 0, len(first + second), 0, 4096).stop is ScanStop.LIMIT
    # a peer's bytes never contain zeros where a unit should start
    assert scan_units(buf, 0, len(buf), 0, 4096, strict=True).error.reason is RejectReason.BAD_MAGIC


def test_header_only_scan_skips_crcs_but_not_offsets() -> None:
    record = bytearray(forge(offset=0, body=b"abcdef"))
    record[-1] ^= 0xFF
    assert scan_units(record, 0, len(record), 0, 4096, verify_crc=False).stop is ScanStop.LIMIT
    assert scan_units(record, 0, len(record), 0, 4096).error.reason is RejectReason.BAD_BODY_CRC
    assert (
        scan_units(forge(offset=8), 0, 60, 0, 4096, verify_crc=False).error.reason
        is RejectReason.WRONG_OFFSET
    )


def test_a_window_end_inside_a_unit_is_a_limit_not_a_torn_unit() -> None:
    first = encode_message(MessageDraft("t", b"a" * 50), 0, TS, msg_id="1")
    second = encode_message(MessageDraft("t", b"b" * 60), len(first), TS, msg_id="2")
    used = len(first) + len(second)
    segment = first + second + encode_blank(1024 - used) + bytes(1024 - used - BLANK_SIZE)
    for end in (len(first) + 1, used - 1, used + 3, used + 100):
        torn = scan_units(segment, 0, end, 0, 1024, verify_crc=False)
        assert torn.stop in (ScanStop.INVALID, ScanStop.ZEROS)  # as the end of the data: torn
        cut = len(first) if end < used else used
        assert scan_units(segment, 0, end, 0, 1024, verify_crc=False, window=True) == (
            cut,
            1 if end < used else 2,
            0 if end < used else len(first),
            ScanStop.LIMIT,
            None,
        )
    # a damaged header past the window end is still an error, not a limit
    bad = first + forge(offset=len(first) + 8) + bytes(200)
    scan = scan_units(bad, 0, len(first) + 10, 0, 4096, verify_crc=False, window=True)
    assert (scan.end, scan.stop) == (len(first), ScanStop.INVALID)


# --- rejections ------------------------------------------------------------------------------------------
def test_torn_record_at_every_length_is_rejected() -> None:
    record = forge(body=b"0123456789")
    for cut in range(1, len(record)):
        with pytest.raises(InvalidRecord) as info:
            decode_message(record[:cut], 0, base_offset=0)
        assert info.value.reason in (RejectReason.TORN, RejectReason.NOT_A_MESSAGE)
        scan = scan_units(record[:cut], 0, cut, 0, 4096, strict=True)
        assert scan.stop is ScanStop.INVALID and scan.end == 0
        assert scan.error.reason in (RejectReason.TORN, RejectReason.BAD_MAGIC)


def test_bad_magic() -> None:
    assert reason_of(forge(magic=0x12345678)) is RejectReason.BAD_MAGIC
    assert scan_units(forge(magic=1), 0, 60, 0, 4096).error.reason is RejectReason.BAD_MAGIC


def test_bad_size() -> None:
    assert reason_of(forge(total=MIN_MESSAGE_SIZE - 1) + bytes(64)) is RejectReason.BAD_SIZE
    record = forge()
    # a message may not end within BLANK_SIZE bytes of its segment end
    scan = scan_units(record, 0, len(record), 0, len(record) + BLANK_SIZE - 1)
    assert scan.error.reason is RejectReason.BAD_SIZE
    assert scan_units(record, 0, len(record), 0, len(record) + BLANK_SIZE).stop is ScanStop.LIMIT


def test_wrong_physical_offset() -> None:
    record = forge(offset=100)
    assert reason_of(record, base_offset=0) is RejectReason.WRONG_OFFSET
    assert decode_message(record, 0, base_offset=100).offset == 100
    assert decode_message(record).offset == 100  # no expectation given
    scan = scan_units(bytes(100) + record, 100, 100 + len(record), 8, 4096)
    assert scan.error.reason is RejectReason.WRONG_OFFSET and scan.error.offset == 108


def test_flipped_bytes_are_caught_by_the_crcs() -> None:
    record = forge(topic=b"topic", keys=b"keys", body=b"the body")
    for pos in range(BODY_CRC_POS, len(record)):
        if PHYSICAL_OFFSET_POS <= pos < STORE_TIMESTAMP_POS:
            continue  # the offset field has its own check
        damaged = bytearray(record)
        damaged[pos] ^= 0x01
        expected = RejectReason.BAD_BODY_CRC if pos >= len(record) - 8 else RejectReason.BAD_CRC
        if pos in range(BODY_CRC_POS, BODY_CRC_POS + 4):
            expected = RejectReason.BAD_BODY_CRC
        with pytest.raises(InvalidRecord) as info:
            decode_message(damaged, 0, base_offset=0)
        if not BODY_LENGTH_POS <= pos < HEADER_SIZE:  # a damaged length may fail the structure check first
            assert info.value.reason is expected, pos
        scan = scan_units(damaged, 0, len(damaged), 0, 4096)
        assert scan.stop is ScanStop.INVALID, pos


def test_bad_structure_with_valid_crcs() -> None:
    lengths = (4, 2, 1, 0, 0)  # claims a 4-byte body, but the record holds 5 bytes of body
    record = forge(body=b"12345", lengths=lengths, total=HEADER_SIZE + 2 + 1 + 5)
    assert reason_of(record) in (RejectReason.BAD_STRUCTURE, RejectReason.BAD_BODY_CRC)
    no_topic = forge(topic=b"")
    assert reason_of(no_topic) is RejectReason.BAD_STRUCTURE
    assert (
        scan_units(no_topic, 0, len(no_topic), 0, 4096, strict=True).error.reason
        is RejectReason.BAD_STRUCTURE
    )


def test_bad_text_with_valid_crcs() -> None:
    assert reason_of(forge(topic=b"\xff\xfe")) is RejectReason.BAD_TEXT
    assert reason_of(forge(msg_id=b"\xc3\xa9")) is RejectReason.BAD_TEXT  # msgId must be ASCII
    assert reason_of(forge(props=b"no-separator")) is RejectReason.BAD_TEXT
    bad = forge(props=b"k\x01v")
    assert reason_of(bad) is RejectReason.BAD_TEXT
    # A replica takes the record as its master holds it (reads refuse it on both): no scan decodes text.
    assert scan_units(bad, 0, len(bad), 0, 4096, strict=True).stop is ScanStop.LIMIT
    assert scan_units(bad, 0, len(bad), 0, 4096).stop is ScanStop.LIMIT


def test_bad_blank_marker() -> None:
    wrong = encode_blank(100) + bytes(92)
    assert scan_units(wrong, 0, 100, 0, 101).error.reason is RejectReason.BAD_BLANK
    filler = encode_blank(100) + b"\x01" + bytes(91)
    assert scan_units(filler, 0, 100, 0, 100).stop is ScanStop.BLANK  # recovery ignores the filler
    assert scan_units(filler, 0, 100, 0, 100, strict=True).error.reason is RejectReason.BAD_BLANK
    assert scan_units(encode_blank(100), 0, 8, 0, 100).error.reason is RejectReason.TORN


def test_blank_or_zeros_where_a_message_is_expected() -> None:
    assert reason_of(encode_blank(64) + bytes(56)) is RejectReason.NOT_A_MESSAGE
    assert reason_of(encode_blank(8)) is RejectReason.NOT_A_MESSAGE
    assert reason_of(bytes(64)) is RejectReason.NOT_A_MESSAGE


def test_fewer_than_eight_bytes_left() -> None:
    assert scan_units(bytes(5), 0, 5, 0, 4096).stop is ScanStop.ZEROS
    assert scan_units(b"\x00\x00\x01", 0, 3, 0, 4096).error.reason is RejectReason.TORN


def test_invalid_record_message_names_offset_and_reason() -> None:
    error = InvalidRecord(RejectReason.BAD_CRC, 4242, "x")
    assert str(error) == "offset 4242: record CRC mismatch (x)"


# --- checkpoint ------------------------------------------------------------------------------------------
def test_checkpoint_round_trip_and_damage() -> None:
    checkpoint = Checkpoint(True, 1 << 30, 123456)
    data = encode_checkpoint(checkpoint)
    assert len(data) == 32 and decode_checkpoint(data) == checkpoint
    assert decode_checkpoint(data[:31]) is None
    for pos in range(28):
        damaged = bytearray(data)
        damaged[pos] ^= 0x10
        assert decode_checkpoint(bytes(damaged)) is None, pos
