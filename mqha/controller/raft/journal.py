"""Durable storage for one Raft member: PySyncObj's journal and ``.meta`` file, checksummed and crash-safe.

Checksums (docs/raft.md §11). Every journal record ends with a CRC32 (:mod:`journal_format`), the
``.meta`` carries one (:class:`ChecksummedMetaStorer`), and a dump is read whole before it is loaded
(:func:`read_dump`, gzip's CRC32). What fails a check is *damage*, kept in ``journal.damage``: the member
then takes no part in Raft (``node.PipelinedSyncObj``), and the damaged journal is never written again.

Durability (``ReplicatedLog(durable=True)``, the default; config key ``controllerJournalFsync``;
docs/raft.md §7.3). Stock PySyncObj writes its journal into an mmap and its ``.meta`` (term, vote, commit
index) and dump by rename, all without fsync (P8): that survives ``kill -9``, but a power loss or kernel
crash on a majority can lose acknowledged writes, or let a member vote twice in a term. With ``durable``:

- the journal is a :class:`DurableFileJournal`, built by us and handed to PySyncObj's constructor by
  :class:`mqha.controller.raft.node.PipelinedSyncObj` (checked afterwards);
- the transport is a :class:`mqha.controller.raft.transport.GroupCommitTransport`: no message leaves the
  member while the journal has unsynced changes; at the end of each tick one sync covers every change
  of the tick, then the held messages go out in order (group commit). A follower's ack thus follows its
  disk write, and a leader's AppendEntries follows its own, so a committed entry is on disk on the
  leader and on a majority;
- ``.meta`` is written by ``mqha.durable.write_atomically`` (temp file + fsync + rename + directory fsync;
  term and vote before any vote leaves);
- the dump is fsynced before the journal is cut back to it (compaction, installed snapshot), and
  PySyncObj's own rename of a new dump fsyncs it first (:func:`install_durable_dumps`): a power cut
  right after a compaction's rename could otherwise leave a dump without its data in place of the
  previous one, while the journal still starts at the previous one's entries.

Compaction, in both modes (:class:`CompactionSafeJournal`; docs/raft.md §7.3). PySyncObj's forked child
renames the new dump into place; a tick later the member cuts its journal back to the dump's last two
entries, and stock PySyncObj does that in place (clear, then re-add what is kept). A crash inside
either window, on a majority at once, lost committed entries: a journal cut short keeps only part of
its tail, and on restart PySyncObj clears a journal that does not start with the dump's two entries,
tail included (``tests/integration/test_replicated_log.py``: 193 of 240 acknowledged writes lost). Here
the cut writes a new journal file and renames it over the old one, and a journal found at start to
begin before the dump is cut at it first, so its entries after the dump are kept.

Measured on the shared 2-vCPU dev VM, 3 members on one host, ext4 on virtio, load inside the leader
process (``tests/bench/test_replicated_log_bench.py``; medians of 3 runs of 3 s, range over two bench
runs):

=========  ===============================  ===============================
proposers  mmap only                        durable
=========  ===============================  ===============================
1          2 360-2 530/s, p50 0.37-0.40 ms  510-850/s, p50 1.1-1.6 ms
32         6 540-6 940/s, p50 4.3-4.9 ms    3 230-5 310/s, p50 5.7-8.9 ms
=========  ===============================  ===============================

Failover (kill -9 leader -> next commit) is unchanged, 0.16-0.65 s. Flushing per append instead of per
tick gave 160 commits/s at 32 proposers. The controller writes a few records per second, so we pay it.

Every method here that PySyncObj also defines says which one it overrides and what differs (the table
is docs/raft.md §9; the pinned internals are checked by ``tests/unit/controller/test_raft_pins.py``).
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import zlib
from collections.abc import Sequence
from typing import Any

import pysyncobj.serializer
from pysyncobj.journal import FileJournal, MetaStorer, ResizableFile
from pysyncobj.pickle import dumps as _pickle_dumps
from pysyncobj.pickle import to_bytes
from pysyncobj.version import VERSION as _PYSYNCOBJ_VERSION

from mqha import durable
from mqha.controller.raft import decoding, journal_format
from mqha.controller.raft.journal_format import Entry

log = logging.getLogger(__name__)
META_MAGIC = b"MQHAMETA"  # a checksummed .meta: magic | crc32 (u32 LE) of the pickle | pickle


class ChecksummedMetaStorer(MetaStorer):
    """Stores ``.meta`` (term, vote, commit index) with a CRC32, and tells a damaged one from a missing one.

    Stock PySyncObj reads any unreadable ``.meta`` as empty: a member whose file took a flipped bit
    forgets its term and its vote and may vote twice in a term. Here a file that exists and does not
    check out is damage (:meth:`read`). A ``.meta`` without the magic (written by stock PySyncObj or an
    older mqha) is read as stock pickle; the next write adds the checksum.
    """

    def read(self) -> tuple[dict[str, Any], str | None]:
        """The stored meta (empty when there is no file), and what is wrong with the file, if anything."""
        try:
            with open(self.getPath(), "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return {}, None
        if data.startswith(META_MAGIC):
            body = data[len(META_MAGIC) + 4 :]
            stored = int.from_bytes(data[len(META_MAGIC) : len(META_MAGIC) + 4], "little")
            if zlib.crc32(body) != stored:
                return {}, f"{self.getPath()}: checksum mismatch"
            data = body
        try:
            meta = decoding.restricted_loads(data)
        except Exception as exc:
            return {}, f"{self.getPath()}: unreadable ({type(exc).__name__}: {exc})"
        if not isinstance(meta, dict):
            return {}, f"{self.getPath()}: holds a {type(meta).__name__}, not a dict"
        return meta, None

    def storeMeta(self, meta: dict[str, Any]) -> None:
        """Overrides ``pysyncobj.journal.MetaStorer.storeMeta``. Why: a damaged ``.meta`` must be told
        apart from a missing one. Differs: the pickle is prefixed with :data:`META_MAGIC` and its CRC32;
        written as stock (temp file, then rename), without fsync (``controllerJournalFsync=false``)."""
        temp = self.getPath() + ".tmp"
        with open(temp, "wb") as file:
            file.write(_checksummed_meta(meta))
        os.replace(temp, self.getPath())


class DurableMetaStorer(ChecksummedMetaStorer):
    """Stores ``.meta`` (term, vote, commit index) so that it survives a power loss."""

    def storeMeta(self, meta: dict[str, Any]) -> None:
        """Overrides ``pysyncobj.journal.MetaStorer.storeMeta``.

        Why: the stock write (tmp file + ``shutil.move``) has no fsync, so after a power loss a member
        can forget its vote and vote twice in a term (P8). Differs: written by
        ``mqha.durable.write_atomically`` (a temp file fsynced before the rename, the directory after
        it), with the checksum of :class:`ChecksummedMetaStorer`.
        """
        durable.write_atomically(self.getPath(), _checksummed_meta(meta))


def _checksummed_meta(meta: dict[str, Any]) -> bytes:
    body = _pickle_dumps(meta)
    return META_MAGIC + zlib.crc32(body).to_bytes(4, "little") + body


class CompactionSafeJournal(FileJournal):
    """PySyncObj's file journal with a checksum per record and a compaction no crash can cut short.

    Compaction: module docstring. The file format is :mod:`journal_format`'s (a CRC32 ends each
    record). Damage found at start (a record, the ``.meta`` or a missing dump) is kept in
    :attr:`damage`; a damaged journal is then read-only: its file is never written again, so every
    restart finds the same damage until the store is replaced (docs/raft.md §11). Pinned to pysyncobj
    0.3.17's private ``FileJournal.__journalFile``, ``__journal``, ``__meta``, ``__metaSaved``,
    ``__metaStorer``, ``__currentOffset``,
    ``__setLastRecordOffset`` and ``__getLastRecordOffset``.
    """

    meta_storer_class: type[ChecksummedMetaStorer] = ChecksummedMetaStorer

    def __init__(self, journal_file: str, dump_file: str) -> None:
        """Overrides ``pysyncobj.journal.FileJournal.__init__`` (sets the same private state, does not
        call it).

        Why: the stock constructor reads records without any check (a flipped bit is read as data, a torn
        size raises or misreads) and reads an unreadable ``.meta`` as empty. Differs: records are read by
        :func:`journal_format.parse` (CRC32 per record), the ``.meta`` by
        :meth:`ChecksummedMetaStorer.read`; damage is recorded in :attr:`damage` instead of guessed past.
        A stock-format journal is rewritten in our format. A journal that starts before the dump (a crash
        between a compaction's dump and its cut) is cut at the dump's last two entries, keeping its tail
        (:meth:`_align_with_dump`); stock PySyncObj would clear it."""
        self.path = journal_file
        self._dump_file = dump_file
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._cut_file)  # a cut that a crash interrupted before its rename: never used
        header = journal_format.header(_PYSYNCOBJ_VERSION.encode())
        self._FileJournal__journalFile = ResizableFile(journal_file, defaultContent=header)
        storer = self.meta_storer_class(journal_file + ".meta")
        meta, meta_damage = storer.read()
        self._FileJournal__metaStorer = storer
        self._FileJournal__meta = meta
        self._FileJournal__metaSaved = True
        with open(journal_file, "rb") as file:
            parsed = journal_format.parse(file.read())
        self._FileJournal__journal = parsed.entries
        self._FileJournal__currentOffset = parsed.end
        self.damage = meta_damage or (parsed.damage and f"{journal_file}: {parsed.damage}")
        first = parsed.entries[0][1] if parsed.entries else 1
        if self.damage is None and first > 1 and not os.path.exists(dump_file):
            self.damage = f"{dump_file} is missing, and {journal_file} starts at index {first}"
        if self.damage is not None:
            log.critical(
                "raft store damaged: %s; this member takes no part in Raft (docs/raft.md §11)", self.damage
            )
            return
        if parsed.format == journal_format.STOCK_FORMAT and parsed.entries:
            log.warning(
                "raft journal %s is in the format without checksums: rewriting it with them", self.path
            )
            self._replace_with(parsed.entries)
        elif parsed.format == journal_format.STOCK_FORMAT:
            self._FileJournal__journalFile.write(0, header)
        self._align_with_dump()

    @property
    def _cut_file(self) -> str:
        return self.path + ".cut"

    def add(self, command: bytes, idx: int, term: int) -> None:
        """Overrides ``pysyncobj.journal.FileJournal.add``. Why: every record carries a checksum. Differs:
        writes :func:`journal_format.encode_record`; a damaged journal only keeps the entry in memory."""
        self._FileJournal__journal.append((command, idx, term))
        if self.damage is not None:
            return
        record = journal_format.encode_record(to_bytes(command), idx, term)
        offset = self._FileJournal__currentOffset
        self._FileJournal__journalFile.write(offset, record)
        self._FileJournal__currentOffset = offset + len(record)
        self._FileJournal__setLastRecordOffset(offset + len(record))

    def clear(self) -> None:
        """Extends ``pysyncobj.journal.FileJournal.clear``. Why and what differs: a damaged journal's file
        is never written (class docstring); only its memory is cleared."""
        if self.damage is not None:
            self._FileJournal__journal = []
            return
        super().clear()

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        """Extends ``pysyncobj.journal.FileJournal.deleteEntriesFrom``. Why and what differs: as
        :meth:`clear`."""
        if self.damage is not None:
            del self._FileJournal__journal[entryFrom:]
            return
        super().deleteEntriesFrom(entryFrom)

    def deleteEntriesTo(self, entryTo: int) -> None:
        """Overrides ``pysyncobj.journal.FileJournal.deleteEntriesTo`` (compaction: the journal cut back
        to the dump just written).

        Why: stock clears the journal in place and re-adds the entries kept; a crash in between loses
        them. Differs: the kept entries are written to a new file that replaces the journal by rename.
        """
        if self.damage is not None:
            self._FileJournal__journal = self._FileJournal__journal[entryTo:]
            return
        self._before_cut()
        self._replace_with(self._FileJournal__journal[entryTo:])

    def _before_cut(self) -> None:
        """What must be true on disk before the journal is cut back to the dump (durable: the dump)."""

    def _replace_with(self, entries: Sequence[Entry]) -> None:
        """Make ``entries`` the whole journal: a new file renamed over the old one, then mapped."""
        temp = self._cut_file
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        header = journal_format.header(_PYSYNCOBJ_VERSION.encode())
        records = b"".join(journal_format.encode_record(to_bytes(c), i, t) for c, i, t in entries)
        end = len(header) + len(records)
        with open(temp, "wb") as file:
            file.write(header[: journal_format.END_OFFSET] + end.to_bytes(4, "little") + records)
        durable.rename_durably(temp, self.path)  # one fsync per compaction, in both modes
        self._FileJournal__journalFile._destroy()
        self._FileJournal__journalFile = ResizableFile(self.path)
        self._FileJournal__journal = list(entries)
        self._FileJournal__currentOffset = self._FileJournal__getLastRecordOffset()

    def _align_with_dump(self) -> None:
        """Cut a journal that starts before the dump back to the dump's last two entries (as the
        compaction that wrote the dump would have), keeping the entries after them."""
        entries = self._FileJournal__journal
        if len(entries) < 3 or not os.path.exists(self._dump_file):
            return
        tail = _dump_tail(self._dump_file)
        if tail is None or (entries[0], entries[1]) == tail:
            return
        start = next((k for k in range(1, len(entries) - 1) if (entries[k], entries[k + 1]) == tail), None)
        if start is None:
            return
        log.warning(
            "raft journal %s starts %d entries before the dump (a crash between a compaction's dump and "
            "its journal cut): cutting it at the dump, keeping the %d entries after it",
            self.path,
            start,
            len(entries) - start - 2,
        )
        self._before_cut()
        self._replace_with(entries[start:])


class DurableFileJournal(CompactionSafeJournal):
    """Keeps the Raft log on disk durably: PySyncObj's mmap journal plus one sync per tick.

    Changes only mark the journal dirty; :meth:`sync` makes them durable with one ``fdatasync`` of the
    journal file, which on Linux writes the pages dirtied through the map just as PySyncObj's ``flush()``
    (``msync(MS_SYNC)``) would -- but CPython's ``mmap.flush`` holds the GIL through the disk flush
    (py-spy: 23 % of the leader's GIL time at 32 clients), stalling the event loop, while
    ``os.fdatasync`` releases it. Pinned as :class:`CompactionSafeJournal`, and to ``ResizableFile.__f``.
    """

    meta_storer_class = DurableMetaStorer

    def __init__(self, journal_file: str, dump_file: str) -> None:
        """Extends ``pysyncobj.journal.FileJournal.__init__`` (through :class:`CompactionSafeJournal`).

        Why: term and vote must survive a power loss, and a tick must not find changed internals. Differs:
        the ``.meta`` is stored by a :class:`DurableMetaStorer`, the journal's file descriptor is looked
        up once (so changed internals fail at start, not in a tick), and the directory entry of the
        journal file is fsynced.
        """
        self.dirty = False
        super().__init__(journal_file, dump_file)
        self._journal_fd()
        durable.fsync_directory(_directory_of(journal_file))

    def sync(self) -> None:
        """Make every change since the last sync durable (one ``fdatasync``); no-op when clean."""
        if self.dirty:
            os.fdatasync(self._journal_fd())
            self.dirty = False

    def _journal_fd(self) -> int:
        # Looked up each time: ResizableFile reopens its file when it grows the journal.
        return int(self._FileJournal__journalFile._ResizableFile__f.fileno())

    def add(self, command: bytes, idx: int, term: int) -> None:
        """Extends ``pysyncobj.journal.FileJournal.add`` (through :class:`CompactionSafeJournal`). Why: the
        group-commit transport must hold messages until this entry is on disk. Differs: marks the
        journal dirty after the write."""
        super().add(command, idx, term)
        self.dirty = True

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        """Extends ``pysyncobj.journal.FileJournal.deleteEntriesFrom`` (a follower dropping a conflicting
        tail). Why and what differs: as :meth:`add` -- the truncation must be durable before the ack."""
        super().deleteEntriesFrom(entryFrom)
        self.dirty = True

    def clear(self) -> None:
        """Extends ``pysyncobj.journal.FileJournal.clear``.

        PySyncObj calls it when the log is rebuilt from a dump (an installed or loaded snapshot; a
        compaction replaces the file instead). Why: the stock dump is renamed into place without fsync,
        so a power loss right after the journal was cut could leave neither. Differs: the dump and its
        directory are fsynced before the stock clear, and the journal is marked dirty after it.
        """
        if self.damage is None:
            self._before_cut()
        super().clear()
        self.dirty = True

    def _before_cut(self) -> None:
        durable.fsync_file(self._dump_file)
        durable.fsync_directory(_directory_of(self._dump_file))


def install_durable_dumps() -> None:
    """Make PySyncObj's dump renames durable for every member of this process: its serializer renames a
    new dump into place with ``pysyncobj.serializer.atomicReplace`` (``os.rename``, no fsync), for a
    compaction in its forked child and for a snapshot a leader sent; it becomes
    ``mqha.durable.rename_durably`` (fsync the file, rename, fsync the directory). The fsync runs in the
    forked child, off the tick thread. Idempotent; never undone (as ``decoding.install``)."""
    pysyncobj.serializer.atomicReplace = durable.rename_durably  # type: ignore[attr-defined]


def durable_dumps_installed() -> bool:
    return pysyncobj.serializer.atomicReplace is durable.rename_durably  # type: ignore[attr-defined]


def read_dump(path: str) -> tuple[Any, str | None]:
    """A PySyncObj dump, read whole, and what is wrong with it (None when nothing is).

    The dump is gzip, whose trailer holds a CRC32 and the length of the data; PySyncObj's own load
    stops reading where the pickle ends and may never reach it. Here the whole stream is decompressed
    first, so a flipped bit anywhere in the file is found before anything of it is used."""
    try:
        with open(path, "rb") as file:
            raw = gzip.decompress(file.read())
        data = decoding.restricted_loads(raw)
        if not (isinstance(data, tuple) and len(data) == 4 and _is_entry(data[1]) and _is_entry(data[2])):
            return None, "not a PySyncObj dump"
        return data, None
    except Exception as exc:  # any damage: gzip's CRC or length, the pickle, the allow-list
        return None, f"unreadable ({type(exc).__name__}: {exc})"


def _is_entry(value: object) -> bool:
    return isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], int)


def _dump_tail(path: str) -> tuple[Entry, Entry] | None:
    """The last two entries a PySyncObj dump covers (the journal it was cut to starts with them); None
    for a dump that cannot be read (the member reports that itself when it loads it)."""
    data, damage = read_dump(path)
    if damage is not None:
        log.debug("reading the raft dump %s for its last entries: %s", path, damage)
        return None
    return data[2], data[1]


def _directory_of(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))
