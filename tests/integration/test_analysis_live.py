"""The no-loss proof on live clusters (issue 28): ``mqha export --controller`` + ``mqha analyze``.

No instrumented client: the load is plain HTTP puts, the acks the proof checks are the ones the masters
recorded themselves (``historyRecordPutAcks``), and every history and final log comes over the network
with the admin token (``secure=True``: authentication on).

1. 3 controllers, 3 replicas, a produce load, the master killed (-9) and restarted: ``ok``, with
   counts showing every ack and every replica's final log were checked; the same export without one
   broker's final log: ``inconclusive``.
2. one ASYNC_FLUSH replica, its un-flushed tail lost as in a power cut: ``violated``, ``lost_ack``
   naming exactly the lost messages.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mqha.analysis.report import VERDICT_FILE
from mqha.chaos.power_loss import cut_unflushed
from mqha.cli import main as mqha_main
from mqha.cluster.client_auth import client_headers
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import Node
from tests.helpers.processes import wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path(sys.executable).with_name("mqbroker").exists(), reason="mqbroker is not installed"
    ),
]


def _put(node: Node, headers: dict[str, str], body: str) -> dict[str, Any] | None:
    """One put; the answer when it is PUT_OK, else None (any refusal, timeout or dead broker)."""
    data = json.dumps({"topic": "LiveTopic", "body": body}).encode()
    request = urllib.request.Request(
        node.url + "/v1/messages", data=data, headers={"Content-Type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            reply = json.loads(response.read())
    except (OSError, ValueError):
        return None
    return reply if reply.get("status") == "PUT_OK" else None


class Load:
    """A thread putting to whichever broker is the master, counting PUT_OK answers."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster, self.headers = cluster, client_headers(cluster.broker_settings)
        self.acked: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            master = self.cluster.master(timeout=0)
            if master is None:
                time.sleep(0.05)
                continue
            reply = _put(master, self.headers, f"live-{n}")
            n += 1
            if reply is not None:
                self.acked.append(reply)

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.thread.join(10)


def _token(cluster: LocalCluster) -> str:
    return cluster.controller_settings["adminAuthToken"]


def _export_and_analyze(cluster: LocalCluster, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    controllers = ";".join(cluster.controller_addresses)
    assert mqha_main(["export", "--controller", controllers, "--token", _token(cluster), str(out)]) == 0
    code = mqha_main(["analyze", str(out), *extra])
    return code, json.loads((out / "report" / VERDICT_FILE).read_text())


def test_live_cluster_master_kill_and_rejoin_is_ok_and_a_missing_log_is_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LocalCluster(
        tmp_path / "run", controllers=3, replicas=3, secure=True, log_level="WARNING"
    ) as cluster:
        cluster.wait_ready(60)
        old = cluster.master(timeout=30)
        assert old is not None
        with Load(cluster) as load:
            wait_until(lambda: len(load.acked) >= 60, 30, message="first acks")
            cluster.kill(old)
            wait_until(
                lambda: (m := cluster.master(timeout=0)) is not None and m.name != old.name,
                30,
                message="a new master",
            )
            before = len(load.acked)
            wait_until(lambda: len(load.acked) >= before + 60, 30, message="acks from the new master")
            cluster.start_node(old)
            wait_until(lambda: cluster.group_ready(cluster.groups[0], 3), 60, message="old master rejoined")
        acked = len(load.acked)
        # Anonymous callers may not read histories.
        anonymous = urllib.request.Request(cluster.brokers[0].url + "/v1/history/rows?table=acks")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(anonymous, timeout=5)
        assert refused.value.code == 401
        code, verdict = _export_and_analyze(cluster, tmp_path / "export", "--master", "local[2]")
    assert code == 0, capsys.readouterr()
    assert verdict["status"] == "ok" and verdict["reasons"] == [], verdict["reasons"]
    cov = verdict["coverage"]
    (name, group), *_ = cov["sets"].items()
    # Every answered PUT_OK the masters recorded was checked: all but the batch in flight when the master
    # was killed (its history writer commits every 50 ms; one sequential client answers a few per 50 ms) ...
    assert acked - 50 <= cov["acksByBroker"] <= acked and cov["acksByClient"] == 0
    assert cov["acksChecked"] == cov["acksByBroker"] and group["acksUnchecked"] == 0
    # ... against the final log of every replica, all three of them.
    assert [r["brokerId"] for r in group["finalLogs"]] == group["replicas"] and len(group["replicas"]) == 3
    assert all(r["rows"] >= acked for r in group["finalLogs"])
    assert verdict["tables"]["controller_events"] > 0 and verdict["tables"]["roles"] >= 4
    manifest = json.loads((tmp_path / "export" / "manifest.json").read_text())
    assert manifest["problems"] == [] and len(manifest["sources"]) == 3 + 3 + 3

    # The same export without one replica's final log: inconclusive, naming it (exit 3).
    partial = tmp_path / "partial"
    shutil.copytree(tmp_path / "export", partial)
    shutil.rmtree(partial / "report")
    # A slave's log: without the final master's log the acks themselves go unchecked (another reason).
    dropped = next(r["brokerId"] for r in group["finalLogs"] if r["brokerId"] != group["finalMasterId"])
    lines = (partial / "final_logs.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["brokerId"] != dropped]
    (partial / "final_logs.jsonl").write_text("".join(line + "\n" for line in kept))
    assert mqha_main(["analyze", str(partial), "--engine", "python"]) == 3
    doc = json.loads((partial / "report" / VERDICT_FILE).read_text())
    assert doc["status"] == "inconclusive" and doc["failed"] == []
    assert doc["reasons"] == [
        f"set {name}: no final log of replica(s) {dropped}: their logs were not compared"
    ]
    assert "INCONCLUSIVE" in capsys.readouterr().err


def test_power_cut_tail_of_an_async_flush_replica_is_a_violation(tmp_path: Path) -> None:
    settings = {
        "flushDiskType": "ASYNC_FLUSH",
        "flushIntervalCommitLog": "600000",
        "allAckInSyncStateSet": "true",
    }
    with LocalCluster(
        tmp_path / "run",
        controllers=1,
        replicas=1,
        broker_settings=settings,
        secure=True,
        log_level="WARNING",
    ) as cluster:
        cluster.wait_ready(60)
        master = cluster.master(timeout=30)
        assert master is not None
        headers = client_headers(cluster.broker_settings)
        acked = [_put(master, headers, f"tail-{i}") for i in range(12)]
        assert all(acked)
        time.sleep(1.0)  # the broker's history commits its batch (50 ms); the commit log stays un-flushed
        cluster.kill(master)
        cut = cut_unflushed(Path(master.store))
        lost = [a for a in acked if a["offset"] >= cut.flushed_offset]
        assert len(lost) >= 6, cut.describe()  # acknowledged messages gone, as in a power cut
        assert sorted(r.msg_id for r in cut.lost) == sorted(a["msgId"] for a in lost)
        cluster.start_node(master)
        wait_until(lambda: cluster.master(timeout=0) is not None, 30, message="the replica is master again")
        after = [_put(master, headers, f"after-{i}") for i in range(3)]
        assert all(after)
        code, verdict = _export_and_analyze(cluster, tmp_path / "export", "--engine", "python")
    assert code == 1, verdict
    assert verdict["status"] == "violated" and verdict["failed"] == ["lost_ack"]
    found = verdict["checks"]["lost_ack"]
    assert found["count"] == len(lost)
    assert sorted(r["msgId"] for r in found["rows"]) == sorted(r["msgId"] for r in lost)
    assert all(r["client"].startswith("broker@") for r in found["rows"])
