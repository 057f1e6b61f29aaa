"""Issue 45 finding 4 with real processes (docs/architecture.md §4.7): a flipped bit in a commit-log
segment other than the last.

``broker-a`` x 3, allAck, 64 KiB segments (1,600 messages fill several), a fast scrub.

- A stopped slave with one flipped bit starts: its scrub finds the record, it stops replicating and
  reports itself damaged, it repairs the record from an in-sync replica, and then serves every message
  from offset 0.
- The same record flipped on all three running replicas: nobody can repair it. The master serves the
  messages before it with ``MESSAGE_CORRUPTED`` (not a 400), its queue index passes over it (other
  queues' consumers go on), ``/healthz`` is 503 naming it, the metric counts it, every replica's
  heartbeat says it is incomplete (``lossyRecovery``, ``maxOffset`` at the record) and the slaves leave
  the SyncStateSet. Once one slave's copy is good again, the master and the other slave repair from it.
- A slave that cannot repair (the planted ``no-repair``) leaves the SyncStateSet and is not elected
  when the master dies, though the election's tie-break favours it.
- The running master's copy flipped while a replica with a new disk copies the log: the master never
  ships the record (the old code did, and the replica was stuck at it for good); it repairs it from
  the other slave, and the new replica gets every message.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.broker.commitlog.segment import segment_name
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import Node
from mqha.testing.planted_bugs import NO_REPAIR_ENV
from mqha.wire.broker_api import MESSAGE_CORRUPTED
from tests.integration.controller_cluster import request

pytestmark = pytest.mark.integration

GROUP = "broker-a"
SEGMENT = 64 * 1024
MESSAGES = 1600


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path / "run",
        controllers=1,
        groups=1,
        replicas=3,
        broker_settings={
            "mappedFileSizeCommitLog": str(SEGMENT),
            "maxMessageSize": str(16 * 1024),
            "scrubCommitLogBytesPerSecond": str(16 * 1024 * 1024),
            "flushDiskType": "SYNC_FLUSH",
        },
    ) as local:
        yield local
    assert local.running_pids() == []


def _wait(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except OSError:  # a process still starting
            found = None
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _put_all(master: Node) -> list[dict[str, Any]]:
    """MESSAGES acknowledged messages, alternately of topics ``orders`` and ``audit``: their results."""
    results: list[dict[str, Any]] = []
    for first in range(0, MESSAGES, 100):
        batch = [
            {"topic": "orders" if i % 2 == 0 else "audit", "body": f"message-{i:05d}-" + "x" * 80}
            for i in range(first, first + 100)
        ]
        status, body = request("POST", master.url + "/v1/messages", {"messages": batch}, timeout=20.0)
        assert status == 200 and body["status"] == "PUT_OK", body
        results += body["results"]
    return results


def _flip(node: Node, offset: int) -> None:
    """Invert one byte of the segment file holding ``offset`` (as a disk's flipped bit would)."""
    base = offset - offset % SEGMENT
    with open(Path(node.store) / "commitlog" / segment_name(base), "r+b") as f:
        f.seek(offset - base)
        byte = f.read(1)[0]
        f.seek(offset - base)
        f.write(bytes([byte ^ 0x04]))


def _read_from_zero(node: Node) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every message ``node`` serves from offset 0, and the last reply (the one that stopped)."""
    out, offset = [], 0
    while True:
        status, body = request("GET", f"{node.url}/v1/messages?offset={offset}&maxMessages=256", timeout=5.0)
        assert status in (200, 503), body
        out += body.get("messages") or []
        if status != 200 or not body["messages"] or body.get("status") == MESSAGE_CORRUPTED:
            return out, body
        offset = body["nextOffset"]


def _status(node: Node) -> dict[str, Any]:
    status, body = request("GET", node.url + "/v1/status", timeout=3.0)
    assert status == 200, body
    return body


def _metric(node: Node, name: str) -> float | None:
    status, text = request("GET", node.url + "/metrics", timeout=3.0)
    assert status == 200
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def _heartbeats(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    status, body = request("GET", f"http://{cluster.controller_addresses[0]}/v1/controller/status")
    assert status == 200, body
    return {h["brokerAddr"]: h for h in body["heartbeats"] if h["brokerName"] == GROUP}


def _sync_state_set(cluster: LocalCluster) -> list[int]:
    status, body = request("GET", f"http://{cluster.controller_addresses[0]}/v1/controller/status")
    assert status == 200, body
    return next(g for g in body["state"]["groups"] if g["brokerName"] == GROUP)["syncStateSet"]


def _setup(cluster: LocalCluster) -> tuple[Node, list[Node], list[dict[str, Any]]]:
    cluster.wait_ready(60)
    master = cluster.master(GROUP, timeout=10)
    assert master is not None
    slaves = [node for node in cluster.group_brokers(GROUP) if node.name != master.name]
    results = _put_all(master)
    assert results[-1]["offset"] > 3 * SEGMENT  # several segments
    return master, slaves, results


def test_a_slave_with_a_flipped_bit_is_repaired_from_an_in_sync_replica(cluster: LocalCluster) -> None:
    master, slaves, results = _setup(cluster)
    slave = slaves[0]
    bad = results[100]  # in the first segment, far from the last
    assert bad["offset"] + bad["size"] < SEGMENT
    _wait("the slave to catch up", lambda: _status(slave)["maxOffset"] >= results[-1]["offset"])
    cluster.stop_node(slave)
    _flip(slave, bad["offset"] + bad["size"] - 10)  # a body byte
    cluster.start_node(slave, wait=False)

    integrity = _wait(
        "the slave's scrub to find and repair the record",
        lambda: (
            (s := cluster.broker_status(slave)) and s.get("integrity", {}).get("repaired") and s["integrity"]
        ),
    )
    assert integrity["found"] == 1
    (repair,) = integrity["repaired"]
    assert repair["offset"] == bad["offset"]
    assert repair["source"] in {master.address, slaves[1].address}  # an in-sync replica of the set
    assert integrity["damagedRecords"] == []
    assert _metric(slave, "mqha_broker_commitlog_records_repaired_total") == 1.0
    assert _metric(slave, "mqha_broker_commitlog_damaged_records") == 0.0

    # Healthy again: it serves every message from offset 0, byte for byte what was acknowledged.
    _wait("the slave's /healthz", lambda: request("GET", slave.url + "/healthz")[0] == 200)
    served = _wait(
        "the slave to serve every message", lambda: len((r := _read_from_zero(slave))[0]) >= MESSAGES and r
    )
    messages, last = served
    assert last.get("status") != MESSAGE_CORRUPTED, last
    assert [(m["offset"], m["msgId"]) for m in messages] == [(r["offset"], r["msgId"]) for r in results]
    assert messages[100]["body"] == f"message-{100:05d}-" + "x" * 80
    ids = {h["brokerId"] for h in _heartbeats(cluster).values()}
    _wait("the SyncStateSet to hold all three", lambda: sorted(_sync_state_set(cluster)) == sorted(ids))
    # The scrub's rate is a runtime key (updateBrokerConfig): 0 pauses it.
    code, body = request("PUT", slave.url + "/v1/config", {"scrubCommitLogBytesPerSecond": 0})
    assert code == 200, body
    assert _status(slave)["integrity"]["scrubBytesPerSecond"] == 0


def test_a_record_damaged_everywhere_is_served_around_and_repaired_from_a_good_copy(
    cluster: LocalCluster,
) -> None:
    master, slaves, results = _setup(cluster)
    nodes = [master, *slaves]
    for node in slaves:
        _wait("the slaves to catch up", lambda n=node: _status(n)["maxOffset"] >= results[-1]["offset"])
    bad = results[200]  # topic orders (even index), in the first segment
    assert bad["offset"] + bad["size"] < SEGMENT
    for node in nodes:  # the running replicas' files: the page cache the brokers read changes too
        _flip(node, bad["offset"] + bad["size"] - 10)

    for node in nodes:
        _wait(
            f"{node.name}'s scrub to find the record",
            lambda n=node: (
                [r["offset"] for r in _status(n)["integrity"]["damagedRecords"]] == [bad["offset"]]
            ),
        )
    code, health = request("GET", master.url + "/healthz")
    assert code == 503 and health["status"] == "degraded" and str(bad["offset"]) in health["remark"], health
    assert request("GET", master.url + "/livez")[0] == 200  # alive: Kubernetes must not restart it
    assert _metric(master, "mqha_broker_commitlog_damaged_records") == 1.0

    # Reads serve the 200 messages before it, then say MESSAGE_CORRUPTED (never a 400).
    messages, last = _read_from_zero(master)
    assert [m["msgId"] for m in messages] == [r["msgId"] for r in results[:200]]
    assert last["status"] == MESSAGE_CORRUPTED and last["corruptOffset"] == bad["offset"], last
    code, at_bad = request("GET", f"{master.url}/v1/messages?offset={bad['offset']}&maxMessages=8")
    assert code == 503 and at_bad["status"] == MESSAGE_CORRUPTED and at_bad["nextOffset"] == bad["offset"]

    # The queue index passes over it: the other topic's queue is read whole.
    audit, position = [], 0
    for _ in range(100):
        code, page = request(
            "GET", f"{master.url}/v1/queues/messages?topic=audit&queueId=0&offset={position}&maxMessages=256"
        )
        assert code == 200, page
        audit += page["messages"]
        if not page["messages"] and position >= results[-1]["offset"]:
            break
        position = page["nextOffset"]
    assert [m["msgId"] for m in audit] == [r["msgId"] for r in results[1::2]]

    # Every replica reports itself incomplete; the slaves stop replicating and leave the SyncStateSet.
    _wait(
        "every heartbeat to say lossy at the record",
        lambda: (
            all(h["lossyRecovery"] and h["maxOffset"] == bad["offset"] for h in _heartbeats(cluster).values())
            and len(_heartbeats(cluster)) == 3
        ),
        15,
    )
    master_id = _status(master)["controllerBrokerId"]
    _wait("the SyncStateSet to shrink to the master", lambda: _sync_state_set(cluster) == [master_id], 20)

    # One slave's copy becomes good again (flipped back): the others repair from it.
    _flip(slaves[1], bad["offset"] + bad["size"] - 10)
    for node in nodes:
        _wait(
            f"{node.name} to be repaired", lambda n=node: _status(n)["integrity"]["damagedRecords"] == [], 30
        )
    repaired = {node.name: _status(node)["integrity"]["repaired"] for node in nodes}
    assert repaired[slaves[1].name] == []  # its own copy became sound
    assert [r["source"] for r in repaired[master.name]] in ([slaves[1].address], [slaves[0].address])
    messages, last = _read_from_zero(master)
    assert last.get("status") != MESSAGE_CORRUPTED, last
    assert [m["msgId"] for m in messages] == [r["msgId"] for r in results]
    _wait("the SyncStateSet to hold all three again", lambda: len(_sync_state_set(cluster)) == 3, 30)


def test_a_replacement_replica_is_never_sent_the_masters_damaged_record(cluster: LocalCluster) -> None:
    master, slaves, results = _setup(cluster)
    for node in slaves:
        _wait("the slaves to catch up", lambda n=node: _status(n)["maxOffset"] >= results[-1]["offset"])
    victim = slaves[0]
    cluster.kill(victim)
    shutil.rmtree(victim.store)  # a new disk: it copies the whole log from the master again
    bad = results[300]
    _flip(master, bad["offset"] + bad["size"] - 10)
    cluster.start_node(victim, wait=False)

    # The master ships nothing of the record; its scrub finds it, it repairs it from the other slave,
    # and the new replica gets every message (the old code shipped it, and the replica was stuck there).
    served = _wait(
        "the new replica to serve every message",
        lambda: (r := _read_from_zero(victim)) and len(r[0]) >= MESSAGES and r,
        60,
    )
    assert [m["msgId"] for m in served[0]] == [r["msgId"] for r in results]
    repaired = _status(master)["integrity"]["repaired"]
    assert [(r["offset"], r["source"]) for r in repaired] == [(bad["offset"], slaves[1].address)]
    assert _metric(victim, "mqha_broker_commitlog_damaged_records_found_total") == 0.0


def test_a_damaged_slave_is_not_elected(cluster: LocalCluster) -> None:
    # The damaged slave is the one the election's tie-break favours (the lower id, the same log end), and
    # it cannot repair (the planted no-repair): it must stay out of the SyncStateSet, report itself
    # incomplete, and lose the election to the healthy slave when the master dies.
    master, slaves, results = _setup(cluster)
    ids = {node.name: _status(node)["controllerBrokerId"] for node in slaves}
    damaged, healthy = sorted(slaves, key=lambda node: ids[node.name])
    for node in slaves:
        _wait("the slaves to catch up", lambda n=node: _status(n)["maxOffset"] >= results[-1]["offset"])
    bad = results[100]
    cluster.stop_node(damaged)
    cluster.node_env[damaged.name] = {NO_REPAIR_ENV: "1"}
    _flip(damaged, bad["offset"] + bad["size"] - 10)
    cluster.start_node(damaged, wait=False)
    _wait(
        "the damaged slave to report itself incomplete",
        lambda: (
            (h := _heartbeats(cluster).get(damaged.address))
            and h["lossyRecovery"]
            and h["maxOffset"] == bad["offset"]
        ),
    )
    master_id = _status(master)["controllerBrokerId"]
    _wait(
        "the SyncStateSet without the damaged slave",
        lambda: sorted(_sync_state_set(cluster)) == sorted([master_id, ids[healthy.name]]),
    )
    cluster.kill(master)
    elected = _wait("a new master", lambda: cluster.master(GROUP), 30)
    assert elected.name == healthy.name
    messages, _ = _wait(
        "the new master to serve every message",
        lambda: (r := _read_from_zero(elected)) and len(r[0]) >= MESSAGES and r,
    )
    assert [m["msgId"] for m in messages] == [r["msgId"] for r in results]
