"""Commit-log record format. CORE: bytes and values in, values out (no files, clocks or randomness).

A segment holds back-to-back *units*: message records, then (once the next message does not fit) one
blank marker that fills the segment to its end. All integers are big-endian.

Message record::

    pos  size  field
      0     4  totalSize         the whole record, this field included
      4     4  magic             MESSAGE_MAGIC
      8     4  recordCRC         zlib.crc32(bytes[12, bodyStart), bodyCRC): every later byte, body included
     12     4  bodyCRC           CRC32 (zlib) of the body alone (docs/architecture.md §4)
     16     8  physicalOffset    global offset of this record (a record copied elsewhere is rejected)
     24     8  storeTimestamp    ms since the epoch, set by the store
     32     8  bornTimestamp     ms since the epoch, set by the producer
     40     4  bodyLength
     44     2  msgIdLength       ASCII, 1..255 bytes
     46     2  topicLength       UTF-8, 1..255 bytes
     48     2  keysLength        UTF-8, 0..65535 bytes
     50     2  propertiesLength  ``name \\x01 value \\x02`` pairs, UTF-8, 0..32767 bytes
     52        msgId | topic | keys | properties | body

Blank marker: ``totalSize`` (4) = bytes from the marker to the segment end, then ``BLANK_MAGIC`` (4);
the bytes after it are zeros. It is a unit like any other, so replicas copy it and cut files alike.

Two deliberate changes to the field list of the design brief, both for the scanner:

* every length sits in the fixed header, so one ``struct`` unpack sees a record's whole structure
  (no walk over length-prefixed fields);
* ``recordCRC`` covers every byte after it, not only the body: a torn page can zero the topic or the
  properties of a record whose body survived, and a body CRC alone would not notice. It is the CRC32
  of the body followed by bytes ``[12, bodyStart)`` (zlib's running CRC seeded with ``bodyCRC``), so
  the writer hashes the body once.

Compiled fast path (``_native.c``, loaded by ``native.py``): ``encode_run`` encodes plain drafts back
to back and hands every other case to ``encode_message`` here, which stays the definition
(tests/property/test_native_codec.py compares the two on the same inputs). Walking a run of units is
``scanning.py``; the checkpoint file is ``checkpoint.py``.

Placement rule (``fits``): a message goes into a segment only if ``size + BLANK_SIZE <= remaining``,
so there is always room for the blank marker and a message never ends within 8 bytes of a segment end.
``max_message_size`` (maxMessageSize, default 4 MiB) bounds the whole record on encode only: decoding
never rejects a record for its size alone, so lowering the setting cannot make a stored log invalid.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from struct import Struct

from isal import isal_zlib

from mqha.broker.commitlog.native import NATIVE
from mqha.errors import LocalProtocolError, MqhaError

# --- layout ------------------------------------------------------------------------------------------
MESSAGE_MAGIC = 0x4D514D31  # "MQM1": a message record, format 1
BLANK_MAGIC = 0x4D514231  # "MQB1": end-of-segment blank marker, format 1

TOTAL_SIZE_POS = 0
MAGIC_POS = 4
RECORD_CRC_POS = 8
BODY_CRC_POS = 12
PHYSICAL_OFFSET_POS = 16
STORE_TIMESTAMP_POS = 24
BORN_TIMESTAMP_POS = 32
BODY_LENGTH_POS = 40
MSG_ID_LENGTH_POS = 44
TOPIC_LENGTH_POS = 46
KEYS_LENGTH_POS = 48
PROPERTIES_LENGTH_POS = 50
HEADER_SIZE = 52
RECORD_CRC_FROM = BODY_CRC_POS
"""recordCRC = ``crc32(record[RECORD_CRC_FROM:bodyStart], crc32(body))``."""

BLANK_SIZE = 8
"""Size of a blank marker proper (totalSize + magic); the zeros after it belong to the unit too."""

MAX_MSG_ID_BYTES = 255
MAX_TOPIC_BYTES = 255
MAX_KEYS_BYTES = 0xFFFF
MAX_PROPERTIES_BYTES = 0x7FFF  # a Java short, as the reference stores it
MIN_MESSAGE_SIZE = HEADER_SIZE + 2  # a 1-byte msgId and a 1-byte topic
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # maxMessageSize (docs/reference-behaviour.md §16.3 family)

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

UNIT_PREFIX = Struct(">II")  # totalSize, magic: the start of every unit
# The 40 bytes after the two CRCs' neighbour fields: bodyCRC .. propertiesLength (positions 12..52).
_HEADER_TAIL = Struct(">IqqqIHHHH")
_HEADER_HEAD = Struct(">III")  # totalSize, magic, recordCRC
_HEADER = Struct(">IIIIqqqIHHHH")  # all 52 bytes
_BLANK = Struct(">II")
# ISA-L's CRC32 is zlib's (same polynomial, same running seed) at about twice the speed for a 1 KiB
# body: it is most of what recovery and the slave's batch check cost per message.
_crc32 = isal_zlib.crc32
_pack_tail = _HEADER_TAIL.pack  # bound once: encode_message runs once per stored message
_pack_head = _HEADER_HEAD.pack
_join = b"".join


# --- values ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MessageDraft:
    """A message as a producer hands it to the store.

    ``msg_id`` None: the store assigns one; ``born_ts`` None: the store timestamp.
    """

    topic: str
    body: bytes
    msg_id: str | None = None
    keys: str = ""
    properties: dict[str, str] | None = None
    born_ts: int | None = None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as the commit log holds it: its place (offset, size), its fields and timestamps, its CRC."""

    offset: int
    size: int
    msg_id: str
    topic: str
    keys: str
    properties: dict[str, str]
    body: bytes
    born_ts: int
    store_ts: int
    body_crc: int

    @property
    def next_offset(self) -> int:
        return self.offset + self.size


class RejectReason(Enum):
    """Why a byte range is not a valid unit. ``value`` is the phrase used in messages."""

    TORN = "unit runs past the end of the data (torn write)"
    BAD_MAGIC = "unknown magic"
    BAD_SIZE = "size out of range"
    WRONG_OFFSET = "physicalOffset field does not match the record's position"
    BAD_CRC = "record CRC mismatch"
    BAD_BODY_CRC = "body CRC mismatch"
    BAD_STRUCTURE = "field lengths do not add up to the record size"
    BAD_TEXT = "a text field is not valid UTF-8/ASCII or properties are malformed"
    BAD_BLANK = "blank marker size does not reach the segment end, or its filler is not zeros"
    NOT_A_MESSAGE = "a blank marker or zeros where a message was expected"


class InvalidRecord(MqhaError):
    """Reports bytes at ``offset`` that are not a valid unit.

    Core error: the store shell turns it into a recovery cut, a ``NotAlignedError`` or a
    ``RemoteProtocolError``, never lets it escape.
    """

    def __init__(self, reason: RejectReason, offset: int, detail: str = "") -> None:
        text = f"offset {offset}: {reason.value}"
        super().__init__(f"{text} ({detail})" if detail else text)
        self.reason = reason
        self.offset = offset


class InvalidDraft(LocalProtocolError):
    """A draft that cannot be stored (too large, a field out of bounds, a bad character)."""


# --- encoding ----------------------------------------------------------------------------------------
def fits(size: int, remaining: int) -> bool:
    """Placement rule: a unit of ``size`` bytes may start where ``remaining`` bytes of segment are left."""
    return size + BLANK_SIZE <= remaining


def encode_properties(properties: dict[str, str] | None) -> bytes:
    if not properties:
        return b""
    parts = []
    for name, value in properties.items():
        if not name or any(s in name or s in value for s in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)):
            raise InvalidDraft(f"property {name!r}: empty name or a \\x01/\\x02 separator inside")
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    return "".join(parts).encode("utf-8")


def decode_properties(raw: bytes | str) -> dict[str, str]:
    text = raw if isinstance(raw, str) else raw.decode("utf-8")
    if not text:
        return {}
    if not text.endswith(PROPERTY_SEPARATOR):
        raise ValueError("properties do not end with a separator")
    result: dict[str, str] = {}
    for pair in text[:-1].split(PROPERTY_SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if not sep or not name:
            raise ValueError(f"malformed property {pair!r}")
        result[name] = value
    return result


def encode_message(
    draft: MessageDraft,
    physical_offset: int,
    store_ts: int,
    *,
    msg_id: str | None = None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> bytes:
    """The record of ``draft`` stored at ``physical_offset``. ``msg_id`` overrides ``draft.msg_id``
    (the store passes the id it generated). Raises ``InvalidDraft`` naming the offending field."""
    mid = msg_id if msg_id is not None else draft.msg_id
    try:
        id_b = mid.encode("ascii")  # type: ignore[union-attr]
    except (AttributeError, UnicodeEncodeError):
        raise InvalidDraft(f"msgId {mid!r} is missing or not ASCII") from None
    if not id_b:
        raise InvalidDraft("msgId is empty")
    topic_b = draft.topic.encode("utf-8")
    keys_b = draft.keys.encode("utf-8") if draft.keys else b""
    props_b = encode_properties(draft.properties) if draft.properties else b""
    body = draft.body
    n_id, n_topic, n_keys, n_props, n_body = len(id_b), len(topic_b), len(keys_b), len(props_b), len(body)
    total = HEADER_SIZE + n_id + n_topic + n_keys + n_props + n_body
    # One combined test on the hot path; the slow path below says which bound failed.
    if (
        n_id > MAX_MSG_ID_BYTES
        or not 0 < n_topic <= MAX_TOPIC_BYTES
        or n_keys > MAX_KEYS_BYTES
        or n_props > MAX_PROPERTIES_BYTES
        or total > max_message_size
        or physical_offset < 0
    ):
        _raise_bounds((n_id, n_topic, n_keys, n_props, total), max_message_size, physical_offset)
    born = store_ts if draft.born_ts is None else draft.born_ts
    body_crc = _crc32(body)
    tail = _pack_tail(body_crc, physical_offset, store_ts, born, n_body, n_id, n_topic, n_keys, n_props)
    fields = id_b + topic_b + keys_b + props_b
    record_crc = _crc32(fields, _crc32(tail, body_crc))
    return _join((_pack_head(total, MESSAGE_MAGIC, record_crc), tail, fields, body))


def _encode_run(
    drafts: list[MessageDraft],
    index: int,
    pos: int,
    *,
    segment_end: int,
    store_ts: int,
    max_message_size: int,
    id_prefix: str,
    next_id: int,
    result_type: type[tuple],
    results: list,
) -> tuple[bytes, int, int]:
    """The compiled encoder: ``encode_message`` for ``drafts[index:]`` back to back from ``pos``, for
    as long as each draft is plain (str/bytes fields, a dict or None of properties), within its bounds
    and ``fits`` before ``segment_end``. Returns ``(records, done, ids_used)`` and appends
    ``result_type(offset, size, msg_id, store_ts)`` per record to ``results``. A draft without a msgId
    gets ``id_prefix`` + 16 hex digits of ``next_id``, ``next_id + 1``, ... The draft it stops at is the
    caller's: ``encode_message`` then raises the precise error, or the segment is closed."""
    assert NATIVE is not None
    return NATIVE.encode_run(  # type: ignore[no-any-return]
        drafts,
        index,
        pos,
        segment_end,
        store_ts,
        max_message_size,
        id_prefix,
        next_id,
        result_type,
        results,
        encode_properties,
    )


encode_run = _encode_run if NATIVE is not None else None


def _raise_bounds(sizes: tuple[int, int, int, int, int], max_message_size: int, offset: int) -> None:
    n_id, n_topic, n_keys, n_props, total = sizes
    if n_id > MAX_MSG_ID_BYTES:
        raise InvalidDraft(f"msgId must be at most {MAX_MSG_ID_BYTES} bytes, got {n_id}")
    if not 0 < n_topic <= MAX_TOPIC_BYTES:
        raise InvalidDraft(f"topic must be 1..{MAX_TOPIC_BYTES} UTF-8 bytes, got {n_topic}")
    if n_keys > MAX_KEYS_BYTES:
        raise InvalidDraft(f"keys must be at most {MAX_KEYS_BYTES} UTF-8 bytes, got {n_keys}")
    if n_props > MAX_PROPERTIES_BYTES:
        raise InvalidDraft(f"properties must be at most {MAX_PROPERTIES_BYTES} bytes, got {n_props}")
    if total > max_message_size:
        raise InvalidDraft(f"message of {total} bytes exceeds maxMessageSize {max_message_size}")
    raise InvalidDraft(f"negative physical offset {offset}")


def encode_blank(remaining: int) -> bytes:
    """The 8-byte blank marker for a segment with ``remaining`` bytes left (the zeros are not included)."""
    if remaining < BLANK_SIZE:
        raise ValueError(f"a blank marker needs {BLANK_SIZE} bytes, only {remaining} left")
    return _BLANK.pack(remaining, BLANK_MAGIC)


# --- decoding ----------------------------------------------------------------------------------------
def decode_message(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, base_offset: int | None = None
) -> StoredMessage:
    """Fully validate and decode the message record at ``buf[pos:]``.

    ``base_offset`` is the global offset of ``buf[0]``; when given, the record's physicalOffset field
    must equal ``base_offset + pos``. Raises ``InvalidRecord`` (never anything else on bad bytes).
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    where = pos if base_offset is None else base_offset + pos
    left = len(mv) - pos
    if left < HEADER_SIZE:
        if left >= BLANK_SIZE and UNIT_PREFIX.unpack_from(mv, pos)[1] in (BLANK_MAGIC, 0):
            raise InvalidRecord(RejectReason.NOT_A_MESSAGE, where)
        raise InvalidRecord(RejectReason.TORN, where, f"{left} bytes left")
    (size, magic, record_crc, body_crc, phys, store_ts, born_ts, n_body, n_id, n_topic, n_keys, n_props) = (
        _HEADER.unpack_from(mv, pos)
    )
    if magic != MESSAGE_MAGIC:
        if magic == BLANK_MAGIC or (size == 0 and magic == 0):
            raise InvalidRecord(RejectReason.NOT_A_MESSAGE, where)
        raise InvalidRecord(RejectReason.BAD_MAGIC, where, f"0x{magic:08X}")
    if size < MIN_MESSAGE_SIZE:
        raise InvalidRecord(RejectReason.BAD_SIZE, where, f"size {size}")
    if size > left:
        raise InvalidRecord(RejectReason.TORN, where, f"size {size}, {left} bytes left")
    if base_offset is not None and phys != where:
        raise InvalidRecord(RejectReason.WRONG_OFFSET, where, f"field says {phys}")
    end = pos + size
    a = pos + HEADER_SIZE
    b = a + n_id
    c = b + n_topic
    d = c + n_keys
    e = d + n_props
    if e + n_body != end or n_id == 0 or n_topic == 0:
        raise InvalidRecord(RejectReason.BAD_STRUCTURE, where)
    body = bytes(mv[e:end])
    actual_body_crc = _crc32(body)
    if actual_body_crc != body_crc:
        raise InvalidRecord(RejectReason.BAD_BODY_CRC, where)
    if _crc32(mv[pos + RECORD_CRC_FROM : e], actual_body_crc) != record_crc:
        raise InvalidRecord(RejectReason.BAD_CRC, where)
    try:
        msg_id = str(mv[a:b], "ascii")
        topic = str(mv[b:c], "utf-8")
        keys = str(mv[c:d], "utf-8")
        properties = decode_properties(str(mv[d:e], "utf-8")) if n_props else {}
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidRecord(RejectReason.BAD_TEXT, where, str(exc)) from None
    return StoredMessage(phys, size, msg_id, topic, keys, properties, body, born_ts, store_ts, body_crc)


def unit_size_at(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """``(totalSize, magic)`` of the unit at ``pos``, unchecked (the caller validates)."""
    size, magic = UNIT_PREFIX.unpack_from(buf, pos)
    return size, magic
