"""The journal's checksummed file format (``journal_format``) and what the journal does with damage
(docs/architecture.md §9.6, docs/raft.md §11): every single-bit flip in a record is found, never read as
data; a damaged journal keeps the records before the damage and never writes its file again."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest
from pysyncobj.journal import FileJournal
from pysyncobj.pickle import dumps as pysyncobj_dumps

from mqha.controller.raft import journal_format
from mqha.controller.raft.journal import META_MAGIC, ChecksummedMetaStorer, CompactionSafeJournal
from mqha.controller.raft.journal_format import FIRST_RECORD_OFFSET, encode_record, header, parse

ELECT = b'\x00{"newMasterBrokerId":3,"record":"ElectMaster"}'


def _file(*entries: tuple[bytes, int, int]) -> bytes:
    records = b"".join(encode_record(*entry) for entry in entries)
    head = header(b"0.3.17")
    end = FIRST_RECORD_OFFSET + len(records)
    return head[: journal_format.END_OFFSET] + end.to_bytes(4, "little") + records + b"\0" * 64


def test_records_round_trip() -> None:
    entries = [(b"\x00", 1, 0), (ELECT, 2, 3), (b"", 3, 3)]
    parsed = parse(_file(*entries))
    assert parsed == journal_format.ParsedJournal(journal_format.CHECKSUMMED_FORMAT, entries, parsed.end)
    assert parsed.end == FIRST_RECORD_OFFSET + sum(len(encode_record(*e)) for e in entries)


def test_an_empty_journal_has_no_damage() -> None:
    assert parse(header(b"0.3.17")) == journal_format.ParsedJournal(2, [], FIRST_RECORD_OFFSET)


def test_every_single_bit_flip_in_a_record_is_damage_never_data() -> None:
    """Issue 45: ``"newMasterBrokerId":3`` -> ``2`` read as data made a member silently diverge."""
    data = _file((b"\x00", 1, 0), (ELECT, 2, 3), (b"\x00tail", 3, 3))
    start = FIRST_RECORD_OFFSET + len(encode_record(b"\x00", 1, 0))
    stop = start + len(encode_record(ELECT, 2, 3))
    for byte in range(start, stop):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[byte] ^= 1 << bit
            parsed = parse(bytes(damaged))
            assert parsed.damage is not None, (byte, bit)
            assert parsed.entries == [(b"\x00", 1, 0)], (byte, bit)  # the records before it, only
            assert parsed.end == start


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d[:20], "header cut short"),
        (lambda d: d[:32] + (7).to_bytes(4, "little") + d[36:], "unknown journal format 7"),
        (lambda d: d[:36] + (10**6).to_bytes(4, "little") + d[40:], "outside the file"),
        (lambda d: d[:36] + (FIRST_RECORD_OFFSET + 10).to_bytes(4, "little") + d[40:], "does not fit"),
    ],
    ids=["short-header", "format", "end-past-the-file", "end-inside-a-record"],
)
def test_a_damaged_header_is_damage(change: object, expected: str) -> None:
    parsed = parse(change(_file((ELECT, 1, 1), (ELECT, 2, 1))))  # type: ignore[operator]
    assert parsed.damage is not None and expected in parsed.damage


def test_a_gap_in_the_indexes_is_damage() -> None:
    parsed = parse(_file((ELECT, 1, 1), (ELECT, 3, 1)))
    assert parsed.entries == [(ELECT, 1, 1)] and "index 3 follows index 1" in (parsed.damage or "")


def test_the_stock_format_reads_without_checks(tmp_path: Path) -> None:
    stock = FileJournal(str(tmp_path / "j"))
    stock.add(ELECT, 1, 1)
    stock._destroy()
    parsed = parse((tmp_path / "j").read_bytes())
    assert (parsed.format, parsed.entries, parsed.damage) == (
        journal_format.STOCK_FORMAT,
        [(ELECT, 1, 1)],
        None,
    )


def _paths(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "raft.journal", tmp_path / "raft.dump"


def test_a_stock_journal_is_rewritten_with_checksums_at_start(tmp_path: Path) -> None:
    path, dump = _paths(tmp_path)
    stock = FileJournal(str(path))
    for index in (1, 2, 3):
        stock.add(ELECT, index, 1)
    stock._destroy()
    journal = CompactionSafeJournal(str(path), str(dump))
    journal.add(ELECT, 4, 2)
    journal._destroy()
    parsed = parse(path.read_bytes())
    assert parsed.format == journal_format.CHECKSUMMED_FORMAT and parsed.damage is None
    assert [e[1] for e in parsed.entries] == [1, 2, 3, 4]


def test_a_new_journal_is_written_in_the_checksummed_format(tmp_path: Path) -> None:
    path, dump = _paths(tmp_path)
    journal = CompactionSafeJournal(str(path), str(dump))
    journal.add(ELECT, 1, 1)
    journal.deleteEntriesFrom(1)
    journal.add(ELECT, 2, 1)  # replaces index 2 of a follower's conflicting tail
    journal._destroy()
    assert parse(path.read_bytes()).entries == [(ELECT, 1, 1), (ELECT, 2, 1)]


def test_a_damaged_journal_keeps_what_precedes_the_damage_and_never_writes_its_file(tmp_path: Path) -> None:
    path, dump = _paths(tmp_path)
    journal = CompactionSafeJournal(str(path), str(dump))
    for index in (1, 2, 3):
        journal.add(ELECT, index, 1)
    journal._destroy()
    data = bytearray(path.read_bytes())
    second = FIRST_RECORD_OFFSET + len(encode_record(ELECT, 1, 1))
    data[data.index(b":3,", second)] ^= 0x01  # the second record's "3" -> "2"
    path.write_bytes(bytes(data))
    damaged = CompactionSafeJournal(str(path), str(dump))
    assert (
        damaged.damage is not None
        and "checksum mismatch" in damaged.damage
        and "after index 1" in damaged.damage
    )
    assert [e[1] for e in damaged] == [1]
    damaged.add(ELECT, 2, 5)  # what PySyncObj may still do: memory only
    damaged.deleteEntriesFrom(0)
    damaged.clear()
    damaged.deleteEntriesTo(0)
    damaged._destroy()
    assert path.read_bytes() == bytes(data)  # the evidence stays: the next start finds the same damage
    assert CompactionSafeJournal(str(path), str(dump)).damage == damaged.damage


def test_a_compacted_journal_without_its_dump_is_damage(tmp_path: Path) -> None:
    path, dump = _paths(tmp_path)
    journal = CompactionSafeJournal(str(path), str(dump))
    for index in (7, 8):
        journal.add(ELECT, index, 1)
    journal._destroy()
    damaged = CompactionSafeJournal(str(path), str(dump))
    assert damaged.damage is not None and "raft.dump is missing" in damaged.damage


def test_meta_carries_a_checksum_and_a_damaged_one_is_not_read_as_empty(tmp_path: Path) -> None:
    path = str(tmp_path / "raft.journal.meta")
    storer = ChecksummedMetaStorer(path)
    assert storer.read() == ({}, None)  # no file: a new member
    storer.storeMeta({"currentTerm": 7, "votedForNodeId": "a"})
    data = Path(path).read_bytes()
    assert data.startswith(META_MAGIC) and storer.read() == ({"currentTerm": 7, "votedForNodeId": "a"}, None)
    assert os.listdir(tmp_path) == ["raft.journal.meta"]
    flipped = bytearray(data)
    flipped[-3] ^= 0x04
    Path(path).write_bytes(bytes(flipped))
    meta, damage = storer.read()
    assert meta == {} and damage is not None and "checksum mismatch" in damage
    Path(path).write_bytes(pysyncobj_dumps({"currentTerm": 3}))  # written by stock PySyncObj
    assert storer.read() == ({"currentTerm": 3}, None)
    Path(path).write_bytes(b"\x80\x02garbage")
    assert "unreadable" in (storer.read()[1] or "")


def test_a_damaged_meta_damages_the_journal(tmp_path: Path) -> None:
    path, dump = _paths(tmp_path)
    body = pysyncobj_dumps({"currentTerm": 3})
    (tmp_path / "raft.journal.meta").write_bytes(
        META_MAGIC + (zlib.crc32(body) ^ 1).to_bytes(4, "little") + body
    )
    journal = CompactionSafeJournal(str(path), str(dump))
    assert journal.damage is not None and "raft.journal.meta" in journal.damage
    journal._destroy()
