"""Walking a run of commit-log units. CORE: bytes and values in, a verdict out (no files or clocks).

``scan_units`` is how recovery finds where valid data ends, how a replica checks bytes from its
master before writing them, and how reads cut a segment into whole-unit batches. The record format
it checks is ``codec.py``. Its compiled fast path (``skip_messages`` of ``_native.c``, loaded by
``native.py``) walks the valid messages; the Python loop here judges every other unit and stays the
definition (tests/property/test_native_codec.py compares the two on the same inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import Enum
from struct import Struct
from struct import error as struct_error
from typing import NamedTuple

from isal import isal_zlib

from mqha.broker.commitlog.codec import (
    BLANK_MAGIC,
    BLANK_SIZE,
    HEADER_SIZE,
    MESSAGE_MAGIC,
    MIN_MESSAGE_SIZE,
    RECORD_CRC_FROM,
    UNIT_PREFIX,
    InvalidRecord,
    RejectReason,
)
from mqha.broker.commitlog.native import NATIVE

# What the scanner needs: totalSize, magic, recordCRC, bodyCRC, physicalOffset, and the five lengths.
_SCAN = Struct(">IIIIq16xIHHHH")
_SCAN_SIZE = _SCAN.size
_crc32 = isal_zlib.crc32  # the codec's CRC (codec.py says why ISA-L)
_skip_messages = NATIVE.skip_messages if NATIVE is not None else None


class ScanStop(Enum):
    """Why ``scan_units`` stopped. ``value`` is the phrase used in messages."""

    LIMIT = "reached the end of the range"
    ZEROS = "reached zeros: end of data"
    BLANK = "passed a blank marker: the segment is complete"
    INVALID = "found an invalid unit"


class Scan(NamedTuple):
    """Outcome of ``scan_units``. ``end`` is where valid data stops (relative to the buffer)."""

    end: int
    messages: int
    last_message: int  # buffer position of the last valid message, -1 when none
    stop: ScanStop
    error: InvalidRecord | None


def scan_units(
    buf: bytes | bytearray | memoryview,
    start: int,
    end: int,
    base_offset: int,
    segment_end: int,
    *,
    verify_crc: bool = True,
    strict: bool = False,
    max_messages: int = -1,
    window: bool = False,
) -> Scan:
    """Walk the units in ``buf[start:end]`` and stop at the first one that is not valid.

    ``base_offset`` is the global offset of ``buf[0]``; ``segment_end`` the global offset where the
    segment holding these bytes ends (a blank marker must reach exactly there). Checks per message:
    magic; size within ``[MIN_MESSAGE_SIZE, remaining - BLANK_SIZE]``; the unit within ``end`` (else
    TORN); physicalOffset; and, when ``verify_crc`` (recovery), the body and record CRCs. Without
    ``verify_crc`` it is the fast header-only walk over bytes already verified. ``strict`` (bytes from
    a peer) adds the structure check of ``decode_message`` (the field lengths add up to the record, msgId
    and topic are not empty), requires zeros after a blank marker and treats zeros where a unit should
    start as invalid. It does not decode the text fields: a replica must hold what its master holds, and
    every read decodes and checks them (``decode_message``).

    Zeros where a unit would start stop the walk as ``ZEROS`` (end of data in a preallocated segment).
    A blank marker stops it as ``BLANK`` with ``end`` just past the unit. ``max_messages`` >= 0 stops
    before the walk passes that many messages (``LIMIT``). ``window``: ``end`` only bounds how much to
    take, not the data: a unit that would cross it ends the walk as ``LIMIT``, not as a torn unit.
    """
    seg_rel_end = segment_end - base_offset  # segment end, relative to the buffer
    pos = start
    count = 0
    last = -1
    skip = _skip_messages
    if skip is not None:  # the compiled walk passes the valid messages; the loop below judges the rest
        pos, count, last = skip(
            buf, pos, end, base_offset, seg_rel_end, verify_crc, strict, max_messages, 0, -1
        )
        if pos == end:  # the usual answer for a batch of whole messages: before any setup
            return Scan(pos, count, last, ScanStop.LIMIT, None)
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    unpack_prefix = UNIT_PREFIX.unpack_from
    unpack_scan = _SCAN.unpack_from
    crc32 = _crc32
    limit = end - BLANK_SIZE
    # The loop is the recovery hot path (one pass per message of a 1 GiB segment): every check of a
    # message is one combined test, and a failure is explained afterwards by _message_error.
    while pos <= limit and count != max_messages:
        try:
            size, magic, record_crc, body_crc, phys, n_body, n_id, n_topic, n_keys, n_props = unpack_scan(
                mv, pos
            )
        except struct_error:  # under 52 bytes of buffer left: a blank marker or a torn unit
            size, magic = unpack_prefix(mv, pos)
            record_crc = body_crc = phys = n_body = n_id = n_topic = n_keys = n_props = -1
        if magic == MESSAGE_MAGIC:
            stop = pos + size
            body_start = stop - n_body
            if (
                size < MIN_MESSAGE_SIZE
                or stop + BLANK_SIZE > seg_rel_end
                or phys != base_offset + pos
                or body_start < pos + MIN_MESSAGE_SIZE
                or (stop > end and not window)
                or (
                    strict
                    and (
                        pos + HEADER_SIZE + n_id + n_topic + n_keys + n_props != body_start
                        or not n_id
                        or not n_topic
                    )
                )
            ):
                return Scan(
                    pos, count, last, ScanStop.INVALID, _message_error(mv, pos, end, seg_rel_end, base_offset)
                )
            if stop > end:  # a sound header whose message the window cuts: stop before it
                return Scan(pos, count, last, ScanStop.LIMIT, None)
            if verify_crc:
                actual = crc32(mv[body_start:stop])
                if actual != body_crc or crc32(mv[pos + RECORD_CRC_FROM : body_start], actual) != record_crc:
                    reason = RejectReason.BAD_BODY_CRC if actual != body_crc else RejectReason.BAD_CRC
                    return _invalid(pos, count, last, reason, base=base_offset)
            last = pos
            count += 1
            pos = stop
            if skip is not None:
                pos, count, last = skip(
                    mv, pos, end, base_offset, seg_rel_end, verify_crc, strict, max_messages, count, last
                )
        elif magic == BLANK_MAGIC:
            if size != seg_rel_end - pos:
                return _invalid(
                    pos, count, last, RejectReason.BAD_BLANK, base=base_offset, detail=f"size {size}"
                )
            if pos + size > end:
                if window:
                    return Scan(pos, count, last, ScanStop.LIMIT, None)
                return _invalid(
                    pos, count, last, RejectReason.TORN, base=base_offset, detail=f"blank of {size}"
                )
            if strict and not is_zeros(mv[pos + BLANK_SIZE : pos + size]):
                return _invalid(
                    pos, count, last, RejectReason.BAD_BLANK, base=base_offset, detail="non-zero filler"
                )
            return Scan(pos + size, count, last, ScanStop.BLANK, None)
        elif size == 0 and magic == 0 and not strict:
            return Scan(pos, count, last, ScanStop.ZEROS, None)
        else:
            return _invalid(
                pos, count, last, RejectReason.BAD_MAGIC, base=base_offset, detail=f"0x{magic:08X}"
            )
    if count == max_messages or pos == end or window:
        return Scan(pos, count, last, ScanStop.LIMIT, None)
    # Fewer than 8 bytes left: only zeros may remain (a unit never starts this close to the end).
    if not strict and is_zeros(mv[pos:end]):
        return Scan(pos, count, last, ScanStop.ZEROS, None)
    return _invalid(pos, count, last, RejectReason.TORN, base=base_offset, detail=f"{end - pos} bytes left")


def _message_error(mv: memoryview, pos: int, end: int, seg_rel_end: int, base_offset: int) -> InvalidRecord:
    """Which header check the message at ``pos`` failed, in the documented order."""
    where = base_offset + pos
    size = UNIT_PREFIX.unpack_from(mv, pos)[0]
    if size < MIN_MESSAGE_SIZE or pos + size + BLANK_SIZE > seg_rel_end:
        return InvalidRecord(RejectReason.BAD_SIZE, where, f"size {size}")
    if pos + size > end or len(mv) - pos < _SCAN_SIZE:
        return InvalidRecord(RejectReason.TORN, where, f"size {size}, {end - pos} bytes left")
    phys, n_body, n_id, n_topic, n_keys, n_props = _SCAN.unpack_from(mv, pos)[4:]
    if phys != where:
        return InvalidRecord(RejectReason.WRONG_OFFSET, where, f"field says {phys}")
    lengths = f"body {n_body}, msgId {n_id}, topic {n_topic}, keys {n_keys}, properties {n_props}"
    return InvalidRecord(RejectReason.BAD_STRUCTURE, where, f"lengths ({lengths}) in a record of {size}")


def is_zeros(data: bytes | bytearray | memoryview) -> bool:
    """True when every byte is zero (a copy and a memcmp: far faster than comparing memoryviews)."""
    return bytes(data) == bytes(len(data))


def _invalid(pos: int, count: int, last: int, reason: RejectReason, *, base: int, detail: str = "") -> Scan:
    return Scan(pos, count, last, ScanStop.INVALID, InvalidRecord(reason, base + pos, detail))


def message_walk(
    buf: bytes | bytearray | memoryview,
    base_offset: int,
    segment_end: int,
    *,
    verify_crc: bool = True,
    strict: bool = False,
) -> Callable[[int, int], int]:
    """``walk(start, end)``: where ``scan_units(buf, start, end, base_offset, segment_end, ...)`` ends
    (with these flags, either ``window``, no message limit) when the compiled walk alone can tell, else
    ``-1``: then call :func:`scan_units`. Without the compiled walk it always answers ``-1``.

    It can tell when the walk took at least one message and stopped where no blank marker starts:
    whatever unit stops it there (cut by ``end``, invalid, zeros), scan_units stops there too. A blank
    marker might be taken, so it is left to scan_units. The HA paths and reads ask once per 32 KiB
    batch, the arguments fixed for a whole read: one small call instead of scan_units' setup, the
    judgement of the unit it stops at and its result.
    """
    skip = _skip_messages
    if skip is None:
        return _no_walk
    seg_rel_end = segment_end - base_offset
    blank_at = UNIT_PREFIX.unpack_from

    def walk(start: int, end: int) -> int:
        pos, count, _ = skip(buf, start, end, base_offset, seg_rel_end, verify_crc, strict, -1, 0, -1)
        if not count or (pos + BLANK_SIZE <= end and blank_at(buf, pos)[1] == BLANK_MAGIC):
            return -1
        return pos

    return walk


def _no_walk(start: int, end: int) -> int:
    return -1


_MESSAGE_MAGIC_BYTES = MESSAGE_MAGIC.to_bytes(4, "big")
_BLANK_MAGIC_BYTES = BLANK_MAGIC.to_bytes(4, "big")
_SEARCH_WINDOW = 64 * 1024


def _all_at(data: bytes, magic: bytes) -> Iterator[int]:
    found = data.find(magic)
    while found >= 0:
        yield found
        found = data.find(magic, found + 1)


def resume_after(
    buf: bytes | bytearray | memoryview, bad: int, end: int, base_offset: int, segment_end: int
) -> int:
    """Where valid data goes on after the damaged unit at ``bad`` (buffer positions; ``end`` bounds
    the data, e.g. the log end within this segment): the first later position where a message passes
    every check (its own physicalOffset, its CRCs) or a blank marker ends the segment exactly; ``end``
    when none does. The damaged unit's own size is tried first (a flipped body bit leaves it right);
    else the search goes by the message magic (a record's physicalOffset pins it to its place), then
    by the blank marker's."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = min(end, len(mv))

    def unit_at(pos: int) -> bool:
        scan = scan_units(mv, pos, end, base_offset, segment_end, max_messages=1)
        return scan.end > pos or (scan.stop is ScanStop.LIMIT and pos == end)

    if bad + UNIT_PREFIX.size <= end:
        size = UNIT_PREFIX.unpack_from(mv, bad)[0]
        if size >= MIN_MESSAGE_SIZE and bad + size <= end and unit_at(bad + size):
            return bad + size
    # The search copies a window at a time: the next unit is usually a few hundred bytes on, and the
    # caller may hold the log's lock over a 1 GiB segment.
    for window in range(bad + 5, end, _SEARCH_WINDOW):  # a magic at bad + 5 is a unit at bad + 1
        data = bytes(mv[window : min(window + _SEARCH_WINDOW + 3, end)])
        candidates = sorted(
            window + found - 4
            for magic in (_MESSAGE_MAGIC_BYTES, _BLANK_MAGIC_BYTES)
            for found in _all_at(data, magic)
            if found < _SEARCH_WINDOW
        )
        for pos in candidates:
            if unit_at(pos):
                return pos
    return end
