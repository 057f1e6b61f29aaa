"""Readers see only what ``inSyncReplicas`` replicas hold (issue 27's soak; docs/architecture.md §7).

``allAckInSyncStateSet=false``, ``inSyncReplicas=2``, 3 replicas (real processes): 5 puts are
acknowledged, then both slaves freeze (SIGSTOP) and 3 more puts reach only the master's log
(``FLUSH_SLAVE_TIMEOUT``). A consumer reading the group must get the 5 and not the 3: the reference
serves the master's max offset in this mode, so a consumer read messages a failover then truncated
(the soak's ``read_uncommitted`` 711).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqha.client import SyncConsumer, SyncProducer
from mqha.cluster.local import LocalCluster
from tests.integration.test_in_sync_acks import IN_SYNC_FREEZE as SETTINGS
from tests.integration.test_power_loss import GROUP, TOPIC, master_of_full_set, put, read_all

pytestmark = pytest.mark.integration


def test_readers_never_see_what_fewer_than_in_sync_replicas_hold(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, controllers=3, groups=1, replicas=3, broker_settings=SETTINGS) as cluster:
        master = master_of_full_set(cluster)
        acked = put(cluster, 5)
        assert all(r.ok for r in acked), [r.status for r in acked]
        slaves = [b for b in cluster.group_brokers(GROUP) if b.name != master.name]
        for slave in slaves:
            cluster.pause(slave)
        try:
            with SyncProducer(cluster.controller_addresses, GROUP, send_timeout=3.0) as producer:
                late = [producer.send(TOPIC, f"late-{i}") for i in range(3)]
            assert not any(r.ok for r in late), [r.status for r in late]  # only the master holds them
            with SyncConsumer(cluster.controller_addresses, GROUP) as consumer:
                got = read_all(consumer, 8, timeout=4.0)
            assert [m.msg_id for m in got] == [r.msg_id for r in acked]
        finally:
            for slave in slaves:
                cluster.resume(slave)
    assert not cluster.running_pids()
