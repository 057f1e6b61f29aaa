"""The Raft journal's file format: PySyncObj's, with a CRC32 at the end of every record (pure codec).

docs/architecture.md §9.6. The file is PySyncObj 0.3.17's ``FileJournal`` layout::

    header (40 bytes): app name (24) | app version (8) | format (u32 LE) | end of the last record (u32 LE)
    record:            size (u32 LE) | index (u64 LE) | term (u64 LE) | command | [crc32 (u32 LE)] | size

Format 1 is stock (no CRC). Format 2 (ours) ends each record body with ``zlib.crc32(index | term |
command)``, and ``size`` counts it. A flipped bit in a record, a torn record or an end offset that does
not fall on a record boundary is *damage*: :func:`parse` returns the records before it and says where
it is, and never guesses past it. A format-1 file is read without checks (it has none) and rewritten
as format 2 by the journal at start (``journal.CompactionSafeJournal``).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

Entry = tuple[bytes, int, int]  # PySyncObj's (command, index, term)

STOCK_FORMAT = 1  # pysyncobj.journal.JOURNAL_FORMAT_VERSION: records without a checksum
CHECKSUMMED_FORMAT = 2  # ours: every record ends with a CRC32
APP_NAME = b"PYSYNCOBJ"  # as stock: the header stays PySyncObj's
NAME_SIZE, VERSION_SIZE = 24, 8
FORMAT_OFFSET = NAME_SIZE + VERSION_SIZE
END_OFFSET = FORMAT_OFFSET + 4
FIRST_RECORD_OFFSET = END_OFFSET + 4

_U32 = struct.Struct("<I")
_INDEX_TERM = struct.Struct("<QQ")
_CRC_SIZE = 4


def header(app_version: bytes) -> bytes:
    """The header of an empty format-2 journal (its end offset is the first record's)."""
    name = APP_NAME.ljust(NAME_SIZE, b"\0")
    version = app_version[: VERSION_SIZE - 1].ljust(VERSION_SIZE, b"\0")
    return name + version + _U32.pack(CHECKSUMMED_FORMAT) + _U32.pack(FIRST_RECORD_OFFSET)


def encode_record(command: bytes, index: int, term: int) -> bytes:
    """One format-2 record: ``size | index term command crc32 | size``."""
    body = _INDEX_TERM.pack(index, term) + command
    body += _U32.pack(zlib.crc32(body))
    size = _U32.pack(len(body))
    return size + body + size


@dataclass(frozen=True)
class ParsedJournal:
    """What :func:`parse` read: the records up to the first damage, where they end, and the damage."""

    format: int
    entries: list[Entry]
    end: int  # file offset after the last record returned (where the next one is written)
    damage: str | None = None  # None: the whole journal was read and every checksum matched


def parse(data: bytes) -> ParsedJournal:
    """Read a whole journal file (format 1 or 2). Never raises: damage is reported, not guessed past."""
    if len(data) < FIRST_RECORD_OFFSET:
        return ParsedJournal(
            CHECKSUMMED_FORMAT, [], FIRST_RECORD_OFFSET, f"header cut short ({len(data)} bytes)"
        )
    file_format = _U32.unpack_from(data, FORMAT_OFFSET)[0]
    end = _U32.unpack_from(data, END_OFFSET)[0]
    if file_format not in (STOCK_FORMAT, CHECKSUMMED_FORMAT):
        return ParsedJournal(file_format, [], FIRST_RECORD_OFFSET, f"unknown journal format {file_format}")
    if not FIRST_RECORD_OFFSET <= end <= len(data):
        damage = f"end of the last record at byte {end} lies outside the file ({len(data)} bytes)"
        return ParsedJournal(file_format, [], FIRST_RECORD_OFFSET, damage)
    entries: list[Entry] = []
    offset = FIRST_RECORD_OFFSET
    checked = file_format == CHECKSUMMED_FORMAT
    while offset < end:
        entry, damage = _record_at(data, offset, end, checked)
        if entry is None:
            after = f"after index {entries[-1][1]}" if entries else "the first record"
            return ParsedJournal(file_format, entries, offset, f"record at byte {offset} ({after}): {damage}")
        index = entry[1]
        if entries and index != entries[-1][1] + 1:
            damage = f"record at byte {offset}: index {index} follows index {entries[-1][1]}"
            return ParsedJournal(file_format, entries, offset, damage)
        entries.append(entry)
        offset += 8 + _U32.unpack_from(data, offset)[0]
    return ParsedJournal(file_format, entries, offset)


def _record_at(data: bytes, offset: int, end: int, checked: bool) -> tuple[Entry | None, str]:
    """The record at ``offset`` (ending by ``end``), or None and what is wrong with it."""
    if offset + 4 > end:
        return None, "size cut short"
    size = _U32.unpack_from(data, offset)[0]
    minimum = _INDEX_TERM.size + (_CRC_SIZE if checked else 0)
    if size < minimum or offset + 8 + size > end:
        return None, f"size {size} does not fit"
    if _U32.unpack_from(data, offset + 4 + size)[0] != size:
        return None, "the sizes before and after it differ"
    body = data[offset + 4 : offset + 4 + size]
    if checked:
        body, stored = body[:-_CRC_SIZE], _U32.unpack(body[-_CRC_SIZE:])[0]
        if zlib.crc32(body) != stored:
            return None, "checksum mismatch"
    index, term = _INDEX_TERM.unpack_from(body)
    return (bytes(body[_INDEX_TERM.size :]), index, term), ""
