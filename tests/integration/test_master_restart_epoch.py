"""A master that restarts after a crash never writes on in its old masterEpoch (issue 27's soak; §3.2).

The soak (``async-allack-min1-r3``, seed 71) lost an acknowledged message this way: a whole-group power
cut took the master's unflushed tail, one message its slaves had received, never acknowledged, and
fsynced. The master came back first, with nothing acknowledged missing (not lossy), and resumed as
master in the same masterEpoch. Its next put took that message's offset, and when the slaves returned
their handshake saw the same epoch on both sides and kept their message: two replicas with different
messages at one offset of one epoch, and the acknowledged one lost at the next failover.

Here (real processes, ``allAckInSyncStateSet``, ``ASYNC_FLUSH`` with a flusher that never runs): 10 puts
are acknowledged and read (a read fsyncs up to the confirm offset); the slaves' acknowledgements are
then dropped by the kernel's packet filter while one more put reaches them, and a read on each slave
fsyncs it there; the controllers are killed, the whole group loses power (SIGKILL, each store loses
its un-fsynced writes: the master that message), the controllers return, the master comes back
first and takes 5 puts, then the slaves return. Every replica must hold the same message at every
offset. On the old code the master resumed masterEpoch 1 and wrote other messages where its slaves
hold that one; they never caught up.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mqha.chaos import packet_filter
from mqha.chaos.power_loss import cut_unflushed
from mqha.client import SyncConsumer, SyncProducer
from mqha.cluster.checking import read_replica_log
from mqha.cluster.local import LocalCluster
from tests.integration.test_in_sync_failover import _ha_client_port, _nft
from tests.integration.test_power_loss import (
    GROUP,
    LAZY_FLUSH,
    TOPIC,
    assert_no_loss_and_agreement,
    master_of_full_set,
    put,
    read_all,
    replica_logs,
    wait_for,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(packet_filter.problem() is not None, reason=str(packet_filter.problem())),
]

SETTINGS = {**LAZY_FLUSH, "allAckInSyncStateSet": "true", "slaveTimeout": "1000"}


def test_a_restarted_master_takes_a_new_epoch_before_it_writes(tmp_path: Path) -> None:
    table = f"mqha_test_{int(time.time() * 1000) % 10**9}"
    with LocalCluster(tmp_path, controllers=3, groups=1, replicas=3, broker_settings=SETTINGS) as cluster:
        master = master_of_full_set(cluster)
        acked = put(cluster, 10)
        assert all(r.ok for r in acked), [r.status for r in acked]
        with SyncConsumer(cluster.controller_addresses, GROUP) as consumer:
            assert len(read_all(consumer, 10)) == 10  # the master fsynced them to serve them
        slaves = [b for b in cluster.group_brokers(GROUP) if b.name != master.name]
        ha_port = int(cluster.broker_status(master)["haAddress"].rsplit(":", 1)[1])
        ports = ", ".join(str(_ha_client_port(s, ha_port)) for s in slaves)
        _nft(
            f"table inet {table} {{\n chain out {{\n  type filter hook output priority 0;\n"
            f"  tcp sport {{ {ports} }} tcp dport {ha_port} drop\n }}\n}}\n"
        )
        try:
            with SyncProducer(cluster.controller_addresses, GROUP, send_timeout=3.0) as producer:
                unacked = producer.send(TOPIC, "never-acknowledged")
            assert not unacked.ok, unacked.status
            end = cluster.broker_status(master)["maxOffset"]
            wait_for(
                lambda: all(cluster.broker_status(s)["maxOffset"] == end for s in slaves),
                10,
                "the slaves hold the unacknowledged message",
            )
            for slave in slaves:
                read_replica_log(slave)  # a read fsyncs: the slaves keep the message through the cut
            # The controllers are down (in the soak: none was the serving leader when the master's
            # session closed), so nobody clears the master. The whole group loses power at once:
            # frozen first, so the master never shrinks its set (the message stays unconfirmed); the
            # master loses its un-fsynced tail: that message, nothing acknowledged.
            for controller in cluster.controllers:
                cluster.kill(controller)
            for node in (master, *slaves):
                cluster.pause(node)
            for node in (*slaves, master):
                cluster.kill(node)
        finally:
            _nft(f"delete table inet {table}\n")
        report = cut_unflushed(master.store)
        assert [r.msg_id for r in report.lost] == [unacked.msg_id], report
        assert not report.lost or report.confirm_offset <= report.lost[0].offset, report  # not lossy
        for slave in slaves:
            assert not cut_unflushed(slave.store).lost
        epoch_before = max(r.epoch for r in acked if r.epoch is not None)

        for controller in cluster.controllers:
            cluster.start_node(controller)
        wait_for(lambda: cluster.controller_leader() is not None, 30, "a controller leader")
        cluster.start_node(master)
        assert cluster.master(GROUP, timeout=30) is not None, cluster.status_table()
        after = put(cluster, 5, start=100)
        assert all(r.ok for r in after), [r.status for r in after]
        for slave in slaves:
            cluster.start_node(slave)
        cluster.wait_ready(30)
        last = max(r.offset for r in after if r.offset is not None)
        wait_for(
            lambda: all(max(log, default=-1) >= last for log in replica_logs(cluster).values()),
            15,
            "every replica serves the last put",
        )
        assert_no_loss_and_agreement([*acked, *after], replica_logs(cluster))
        assert all(r.epoch is not None and r.epoch > epoch_before for r in after), [r.epoch for r in after]
    assert not cluster.running_pids()
