"""Issue 45 finding 1 with real processes: one live process per broker id.

A second process that claims the id of a live replica is refused by the controllers and stops with one
line; no two processes are ever MASTER at one masterEpoch, and after the real master's ``kill -9`` no
acknowledged (PUT_OK) message is missing on any replica. Both variants of the issue:

* **slave-id**: a slave's ``brokerIdentity`` names the master's id (the issue's flipped bit, ``#1`` ->
  ``#3``, in the file format older brokers write, which carries no checksum): the slave is restarted
  with it while the master lives.
* **master-id**: a copy of the running master's store is started as a fourth replica (the operator's
  clone): it claims the master's id from another address. Once the master is dead, the same copy is a
  moved store: it takes the id as a slave and catches up; after ``mqha store reset-identity`` it joins
  as a new replica with its own store id.

Before the fix the controllers took both processes under one id: the second one came up MASTER at the
master's epoch (the register reply named its id as the live master), and acknowledged messages were
lost after a master kill (docs/architecture.md §3.2, "One live process per broker id").
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest

from mqha.client import SendResult, SyncProducer
from mqha.cluster.checking import read_replica_log
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import Node
from mqha.cluster.workload import ProduceWorkload

pytestmark = pytest.mark.integration

GROUP = "broker-a"
SPARE = f"{GROUP}-3"  # started only by the master-id variant, from a copy of the master's store
TOPIC = "identity"
STOPS_WITHIN = 30.0  # seconds for a refused process to exit


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.1)


class MasterWatch:
    """Samples every broker's ``/v1/status`` on a thread: which processes were unfenced MASTER at which
    masterEpoch."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.masters: dict[int, set[str]] = {}  # masterEpoch -> node names seen MASTER at it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MasterWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for node in self.cluster.group_brokers(GROUP):
                if not self.cluster.is_running(node):
                    continue
                status = self.cluster.broker_status(node, timeout=0.5)
                if status and status.get("role") == "MASTER" and not status.get("fenced"):
                    self.masters.setdefault(int(status.get("masterEpoch") or 0), set()).add(node.name)
            self._stop.wait(0.05)

    def assert_one_master_per_epoch(self) -> None:
        shared = {epoch: names for epoch, names in self.masters.items() if len(names) > 1}
        assert not shared, f"two processes MASTER at one masterEpoch: {shared}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path, controllers=3, groups=1, replicas=4)
    try:
        local.start(wait=False, timeout=60, later=[SPARE])
        wait_for(lambda: local.group_ready(GROUP, 3), 60, "a master and a SyncStateSet of 3")
        yield local
    finally:
        local.stop()
    assert local.running_pids() == []


def put(cluster: LocalCluster, count: int, start: int) -> list[SendResult]:
    with SyncProducer(cluster.controller_addresses, GROUP) as producer:
        return [producer.send(TOPIC, f"identity-{start + i}") for i in range(count)]


def broker_id(cluster: LocalCluster, node: Node) -> int:
    status = cluster.broker_status(node, timeout=2.0)
    assert status is not None and status.get("controllerBrokerId") is not None, status
    return int(status["controllerBrokerId"])


def served(node: Node) -> dict[int, str]:
    """What a replica serves (offset -> msgId); nothing yet while it answers 503 (a slave whose log is
    not verified against its master yet)."""
    try:
        return {row["offset"]: row["msgId"] for row in read_replica_log(node)}
    except urllib.error.HTTPError as exc:
        if exc.code != 503:
            raise
        return {}


def running_brokers(cluster: LocalCluster) -> list[Node]:
    return [b for b in cluster.group_brokers(GROUP) if cluster.is_running(b)]


def assert_refused_and_stopped(cluster: LocalCluster, node: Node, holder: Node) -> None:
    """``node`` exits on its own with one line naming the id's holder and what to do."""
    wait_for(lambda: not cluster.is_running(node), STOPS_WITHIN, f"{node.name} to stop")
    crashed = dict(cluster.processes.crashed())
    assert crashed.get(node.name) == 1, (crashed, cluster.log_tail(node))
    last = [line for line in node.log.read_text().splitlines() if line.startswith("mqbroker: ")]
    assert last, cluster.log_tail(node)
    assert holder.address in last[-1] and "another live process" in last[-1], last[-1]
    assert "mqha store reset-identity" in last[-1], last[-1]


def kill_master_and_check(cluster: LocalCluster, acked: list[SendResult], watch: MasterWatch) -> None:
    """kill -9 the master under load, then: a new master, every acknowledged message on every running
    replica, one master per epoch."""
    with ProduceWorkload(cluster.controller_addresses, GROUP, concurrency=2, topic=TOPIC) as workload:
        workload.wait_acked(20, timeout=30)
        master = cluster.master(GROUP, timeout=10)
        assert master is not None
        cluster.kill(master)
        wait_for(
            lambda: (m := cluster.master(GROUP)) is not None and m.name != master.name, 30, "a new master"
        )
        workload.wait_acked(workload.acked + 20, timeout=30)
    acked += [r for r in workload.snapshot() if r.ok]
    end = max(r.offset or 0 for r in acked)
    running = [b for b in cluster.group_brokers(GROUP) if cluster.is_running(b)]
    assert running, "no replica left"

    seen: dict[str, dict[int, str]] = {}

    def caught_up() -> bool:
        seen.update({b.name: served(b) for b in running})
        return all(max(log, default=-1) >= end for log in seen.values())

    wait_for(caught_up, 30, "replicas caught up")
    watch.assert_one_master_per_epoch()
    missing = {name: [r.offset for r in acked if log.get(r.offset) != r.msg_id] for name, log in seen.items()}
    assert not any(missing.values()), f"acknowledged messages missing (offsets per replica): {missing}"


def test_a_slave_naming_the_masters_id_is_refused(cluster: LocalCluster) -> None:
    with MasterWatch(cluster) as watch:
        acked = put(cluster, 30, 0)
        master = cluster.master(GROUP, timeout=10)
        assert master is not None
        slave = next(b for b in cluster.group_brokers(GROUP) if b.name not in (master.name, SPARE))
        cluster.stop_node(slave)
        # The bit flip: the slave's identity now names the master's id (the format of older
        # brokers, no checksum: a checksummed file with a flipped bit is refused at start, unit-tested).
        identity = slave.store / "brokerIdentity"
        identity.write_text(f"{cluster.cluster_name}#{GROUP}#{broker_id(cluster, master)}")
        cluster.start_node(slave, wait=False)
        acked += put(cluster, 30, 30)  # the master keeps acknowledging meanwhile
        assert_refused_and_stopped(cluster, slave, master)
        assert cluster.master(GROUP, timeout=10) == master
        kill_master_and_check(cluster, acked, watch)


def test_a_clone_of_the_masters_store_is_refused(cluster: LocalCluster) -> None:
    with MasterWatch(cluster) as watch:
        acked = put(cluster, 30, 0)
        master = cluster.master(GROUP, timeout=10)
        assert master is not None
        spare = cluster.node(SPARE)
        shutil.copytree(master.store, spare.store, ignore=shutil.ignore_patterns("*.pid"))
        cluster.start_node(spare, wait=False)
        acked += put(cluster, 30, 30)
        assert_refused_and_stopped(cluster, spare, master)
        assert cluster.master(GROUP, timeout=10) == master
        master_id = broker_id(cluster, master)
        kill_master_and_check(cluster, acked, watch)
        # Its holder gone, the copy is a moved store: it takes the id (a slave now) and catches up.
        cluster.start_node(spare)
        wait_for(
            lambda: (cluster.broker_status(spare) or {}).get("role") == "SLAVE", 30, "the moved store a slave"
        )
        assert broker_id(cluster, spare) == master_id
        end = max(r.offset or 0 for r in acked)
        wait_for(lambda: max(served(spare), default=-1) >= end, 30, "catch-up")
        log = served(spare)
        assert [r.offset for r in acked if log.get(r.offset) != r.msg_id] == []
        watch.assert_one_master_per_epoch()
        cluster.stop_node(spare)
        # The documented way to make the copy a replica of its own: a new store id and broker id.
        reset = subprocess.run(
            [sys.executable, "-m", "mqha", "store", "reset-identity", "-c", str(spare.conf)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert reset.returncode == 0 and "new replica" in reset.stdout, (reset.stdout, reset.stderr)
        cluster.start_node(spare)
        wait_for(lambda: (cluster.broker_status(spare) or {}).get("role") == "SLAVE", 30, "the copy a slave")
        others = {
            broker_id(cluster, b)
            for b in cluster.group_brokers(GROUP)
            if b != spare and cluster.is_running(b)
        }
        assert broker_id(cluster, spare) not in others | {1, 2, 3}
        stores = {
            b.name: (cluster.broker_status(b) or {}).get("replicasManager", {}).get("storeId")
            for b in running_brokers(cluster)
        }
        assert None not in stores.values() and len(set(stores.values())) == len(stores), stores
        watch.assert_one_master_per_epoch()


def test_a_session_cannot_speak_for_or_close_the_masters_id(cluster: LocalCluster) -> None:
    # Issue 45 finding 5's second half: a broker session (here opened directly: authentication is off,
    # the replayed upgrade is the signatures' part) sent one heartbeat for the master's id and closed,
    # and the leader elected a new master. Now a session is bound to the process that opened it, and
    # the master's own session carries its entry on.
    master = cluster.master(GROUP, timeout=10)
    leader = cluster.controller_leader()
    assert master is not None and leader is not None
    status = cluster.broker_status(master, timeout=2.0)
    assert status is not None
    epoch, master_id = status["masterEpoch"], status["controllerBrokerId"]
    incarnation = status["startReport"]["incarnation"]  # public: /v1/status, the console
    beat = {"clusterName": cluster.cluster_name, "brokerName": GROUP, "brokerId": master_id}

    async def speak(*heartbeats: dict[str, object], answers: int) -> list[dict[str, object]]:
        """Send the heartbeats on one session, read ``answers`` answers (an accepted heartbeat gets
        none), then close it."""
        got: list[dict[str, object]] = []
        async with aiohttp.ClientSession() as http, http.ws_connect(f"{leader.url}/v1/brokers/session") as ws:
            for heartbeat in heartbeats:
                await ws.send_str(json.dumps(heartbeat))
            while len(got) < answers:
                message = await asyncio.wait_for(ws.receive(), 10)
                assert message.type == aiohttp.WSMsgType.TEXT, message
                got.append(json.loads(message.data))
        return got

    itself = {**beat, "brokerAddr": master.address, "incarnation": incarnation}
    asyncio.run(speak(itself, answers=0))  # a copy of the master's own heartbeat, then the close
    time.sleep(2.0)  # an election would have happened at the close, within milliseconds
    assert cluster.master(GROUP, timeout=5) == master
    now = cluster.broker_status(master, timeout=2.0)
    assert now is not None and now["masterEpoch"] == epoch and not now["fenced"], now

    elsewhere = {**beat, "brokerAddr": "127.0.0.1:1", "incarnation": "f" * 32}
    another_process = {**beat, "brokerAddr": master.address, "incarnation": "f" * 32}
    refused = asyncio.run(speak(elsewhere, another_process, answers=2))
    assert [answer["codeName"] for answer in refused] == [
        "CONTROLLER_BROKER_ID_INVALID",  # the id is held at another address
        "CONTROLLER_INVALID_REQUEST",  # the holder's session is open: not a restart
    ], refused
    # The first accepted heartbeat binds the session: nothing for another id goes on it.
    other_id = {**beat, "brokerId": master_id % 3 + 1, "brokerAddr": "127.0.0.1:2", "incarnation": "e" * 32}
    answers = asyncio.run(speak(itself, other_id, answers=1))
    assert len(answers) == 1 and "bound to broker" in str(answers[0]["remark"]), answers
    assert cluster.master(GROUP, timeout=5) == master
