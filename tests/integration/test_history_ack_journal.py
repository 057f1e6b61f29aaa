"""The ack journal (docs/architecture.md §5, issue 45 finding 8): a master's PUT_OKs are on disk before
the answer leaves, imported exactly once, damaged lines never imported. Real files, a real kill -9."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mqha.analysis.export import export, table_rows
from mqha.broker.protocol import Appended
from mqha.history.ack_journal import AckJournal, journal_paths
from mqha.history.recorder import BrokerHistory, HistoryRecorder
from tests.helpers.processes import ManagedProcess, ProcessGroup, wait_until

pytestmark = pytest.mark.integration

ALL_ACK = "allAckInSyncStateSet"


def _acks(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT client, msgId, brokerName, brokerId, offset, size, epoch FROM acks"
        ).fetchall()


# Answers puts as a master's put path does, prints each answer once put_ok returned (the answer would
# leave then), and flushes every 7th answer (some are imported, some only journalled, when it dies).
# The writer's interval is long: nothing is imported but by a flush.
_MASTER = textwrap.dedent(
    """
    import sys
    from mqha.broker.protocol import Appended
    from mqha.history.recorder import BrokerHistory, HistoryRecorder
    rec = HistoryRecorder(sys.argv[1], interval=30)
    history = BrokerHistory(rec, "127.0.0.1:10911", "bs1", 2)
    for k in range(1_000_000):
        history.put_ok((Appended(k * 100, 100, f"m{k}"),), 3, "allAckInSyncStateSet")
        print(k, flush=True)
        if k % 7 == 6 and not rec.flush(10):
            sys.exit(3)
    """
)


def test_every_put_ok_answered_before_a_kill_9_is_imported_once_by_the_next_start(tmp_path: Path) -> None:
    db, log = tmp_path / "history.db", tmp_path / "master.log"
    with ProcessGroup() as group:
        master: ManagedProcess = group.start_python(["-c", _MASTER, str(db)], log_path=log, name="master")

        def answered() -> int | None:
            lines = [ln for ln in (log.read_text() if log.exists() else "").splitlines() if ln.isdigit()]
            return int(lines[-1]) if lines and int(lines[-1]) >= 200 else None

        wait_until(answered, timeout=30, message="200 answered puts")
        master.kill()
        assert master.returncode == -9
    last = max(int(ln) for ln in log.read_text().splitlines() if ln.isdigit())
    before = {row[1] for row in _acks(db)}
    assert len(before) < last + 1  # the crash left answered acks only in the journal
    assert journal_paths(str(db))
    # An export of the stopped run has them all too: it reads the journal past its marks.
    summary = export([db], tmp_path / "out")
    exported = [r["msgId"] for r in table_rows(tmp_path / "out", "acks")]
    assert sorted(exported) == sorted({*exported}) and {f"m{k}" for k in range(last + 1)} <= {*exported}
    assert summary.sources[0]["journalAcks"] == len(exported) - len(before)
    with HistoryRecorder(db) as rec:  # the next start imports what the crash left
        assert rec.flush(10) and rec.failures == 0
    rows = _acks(db)
    ids = [row[1] for row in rows]
    assert len(ids) == len(set(ids)), "an ack imported twice"
    assert {f"m{k}" for k in range(last + 1)} <= set(ids)
    assert rows[0][0] == "broker@127.0.0.1:10911" and {r[2:4] + r[6:] for r in rows} == {("bs1", 2, 3)}
    assert journal_paths(str(db)) == []


def test_a_damaged_or_torn_line_is_counted_and_skipped_the_rest_imported(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    HistoryRecorder(db).close()  # the database exists, as on a broker
    journal = AckJournal(str(db), "broker@a:1", "bs1")
    for k in range(5):
        journal.append((Appended(k * 10, 10, f"m{k}"),), 1, ALL_ACK, 7, 1)
    journal.close()
    path = Path(journal.path)
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"m1", b"m9")  # a flipped byte: the CRC no longer matches
    path.write_bytes(b"\n".join(lines) + b"10 10 1 7 1 torn")  # and a torn last line
    other = AckJournal(str(db), "broker@a:1", "bs1")
    other.append((Appended(90, 10, "h0"), Appended(100, 10, "h1")), 1, ALL_ACK, 7, 1)
    other.close()
    header = Path(other.path).read_bytes()
    Path(other.path).write_bytes(header.replace(b"bs1", b"bs2", 1))  # whose acks? unknown: none imported
    with HistoryRecorder(db) as rec:
        assert rec.flush(10)
        assert rec.failures == 2 + 3
    assert sorted(row[1] for row in _acks(db)) == ["m0", "m2", "m3", "m4"]
    assert journal_paths(str(db)) == []


def test_rotation_imports_each_ack_once_and_a_clean_stop_leaves_no_journal(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    with HistoryRecorder(db, interval=0.005) as rec:
        rec.journal_rotate_bytes = 2000
        history = BrokerHistory(rec, "a:1", "bs1", 1)
        for k in range(600):
            history.put_ok((Appended(k * 10, 10, f"m{k}"), Appended(k * 10 + 5, 5, f"n{k}")), 2, ALL_ACK)
            if k % 50 == 0:
                assert rec.flush(10)
        assert rec.flush(10)
        assert len(journal_paths(str(db))) <= 2  # the live file, and at most one rotated out
        assert rec.failures == 0
    ids = [row[1] for row in _acks(db)]
    assert len(ids) == 1200 == len(set(ids))
    assert journal_paths(str(db)) == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM ack_journal_marks").fetchone() == (0,)


def test_a_second_recorder_on_the_same_database_leaves_a_live_journal_alone(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    with HistoryRecorder(db) as live:
        history = BrokerHistory(live, "a:1", "bs1", 1)
        history.put_ok((Appended(0, 10, "m0"),), 1, ALL_ACK)
        with HistoryRecorder(db) as other:  # e.g. a tool opened on a running broker's store
            assert other.flush(10)
        assert journal_paths(str(db))  # still there, still written
        history.put_ok((Appended(10, 10, "m1"),), 1, ALL_ACK)
        assert live.flush(10) and live.failures == 0
    assert sorted(row[1] for row in _acks(db)) == ["m0", "m1"]
