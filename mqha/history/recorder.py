"""History recorder (shell): each node's SQLite database of what it did (docs/architecture.md §5).

One ``HistoryRecorder`` per process, one database file, by convention ``<store path>/history.db``
(``history_path``). Callers on a hot path -- PySyncObj's tick thread, a broker's event loop, a
client's put loop -- only build a dict and put it on an unbounded queue (``record`` never blocks and
never raises into the caller); one background thread takes everything queued, up to ``batch_max``
rows or ``interval`` seconds after the first, and writes it in ONE transaction. A crash (kill -9)
therefore keeps every committed batch and loses at most the batch in flight; the database is in WAL
mode, so a torn write never corrupts earlier batches. A master's PUT_OKs do not wait for a batch:
they go to an append-only ack journal before the answer leaves (``mqha.history.ack_journal``), which
this thread imports (and a restart imports what a crash left). With ``durable=False`` (the default)
``synchronous=NORMAL``: a power loss may also drop the last batches (never corrupt), which is the
same promise the OS gives for any unsynced file; ``durable=True`` fsyncs each batch.

Typed façades say which calls each process makes:

- controller: ``controller_observer(recorder, node)`` -> an ``ControllerApplier.add_observer`` hook;
- broker: ``BrokerHistory`` (``epoch``, ``role``, ``truncation``, ``final_log``);
- client: ``ClientHistory`` (``ack``, ``read``).

The tables are created from ``mqha.history.schema`` with sqlite-utils; SQLite INTEGER is 64-bit, so
offsets are stored whole (the exporter, not a JDBC driver, reads them back).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from mqha.errors import CorruptRecordError
from mqha.history.ack_journal import MARKS_TABLE, ROTATE_BYTES, AckJournal, JournalFile, journal_paths
from mqha.history.database import (
    history_path,
    now_ms,
    open_database,
    sql_row,
    transaction,
)
from mqha.history.schema import (
    ACKS,
    BROKER_ACK_PREFIX,
    CONTROLLER_EVENTS,
    EPOCHS,
    FINAL_LOGS,
    READS,
    ROLES,
    TABLES,
    TRUNCATIONS,
    columns,
)

log = logging.getLogger(__name__)


@dataclass
class _Rows:
    """A queued row of one history table."""

    table: str
    row: Mapping[str, Any]


@dataclass
class _LazyRows:
    """Queues rows of one table that the writer thread builds.

    ``build`` returns SQL-ready tuples in ``columns(table)`` order: the producer pays one queue put,
    not one per row."""

    table: str
    build: Callable[[], list[tuple[Any, ...]]]


@dataclass
class _ReplaceFinalLog:
    """A queued replacement of one replica's whole final log."""

    broker_name: str
    broker_id: int
    rows: list[Mapping[str, Any]]


@dataclass
class _Barrier:
    """A queued marker that is set once everything queued before it is written."""

    done: threading.Event


_STOP = object()


class HistoryRecorder:
    """Batched, non-blocking writer of one history database (see the module docstring).

    ``record(table, row)`` from any thread; ``flush(timeout)`` waits until everything recorded before
    the call is committed; ``close(timeout)`` flushes and stops the writer thread.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        batch_max: int = 5000,
        interval: float = 0.05,
        durable: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.batch_max = batch_max
        self.interval = interval
        self.durable = durable
        self.journal_rotate_bytes = ROTATE_BYTES
        self.batches = 0
        self.rows_written = 0
        self.failures = 0
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        # The ack journal (mqha.history.ack_journal): the live one (attached by the first put_ok) and the
        # files left to import -- by a crashed process, or rotated out; touched by the writer thread only.
        self._journal: AckJournal | None = None
        self._live: JournalFile | None = None
        self._leftovers = [JournalFile(p) for p in journal_paths(self.path)]
        # Open (and create tables) here, so a bad path fails the caller's start, not a thread later.
        open_database(self.path, durable=durable).close()
        self._thread = threading.Thread(target=self._run, name=f"history-writer:{self.path}", daemon=True)
        self._thread.start()

    @classmethod
    def in_store(cls, store_dir: str | os.PathLike[str], **kwargs: Any) -> HistoryRecorder:
        """The recorder of ``<store_dir>/history.db``."""
        return cls(history_path(store_dir), **kwargs)

    # -- producer side (any thread; never blocks) -----------------------------------------------

    def record(self, table: str, row: Mapping[str, Any]) -> None:
        """Queue one row of ``table`` (§5 column names; missing columns are null)."""
        if table not in TABLES:
            raise ValueError(f"unknown history table {table!r}")
        if not self._closed:
            self._queue.put(_Rows(table, row))

    def record_rows(self, table: str, build: Callable[[], list[tuple[Any, ...]]]) -> None:
        """Queue the rows ``build()`` returns (SQL-ready tuples in ``columns(table)`` order), built
        later by the writer thread: for hot paths that record many rows at a time."""
        if table not in TABLES:
            raise ValueError(f"unknown history table {table!r}")
        if not self._closed:
            self._queue.put(_LazyRows(table, build))

    def replace_final_log(self, broker_name: str, broker_id: int, rows: Iterable[Mapping[str, Any]]) -> None:
        """Queue a dump of one replica's log index; it replaces that replica's previous dump whole."""
        if not self._closed:
            self._queue.put(_ReplaceFinalLog(broker_name, broker_id, list(rows)))

    def attach_journal(self, client: str, broker_name: str) -> AckJournal:
        """A new live ack journal whose lines this recorder's writer imports as ``acks`` rows (one per
        recorder; ``BrokerHistory.put_ok`` attaches it on first use). Raises OSError."""
        if self._journal is not None:
            return self._journal
        if self._closed:
            raise ValueError("the history recorder is closed")
        journal = AckJournal(self.path, client, broker_name)
        self._live, self._journal = JournalFile(journal.path), journal
        self._queue.put(_Barrier(threading.Event()))  # wake the writer: it polls the journal from now on
        return journal

    @property
    def pending(self) -> int:
        """Approximate number of queued items not yet taken by the writer."""
        return self._queue.qsize()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued before this call is committed; False on timeout or if closed."""
        if self._closed or not self._thread.is_alive():
            return False
        barrier = _Barrier(threading.Event())
        self._queue.put(barrier)
        return barrier.done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is queued and stop the writer thread (bounded by ``timeout``)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("history writer of %s did not stop within %.1f s", self.path, timeout)

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writer thread ----------------------------------------------------------------------------

    def _take_batch(self) -> tuple[list[Any], bool]:
        """Block for the first item, let ``interval`` pass, then take what came (up to ``batch_max``
        rows). Sleeping instead of waking for every row keeps this thread off the GIL while a busy
        producer (the Raft tick thread, the event loop) records thousands of rows a second."""
        try:  # with a journal to import, wake every interval even when nothing is queued
            first = self._queue.get(timeout=self.interval if self._live or self._leftovers else None)
        except queue.Empty:
            return [], False
        items = [first]
        if first is _STOP:
            return items, True
        if not isinstance(first, _Barrier):  # somebody waits on a barrier: commit at once
            time.sleep(self.interval)
        take = self._queue.get_nowait
        rows = 0
        while rows < self.batch_max:
            try:
                item = take()
            except queue.Empty:
                break
            items.append(item)
            if item is _STOP:
                return items, True
            if isinstance(item, _Barrier):
                break  # commit now: somebody is waiting
            rows += 1
        return items, False

    def _run(self) -> None:
        db = open_database(self.path, durable=self.durable)
        inserts = {
            table: self._insert_sql(table, "OR IGNORE" if table == CONTROLLER_EVENTS else "")
            for table in TABLES
        }
        inserts[FINAL_LOGS] = self._insert_sql(FINAL_LOGS, "OR REPLACE")
        try:
            self._load_marks(db)
            stop = False
            while not stop:
                self._finish_leftovers(db, inserts[ACKS])
                items, stop = self._take_batch()
                self._write(db, items, inserts)
                self._rotate_if_big()
        finally:
            # Whatever raced in after the stop marker is dropped; close() was called. The live journal
            # is imported whole and removed (a clean stop leaves no journal behind).
            with contextlib.suppress(Exception):
                self._retire_live()
                self._finish_leftovers(db, inserts[ACKS])
            with contextlib.suppress(Exception):
                db.close()

    @staticmethod
    def _insert_sql(table: str, conflict: str) -> str:
        cols = columns(table)
        names = ", ".join(f"[{c}]" for c in cols)
        marks = ", ".join("?" for _ in cols)
        return f"INSERT {conflict} INTO [{table}] ({names}) VALUES ({marks})"

    # -- the ack journal (writer thread) ------------------------------------------------------------

    def _load_marks(self, db: sqlite_utils.Database) -> None:
        db.conn.execute(
            f"CREATE TABLE IF NOT EXISTS [{MARKS_TABLE}] (file TEXT PRIMARY KEY, position INTEGER)"
        )
        marks = dict(db.conn.execute(f"SELECT file, position FROM [{MARKS_TABLE}]").fetchall())
        for leftover in self._leftovers:
            leftover.position = int(marks.get(leftover.file_id, 0))

    def _rotate_if_big(self) -> None:
        live, journal = self._live, self._journal
        if live is not None and journal is not None and live.position >= self.journal_rotate_bytes:
            try:
                journal.rotate()
            except OSError:  # a full disk: the put path keeps the old file; try again next pass
                self.failures += 1
                log.exception("history: the ack journal %s could not be rotated", live.path)
                return
            self._leftovers.append(live)
            self._live = JournalFile(journal.path)

    def _retire_live(self) -> None:
        if self._journal is not None and self._live is not None:
            self._journal.close()
            self._leftovers.append(self._live)
            self._live = None

    def _finish_leftovers(self, db: sqlite_utils.Database, insert: str) -> None:
        """Import each journal file no process writes any more to its end (one durable commit with its
        mark), then delete it and its mark. A failure leaves it for the next pass."""
        for leftover in list(self._leftovers):
            if leftover.in_use():  # another process's live journal (a second recorder on this file)
                self._leftovers.remove(leftover)
                continue
            try:
                rows, position = leftover.read_new(at_end=True)
                with _synchronous_full(db, not self.durable), transaction(db):
                    db.conn.executemany(insert, rows)
                    _set_mark(db, leftover.file_id, position)
                self.rows_written += len(rows)
                os.unlink(leftover.path)
                db.conn.execute(f"DELETE FROM [{MARKS_TABLE}] WHERE file = ?", (leftover.file_id,))
                self._leftovers.remove(leftover)
            except FileNotFoundError:
                self._leftovers.remove(leftover)
            except Exception:
                self.failures += 1
                log.exception("history: the ack journal %s could not be imported", leftover.path)
            finally:
                self.failures += leftover.failures
                leftover.failures = 0

    def _write(self, db: sqlite_utils.Database, items: list[Any], inserts: Mapping[str, str]) -> None:
        barriers = [item for item in items if isinstance(item, _Barrier)]
        by_table: dict[str, list[tuple[Any, ...]]] = {}
        live, mark = self._live, None
        if live is not None:
            try:
                rows, position = live.read_new(at_end=False)
                if position > live.position:
                    by_table[ACKS], mark = rows, (live.file_id, position)
            except OSError:
                self.failures += 1
                log.exception("history: the ack journal %s could not be read", live.path)
        dumps: list[_ReplaceFinalLog] = []
        for item in items:
            if isinstance(item, _Rows):
                try:
                    by_table.setdefault(item.table, []).append(sql_row(item.table, item.row))
                except (TypeError, ValueError):
                    self.failures += 1
                    log.warning("history: dropped a malformed %s row %r", item.table, item.row)
            elif isinstance(item, _LazyRows):
                try:
                    by_table.setdefault(item.table, []).extend(item.build())
                except Exception:
                    self.failures += 1
                    log.exception("history: dropped lazily built %s rows", item.table)
            elif isinstance(item, _ReplaceFinalLog):
                dumps.append(item)
        try:
            if by_table or dumps:
                with transaction(db):  # one transaction per batch: a crash keeps whole batches only
                    for dump in dumps:
                        db.conn.execute(
                            "DELETE FROM [final_logs] WHERE brokerName = ? AND brokerId = ?",
                            (dump.broker_name, dump.broker_id),
                        )
                        db.conn.executemany(
                            inserts[FINAL_LOGS],
                            [
                                sql_row(
                                    FINAL_LOGS,
                                    {**row, "brokerName": dump.broker_name, "brokerId": dump.broker_id},
                                )
                                for row in dump.rows
                            ],
                        )
                    for table, rows in by_table.items():
                        db.conn.executemany(inserts[table], rows)
                    if mark is not None:
                        _set_mark(db, *mark)
                if mark is not None and live is not None:
                    live.position = mark[1]
                    self.failures += live.failures
                    live.failures = 0
                self.batches += 1
                self.rows_written += sum(len(r) for r in by_table.values()) + sum(len(d.rows) for d in dumps)
        except Exception:
            # A full disk or a locked file must not kill the writer: count it, keep going.
            self.failures += 1
            log.exception("history: a batch of %d items could not be written to %s", len(items), self.path)
        finally:
            for barrier in barriers:
                barrier.done.set()


def _set_mark(db: sqlite_utils.Database, file_id: str, position: int) -> None:
    db.conn.execute(
        f"INSERT OR REPLACE INTO [{MARKS_TABLE}] (file, position) VALUES (?, ?)", (file_id, position)
    )


@contextlib.contextmanager
def _synchronous_full(db: sqlite_utils.Database, needed: bool) -> Iterator[None]:
    """A commit that is on disk when it returns (before a journal file is deleted)."""
    if needed:
        db.conn.execute("PRAGMA synchronous=FULL")
    try:
        yield
    finally:
        if needed:
            db.conn.execute("PRAGMA synchronous=NORMAL")


# --------------------------------------------------------------------------------------------------
# Façades: the calls each kind of process makes.


def controller_observer(
    recorder: HistoryRecorder, node: str, clock: Callable[[], int] = now_ms
) -> Callable[[Any], None]:
    """An ``OutcomeObserver`` recording each applied entry as a ``controller_events`` row.

    Runs on PySyncObj's tick thread: it reads the outcome and queues a dict, nothing more. The epochs
    and SyncStateSet are those of the set *after* the entry (accepted or not), so the history shows the
    state every replica of the controller holds at that index.
    """

    def observe(outcome: Any) -> None:
        record = outcome.record
        group = outcome.group
        broker_id = None
        if record is not None:
            for attr in ("broker_id", "new_master_broker_id", "master_broker_id"):
                if getattr(record, attr, None) is not None:
                    broker_id = getattr(record, attr)
                    break
        lost = getattr(record, "acked_data_lost", None) if outcome.accepted else None
        cluster = getattr(record, "cluster_name", None) if record is not None else None
        if cluster is None and group is not None:
            cluster = group.cluster_name
        recorder.record(
            CONTROLLER_EVENTS,
            {
                "node": node,
                "raftIndex": outcome.raft_index,
                "ts": clock(),
                "type": record.TYPE if record is not None else "Undecodable",
                "clusterName": cluster,
                "brokerName": outcome.broker_name,
                "brokerId": broker_id,
                "masterBrokerId": None if group is None else group.master_broker_id,
                "masterEpoch": None if group is None else group.master_epoch,
                "syncStateSet": None if group is None else group.sync_state_set,
                "syncStateSetEpoch": None if group is None else group.sync_state_set_epoch,
                "code": int(outcome.code),
                "accepted": outcome.accepted,
                "remark": outcome.remark or None,
                "ackedWatermark": None if group is None else getattr(group, "acked_watermark", None),
                "eligibleReplicas": None
                if group is None
                else sorted(getattr(group, "eligible_replicas", ())),
                "ackedDataLostFrom": None if lost is None else lost.from_offset,
                "ackedDataLostTo": None if lost is None else lost.to_offset,
            },
        )

    return observe


class BrokerHistory:
    """What one broker replica records. ``broker_id`` is its controller-assigned id (set it once known).

    Calls (all non-blocking except ``final_log``'s optional wait):

    - ``epoch(epoch, start_offset)`` after an epoch entry is persisted (master: changeToMaster; slave:
      an entry received from the master);
    - ``role(role, master_epoch, master_broker_id)`` after a role change took effect
      (``"MASTER"`` / ``"SLAVE"``);
    - ``truncation(from_offset, to_offset, reason)`` after the log was cut (divergent tail on a slave,
      torn tail at recovery);
    - ``put_ok(appended, epoch, ack_mode)`` for every PUT_OK the master answered (``acks`` rows whose
      ``client`` is ``broker@<node>``, ``BROKER_ACK_PREFIX``): one line per message appended to the
      ack journal before the answer leaves (one ``os.write``), imported by the writer thread;
    - ``final_log(messages)`` with every stored message (anything with ``offset``, ``size``,
      ``msg_id``, ``body_crc`` attributes, or mappings with offset/size/msgId/crc) -- at shutdown, or
      on request of a test/chaos run.
    """

    def __init__(self, recorder: HistoryRecorder, node: str, broker_name: str, broker_id: int | None = None):
        self.recorder = recorder
        self.node = node
        self.broker_name = broker_name
        self.broker_id = broker_id
        self._ack_client = BROKER_ACK_PREFIX + node
        self._journal: AckJournal | None = None
        self._journal_failed = False

    def _base(self, ts: int | None) -> dict[str, Any]:
        return {
            "node": self.node,
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "ts": now_ms() if ts is None else ts,
        }

    def epoch(self, epoch: int, start_offset: int, *, ts: int | None = None) -> None:
        self.recorder.record(EPOCHS, {**self._base(ts), "epoch": epoch, "startOffset": start_offset})

    def role(
        self, role: str, master_epoch: int, master_broker_id: int | None = None, *, ts: int | None = None
    ) -> None:
        self.recorder.record(
            ROLES,
            {**self._base(ts), "role": role, "masterEpoch": master_epoch, "masterBrokerId": master_broker_id},
        )

    def put_ok(self, appended: Sequence[Any], epoch: int, ack_mode: str, *, ts: int | None = None) -> None:
        """The messages of one PUT_OK answer (each with ``offset``, ``size``, ``msg_id``) as ``acks``:
        appended to the ack journal (one ``os.write``, so the answer's acks survive a kill -9 once this
        returns; ``mqha.history.ack_journal``), which the writer thread imports. Should the journal
        fail (a full disk), the rows are queued as before and the failure is counted."""
        stamp = now_ms() if ts is None else ts
        try:
            journal = self._journal or self._attach_journal()
            journal.append(appended, epoch, ack_mode, stamp, self.broker_id)
            return
        except (OSError, ValueError):
            self.recorder.failures += 1
            if not self._journal_failed:
                self._journal_failed = True
                log.exception("history: the ack journal of %s failed; acks are queued in memory", self.node)
        client, name, broker_id = self._ack_client, self.broker_name, self.broker_id
        self.recorder.record_rows(
            ACKS,
            lambda: [
                (client, a.msg_id, name, broker_id, a.offset, a.size, epoch, "PUT_OK", ack_mode, stamp)
                for a in appended
            ],
        )

    def _attach_journal(self) -> AckJournal:
        self._journal = self.recorder.attach_journal(self._ack_client, self.broker_name)
        return self._journal

    def truncation(self, from_offset: int, to_offset: int, reason: str, *, ts: int | None = None) -> None:
        self.recorder.record(
            TRUNCATIONS,
            {**self._base(ts), "fromOffset": from_offset, "toOffset": to_offset, "reason": reason},
        )

    def final_log(self, messages: Iterable[Any], *, wait: float | None = None) -> bool:
        """Replace this replica's ``final_logs`` with ``messages``; with ``wait``, block until committed
        (call it from a worker thread or at shutdown, not on the event loop)."""
        if self.broker_id is None:
            raise ValueError("final_log needs the broker's controller id")
        rows = [_log_row(m, self.node) for m in messages]
        self.recorder.replace_final_log(self.broker_name, self.broker_id, rows)
        return self.recorder.flush(wait) if wait is not None else True


def commit_log_entries(commit_log: Any, batch: int = 4096) -> Iterator[Any]:
    """Every stored message of a ``mqha.broker.commitlog.CommitLog`` (``read_messages`` up to its
    ``max_offset``; blank markers skipped), for ``BrokerHistory.final_log``. A damaged record is left
    out (this replica does not hold that message), the good ones after it are not."""
    pos = commit_log.min_offset
    while pos < commit_log.max_offset:
        try:
            messages, pos_next = commit_log.read_messages(
                pos, batch, commit_log.max_offset, skip_deleted=True
            )
        except CorruptRecordError as exc:
            messages, pos_next = [*exc.messages, None], exc.resume  # None: go on past it
        yield from (m for m in messages if m is not None)
        if not messages or pos_next <= pos:
            return
        pos = pos_next


def _log_row(message: Any, node: str) -> dict[str, Any]:
    if isinstance(message, Mapping):
        return {
            "offset": message["offset"],
            "size": message.get("size"),
            "msgId": message.get("msgId"),
            "crc": message.get("crc"),
            "node": node,
        }
    return {
        "offset": message.offset,
        "size": message.size,
        "msgId": message.msg_id,
        "crc": getattr(message, "body_crc", None),
        "node": node,
    }


class ClientHistory:
    """What a client (or the chaos workload) records: every put answer it got, every message it read."""

    def __init__(self, recorder: HistoryRecorder, client: str):
        self.recorder = recorder
        self.client = client

    def ack(
        self,
        *,
        msg_id: str | None,
        broker_name: str,
        broker_id: int | None,
        offset: int | None,
        size: int | None,
        epoch: int | None,
        status: str,
        ack_mode: str | None,
        ts: int | None = None,
    ) -> None:
        """One put answer (any status; only PUT_OK under allAckInSyncStateSet is checked for loss)."""
        self.recorder.record(
            ACKS,
            {
                "client": self.client,
                "msgId": msg_id,
                "brokerName": broker_name,
                "brokerId": broker_id,
                "offset": offset,
                "size": size,
                "epoch": epoch,
                "status": status,
                "ackMode": ack_mode,
                "ts": now_ms() if ts is None else ts,
            },
        )

    def read(
        self,
        *,
        msg_id: str,
        broker_name: str,
        offset: int,
        broker_id: int | None = None,
        ts: int | None = None,
    ) -> None:
        """One message a consumer received."""
        self.recorder.record(
            READS,
            {
                "client": self.client,
                "msgId": msg_id,
                "brokerName": broker_name,
                "offset": offset,
                "brokerId": broker_id,
                "ts": now_ms() if ts is None else ts,
            },
        )
