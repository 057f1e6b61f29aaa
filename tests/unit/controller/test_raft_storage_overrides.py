"""One test per PySyncObj override in mqha/controller/raft/journal.py and node.py's ``RecordConsumer``
(docs/raft.md §9): what each does differently from the stock method. Files only, no sockets or threads."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import Any

import pysyncobj.serializer
import pytest
from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.journal import FileJournal
from pysyncobj.pickle import dumps as pysyncobj_dumps
from pysyncobj.serializer import Serializer

from mqha.controller.raft import journal_format
from mqha.controller.raft.journal import (
    CompactionSafeJournal,
    DurableFileJournal,
    DurableMetaStorer,
    durable_dumps_installed,
    install_durable_dumps,
)
from mqha.controller.raft.node import SNAPSHOT_FORMAT, RecordConsumer


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths (or ``fd:journal``) fsynced/fdatasynced, in order."""
    calls: list[str] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        calls.append("fdatasync:" + os.readlink(f"/proc/self/fd/{fd}"))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    return calls


def _journal(tmp_path: Path) -> DurableFileJournal:
    return DurableFileJournal(str(tmp_path / "raft.journal"), str(tmp_path / "raft.dump"))


def test_store_meta_fsyncs_file_then_directory_with_a_checksum(tmp_path: Path, synced: list[str]) -> None:
    """``DurableMetaStorer.storeMeta`` overrides ``MetaStorer.storeMeta``."""
    path = str(tmp_path / "raft.journal.meta")
    DurableMetaStorer(path).storeMeta({"term": 7, "vote": "127.0.0.1:1"})
    temp, directory = synced  # mqha.durable's temp file: .<name>.<random>.tmp in the same directory
    assert temp.startswith(str(tmp_path / ".raft.journal.meta.")) and temp.endswith(".tmp")
    assert directory == str(tmp_path)  # the temp file before the rename, then the directory
    assert os.listdir(tmp_path) == ["raft.journal.meta"]  # no temp file left
    assert DurableMetaStorer(path).read() == ({"term": 7, "vote": "127.0.0.1:1"}, None)


def test_journal_init_installs_the_durable_meta_storer(tmp_path: Path, synced: list[str]) -> None:
    """``DurableFileJournal.__init__`` extends ``FileJournal.__init__``."""
    journal = _journal(tmp_path)
    try:
        assert isinstance(journal._FileJournal__metaStorer, DurableMetaStorer)
        assert journal._FileJournal__metaStorer.getPath() == str(tmp_path / "raft.journal.meta")
        assert synced == [str(tmp_path)]  # the journal's directory entry
        assert not journal.dirty and journal.path == str(tmp_path / "raft.journal")
        synced.clear()
        journal.setCurrentTerm(3, "127.0.0.1:1")  # term and vote go through the durable storer
        assert any(path.startswith(str(tmp_path / ".raft.journal.meta.")) for path in synced)
    finally:
        journal._destroy()


def test_journal_add_marks_dirty_until_one_sync(tmp_path: Path, synced: list[str]) -> None:
    """``DurableFileJournal.add`` extends ``FileJournal.add``."""
    journal = _journal(tmp_path)
    try:
        synced.clear()
        journal.sync()
        assert synced == []  # clean: nothing to flush
        journal.add(b"\x01", 1, 1)
        journal.add(b"\x00cmd", 2, 1)
        assert journal.dirty
        journal.sync()
        assert synced == ["fdatasync:" + str(tmp_path / "raft.journal")]  # one flush for both
        assert not journal.dirty
    finally:
        journal._destroy()


def test_journal_delete_entries_from_marks_dirty(tmp_path: Path) -> None:
    """``DurableFileJournal.deleteEntriesFrom`` extends ``FileJournal.deleteEntriesFrom``."""
    journal = _journal(tmp_path)
    try:
        for idx in range(1, 5):
            journal.add(b"\x00cmd", idx, 1)
        journal.sync()
        journal.deleteEntriesFrom(2)  # a follower drops a conflicting tail: indexes 3 and 4
        assert journal.dirty
        journal.sync()
    finally:
        journal._destroy()
    assert [entry[1] for entry in _read(tmp_path / "raft.journal")] == [1, 2]


def test_journal_clear_fsyncs_the_dump_before_clearing(
    tmp_path: Path, synced: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DurableFileJournal.clear`` extends ``FileJournal.clear``."""
    journal = _journal(tmp_path)
    (tmp_path / "raft.dump").write_bytes(b"dump")
    stock_clear = FileJournal.clear

    def clear(self: FileJournal) -> None:
        synced.append("stock clear")
        stock_clear(self)

    monkeypatch.setattr(FileJournal, "clear", clear)
    try:
        journal.add(b"\x00cmd", 1, 1)
        journal.sync()
        synced.clear()
        journal.clear()
        assert synced == [str(tmp_path / "raft.dump"), str(tmp_path), "stock clear"]
        assert journal.dirty and len(journal) == 0
    finally:
        journal._destroy()


def _entries(first: int, last: int) -> list[tuple[bytes, int, int]]:
    return [(b"\x00cmd%d" % i, i, 1) for i in range(first, last + 1)]


def _stock_journal(path: Path, entries: list[tuple[bytes, int, int]]) -> None:
    stock = FileJournal(str(path))
    for entry in entries:
        stock.add(*entry)
    stock._destroy()


def _our_journal(path: Path, entries: list[tuple[bytes, int, int]]) -> None:
    ours = CompactionSafeJournal(str(path), str(path) + ".no-dump")
    for entry in entries:
        ours.add(*entry)
    ours._destroy()


def _read(path: Path) -> list[tuple[bytes, int, int]]:
    parsed = journal_format.parse(path.read_bytes())
    assert parsed.damage is None and parsed.format == journal_format.CHECKSUMMED_FORMAT
    return parsed.entries


def _write_dump(path: Path, prev: tuple[bytes, int, int], last: tuple[bytes, int, int]) -> None:
    """A PySyncObj dump's shape: gzip of (state, last entry, the one before, cluster)."""
    path.write_bytes(gzip.compress(pysyncobj_dumps((None, last, prev, set()))))


def test_compaction_cut_replaces_the_journal_file_with_the_entries_kept(tmp_path: Path) -> None:
    """``CompactionSafeJournal.deleteEntriesTo`` overrides ``FileJournal.deleteEntriesTo``."""
    path = tmp_path / "raft.journal"
    journal = CompactionSafeJournal(str(path), str(tmp_path / "raft.dump"))
    try:
        for entry in _entries(1, 10):
            journal.add(*entry)
        inode = path.stat().st_ino
        journal.deleteEntriesTo(6)  # keep entries 7..10
        assert path.stat().st_ino != inode  # a new file renamed over the old one, not a rewrite in place
        assert [e[1] for e in journal] == [7, 8, 9, 10]
        journal.add(*_entries(11, 11)[0])  # the journal goes on in the new file
    finally:
        journal._destroy()
    assert _read(path) == _entries(7, 11)  # stock reader
    assert sorted(os.listdir(tmp_path)) == ["raft.journal"]  # no temp file left


def test_durable_compaction_cut_fsyncs_the_dump_the_new_journal_and_the_directory(
    tmp_path: Path, synced: list[str]
) -> None:
    journal = _journal(tmp_path)
    (tmp_path / "raft.dump").write_bytes(b"dump")
    try:
        for entry in _entries(1, 5):
            journal.add(*entry)
        journal.sync()
        synced.clear()
        journal.deleteEntriesTo(2)
        assert synced == [
            str(tmp_path / "raft.dump"),
            str(tmp_path),
            str(tmp_path / "raft.journal.cut"),  # the new journal before the rename
            str(tmp_path),
        ]
    finally:
        journal._destroy()


def test_a_journal_that_starts_before_the_dump_is_cut_at_it_and_keeps_its_tail(tmp_path: Path) -> None:
    """``CompactionSafeJournal.__init__`` extends ``FileJournal.__init__``: a crash after the dump of
    entries ..5 was renamed into place, before the journal (1..9) was cut back to it."""
    path, dump = tmp_path / "raft.journal", tmp_path / "raft.dump"
    _stock_journal(path, _entries(1, 9))
    _write_dump(dump, prev=_entries(4, 4)[0], last=_entries(5, 5)[0])
    journal = CompactionSafeJournal(str(path), str(dump))
    journal._destroy()
    assert [e[1] for e in journal] == [4, 5, 6, 7, 8, 9]  # starts as PySyncObj's load expects; tail kept
    assert _read(path) == _entries(4, 9)


@pytest.mark.parametrize(
    ("journal_range", "dump_pair"),
    [((4, 9), (4, 5)), ((1, 9), (11, 12)), ((1, 2), (1, 2))],
    ids=["already-cut", "dump-beyond-the-journal", "too-short"],
)
def test_a_journal_that_does_not_start_before_the_dump_is_left_alone(
    tmp_path: Path, journal_range: tuple[int, int], dump_pair: tuple[int, int]
) -> None:
    path, dump = tmp_path / "raft.journal", tmp_path / "raft.dump"
    _our_journal(path, _entries(*journal_range))
    (prev,), (last,) = _entries(dump_pair[0], dump_pair[0]), _entries(dump_pair[1], dump_pair[1])
    _write_dump(dump, prev=prev, last=last)
    inode = path.stat().st_ino
    CompactionSafeJournal(str(path), str(dump))._destroy()
    assert path.stat().st_ino == inode
    assert _read(path) == _entries(*journal_range)


def test_a_cut_file_left_by_a_crash_before_its_rename_is_removed_at_start(tmp_path: Path) -> None:
    path = tmp_path / "raft.journal"
    _our_journal(path, _entries(1, 3))
    (tmp_path / "raft.journal.cut").write_bytes(b"half a journal")
    CompactionSafeJournal(str(path), str(tmp_path / "raft.dump"))._destroy()
    assert sorted(os.listdir(tmp_path)) == ["raft.journal"]
    assert _read(path) == _entries(1, 3)


def test_an_unreadable_dump_leaves_the_journal_to_the_stock_load(tmp_path: Path) -> None:
    path, dump = tmp_path / "raft.journal", tmp_path / "raft.dump"
    _stock_journal(path, _entries(1, 9))
    dump.write_bytes(b"not a gzip")
    CompactionSafeJournal(str(path), str(dump))._destroy()
    assert _read(path) == _entries(1, 9)


def test_durable_dump_renames_fsync_the_dump_before_and_the_directory_after(
    tmp_path: Path, synced: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``install_durable_dumps`` replaces ``pysyncobj.serializer.atomicReplace`` (a module global, as the
    serializer's compaction and installed-snapshot renames look it up)."""
    monkeypatch.setattr(pysyncobj.serializer, "atomicReplace", pysyncobj.serializer.atomicReplace)  # undone
    install_durable_dumps()
    assert durable_dumps_installed()
    dump = tmp_path / "raft.dump"
    serializer = Serializer(str(dump), 1024, False, None, None, None)  # no fork: the rename runs here
    (prev,), (last,) = _entries(4, 4), _entries(5, 5)
    serializer.serialize((None, last, prev, set()), 4)
    assert serializer.checkSerializing()[0] == SERIALIZER_STATE.SUCCESS
    assert synced == [str(tmp_path / "raft.dump.tmp"), str(tmp_path)]
    assert sorted(os.listdir(tmp_path)) == ["raft.dump"]
    assert serializer.deserialize()[1:3] == (last, prev)


class _Applier:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.restored: list[Any] = []

    def apply(self, data: bytes, raft_index: int) -> object:
        return data

    def snapshot(self) -> bytes:
        if self.fail:
            raise RuntimeError("cannot snapshot")
        return b"state"

    def restore(self, data: bytes) -> None:
        if self.fail:
            raise RuntimeError("cannot restore")
        self.restored.append(data)


def test_consumer_serialize_holds_the_applier_snapshot_and_never_raises() -> None:
    """``RecordConsumer._serialize`` overrides ``SyncObjConsumer._serialize``."""
    assert RecordConsumer(_Applier())._serialize() == {
        "format": SNAPSHOT_FORMAT,
        "applier": b"state",
        "crc32": zlib.crc32(b"state"),
    }
    assert RecordConsumer(_Applier(fail=True))._serialize() == {"format": SNAPSHOT_FORMAT, "applier": None}


def test_consumer_deserialize_restores_or_reports_instead_of_raising() -> None:
    """``RecordConsumer._deserialize`` overrides ``SyncObjConsumer._deserialize``."""
    applier = _Applier()
    consumer = RecordConsumer(applier)
    consumer._deserialize({"format": SNAPSHOT_FORMAT, "applier": b"state"})
    assert applier.restored == [b"state"] and consumer.restore_error is None
    assert "restored" not in consumer.__dict__  # the stock hook would have copied keys into __dict__

    for bad in (
        {"format": SNAPSHOT_FORMAT + 1, "applier": b"x"},
        {"format": SNAPSHOT_FORMAT, "applier": None},
    ):
        consumer._deserialize(bad)
        assert consumer.restore_error is not None and "unknown snapshot payload" in consumer.restore_error
    consumer._deserialize({"format": SNAPSHOT_FORMAT, "applier": b"statf", "crc32": zlib.crc32(b"state")})
    assert consumer.restore_error == "ValueError: snapshot checksum mismatch"
    assert applier.restored == [b"state"]  # the damaged payload never reached the applier
    failing = RecordConsumer(_Applier(fail=True))
    failing._deserialize({"format": SNAPSHOT_FORMAT, "applier": b"state"})
    assert failing.restore_error == "RuntimeError: cannot restore"


def test_consumer_init_keeps_its_own_attributes_out_of_the_state() -> None:
    """``RecordConsumer.__init__`` extends ``SyncObjConsumer.__init__``."""
    consumer = RecordConsumer(_Applier())
    assert consumer.apply_failures == 0 and consumer.restore_error is None
    assert {"_applier", "restore_error", "apply_failures"} <= consumer._SyncObjConsumer__properies
