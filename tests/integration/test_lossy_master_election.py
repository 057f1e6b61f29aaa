"""Issue 25, scenario 1 with real processes (docs/architecture.md §3.2): a whole-group power cut where the
master lost its un-fsynced tail and comes back first.

``broker-a`` x 3, ``allAckInSyncStateSet=true``: 50 puts acknowledged by all three but never fsynced
by the master (``flushIntervalCommitLog`` 10 minutes); the slaves stop first (a clean stop fsyncs; the
SyncStateSet shrinks to the master, the slaves join the ELR credited with the master's ack point); the
master loses power: SIGKILL and ``mqha.chaos.power_loss.cut_unflushed`` takes its log back to what it
had fsynced. It comes back first, reports a lossy start, and is NOT
elected: the set waits (gauge, remark) while the healthy slaves are down, and gets one of them as master
within a few seconds of their return. Every acknowledged message is then on the new master, at its
offset, and the old master follows it without truncating anything acknowledged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.chaos.power_loss import cut_unflushed
from mqha.client import Consumer, Producer, SendStatus
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import Node, http_get

pytestmark = pytest.mark.integration

GROUP = "broker-a"
MESSAGES = 50


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path / "run",
        controllers=1,
        groups=1,
        replicas=3,
        controller_settings={"uncleanRecoveryTimeoutMills": "-1"},
        broker_settings={"flushDiskType": "ASYNC_FLUSH", "flushIntervalCommitLog": "600000"},
    ) as local:
        yield local
    assert local.running_pids() == []


def _wait(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _controller_group(cluster: LocalCluster) -> dict[str, Any]:
    address = cluster.controller_addresses[0]
    status, body = http_get(f"http://{address}/v1/controller/status")
    assert status == 200, body
    return next(g for g in body["state"]["groups"] if g["brokerName"] == GROUP)


def _metric(cluster: LocalCluster, name: str) -> float | None:
    import urllib.request

    address = cluster.controller_addresses[0]
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=2).read().decode()
    for line in text.splitlines():
        if line.startswith(f'{name}{{broker_name="{GROUP}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


def _put(cluster: LocalCluster, first: int, count: int) -> list[tuple[str, int]]:
    async def run() -> list[tuple[str, int]]:
        acked = []
        async with Producer(cluster.controller_addresses, GROUP) as producer:
            for i in range(first, first + count):
                result = await producer.send("orders", f"message-{i:03d}")
                assert result.status is SendStatus.PUT_OK, result
                assert result.offset is not None and result.msg_id is not None
                acked.append((result.msg_id, result.offset))
        return acked

    return asyncio.run(run())


def _read_all(cluster: LocalCluster, count: int) -> dict[int, str]:
    async def run() -> dict[int, str]:
        async with Consumer(cluster.controller_addresses, GROUP, offset=0) as consumer:
            messages = await consumer.read_until(count, timeout=20)
            return {m.offset: m.msg_id for m in messages}

    return asyncio.run(run())


def test_a_lossy_old_master_waits_for_the_healthy_slaves_and_loses_nothing(cluster: LocalCluster) -> None:
    cluster.wait_ready(60)
    master = cluster.master(GROUP, timeout=10)
    assert master is not None
    slaves = [node for node in cluster.group_brokers(GROUP) if node.name != master.name]
    acked = _put(cluster, 0, MESSAGES)

    # The slaves stop first: the SyncStateSet shrinks to the master, the slaves join the ELR.
    for slave in slaves:
        cluster.stop_node(slave)
    master_id = cluster.broker_status(master)["controllerBrokerId"]  # type: ignore[index]
    group = _wait(
        "the SyncStateSet to shrink to the master",
        lambda: (g := _controller_group(cluster))["syncStateSet"] == [master_id] and g,
        15,
    )
    credits = {e["brokerId"]: e["creditedOffset"] for e in group["eligibleReplicas"]}
    end = acked[-1][1]
    assert set(credits) == set(range(1, 4)) - {master_id} and min(credits.values()) > end
    assert group["ackedWatermark"] > end

    # Power cut of the master: SIGKILL, its un-fsynced tail gone.
    cluster.kill(master)
    cut = cut_unflushed(_store(cluster, master))
    assert cut.cut and cut.flushed_offset < acked[-1][1], cut.describe()  # acknowledged messages gone
    cluster.start_node(master)
    report = _wait(
        "the master's start report", lambda: (s := cluster.broker_status(master)) and s["startReport"], 20
    )
    assert report["lossyRecovery"] is True and report["recoveredMaxOffset"] == cut.flushed_offset
    assert report["confirmOffsetBeforeRecovery"] > end

    # It is not elected: the set waits for the healthy slaves, and says so.
    _wait("the election to wait", lambda: _metric(cluster, "mqha_controller_election_waiting") == 1.0, 20)
    time.sleep(2.0)
    assert cluster.master(GROUP) is None
    assert _controller_group(cluster)["masterBrokerId"] in (None, master_id)
    status = cluster.broker_status(master)
    assert status is not None and not (status["role"] == "MASTER" and not status["fenced"])

    # The healthy slaves return: one of them is master within seconds, nothing acknowledged is lost.
    back = time.monotonic()
    for slave in slaves:
        cluster.start_node(slave, wait=False)
    new_master = _wait("a new master", lambda: cluster.master(GROUP), 20)
    took = time.monotonic() - back
    assert new_master.name in {s.name for s in slaves}, new_master.name
    assert took < 20, took
    assert _metric(cluster, "mqha_controller_election_waiting") == 0.0
    assert _metric(cluster, "mqha_controller_acked_data_lost_total") in (None, 0.0)
    stored = _read_all(cluster, MESSAGES)
    missing = [(msg_id, offset) for msg_id, offset in acked if stored.get(offset) != msg_id]
    assert missing == [], f"{len(missing)} acknowledged messages lost"
    # The old master follows the new one and ends up holding every acknowledged message too.
    _wait(
        "the old master to catch up",
        lambda: (
            (s := cluster.broker_status(master)) and s["role"] == "SLAVE" and s["maxOffset"] >= acked[-1][1]
        ),
        20,
    )


def _store(cluster: LocalCluster, node: Node) -> Path:
    return Path(cluster.node(node).store)
