"""The RocketMQ #7017 topology with real packet drops (issue 27): the old master, the controller leader
and the producers are cut off together from the other controllers and replicas.

Every node and the producer (a subprocess) connect from their own loopback address
(``mqha.chaos.packet_filter``) and the kernel drops every packet between the two sides. The majority
elects a new master; the old one still has a controller and its producers. With
``allAckInSyncStateSet`` nothing it takes alone may be acknowledged, so after the heal every
acknowledged message is in the final master's log. The same run with the planted bug that acknowledges
before replication loses the old master's acks -- the scenario catches it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqha.chaos.netfilter import Endpoint, partition, source_addresses
from mqha.chaos.packet_filter import PacketFilter, problem, shim_env
from mqha.cluster.checking import read_replica_log
from mqha.cluster.local import LocalCluster
from mqha.testing.planted_bugs import ACK_BEFORE_REPLICATION_ENV

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(problem() is not None, reason=str(problem())),
]

GROUP = "broker-a"
PRODUCER = """
import json, sys, time
from pathlib import Path
from mqha.client import SyncProducer
controllers, stop, out = sys.argv[1], Path(sys.argv[2]), open(sys.argv[3], "w")
with SyncProducer(controllers, "broker-a") as producer:
    i = 0
    while not stop.exists():
        r = producer.send("t7017", f"m-{i}", timeout=2.0)
        row = {"msgId": r.msg_id, "ok": r.ok, "offset": r.offset, "epoch": r.epoch, "at": time.time()}
        out.write(json.dumps(row) + "\\n")
        out.flush()
        i += 1
        time.sleep(0.01)
"""


def acked(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["ok"]]


def wait_for_acks(path: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(acked(path)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} acks within {timeout:g} s"
        time.sleep(0.2)


def run_7017(tmp_path: Path, plant: bool) -> tuple[int, int, int]:
    """(acks, acks missing from the final master log, acks taken by the cut-off master); asserts that
    the majority side elected a new master meanwhile (the acks after the heal carry a newer epoch)."""
    settings = {"allAckInSyncStateSet": "true"}
    cluster = LocalCluster(tmp_path / "run", controllers=3, groups=1, replicas=3, broker_settings=settings)
    names = [n.name for n in cluster.controllers] + [b.name for b in cluster.brokers]
    sources = source_addresses([*names, "producer"])
    endpoints = {"producer": Endpoint(sources["producer"])}
    for node in [*cluster.controllers, *cluster.brokers]:
        cluster.node_env[node.name] = {
            **shim_env(sources[node.name]),
            **({ACK_BEFORE_REPLICATION_ENV: "1"} if plant and node in cluster.brokers else {}),
        }
        endpoints[node.name] = Endpoint(sources[node.name], (node.port, node.port + 1))
    packets = PacketFilter(endpoints, table=f"mqha_test_7017_{os.getpid()}")
    stop, results = tmp_path / "stop", tmp_path / "acks.jsonl"
    producer: subprocess.Popen[bytes] | None = None
    try:
        with cluster:
            cluster.wait_ready(60)
            master, leader = cluster.master(GROUP, timeout=30), cluster.controller_leader()
            assert master is not None and leader is not None
            controllers = ";".join(cluster.controller_addresses)
            producer = subprocess.Popen(
                [sys.executable, "-c", PRODUCER, controllers, str(stop), str(results)],
                env={**os.environ, **shim_env(sources["producer"])},
                stderr=open(tmp_path / "producer.err", "wb"),  # noqa: SIM115 - the child holds it
            )
            wait_for_acks(results, 50, 30)
            minority = {master.name, leader.name, "producer"}
            packets.apply(partition(minority, set(endpoints) - minority))
            cut_at = time.time()
            time.sleep(8.0)  # the majority elects a new leader and a new master meanwhile
            packets.apply([])
            healed_at = time.time()
            cluster.wait_ready(60)
            wait_for_acks(results, len(acked(results)) + 30, 30)
            stop.touch()
            producer.wait(timeout=30)
            final = cluster.master(GROUP, timeout=10)
            assert final is not None
            # The read API serves up to the confirm offset, which may trail the last answer for a moment:
            # wait until it covers what the final master acknowledged (the acks of the newest epoch).
            newest = max(int(r["epoch"]) for r in acked(results))  # type: ignore[call-overload]
            end = 1 + max(int(r["offset"]) for r in acked(results) if r["epoch"] == newest)  # type: ignore[call-overload]
            deadline = time.monotonic() + 10
            while int((cluster.broker_status(final) or {}).get("confirmOffset") or 0) < end:
                assert time.monotonic() < deadline, "the final master's confirm offset stays short"
                time.sleep(0.1)
            log = {row["offset"]: row["msgId"] for row in read_replica_log(final)}
    finally:
        packets.clear()
        if producer is not None and producer.poll() is None:
            producer.kill()
            producer.wait()
    rows = acked(results)
    missing = [r for r in rows if log.get(r["offset"]) != r["msgId"]]  # type: ignore[arg-type]
    during = [r for r in rows if cut_at <= r["at"] <= healed_at]  # type: ignore[operator]
    before = max(r["epoch"] for r in rows if r["at"] < cut_at)  # type: ignore[operator, type-var]
    after = max(r["epoch"] for r in rows if r["at"] > healed_at)  # type: ignore[operator, type-var]
    assert after > before, f"no new master while the old one was cut off (epoch {before} -> {after})"
    return len(rows), len(missing), len(during)


def test_the_7017_topology_loses_nothing_acknowledged(tmp_path: Path) -> None:
    total, missing, during = run_7017(tmp_path, plant=False)
    print(f"#7017: {total} acked, {during} while cut off, {missing} missing from the final log")
    assert total >= 80 and missing == 0


def test_the_7017_topology_catches_acks_taken_before_replication(tmp_path: Path) -> None:
    total, missing, during = run_7017(tmp_path, plant=True)
    print(f"#7017 with the planted bug: {total} acked, {during} while cut off, {missing} missing")
    assert during > 0 and missing > 0
