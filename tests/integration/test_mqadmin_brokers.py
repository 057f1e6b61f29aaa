"""``mqadmin getBrokerEpoch`` / ``haStatus`` against real ``mqbroker`` processes (docs/reference-behaviour.md
§19, §9.8, §10.7).

3 ``mqcontroller`` + 2 ``mqbroker`` of one set (``bs1`` in cluster ``c1``) on 127.0.0.1. The broker
addresses are found through the controller (sync-state-data -> replica addresses); the expected
lines are built from the brokers' own ``/v1/status`` and ``/v1/ha/status``. ``BrokerSet`` is also
used by ``test_metrics_scrape.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.processes import ProcessGroup, free_port, wait_healthy, wait_until
from tests.integration.broker_processes import BROKER_NAME, BROKER_TEST_SETTINGS, CLUSTER_NAME, Broker
from tests.integration.controller_cluster import ControllerCluster, request
from tests.integration.test_mqadmin import fails, mqadmin, ok

pytestmark = pytest.mark.integration

# Fast timings so the set forms in about a second on a loaded machine.
BROKER_SETTINGS = {**BROKER_TEST_SETTINGS, "controllerHeartBeatTimeoutMills": "2000"}


@dataclass
class BrokerSet:
    """A controller cluster and the brokers of one set, started through one ProcessGroup."""

    controllers: ControllerCluster
    brokers: list[Broker]

    @property
    def controller_addresses(self) -> str:
        return ";".join(n.address for n in self.controllers.nodes)

    @classmethod
    def start(cls, group: ProcessGroup, base: Path, replicas: int = 2) -> BrokerSet:
        controllers = ControllerCluster(group, base / "controllers")
        controllers.start()
        controllers.leader(timeout=10)
        addresses = ";".join(n.address for n in controllers.nodes)
        brokers = [Broker(f"r{i}", base / f"r{i}", BROKER_SETTINGS) for i in range(replicas)]
        for broker in brokers:
            broker.launch(group, addresses)
        wait_healthy([(broker.proc, broker.url) for broker in brokers])
        return cls(controllers, brokers)

    def master(self) -> Broker:
        return next(b for b in self.brokers if b.get("/v1/status")["role"] == "MASTER")

    def slaves(self) -> list[Broker]:
        master = self.master()
        return [b for b in self.brokers if b is not master]

    def wait_replicated(self, messages: int = 3, timeout: float = 30) -> Broker:
        """Wait for a master whose SyncStateSet holds every replica, put ``messages``, wait until every
        slave holds them; returns the master."""

        def full_set() -> Broker | None:
            for broker in self.brokers:
                status = broker.get("/v1/status")
                if status["role"] == "MASTER" and len(status["syncStateSet"]) == len(self.brokers):
                    return broker
            return None

        master = wait_until(full_set, timeout, interval=0.1, message="a master with every replica in sync")
        bodies = [{"topic": "t", "body": f"m{i}"} for i in range(messages)]
        status, reply = request("POST", master.url + "/v1/messages", {"messages": bodies}, timeout=10)
        assert status == 200 and reply["status"] == "PUT_OK", reply
        top = master.get("/v1/status")["maxOffset"]
        wait_until(
            lambda: all(b.get("/v1/status")["maxOffset"] == top for b in self.brokers),
            timeout,
            interval=0.1,
            message="every slave caught up",
        )
        return master


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerSet]:
    with ProcessGroup() as group:
        broker_set = BrokerSet.start(group, tmp_path_factory.mktemp("mqadmin-brokers"))
        broker_set.wait_replicated()
        yield broker_set


def test_get_broker_epoch_of_every_replica(brokers: BrokerSet) -> None:
    master, slave = brokers.master(), brokers.slaves()[0]
    expected: list[str] = []
    for broker in (master, slave):  # the master first; its brokerId is 0 (docs/reference-behaviour.md §9.8)
        status = broker.get("/v1/status")
        expected += [
            "",
            f"#clusterName\t{CLUSTER_NAME}",
            f"#brokerName\t{BROKER_NAME}",
            f"#brokerAddr\t{broker.address}",
            f"#brokerId\t{0 if broker is master else status['controllerBrokerId']}",
            f"#Epoch: EpochEntry{{epoch=1, startOffset=0, endOffset={status['maxOffset']}}}",
        ]
    expected.append("")
    assert ok("getBrokerEpoch", "-a", brokers.controller_addresses, "-b", BROKER_NAME) == expected
    assert ok("getBrokerEpoch", "-a", brokers.controllers.nodes[2].address, "-c", CLUSTER_NAME) == expected
    doc = json.loads(ok("getBrokerEpoch", "-a", brokers.controller_addresses, "-b", BROKER_NAME, "--json")[0])
    assert [b["brokerAddr"] for b in doc["brokers"]] == [master.address, slave.address]
    assert doc["brokers"][0]["epochList"][0]["epoch"] == 1


def test_get_broker_epoch_errors(brokers: BrokerSet) -> None:
    addresses = brokers.controller_addresses
    fails("getBrokerEpoch", "-a", addresses, "-b", "nope", code=2008, mentions="'nope' is not known")
    fails("getBrokerEpoch", "-a", addresses, "-c", "nope", code=2008, mentions="cluster 'nope'")
    fails("getBrokerEpoch", "-a", f"127.0.0.1:{free_port()}", "-b", BROKER_NAME, exit_code=3, code=10001)
    fails("getBrokerEpoch", "-a", addresses, exit_code=2, mentions="one of -b brokerName or -c clusterName")
    fails("getBrokerEpoch", "-b", BROKER_NAME, exit_code=2, mentions="-a/--controllerAddress")


def test_ha_status_of_the_master_and_of_a_slave(brokers: BrokerSet) -> None:
    master, slave = brokers.master(), brokers.slaves()[0]
    info = master.get("/v1/ha/status")
    top = info["masterCommitLogMaxOffset"]
    (conn,) = info["haConnectionInfo"]
    lines = ok("haStatus", "-b", master.address)
    assert lines[:5] == [
        "",
        f"#MasterAddr\t{master.address}",
        f"#MasterCommitLogMaxOffset\t{top}",
        "#SlaveNum\t1",
        "#InSyncSlaveNum\t1",
    ]
    assert lines[5].split() == [
        "#SlaveAddr",
        "#SlaveAckOffset",
        "#Diff",
        "#TransferSpeed(KB/s)",
        "#Status",
        "#TransferFromWhere",
    ]
    row = lines[6].split()
    assert row[:3] == [conn["addr"], str(top), "0"] and re.fullmatch(r"\d+\.\d\d", row[3]) and row[4] == "OK"
    assert lines[7:] == [""]
    # -c: the masters of the cluster, found through the controller.
    by_cluster = ok("haStatus", "-a", brokers.controller_addresses, "-c", CLUSTER_NAME)
    assert by_cluster[:5] == lines[:5] and len(by_cluster) == len(lines)

    status = slave.get("/v1/status")
    slave_lines = ok("haStatus", "-b", slave.address)
    assert slave_lines[:3] == ["", f"#MasterAddr\t{status['masterHaAddress']}", f"#CommitLogMaxOffset\t{top}"]
    assert re.fullmatch(r"#TransferSpeed\(KB/s\)\t\d+\.\d\d", slave_lines[3])
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    assert re.fullmatch(rf"#LastReadTime\t{stamp}", slave_lines[4]), slave_lines
    assert re.fullmatch(rf"#LastWriteTime\t{stamp}", slave_lines[5]), slave_lines
    assert re.fullmatch(r"#MasterFlushOffset\t-?\d+", slave_lines[6]) and slave_lines[7:] == [""]
    doc = json.loads(ok("haStatus", "-b", slave.address, "--json")[0])
    assert doc["brokers"][0]["master"] is False


def test_ha_status_errors(brokers: BrokerSet) -> None:
    fails("haStatus", "-b", f"127.0.0.1:{free_port()}", exit_code=3, code=10001, mentions="cannot connect")
    fails("haStatus", "-a", brokers.controller_addresses, "-c", "nope", code=2008, mentions="cluster 'nope'")
    fails("haStatus", "-a", f"127.0.0.1:{free_port()}", "-c", CLUSTER_NAME, exit_code=3, code=10001)
    fails("haStatus", "-c", CLUSTER_NAME, exit_code=2, mentions="-c needs -a")
    fails("haStatus", exit_code=2, mentions="one of -b brokerAddr or -c clusterName")
    fails("haStatus", "-b", "not-an-address", exit_code=2, mentions="expected host:port")


def test_get_broker_epoch_skips_a_stopped_replica(brokers: BrokerSet) -> None:
    """Last: stops the slave. The controller sees its session close and reports it not alive."""
    master, slave = brokers.master(), brokers.slaves()[0]
    assert slave.proc is not None
    slave.proc.stop()

    def slave_dead() -> bool:
        out = ok("getSyncStateSet", "-a", brokers.controller_addresses, "-b", BROKER_NAME)
        return any(f"brokerAddress='{slave.address}', alive=false" in line for line in out)

    wait_until(slave_dead, 15, interval=0.2, message="the controller sees the slave down")
    done = mqadmin("getBrokerEpoch", "-a", brokers.controller_addresses, "-b", BROKER_NAME)
    assert done.returncode == 0, done
    assert [line for line in done.stdout.split("\n") if line.startswith("#brokerAddr")] == [
        f"#brokerAddr\t{master.address}"
    ]
    assert f"skipped {slave.address}" in done.stderr and "not alive" in done.stderr
