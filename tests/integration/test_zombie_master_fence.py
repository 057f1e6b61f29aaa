"""A master the controllers take for dead keeps what it acknowledges after they stop hearing it (the fence,
docs/architecture.md §3.2; issue 27's soak, ``async-isr2-min1-r3`` under a ``delay`` fault).

``allAckInSyncStateSet=false``, ``inSyncReplicas=2``, 3 replicas (real processes), each broker connecting
from its own loopback address so the kernel's packet filter can cut one broker's links alone:

- the master M is cut from every controller (both ways): alive, but not heard -- a zombie;
- slave H (the higher broker id) still reaches the controllers, but nothing they send reaches it: its
  heartbeats arrive for a while, the pushes and answers do not;
- slave L hears everything.

M goes on acknowledging puts with H, which still follows it. Without the fence, the controllers elected
L once M's heartbeats expired (L and H last reported the same log, and L has the lower id); when the
links came back, H and M followed L and truncated what M had acknowledged meanwhile. With the fence,
the controllers first clear the master and wait for every alive member to report from behind it: H
cannot, so no master is elected while the cut lasts, and afterwards the longest log (M's or H's) is.

Checked against the old rule (elections by count trusting membership, ``acks_needed=None`` in
``mqha.controller.election``): L was elected during the cut, and after it the three replicas served
L's log without the 5 messages the zombie had acknowledged.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from mqha.chaos import packet_filter
from mqha.chaos.netfilter import Endpoint, one_way, partition, source_addresses
from mqha.chaos.packet_filter import PacketFilter, shim_env
from mqha.cluster.checking import read_replica_log
from mqha.cluster.local import LocalCluster, Node
from tests.integration.test_in_sync_acks import IN_SYNC_FREEZE
from tests.integration.test_power_loss import GROUP, TOPIC, master_of_full_set, put, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(packet_filter.problem() is not None, reason=str(packet_filter.problem())),
]

HEARTBEAT_TIMEOUT_MS = 4000
SETTINGS = {**IN_SYNC_FREEZE, "controllerHeartBeatTimeoutMills": str(HEARTBEAT_TIMEOUT_MS)}
LATE = 5
"""Puts acknowledged by the zombie master while it is cut off."""


def put_to(node: Node, msg_id: str) -> bool:
    """One put straight to ``node`` (not to whichever broker the controllers name); True when PUT_OK."""
    data = json.dumps({"topic": TOPIC, "body": msg_id, "msgId": msg_id}).encode()
    request = urllib.request.Request(
        node.url + "/v1/messages", data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return bool(json.loads(response.read()).get("status") == "PUT_OK")
    except (OSError, ValueError):
        return False


def test_a_zombie_master_keeps_what_it_acknowledged(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, groups=1, replicas=3, broker_settings=SETTINGS)
    sources = source_addresses(b.name for b in cluster.brokers)
    for broker in cluster.brokers:
        cluster.node_env[broker.name] = shim_env(sources[broker.name])
    offset = int(cluster.controller_settings.get("controllerRaftPortOffset", "1"))
    endpoints = {b.name: Endpoint(sources[b.name]) for b in cluster.brokers}
    endpoints |= {c.name: Endpoint("127.0.0.1", (c.port, c.port + offset)) for c in cluster.controllers}
    packets = PacketFilter(endpoints)  # mqha_chaos_<pid>: a later run removes it if this one is killed
    try:
        cluster.start()
        zombie = master_of_full_set(cluster)
        assert all(r.ok for r in put(cluster, 5))
        ids = {b.name: cluster.broker_status(b)["controllerBrokerId"] for b in cluster.group_brokers(GROUP)}
        low, high = sorted(
            (b for b in cluster.group_brokers(GROUP) if b != zombie), key=lambda b: ids[b.name]
        )
        time.sleep(2.5)  # a heartbeat of each slave after the last put: they report the same log end
        controllers = [c.name for c in cluster.controllers]
        packets.apply(partition([zombie.name], controllers) + one_way(controllers, [high.name]))
        # The zombie's heartbeats expire; an election is tried (and, with the fence, waits).
        time.sleep(HEARTBEAT_TIMEOUT_MS / 1000 + 2)
        late = [f"ZOMBIE{i:04d}" for i in range(LATE)]
        acked = [msg_id for msg_id in late if put_to(zombie, msg_id)]
        # No master besides the zombie while H cannot report (without the fence: L, with a shorter log).
        assert (cluster.broker_status(low) or {}).get("role") != "MASTER", f"{low.name} was elected"
        assert acked == late, f"the zombie acknowledged {acked} of {late} (with {high.name})"
        packets.apply([])

        def missing() -> list[str]:
            master = cluster.master(GROUP)
            if master is None:
                return ["no master"]
            try:
                held = {row["msgId"] for row in read_replica_log(master)}
            except OSError:  # 503 while the new master waits for inSyncReplicas copies
                return ["?"]
            return [msg_id for msg_id in acked if msg_id not in held]

        wait_for(lambda: not missing(), 30, "every message the zombie acknowledged served by the master")
    finally:
        packets.clear()
        cluster.stop()
    assert not cluster.running_pids()
