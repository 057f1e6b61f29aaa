"""History recorder (docs/architecture.md §5): batching, crash survival, replay de-duplication, and the
controller wiring on a real 3-node cluster. Every process is stopped by pid; every wait is bounded."""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from mqha.analysis import invariants as inv
from mqha.analysis.export import export, read_tables
from mqha.controller.apply import apply
from mqha.controller.records import (
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    ElectMasterRecord,
    NoopRecord,
)
from mqha.controller.state import ControllerState
from mqha.history.recorder import (
    BrokerHistory,
    ClientHistory,
    HistoryRecorder,
    controller_observer,
    history_path,
)
from tests.helpers.processes import ManagedProcess, ProcessGroup, wait_until
from tests.integration.controller_cluster import ControllerCluster, beating_replicas

pytestmark = pytest.mark.integration

BATCH = 200


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def test_rows_flush_close_and_no_writes_after_close(tmp_path: Path) -> None:
    rec = HistoryRecorder.in_store(tmp_path / "store", interval=0.01)
    client = ClientHistory(rec, "c1")
    for i in range(1000):
        client.ack(
            msg_id=f"m{i}",
            broker_name="b1",
            broker_id=1,
            offset=i * 100 + 2**40,
            size=100,
            epoch=1,
            status="PUT_OK",
            ack_mode="allAckInSyncStateSet",
        )
    assert rec.flush(5)
    db = Path(history_path(tmp_path / "store"))
    assert _rows(db, "SELECT count(*), max(offset) FROM acks") == [(1000, 999 * 100 + 2**40)]
    with pytest.raises(ValueError, match="unknown history table"):
        rec.record("nope", {})
    rec.close()
    rec.record("acks", {"msgId": "late"})  # ignored, never raises
    assert not rec.flush(0.1)
    assert _rows(db, "SELECT count(*) FROM acks") == [(1000,)]
    assert rec.failures == 0 and rec.batches >= 1


def test_final_log_dump_replaces_the_previous_dump_of_that_replica(tmp_path: Path) -> None:
    with HistoryRecorder.in_store(tmp_path) as rec:
        one, two = BrokerHistory(rec, "b1-1", "b1", 1), BrokerHistory(rec, "b1-2", "b1", 2)
        one.final_log([{"offset": o, "size": 10, "msgId": f"m{o}", "crc": 7} for o in (0, 10, 20)], wait=5)
        two.final_log([{"offset": 0, "size": 10, "msgId": "m0", "crc": 7}], wait=5)
        one.final_log([{"offset": 0, "size": 10, "msgId": "m0", "crc": 7}], wait=5)  # after a truncation
    db = Path(history_path(tmp_path))
    assert _rows(db, "SELECT brokerId, offset, node FROM final_logs ORDER BY brokerId") == [
        (1, 0, "b1-1"),
        (2, 0, "b1-2"),
    ]


def test_broker_put_ok_records_one_ack_row_per_message(tmp_path: Path) -> None:
    from mqha.broker.protocol import Appended

    path = tmp_path / "history.db"
    with HistoryRecorder(path) as rec:
        broker = BrokerHistory(rec, "127.0.0.1:10911", "bs1", 2)
        broker.put_ok((Appended(0, 120, "m0"), Appended(2**40, 130, "m1")), 3, "allAckInSyncStateSet", ts=7)
        assert rec.flush(10)
    assert _rows(path, "SELECT * FROM acks ORDER BY offset") == [
        ("broker@127.0.0.1:10911", "m0", "bs1", 2, 0, 120, 3, "PUT_OK", "allAckInSyncStateSet", 7),
        ("broker@127.0.0.1:10911", "m1", "bs1", 2, 2**40, 130, 3, "PUT_OK", "allAckInSyncStateSet", 7),
    ]


def test_controller_observer_rows_and_replay_dedup(tmp_path: Path) -> None:
    records = [
        NoopRecord("barrier"),
        ApplyBrokerIdRecord("c1", "b1", 1, "127.0.0.1:1", "x1"),
        ApplyBrokerIdRecord("c1", "b1", 2, "127.0.0.1:2", "x2"),
        ElectMasterRecord("c1", "b1", 1, 0, 0),
        AlterSyncStateSetRecord("b1", 1, frozenset({1, 2}), 1, 1),
        ElectMasterRecord("c1", "b1", 2, 0, 0),  # fenced: decided against stale epochs
    ]
    with HistoryRecorder.in_store(tmp_path) as rec:
        observe = controller_observer(rec, "n0", clock=lambda: 42)
        for _ in range(2):  # a restart replays the journal: same indexes, same outcomes
            state = ControllerState.empty()
            for index, record in enumerate(records, start=1):
                state, outcome = apply(state, record, index)
                observe(outcome)
    rows = _rows(
        Path(history_path(tmp_path)),
        "SELECT raftIndex, type, brokerName, brokerId, masterBrokerId, masterEpoch, syncStateSet, "
        "syncStateSetEpoch, accepted FROM controller_events ORDER BY raftIndex",
    )
    assert rows == [
        (1, "Noop", None, None, None, None, None, None, 1),
        (2, "ApplyBrokerId", "b1", 1, None, 0, "[]", 0, 1),
        (3, "ApplyBrokerId", "b1", 2, None, 0, "[]", 0, 1),
        (4, "ElectMaster", "b1", 1, 1, 1, "[1]", 1, 1),
        (5, "AlterSyncStateSet", "b1", 1, 1, 1, "[1, 2]", 2, 1),
        (6, "ElectMaster", "b1", 2, 1, 1, "[1, 2]", 2, 0),
    ]


_WRITER = textwrap.dedent(
    """
    import sys
    from mqha.history.recorder import HistoryRecorder
    rec = HistoryRecorder(sys.argv[1], interval=0.005)
    for k in range(100_000):
        for i in range({batch}):
            rec.record("acks", {{"client": "w", "msgId": f"{{k}}-{{i}}", "offset": k * {batch} + i}})
        if not rec.flush(10):
            sys.exit(3)
        print(k, flush=True)
    """
).format(batch=BATCH)


def test_kill_9_keeps_every_committed_batch(tmp_path: Path) -> None:
    db, log = tmp_path / "history.db", tmp_path / "writer.log"
    with ProcessGroup() as group:
        writer: ManagedProcess = group.start_python(["-c", _WRITER, str(db)], log_path=log, name="writer")

        def acknowledged() -> int | None:
            text = log.read_text() if log.exists() else ""
            lines = [ln for ln in text.splitlines() if ln.strip().isdigit()]
            last = int(lines[-1]) if lines else -1
            return last if last >= 30 else None

        wait_until(acknowledged, timeout=30, message="30 committed batches")
        writer.kill()
        assert writer.returncode == -9
    lines = [ln for ln in log.read_text().splitlines() if ln.strip().isdigit()]
    last = int(lines[-1])
    assert _rows(db, "PRAGMA integrity_check") == [("ok",)]
    offsets = [r[0] for r in _rows(db, "SELECT offset FROM acks ORDER BY rowid")]
    # Every batch the writer saw committed is there, and what is there is a prefix of what was
    # queued (whole transactions, in order): no holes, nothing torn.
    assert len(offsets) >= (last + 1) * BATCH
    assert offsets == list(range(len(offsets)))


def test_three_controllers_record_identical_event_sequences(tmp_path: Path) -> None:
    columns = (
        "raftIndex, type, clusterName, brokerName, brokerId, masterBrokerId, masterEpoch, "
        "syncStateSet, syncStateSetEpoch, code, accepted"
    )
    with ProcessGroup() as group:
        cluster = ControllerCluster(group, tmp_path / "run", args=("--log-level", "WARNING"))
        cluster.start()
        leader = cluster.leader(timeout=10)
        with beating_replicas(cluster, "b1", 3):
            leader.post_ok("/v1/groups/b1/elect", {"clusterName": "c1", "brokerId": 1})
            alter = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1, 2, 3], "syncStateSetEpoch": 1}
            leader.post_ok("/v1/groups/b1/sync-state-set", alter)
            cluster.wait_same_state(cluster.nodes, timeout=5)
        group.stop_all()  # SIGTERM: each node closes its recorder after the Raft member stops
        for node in cluster.nodes:
            assert node.proc is not None and node.proc.returncode == 0, node.proc.log_tail()

    sequences = {
        node.node_id: _rows(
            Path(history_path(node.store)), f"SELECT {columns} FROM controller_events ORDER BY raftIndex"
        )
        for node in cluster.nodes
    }
    first = sequences["n0"]
    assert all(seq == first for seq in sequences.values()), json.dumps(sequences, indent=1)
    # Each applied index once (PySyncObj's own leader no-ops take indexes too, so there are gaps).
    indexes = [r[0] for r in first]
    assert indexes == sorted(set(indexes)) and indexes[0] >= 1
    kinds = [r[1] for r in first]
    assert kinds.count("ApplyBrokerId") == 3 and "Noop" in kinds
    elect = next(r for r in first if r[1] == "ElectMaster")
    assert elect[5:9] == (1, 1, "[1]", 1)
    assert first[-1][5:9] == (1, 1, "[1, 2, 3]", 2)

    # The export of the run (three databases) passes the controller invariants; with no acks and no
    # final logs there is nothing to check for loss, so the verdict says so instead of "ok".
    summary = export([tmp_path / "run"], tmp_path / "out")
    assert len(summary.sources) == 3
    verdict = inv.check_all(read_tables(tmp_path / "out"))
    assert verdict.failed == () and verdict.status == "inconclusive", verdict.to_json()
    assert verdict.table_counts["controller_events"] == 3 * len(first)


def test_recording_does_not_wait_for_the_disk(tmp_path: Path) -> None:
    # The hot-path call only queues: 20 000 rows are accepted long before they can all be committed.
    with HistoryRecorder.in_store(tmp_path, interval=0.05) as rec:
        started = time.perf_counter()
        for i in range(20_000):
            rec.record("reads", {"client": "c", "msgId": str(i), "brokerName": "b1", "offset": i})
        queued = time.perf_counter() - started
        assert rec.flush(30)
    assert queued < 2.0, queued
    assert _rows(Path(history_path(tmp_path)), "SELECT count(*) FROM reads") == [(20_000,)]
