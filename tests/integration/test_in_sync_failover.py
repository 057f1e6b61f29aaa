"""A failover under ``inSyncReplicas`` keeps every acknowledged message (issue 27's soak; §3.2).

``allAckInSyncStateSet=false``, ``inSyncReplicas=2``, 3 replicas (real processes). The soak lost 3
acknowledged messages this way: an acknowledgement needs 2 copies, not every SyncStateSet member's, so
a member that is still the process it joined with need not hold it. Here the master's replication
stream to slave L is dropped by the kernel's packet filter (L still heartbeats, stays alive and in the
SyncStateSet), 3 puts are acknowledged by the master and slave H, and the master is SIGKILLed. Both
slaves last reported the same log end, so an election that trusts membership and ranks by those
reports picks L (the lower broker id) and H truncates the 3. The new master must be H.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from mqha.chaos import packet_filter
from mqha.client import SyncProducer
from mqha.cluster.checking import read_replica_log
from mqha.cluster.local import LocalCluster, Node
from tests.integration.test_in_sync_acks import IN_SYNC_FREEZE
from tests.integration.test_power_loss import GROUP, TOPIC, master_of_full_set, put, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(packet_filter.problem() is not None, reason=str(packet_filter.problem())),
]

SETTINGS = {**IN_SYNC_FREEZE, "brokerHeartbeatInterval": "3000"}
"""Slow heartbeats: the slaves' last reports before the kill are the same (all in sync)."""


def _ha_client_port(slave: Node, master_ha_port: int) -> int:
    """The local port of ``slave``'s replication connection to the master."""
    out = subprocess.run(
        ["ss", "-Htnp", "state", "established", f"( dport = :{master_ha_port} )"],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    for line in out.splitlines():
        if f"pid={slave.pid}," in line:
            return int(line.split()[2].rsplit(":", 1)[1])
    raise AssertionError(f"{slave.name} has no connection to port {master_ha_port}: {out!r}")


def _nft(script: str) -> None:
    subprocess.run(["nft", "-f", "-"], input=script, text=True, check=True, timeout=10)


def test_the_member_with_every_acknowledged_message_is_elected(tmp_path: Path) -> None:
    table = f"mqha_test_{int(time.time() * 1000) % 10**9}"
    with LocalCluster(tmp_path, controllers=3, groups=1, replicas=3, broker_settings=SETTINGS) as cluster:
        master = master_of_full_set(cluster)
        assert all(r.ok for r in put(cluster, 5))
        ids = {b.name: cluster.broker_status(b)["controllerBrokerId"] for b in cluster.group_brokers(GROUP)}
        slaves = sorted(
            (b for b in cluster.group_brokers(GROUP) if b.name != master.name), key=lambda b: ids[b.name]
        )
        low, high = slaves
        # Both slaves report the same log end before the cut (a heartbeat period after the last put).
        time.sleep(3.5)
        ha_port = int(cluster.broker_status(master)["haAddress"].rsplit(":", 1)[1])
        low_port = _ha_client_port(low, ha_port)
        _nft(
            f"table inet {table} {{\n chain out {{\n  type filter hook output priority 0;\n"
            f"  tcp sport {ha_port} tcp dport {low_port} drop\n }}\n}}\n"
        )
        try:
            with SyncProducer(cluster.controller_addresses, GROUP, send_timeout=3.0) as producer:
                acked = [producer.send(TOPIC, f"late-{i}") for i in range(3)]
            assert all(r.ok for r in acked), [r.status for r in acked]  # master + H
            behind = cluster.broker_status(low)["maxOffset"]
            assert behind < cluster.broker_status(high)["maxOffset"], "L got the late puts"
            cluster.kill(master)
            # The rule stays: the killed master's kernel would otherwise deliver the data to L after all.
            wait_for(lambda: cluster.master(GROUP) not in (None, master), 30, "a new master")
            new_master = cluster.master(GROUP)
            assert new_master is not None
            assert new_master.name == high.name, f"elected {new_master.name}, whose log ends at {behind}"

            def missing() -> list[str]:
                try:
                    held = {row["msgId"] for row in read_replica_log(new_master)}
                except OSError:  # 503 while the new master waits for inSyncReplicas copies
                    return ["?"]
                return [r.msg_id for r in acked if r.msg_id not in held]

            wait_for(lambda: not missing(), 15, "every acknowledged message served by the new master")
        finally:
            _nft(f"delete table inet {table}\n")
    assert not cluster.running_pids()
