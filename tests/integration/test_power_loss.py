"""Issue 25's "Done when" with real processes: a replica that lost its unflushed tail never costs
acknowledged messages, and only in-sync replicas ack.

* **Whole-group power cut** (``broker-a`` x 3, ``allAckInSyncStateSet=true``, ``ASYNC_FLUSH``): 50 puts
  acknowledged by all three; the slaves stop cleanly first (a clean stop fsyncs: they hold everything on
  disk; the SyncStateSet shrinks to the master as their sessions close), then the master loses power:
  SIGKILL and ``mqha.chaos.power_loss.cut_unflushed`` (its flusher never ran: ``flushIntervalCommitLog``
  is 10 minutes, so its log is cut back to where it was opened). Both orders of return: the lossy master
  first, and the healthy slaves first. Wanted: the group has a master within 30 s of the healthy
  replicas being up, no acknowledged message is missing on any replica, and the replicas agree at
  every offset they both hold.
* **Learner acks** (``inSyncReplicas=2``, ``allAckInSyncStateSet=false``, one ``asyncLearner`` slave):
  while the in-sync slave hangs, puts must not be acknowledged on the learner's word; after the
  master's SIGKILL the in-sync slave returns and is elected, and no acknowledged message may be missing.

These need the election rule (docs/architecture.md §3.2) and the HA changes (§4) of issue 25: without them
the lossy master is elected and the slaves truncate what was acknowledged, or the group has no master
until the lossy one returns, and the learner's acks are lost.
"""

from __future__ import annotations

import itertools
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from mqha.chaos.power_loss import cut_unflushed
from mqha.client import Message, SendResult, SyncConsumer, SyncProducer
from mqha.cluster.checking import read_replica_log
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import ClusterError, Node

pytestmark = pytest.mark.integration

GROUP = "broker-a"
TOPIC = "power"
LAZY_FLUSH = {"flushDiskType": "ASYNC_FLUSH", "flushIntervalCommitLog": "600000"}
"""The flusher never runs during a test: only a clean stop fsyncs (and recovery at open)."""
MASTER_WITHIN = 30.0  # seconds from the healthy replicas being up to a master (the bound)


def put(cluster: LocalCluster, count: int, start: int = 0) -> list[SendResult]:
    with SyncProducer(cluster.controller_addresses, GROUP) as producer:
        return [producer.send(TOPIC, f"power-{start + i}") for i in range(count)]


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.1)


def sync_state_set(cluster: LocalCluster, node: Node) -> list[int]:
    return list((cluster.broker_status(node) or {}).get("syncStateSet") or [])


def master_of_full_set(cluster: LocalCluster) -> Node:
    """The group's master once all three replicas are in its SyncStateSet."""
    master = cluster.master(GROUP, timeout=10)
    assert master is not None
    wait_for(lambda: len(sync_state_set(cluster, master)) == 3, 20, "a full SyncStateSet")
    return master


def replica_logs(cluster: LocalCluster) -> dict[str, dict[int, str]]:
    """Every running replica's log as it serves it (up to its confirm offset): offset -> msgId."""
    return {
        b.name: {row["offset"]: row["msgId"] for row in read_replica_log(b)}
        for b in cluster.group_brokers(GROUP)
        if cluster.is_running(b)
    }


def serves_up_to(cluster: LocalCluster, offset: int) -> bool:
    """Whether every running replica serves ``offset``; a replica that answers 503 (fenced, or a slave
    whose log is not verified against its master yet) does not yet."""
    try:
        return all(max(log, default=-1) >= offset for log in replica_logs(cluster).values())
    except urllib.error.HTTPError as exc:
        if exc.code != 503:
            raise
        return False


def assert_no_loss_and_agreement(acked: Sequence[SendResult], logs: dict[str, dict[int, str]]) -> None:
    missing = {
        name: [r.offset for r in acked if log.get(r.offset) != r.msg_id]  # type: ignore[arg-type]
        for name, log in logs.items()
    }
    assert not any(missing.values()), f"acknowledged messages missing (offsets per replica): {missing}"
    for (a, log_a), (b, log_b) in itertools.combinations(logs.items(), 2):
        differ = [o for o in log_a.keys() & log_b.keys() if log_a[o] != log_b[o]]
        assert not differ, f"{a} and {b} disagree at offsets {sorted(differ)[:10]}"


def settle_and_check(cluster: LocalCluster, acked: Sequence[SendResult]) -> None:
    """Put a few more (the confirm offsets move on, so every replica serves everything it holds), wait
    until every replica serves the last, then check ``acked`` and those on every replica."""
    after = put(cluster, 5, start=1000)
    assert all(r.ok for r in after), [r.status for r in after]
    last = after[-1].offset or 0
    wait_for(lambda: serves_up_to(cluster, last), 15, "every replica serves the last put")
    assert_no_loss_and_agreement([*acked, *after], replica_logs(cluster))


ACK_MODES = {
    "allAck": {"allAckInSyncStateSet": "true"},
    "inSyncReplicas=2": {"allAckInSyncStateSet": "false", "inSyncReplicas": "2"},
}


def whole_group_power_cut(cluster_dir: Path, lossy_master_first: bool, ack_mode: str) -> None:
    cluster = LocalCluster(
        cluster_dir,
        controllers=3,
        groups=1,
        replicas=3,
        broker_settings={**LAZY_FLUSH, **ACK_MODES[ack_mode]},
    )
    with cluster:
        master = cluster.master(GROUP, timeout=10)
        assert master is not None
        slaves = [b for b in cluster.group_brokers(GROUP) if b.name != master.name]
        acked = put(cluster, 50)
        assert all(r.ok for r in acked), [r.status for r in acked if not r.ok]
        end = max(r.offset + r.size for r in acked)  # type: ignore[operator]

        for slave in slaves:  # a clean stop fsyncs everything: the slaves hold all 50 on disk
            cluster.stop_node(slave)
        wait_for(
            lambda: len(sync_state_set(cluster, master)) == 1, 15, "the SyncStateSet shrinks to the master"
        )
        cluster.kill(master)
        report = cut_unflushed(master.store)
        assert report.cut and report.flushed_offset < end, report  # the master lost acknowledged messages
        print(f"{master.name}: {report.describe()}")

        healthy_up: float
        if lossy_master_first:
            cluster.start_node(master)
            time.sleep(3.0)  # the lossy replica alone with the controllers for a while
            for slave in slaves:
                cluster.start_node(slave)
            healthy_up = time.monotonic()
        else:
            for slave in slaves:
                cluster.start_node(slave)
            healthy_up = time.monotonic()
        elected = cluster.master(GROUP, timeout=MASTER_WITHIN)
        assert elected is not None, (
            f"no master within {MASTER_WITHIN:g} s of the healthy replicas being up\n{cluster.status_table()}"
        )
        print(
            f"master {elected.name} {time.monotonic() - healthy_up:.1f} s after the healthy replicas were up"
        )
        if not lossy_master_first:
            cluster.start_node(master)
        try:
            cluster.wait_ready(30)
        except ClusterError as exc:
            # Not whole again: nothing acknowledged may be missing from what the replicas serve anyway.
            assert_no_loss_and_agreement(acked, replica_logs(cluster))
            raise AssertionError(f"the group is not whole again: {exc}") from None
        settle_and_check(cluster, acked)
    assert not cluster.running_pids()


@pytest.mark.parametrize("ack_mode", list(ACK_MODES))
def test_whole_group_power_cut_lossy_master_returns_first(tmp_path: Path, ack_mode: str) -> None:
    whole_group_power_cut(tmp_path, lossy_master_first=True, ack_mode=ack_mode)


@pytest.mark.parametrize("ack_mode", list(ACK_MODES))
def test_whole_group_power_cut_healthy_slaves_return_first(tmp_path: Path, ack_mode: str) -> None:
    whole_group_power_cut(tmp_path, lossy_master_first=False, ack_mode=ack_mode)


def test_learner_acks_never_count(tmp_path: Path) -> None:
    learner = f"{GROUP}-2"
    cluster = LocalCluster(
        tmp_path,
        controllers=3,
        groups=1,
        replicas=3,
        broker_settings={"allAckInSyncStateSet": "false", "inSyncReplicas": "2"},
    )
    cluster.node_settings[learner] = {"asyncLearner": "true"}
    try:
        # The learner starts once a master exists: the first election goes to whoever asks first.
        cluster.start(wait=False, timeout=60, later=[learner])
        wait_for(lambda: cluster.group_ready(GROUP, 2), 60, "a master and a SyncStateSet of 2")
        cluster.start_node(learner)
        master = cluster.master(GROUP, timeout=10)
        assert master is not None and master.name != learner
        in_sync = next(b for b in cluster.group_brokers(GROUP) if b.name not in (master.name, learner))
        acked = [r for r in put(cluster, 10) if r.ok]
        assert len(acked) == 10

        # The in-sync slave's replication stalls (SIGSTOP: its link stays open, so neither the master
        # nor the controller drops it from the SyncStateSet within haMaxTimeSlaveNotCatchup), only the
        # learner can answer the master. Then the master dies, and so does the hung slave before it
        # reads what waits in its socket buffer; it comes back without those puts.
        cluster.pause(in_sync)
        with SyncProducer(cluster.controller_addresses, GROUP) as producer:
            during = producer.send_batch(TOPIC, [f"learner-{i}" for i in range(20)])
        cluster.kill(master)
        cluster.kill(in_sync)
        cluster.start_node(in_sync)
        acked += [r for r in during if r.ok]
        print(f"acknowledged while the in-sync slave hung: {sum(r.ok for r in during)} of 20")

        elected = cluster.master(GROUP, timeout=MASTER_WITHIN)
        assert elected is not None and elected.name == in_sync.name, cluster.status_table()
        cluster.start_node(master)
        wait_for(lambda: cluster.group_ready(GROUP, 2), 60, "the group whole again")
        settle_and_check(cluster, acked)
    finally:
        cluster.stop()
    assert not cluster.running_pids()


@pytest.mark.parametrize(("replicas", "ack_mode"), [(1, "allAck"), (3, "allAck"), (3, "inSyncReplicas=2")])
def test_sync_flush_acks_survive_a_whole_group_power_cut(
    tmp_path: Path, replicas: int, ack_mode: str
) -> None:
    # SYNC_FLUSH: the master fsyncs before it answers, a slave before it reports its offset, and each
    # fsync is in the checkpoint before anyone sees it: a cut of every replica keeps every ack on as
    # many disks as the ack mode waits for, and the election picks a replica that holds them all.
    settings = {"flushDiskType": "SYNC_FLUSH", "flushIntervalCommitLog": "600000", **ACK_MODES[ack_mode]}
    with LocalCluster(
        tmp_path, controllers=3, groups=1, replicas=replicas, broker_settings=settings
    ) as cluster:
        acked = put(cluster, 40)
        assert all(r.ok for r in acked), [r.status for r in acked if not r.ok]
        end = max((r.offset or 0) + (r.size or 0) for r in acked)
        brokers = cluster.group_brokers(GROUP)
        for broker in brokers:
            cluster.kill(broker)
        reports = {b.name: cut_unflushed(b.store) for b in brokers}
        copies = 2 if ack_mode == "inSyncReplicas=2" else replicas
        assert sorted((r.flushed_offset for r in reports.values()), reverse=True)[copies - 1] >= end, reports
        for broker in brokers:
            cluster.start_node(broker)
        cluster.wait_ready(60)
        settle_and_check(cluster, acked)
    assert not cluster.running_pids()


@pytest.mark.parametrize("ack_mode", list(ACK_MODES))
@pytest.mark.parametrize("role", ["slave", "master"])
def test_a_lost_disk_costs_nothing_acknowledged(tmp_path: Path, role: str, ack_mode: str) -> None:
    # 3 replicas: one replica's store is gone (a new disk); every ack is on another replica too, and
    # the replaced one copies the log back from the master.
    with LocalCluster(
        tmp_path, controllers=3, groups=1, replicas=3, broker_settings=ACK_MODES[ack_mode]
    ) as cluster:
        master = cluster.master(GROUP, timeout=10)
        assert master is not None
        acked = put(cluster, 40)
        assert all(r.ok for r in acked)
        victim = master if role == "master" else next(b for b in cluster.group_brokers(GROUP) if b != master)
        cluster.kill(victim)
        shutil.rmtree(victim.store)
        if role == "master":
            assert cluster.master(GROUP, timeout=MASTER_WITHIN) is not None
        cluster.start_node(victim)
        cluster.wait_ready(60)
        settle_and_check(cluster, acked)
    assert not cluster.running_pids()


def test_async_single_replica_power_cut_is_declared(tmp_path: Path) -> None:
    # One replica, ASYNC_FLUSH, a flusher that never runs: its power cut loses acknowledged messages
    # that no disk held. Physics; but the controller must say so (ackedDataLost, the metric), never
    # silently elect it as if nothing had happened. A consumer must never have read what the cut
    # takes (the soak's read-uncommitted: reads stop at what the replica fsynced, and a reader held
    # back brings the fsync forward), and it still gets every message written after the loss.
    with LocalCluster(tmp_path, controllers=3, groups=1, replicas=1, broker_settings=LAZY_FLUSH) as cluster:
        read = put(cluster, 20)
        assert all(r.ok for r in read)
        with SyncConsumer(cluster.controller_addresses, GROUP) as consumer:
            assert [m.msg_id for m in read_all(consumer, 20)] == [r.msg_id for r in read]
            unread = put(cluster, 20, start=20)
            assert all(r.ok for r in unread)
            (broker,) = cluster.group_brokers(GROUP)
            cluster.kill(broker)
            report = cut_unflushed(broker.store)
            assert report.cut and len(report.lost) >= 20, report
            cluster.start_node(broker)
            assert cluster.master(GROUP, timeout=MASTER_WITHIN) is not None, cluster.status_table()
            wait_for(lambda: declared_losses(cluster) >= 1, 15, "the controllers declare the loss")
            survivors = replica_logs(cluster)[broker.name]
            gone = [r.offset for r in read if survivors.get(r.offset) != r.msg_id]  # type: ignore[arg-type]
            assert not gone, f"the consumer read messages the power cut took (offsets {gone}): {report}"
            after = put(cluster, 5, start=100)
            assert all(r.ok for r in after) and after[0].offset == consumer.offset, (after, consumer.offset)
            assert [m.msg_id for m in read_all(consumer, 5)] == [r.msg_id for r in after]
    assert not cluster.running_pids()


def read_all(consumer: SyncConsumer, count: int, timeout: float = 15.0) -> list[Message]:
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        out += consumer.poll(count - len(out), timeout=max(0.1, deadline - time.monotonic()))
        time.sleep(0.05)
    return out


def declared_losses(cluster: LocalCluster) -> float:
    """The most any controller counts in ``mqha_controller_acked_data_lost_total`` for the group."""
    counts = [0.0]
    for controller in cluster.controllers:
        try:
            with urllib.request.urlopen(f"{controller.url}/metrics", timeout=2) as response:
                text = response.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("mqha_controller_acked_data_lost_total{") and f'broker_name="{GROUP}"' in line:
                counts.append(float(line.rsplit(" ", 1)[1]))
    return max(counts)


def test_acks_after_a_shrink_are_not_lost_to_an_early_eligible_replica(tmp_path: Path) -> None:
    # The 600 s chaos run's silent loss (docs/architecture.md §3.2, "ELR release"). A slave stops
    # cleanly: the set shrinks and the controller keeps it eligible, credited with what was acknowledged
    # then. The master acknowledges a few more with the other slave, and both lose power at once. The
    # stopped slave comes back first: it lacks the later acks, and nothing the controller heard says
    # they exist (the master's heartbeat, the only other report of its ack point, comes once a second
    # here and most likely not in between), so it may not be elected on its credit. The master
    # releases the ELR before its first ack past the credit.
    settings = {
        "flushDiskType": "SYNC_FLUSH",
        "allAckInSyncStateSet": "true",
        "brokerHeartbeatInterval": "1000",
        "controllerHeartBeatTimeoutMills": "5000",
    }
    with LocalCluster(tmp_path, controllers=3, groups=1, replicas=3, broker_settings=settings) as cluster:
        master = cluster.master(GROUP, timeout=30)
        assert master is not None
        early, other = (b for b in cluster.group_brokers(GROUP) if b.name != master.name)
        wait_for(lambda: len(sync_state_set(cluster, master)) == 3, 30, "all three in the SyncStateSet")
        acked = put(cluster, 20)
        cluster.stop_node(early)
        wait_for(lambda: len(sync_state_set(cluster, master)) == 2, 15, "the SyncStateSet shrinks")
        acked += put(cluster, 3, start=20)
        for broker in (master, other):
            cluster.kill(broker)
        assert all(r.ok for r in acked), [r.status for r in acked if not r.ok]
        for broker in (master, other):
            cut_unflushed(broker.store)
        cluster.start_node(early)
        time.sleep(6.0)  # the early replica alone with the controllers (an election runs at once)
        elected = cluster.master(GROUP, timeout=0)
        assert elected is None, f"{elected.name} elected without the later acks\n{cluster.status_table()}"
        for broker in (other, master):
            cluster.start_node(broker)
        assert cluster.master(GROUP, timeout=MASTER_WITHIN) is not None, cluster.status_table()
        cluster.wait_ready(60)
        settle_and_check(cluster, acked)
    assert not cluster.running_pids()
