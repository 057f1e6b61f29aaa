"""mqadmin's broker commands against real processes (docs/architecture.md §6, docs/config.md): clusterList,
brokerStatus, getBrokerConfig, updateBrokerConfig, and config changes that survive a restart.

3 ``mqcontroller`` + 2 ``mqbroker`` of one set (``bs1`` in cluster ``c1``) on 127.0.0.1. Expected lines
are built from the brokers' own ``/v1/status`` and ``/v1/config``.

``updateBrokerConfig haMaxTimeSlaveNotCatchup``: with the test value (3000 ms) a paused slave leaves the
SyncStateSet within 14 s (the puts fill the link's socket buffers in a few seconds, then 3 s pass);
after the update to 16000 it stays in it for 14 s under puts, and after the update back to 3000 it
leaves again: the change takes effect at once. A broker restarted from its ``-c`` file keeps the
value. ``updateControllerConfig`` is checked the same way across a restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.helpers.processes import ProcessGroup, free_port, wait_healthy, wait_until
from tests.integration.broker_processes import BROKER_NAME, CLUSTER_NAME, Broker, mqbroker_command
from tests.integration.controller_cluster import ControllerCluster, mqcontroller_command, request
from tests.integration.test_mqadmin import fails, mqadmin, ok
from tests.integration.test_mqadmin_brokers import BROKER_SETTINGS, BrokerSet

pytestmark = pytest.mark.integration


# A paused slave's HA link must outlive the windows below (a closed link drops it from the set at once),
# and puts must not wait for it (allAckInSyncStateSet=false): they fill the link's socket buffers, so
# the master stops counting the paused slave as caught up.
SETTINGS = {
    **BROKER_SETTINGS,
    "haHousekeepingInterval": "30000",
    "allAckInSyncStateSet": "false",
    "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
}
BATCH = {"messages": [{"topic": "t", "body": "x" * 60000} for _ in range(8)]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProcessGroup, BrokerSet]]:
    base = tmp_path_factory.mktemp("mqadmin-broker-config")
    with ProcessGroup() as group:
        controllers = ControllerCluster(group, base / "controllers")
        controllers.start()
        controllers.leader(timeout=10)
        addresses = ";".join(n.address for n in controllers.nodes)
        brokers = [Broker(f"r{i}", base / f"r{i}", SETTINGS) for i in range(2)]
        for broker in brokers:
            broker.launch(group, addresses)
        wait_healthy([(broker.proc, broker.url) for broker in brokers])
        broker_set = BrokerSet(controllers, brokers)
        broker_set.wait_replicated()
        yield group, broker_set


def test_cluster_list(cluster: tuple[ProcessGroup, BrokerSet]) -> None:
    _, brokers = cluster
    master, slave = brokers.master(), brokers.slaves()[0]
    lines = ok("clusterList", "-a", brokers.controller_addresses)
    assert lines[0].split() == [
        "#Cluster",
        "Name",
        "#Broker",
        "Name",
        "#BID",
        "#Addr",
        "#Version",
        "#SPACE",
        "#ACTIVATED",
    ]
    rows = [line.split() for line in lines[1:] if line]
    slave_id = slave.get("/v1/status")["controllerBrokerId"]
    version = master.get("/v1/status")["brokerVersionDesc"]  # "mqha X.Y.Z": two words
    assert [row[:4] for row in rows] == [
        [CLUSTER_NAME, BROKER_NAME, "0", master.address],  # RocketMQ: the master's BID is 0
        [CLUSTER_NAME, BROKER_NAME, str(slave_id), slave.address],
    ]
    for row in rows:
        assert " ".join(row[4:6]) == version and row[7] == "true"
        assert 0 <= float(row[6]) <= 1
    assert ok("clusterList", "-a", brokers.controller_addresses, "-c", CLUSTER_NAME) == lines
    doc = json.loads(ok("clusterList", "-a", brokers.controller_addresses, "--json")[0])
    assert [b["brokerAddr"] for b in doc["brokers"]] == [master.address, slave.address]
    assert doc["brokers"][1]["controllerBrokerId"] == slave_id
    # The master's two ids (docs/architecture.md §6): role id 0 in clusterList and brokerStatus, its
    # controller id in getSyncStateSet, clusterList --json and brokerStatus' controllerBrokerId.
    sync = ok("getSyncStateSet", "-a", brokers.controller_addresses, "-b", BROKER_NAME)
    master_id = int(next(line for line in sync if line.startswith("#MasterBrokerId")).split("\t")[1])
    assert master_id >= 1 and doc["brokers"][0]["brokerId"] == 0
    assert doc["brokers"][0]["controllerBrokerId"] == master_id
    status = dict(line.split(": ", 1) for line in ok("brokerStatus", "-b", master.address) if line)
    assert (status["brokerId".ljust(32)], status["controllerBrokerId".ljust(32)]) == ("0", str(master_id))
    fails(
        "clusterList", "-a", brokers.controller_addresses, "-c", "nope", code=2008, mentions="cluster 'nope'"
    )


def test_broker_status(cluster: tuple[ProcessGroup, BrokerSet]) -> None:
    _, brokers = cluster
    master = brokers.master()
    lines = [line for line in ok("brokerStatus", "-b", master.address) if line]
    table = dict(line.split(": ", 1) for line in lines)
    assert [key.rstrip() for key in table] == sorted(key.rstrip() for key in table)
    assert all(len(key) >= 32 for key in table)  # RocketMQ's %-32s
    values = {key.rstrip(): value for key, value in table.items()}
    status = master.get("/v1/status")
    assert values["role"] == "MASTER" and values["brokerName"] == BROKER_NAME
    assert values["totalReplicas"] == "1" and values["brokerVersionDesc"] == status["brokerVersionDesc"]
    assert values["replicasManager.state"] == str(status["replicasManager"]["state"])
    by_cluster = [
        line for line in ok("brokerStatus", "-a", brokers.controller_addresses, "-c", CLUSTER_NAME) if line
    ]
    assert {line.split()[0] for line in by_cluster} == {b.address for b in brokers.brokers}
    doc = json.loads(ok("brokerStatus", "-b", master.address, "--json")[0])
    assert doc["brokers"][master.address]["role"] == "MASTER"
    fails("brokerStatus", exit_code=2, mentions="one of -b brokerAddr or -c clusterName")
    fails("brokerStatus", "-c", CLUSTER_NAME, exit_code=2, mentions="-c needs -a")
    fails("brokerStatus", "-b", f"127.0.0.1:{free_port()}", exit_code=3, code=10001)


def test_get_broker_config(cluster: tuple[ProcessGroup, BrokerSet]) -> None:
    _, brokers = cluster
    master, slave = brokers.master(), brokers.slaves()[0]
    config = master.get("/v1/config")["config"]
    lines = ok("getBrokerConfig", "-b", master.address)
    assert lines[0] == f"============{master.address}============"
    assert lines[1:-2] == [f"{key:<50}=  {_text(config[key])}" for key in sorted(config)]
    assert lines[-2:] == ["", ""]
    by_cluster = ok("getBrokerConfig", "-a", brokers.controller_addresses, "-c", CLUSTER_NAME)
    banners = [line for line in by_cluster if line.startswith("====")]
    assert banners == [
        f"============Master: {master.address}============",
        f"============My Master: {master.address}=====Slave: {slave.address}============",
    ]
    doc = json.loads(ok("getBrokerConfig", "-b", master.address, "--json")[0])
    assert doc["configs"][master.address]["brokerName"] == BROKER_NAME


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _pause(broker: Broker) -> None:
    assert broker.proc is not None
    os.kill(broker.proc.pid, signal.SIGSTOP)


def _resume(broker: Broker) -> None:
    assert broker.proc is not None
    os.kill(broker.proc.pid, signal.SIGCONT)


def _in_set_while_paused(brokers: BrokerSet, master: Broker, slave: Broker, seconds: float) -> float | None:
    """Pause the slave and put messages for up to ``seconds``; when the slave left the master's
    SyncStateSet, after how many seconds (None: it stayed)."""
    slave_id = slave.get("/v1/status")["controllerBrokerId"]
    started = time.monotonic()
    _pause(slave)
    try:
        while time.monotonic() - started < seconds:
            request("POST", master.url + "/v1/messages", BATCH, timeout=5)
            if slave_id not in master.get("/v1/status")["syncStateSet"]:
                return time.monotonic() - started
            time.sleep(0.1)
        return None
    finally:
        _resume(slave)
        brokers.wait_replicated(messages=1)


def test_update_broker_config_takes_effect_at_once_and_survives_a_restart(
    cluster: tuple[ProcessGroup, BrokerSet],
) -> None:
    group, brokers = cluster
    addresses = brokers.controller_addresses
    master, slave = brokers.master(), brokers.slaves()[0]
    out = ok(
        "updateBrokerConfig",
        "-a",
        addresses,
        "-c",
        CLUSTER_NAME,
        "-k",
        "haMaxTimeSlaveNotCatchup",
        "-v",
        "16000",
    )
    assert out == [
        f"update broker config success, {master.address}",
        f"update broker config success, {slave.address}",
        "",
    ]
    assert master.get("/v1/config")["config"]["haMaxTimeSlaveNotCatchup"] == 16000
    assert _in_set_while_paused(brokers, master, slave, 14.0) is None  # with 3000: gone in 6-10 s
    ok("updateBrokerConfig", "-b", master.address, "-k", "haMaxTimeSlaveNotCatchup", "-v", "3000")
    left = _in_set_while_paused(brokers, master, slave, 14.0)
    assert left is not None and left < 14.0
    print(f"haMaxTimeSlaveNotCatchup=3000: the paused slave left the SyncStateSet after {left:.1f} s")
    ok("updateBrokerConfig", "-b", master.address, "-k", "haMaxTimeSlaveNotCatchup", "-v", "16000")

    # A key that needs a restart, a bad value and an unknown key are refused; nothing changes.
    fails(
        "updateBrokerConfig", "-b", slave.address, "-k", "listenPort", "-v", "1", code=16, mentions="restart"
    )
    fails(
        "updateBrokerConfig",
        "-b",
        slave.address,
        "-k",
        "haMaxTimeSlaveNotCatchup",
        "-v",
        "0",
        code=1,
        mentions="within",
    )
    fails("updateBrokerConfig", "-b", slave.address, "-k", "nope", "-v", "1", code=16)

    # The slave restarts from its -c file: the value is there, from that file (-p says so).
    conf = slave.base / "broker.conf"
    printed = subprocess.run(
        [*mqbroker_command(), "-c", str(conf), "-p"], capture_output=True, text=True, check=True
    )
    section = printed.stdout.split(f"# from {conf}\n", 1)[1].split("# from ", 1)[0]
    assert "haMaxTimeSlaveNotCatchup=16000\n" in section
    assert slave.proc is not None
    slave.proc.stop()
    slave.proc = group.start(
        [*mqbroker_command(), "-c", str(conf)], log_path=slave.base / "broker-2.log", name="mqbroker-r1b"
    )
    wait_healthy([(slave.proc, slave.url)])
    assert slave.get("/v1/config")["config"]["haMaxTimeSlaveNotCatchup"] == 16000
    lines = ok("getBrokerConfig", "-b", slave.address)
    assert f"{'haMaxTimeSlaveNotCatchup':<50}=  16000" in lines


def test_update_broker_config_needs_the_admin_token(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With adminAuthToken set, updateBrokerConfig without --token is refused (401, code 16)."""
    base = tmp_path_factory.mktemp("broker-token")
    from tests.integration.broker_processes import BROKER_TEST_SETTINGS

    broker = Broker("t0", base, {**BROKER_TEST_SETTINGS, "adminAuthToken": "s3cret-token-of-32-characters-x"})
    with ProcessGroup() as group:
        broker.launch(group, f"127.0.0.1:{free_port()}")  # no controller: the API serves anyway
        wait_healthy([(broker.proc, broker.url)])
        fails(
            "updateBrokerConfig",
            "-b",
            broker.address,
            "-k",
            "haMaxTimeSlaveNotCatchup",
            "-v",
            "5000",
            code=16,
        )
        assert ok(
            "updateBrokerConfig",
            "-b",
            broker.address,
            "-k",
            "haMaxTimeSlaveNotCatchup",
            "-v",
            "5000",
            "--token",
            "s3cret-token-of-32-characters-x",
        ) == [f"update broker config success, {broker.address}", ""]


def test_update_controller_config_survives_a_restart(cluster: tuple[ProcessGroup, BrokerSet]) -> None:
    group, brokers = cluster
    node = brokers.controllers.nodes[2]
    key_line = f"{'scanNotActiveBrokerInterval':<50}=  "
    before = ok("getControllerConfig", "-a", node.address)
    assert f"{key_line}500" in before or any(line.startswith(key_line) for line in before)
    out = ok("updateControllerConfig", "-a", node.address, "-k", "scanNotActiveBrokerInterval", "-v", "600")
    assert out == [
        f"update controller config success![{node.address}]",
        "scanNotActiveBrokerInterval : 600",
        "",
    ]
    assert f"{key_line}600" in ok("getControllerConfig", "-a", node.address)
    printed = subprocess.run(
        [*mqcontroller_command(), "-c", str(node.conf), "-p"], capture_output=True, text=True, check=True
    )
    store = node.base / "controller.properties"
    assert f"# from {store}\nscanNotActiveBrokerInterval=600\n" in printed.stdout
    assert node.proc is not None
    node.proc.stop()
    node.proc = group.start(
        [*mqcontroller_command(), "-c", str(node.conf)],
        log_path=node.base / "controller-2.log",
        name="mqcontroller-n2b",
    )
    wait_healthy([(node.proc, node.url)])
    wait_until(
        lambda: f"{key_line}600" in ok("getControllerConfig", "-a", node.address),
        10,
        message="600 after restart",
    )


def test_mqadmin_help_lists_the_broker_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mqha.admin_cli", "--help"], capture_output=True, text=True, check=True
    )
    for name in ("clusterList", "brokerStatus", "getBrokerConfig", "updateBrokerConfig"):
        assert name in done.stdout
    assert mqadmin("updateBrokerConfig", "-h").returncode == 0


def test_metrics_exporter_type_prom_serves_metrics_on_its_port(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``metricsExporterType=PROM`` is mapped: RocketMQ's exporter port serves the API port's /metrics."""
    port = free_port()
    settings = {"metricsExporterType": "PROM", "metricsPromExporterPort": str(port)}
    with ProcessGroup() as group:
        controllers = ControllerCluster(group, tmp_path_factory.mktemp("prom"), size=1, settings=settings)
        controllers.start()
        status, body = request("GET", f"http://127.0.0.1:{port}/metrics", timeout=3)
        assert status == 200 and "mqha_controller" in str(body)
