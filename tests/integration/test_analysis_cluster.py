"""A real local run through ``mqha export`` -> ``mqha analyze`` (issue 7 "Done when").

3 ``mqcontroller`` + 3 ``mqbroker`` of one set; the test is the client: it records every put answer
(``acks``) and every message it read (``reads``) through ``ClientHistory``, freezes the slaves to leave
an unacknowledged tail on the master, kills the master (-9), keeps producing on the new one, restarts
the old one and lets it catch up. The controllers record ``controller_events`` themselves. Until the
broker records its own ``final_logs`` (``BrokerHistory.final_log``), the test dumps each replica's
log through the broker API into a separate database. Every process is stopped by pid.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from mqha.analysis.report import VERDICT_FILE
from mqha.cli import main as mqha_main
from mqha.history.recorder import ClientHistory, HistoryRecorder, history_path
from tests.helpers.processes import ProcessGroup, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path(sys.executable).with_name("mqbroker").exists(),
        reason="mqbroker is not installed yet (issue 4): no broker to run the real-cluster history",
    ),
]

ACK_MODE = "allAckInSyncStateSet"  # BROKER_SETTINGS of test_broker_cluster


def _broker_id(broker: Any) -> int:
    return int(broker.status()["controllerBrokerId"])


def _put(client: ClientHistory, broker: Any, bodies: list[str]) -> tuple[int, dict[str, Any]]:
    code, reply = broker.put(bodies)
    if code == 200:
        broker_id = _broker_id(broker)
        for result in reply["results"]:
            client.ack(
                msg_id=result.get("msgId"),
                broker_name="bs1",
                broker_id=broker_id,
                offset=result.get("offset"),
                size=result.get("size"),
                epoch=result.get("epoch"),
                status=result["status"],
                ack_mode=ACK_MODE,
            )
    return code, reply


def _read(client: ClientHistory, broker: Any) -> int:
    messages = broker.read_all()
    broker_id = _broker_id(broker)
    for offset, msg_id, _ in messages:
        client.read(msg_id=msg_id, broker_name="bs1", offset=offset, broker_id=broker_id)
    return len(messages)


@pytest.mark.slow  # 67 s; test_analysis_live proves a live run in the default run
def test_real_run_export_then_analyze_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.integration.controller_cluster import ControllerCluster, request
    from tests.integration.test_broker_cluster import BrokerCluster

    run = tmp_path / "run"
    with ProcessGroup() as group, HistoryRecorder.in_store(run / "client") as recorder:
        client = ClientHistory(recorder, "test-client")
        controllers = ControllerCluster(group, run / "controllers", args=("--log-level", "WARNING"))
        controllers.start()
        controllers.leader(timeout=10)
        cluster = BrokerCluster(group, run, controllers)
        first, *others = cluster.brokers
        cluster.start(first)
        master, _ = cluster.master()
        for broker in others:
            cluster.start(broker)
        cluster.wait_sync_state_set(master, 3)
        for i in range(10):
            code, reply = _put(client, master, [f"a{i}-{j}" for j in range(4)])
            assert code == 200 and reply["status"] == "PUT_OK", reply
        cluster.wait_caught_up(master, others)
        assert _read(client, master) == 40

        # Slaves frozen: puts are stored on the master but time out (an unacknowledged tail).
        for broker in others:
            broker.proc.pause()
        threads = [
            threading.Thread(
                target=_put, args=(client, master, [f"t{n}-{j}-" + "x" * 1000 for j in range(8)])
            )
            for n in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        master.proc.kill()
        for broker in others:
            broker.proc.resume()

        new_master, _ = cluster.master(timeout=30, exclude=master)
        for i in range(10):
            code, reply = _put(client, new_master, [f"b{i}-{j}" for j in range(4)])
            assert code == 200 and reply["status"] == "PUT_OK", reply
        cluster.start(master)
        wait_until(
            lambda: (master.try_status() or {}).get("role") == "SLAVE", 30, message="old master rejoins"
        )
        cluster.wait_sync_state_set(new_master, 3)
        cluster.wait_caught_up(new_master, [b for b in cluster.brokers if b is not new_master])
        assert _read(client, new_master) >= 80

        # Each replica writes its own log index as final_logs (POST /v1/history/final-log), once the
        # confirm offset has reached every replica.
        def confirmed_everywhere() -> bool:
            top = new_master.status()["maxOffset"]
            return all(b.status()["confirmOffset"] >= top for b in cluster.brokers)

        wait_until(confirmed_everywhere, 10, message="confirm offset reaches every replica")
        for broker in cluster.brokers:
            code, reply = request("POST", broker.url + "/v1/history/final-log", timeout=30.0)
            assert code == 200 and reply["rows"] >= 80, reply
        group.stop_all()

    broker_dbs = [Path(history_path(b.base / "store")) for b in cluster.brokers]
    assert all(_count(p, "final_logs") >= 80 for p in broker_dbs)
    # The brokers recorded their own epochs and role changes (the old master: MASTER, then SLAVE).
    assert all(_count(p, "epochs") >= 2 and _count(p, "roles") >= 2 for p in broker_dbs)

    out = tmp_path / "export"
    assert mqha_main(["export", str(run), str(out)]) == 0
    assert mqha_main(["analyze", str(out), "--master", "local[2]"]) == 0, capsys.readouterr().err
    verdict = json.loads((out / "report" / VERDICT_FILE).read_text())
    assert verdict["ok"]
    tables = verdict["tables"]
    assert tables["controller_events"] > 0 and tables["acks"] >= 80 and tables["reads"] >= 120
    assert tables["final_logs"] >= 3 * 80
    page = (out / "report" / "report.html").read_text()
    assert "<h2>Timeline of bs1</h2>" in page and "<svg" in page
    # The brokers recorded their acks too, beside the client's; both were checked.
    assert verdict["status"] == "ok" and verdict["coverage"]["acksByBroker"] >= 80
    assert verdict["coverage"]["acksByClient"] >= 80


def _count(path: Path, table: str) -> int:
    import sqlite3

    with sqlite3.connect(path) as conn:
        try:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        except sqlite3.OperationalError:
            return 0
