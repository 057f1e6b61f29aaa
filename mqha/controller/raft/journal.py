"""Durable storage for one Raft member: PySyncObj's journal and ``.meta`` file, made crash-safe.

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
from collections.abc import Sequence
from typing import Any

import pysyncobj.serializer
from pysyncobj.journal import FileJournal, MetaStorer, ResizableFile
from pysyncobj.pickle import dumps as _pickle_dumps

from mqha import durable
from mqha.controller.raft import decoding

log = logging.getLogger(__name__)
Entry = tuple[bytes, int, int]  # PySyncObj's (command, index, term)


class DurableMetaStorer(MetaStorer):
    """Stores ``.meta`` (term, vote, commit index) so that it survives a power loss."""

    def storeMeta(self, meta: dict[str, Any]) -> None:
        """Overrides ``pysyncobj.journal.MetaStorer.storeMeta``.

        Why: the stock write (tmp file + ``shutil.move``) has no fsync, so after a power loss a member
        can forget its vote and vote twice in a term (P8). Differs: written by
        ``mqha.durable.write_atomically`` (a temp file fsynced before the rename, the directory after
        it); same pickle format, so stock PySyncObj reads it.
        """
        durable.write_atomically(self.getPath(), _pickle_dumps(meta))


class CompactionSafeJournal(FileJournal):
    """PySyncObj's file journal whose compaction a crash cannot cut short (module docstring).

    Pinned to pysyncobj 0.3.17's private ``FileJournal.__journalFile``, ``__journal``,
    ``__currentOffset`` and ``__getLastRecordOffset``; the file format is stock.
    """

    def __init__(self, journal_file: str, dump_file: str) -> None:
        """Extends ``pysyncobj.journal.FileJournal.__init__``.

        Why: a crash between a compaction's dump and its journal cut leaves a journal that starts
        before the dump, and PySyncObj would clear it, tail included. Differs: after the stock
        constructor has read the journal, a journal holding the dump's last two entries further in is
        cut there (:meth:`_align_with_dump`)."""
        self.path = journal_file
        self._dump_file = dump_file
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._cut_file)  # a cut that a crash interrupted before its rename: never used
        super().__init__(journal_file)
        self._align_with_dump()

    @property
    def _cut_file(self) -> str:
        return self.path + ".cut"

    def deleteEntriesTo(self, entryTo: int) -> None:
        """Overrides ``pysyncobj.journal.FileJournal.deleteEntriesTo`` (compaction: the journal cut back
        to the dump just written).

        Why: stock clears the journal in place and re-adds the entries kept; a crash in between loses
        them. Differs: the kept entries are written to a new file that replaces the journal by rename.
        """
        self._before_cut()
        self._replace_with(self._FileJournal__journal[entryTo:])

    def _before_cut(self) -> None:
        """What must be true on disk before the journal is cut back to the dump (durable: the dump)."""

    def _replace_with(self, entries: Sequence[Entry]) -> None:
        """Make ``entries`` the whole journal: a new file renamed over the old one, then mapped."""
        temp = self._cut_file
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        fresh = FileJournal(temp)
        try:
            for entry in entries:
                fresh.add(*entry)
        finally:
            fresh._destroy()  # flushes the map and closes the file
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
    ``os.fdatasync`` releases it. The file format is stock: ``FileJournal`` reads what this writes.
    Pinned as :class:`CompactionSafeJournal`, and to ``ResizableFile.__f`` and
    ``FileJournal.__metaStorer``.
    """

    def __init__(self, journal_file: str, dump_file: str) -> None:
        """Extends ``pysyncobj.journal.FileJournal.__init__`` (through :class:`CompactionSafeJournal`).

        Why: PySyncObj builds its ``MetaStorer`` inside the constructor, with no way to pass ours.
        Differs: after the stock constructor has read the journal, the private ``__metaStorer`` is
        replaced by a :class:`DurableMetaStorer` of the same path (it has written nothing yet), the
        journal's file descriptor is looked up once (so changed internals fail at start, not in a
        tick), and the directory entry of the journal file is fsynced.
        """
        self.dirty = False
        super().__init__(journal_file, dump_file)
        self._FileJournal__metaStorer = DurableMetaStorer(journal_file + ".meta")
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
        """Extends ``pysyncobj.journal.FileJournal.add``. Why: the group-commit transport must hold
        messages until this entry is on disk. Differs: marks the journal dirty after the stock write."""
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


def _dump_tail(path: str) -> tuple[Entry, Entry] | None:
    """The last two entries a PySyncObj dump covers (the journal it was cut to starts with them); None
    for a dump that cannot be read (PySyncObj reports that itself when it loads it)."""
    try:
        with open(path, "rb") as file, gzip.GzipFile(fileobj=file) as unzipped:
            data = decoding.restricted_load(unzipped)  # type: ignore[arg-type]
        return data[2], data[1]
    except Exception as exc:  # any damage: the stock load decides what to do with this dump
        log.debug("reading the raft dump %s for its last entries: %r", path, exc)
        return None


def _directory_of(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))
