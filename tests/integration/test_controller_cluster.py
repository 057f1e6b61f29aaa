"""Three real ``mqcontroller`` processes: replication, failover, fencing, restart, partition (issue 3).

docs/architecture.md §3 (leader-only APIs, barrier, quorum lease), docs/reference-behaviour.md §5, §8. Every
process is stopped by pid (ProcessGroup); every wait is bounded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.controller_cluster import (
    ControllerCluster,
    Node,
    beating_replicas,
    groups_of,
    register_broker,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(group: ProcessGroup, tmp_path: Path) -> ControllerCluster:
    """Three started controllers."""
    started = ControllerCluster(group, tmp_path)
    started.start()
    return started


def _replica_info(node: Node, name: str = "b1") -> dict[str, Any]:
    status, body = node.get(f"/v1/groups/{name}/replica-info")
    assert status == 200, body
    return body


def _all_alive(node: Node, name: str = "b1") -> bool:
    status, body = node.get(f"/v1/sync-state-data?brokerName={name}")
    if status != 200 or name not in body["replicasInfoTable"]:
        return False
    info = body["replicasInfoTable"][name]
    return all(r["alive"] for r in info["inSyncReplicas"] + info["notInSyncReplicas"])


def test_register_elect_alter_then_failover_fencing_and_full_restart(cluster: ControllerCluster) -> None:
    leader = cluster.leader(timeout=5)

    # docs/reference-behaviour.md §9.3 registration of three replicas: next-id -> apply-id -> register.
    with beating_replicas(cluster, "b1", 3):
        # First election (docs/reference-behaviour.md §5.4 step 3): the registered requester wins.
        body = leader.post_ok("/v1/groups/b1/elect", {"clusterName": "c1", "brokerId": 1})
        assert (body["masterBrokerId"], body["masterEpoch"], body["syncStateSet"]) == (1, 1, [1])
        assert body["masterHaAddress"] == "127.0.0.1:20901"
        assert body["brokerMemberGroup"]["brokerAddrs"] == {
            "1": "127.0.0.1:10901",
            "2": "127.0.0.1:10902",
            "3": "127.0.0.1:10903",
        }

        # The master grows the SyncStateSet (docs/reference-behaviour.md §5.5).
        alter = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1, 2, 3], "syncStateSetEpoch": 1}
        body = leader.post_ok("/v1/groups/b1/sync-state-set", alter)
        assert (body["newSyncStateSetEpoch"], body["syncStateSet"]) == (2, [1, 2, 3])

        before = groups_of(cluster.wait_same_state(cluster.nodes, timeout=3))
        assert before["b1"]["masterEpoch"] == 1 and before["b1"]["syncStateSet"] == [1, 2, 3]

        # kill -9 the leader: a new one serves within 3 s, with the same state.
        assert leader.proc is not None
        leader.proc.kill()
        killed_at = time.monotonic()
        survivors = [n for n in cluster.nodes if n is not leader]
        new_leader = cluster.leader(timeout=3, among=survivors)
        failover = time.monotonic() - killed_at
        print(f"leader kill -9 -> new serving leader: {failover * 1000:.0f} ms")
        assert failover < 3.0, failover
        after = groups_of(cluster.wait_same_state(survivors, timeout=3))
        assert after == before
        info = _replica_info(new_leader)
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSet"]) == (1, 1, [1, 2, 3])

        # A stale master epoch is fenced (2000) on the new leader; nothing changes.
        stale = {"masterBrokerId": 1, "masterEpoch": 0, "syncStateSet": [1, 2], "syncStateSetEpoch": 2}
        status, body = new_leader.post("/v1/groups/b1/sync-state-set", stale)
        assert (status, body["code"]) == (409, 2000), body
        stale_sss = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1, 2], "syncStateSetEpoch": 1}
        status, body = new_leader.post("/v1/groups/b1/sync-state-set", stale_sss)
        assert (status, body["code"]) == (409, 2001), body

        # The new leader commits; the killed node rejoins from its journal and catches up.
        shrink = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1, 2], "syncStateSetEpoch": 2}
        status, body = new_leader.post("/v1/groups/b1/sync-state-set", shrink)
        assert status == 200, body
        cluster.start([leader.index])
        committed = groups_of(cluster.wait_same_state(cluster.nodes, timeout=5))
        assert committed["b1"]["syncStateSet"] == [1, 2]
        assert committed["b1"]["syncStateSetEpoch"] == 3

        # Full restart (kill -9 of every node): every committed decision is still there.
        for node in cluster.nodes:
            assert node.proc is not None
            node.proc.kill()
        cluster.start()
        restarted_leader = cluster.leader(timeout=5)
        assert groups_of(cluster.wait_same_state(cluster.nodes, timeout=5)) == committed
        info = _replica_info(restarted_leader)
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSetEpoch"]) == (1, 1, 3)

        # And the restarted cluster decides: the master (alive again) is still the master.
        wait_until(lambda: _all_alive(restarted_leader), timeout=3, message="heartbeats reach the new leader")
        status, body = restarted_leader.post("/v1/groups/b1/elect", {"clusterName": "c1", "brokerId": 2})
        assert (status, body["code"]) == (409, 2011), body


def test_minority_partitioned_leader_stops_serving_and_cannot_commit(cluster: ControllerCluster) -> None:
    leader = cluster.leader(timeout=5)
    assert register_broker(leader, "b1") == 1
    followers = cluster.followers(leader)
    commit_before = leader.state()["raft"]["commit_index"]

    for follower in followers:
        assert follower.proc is not None
        follower.proc.pause()  # SIGSTOP: sockets stay open, nothing answers
    paused_at = time.monotonic()

    def refused() -> bool:
        status, body = leader.get("/v1/groups/b1/replica-info", timeout=3)
        return status in (421, 503) and body["code"] in (2007, 14)

    wait_until(refused, timeout=2.0, interval=0.02, message="isolated leader refuses leader-only reads")
    assert time.monotonic() - paused_at < 2.0
    metadata = leader.try_metadata()
    assert metadata is not None and metadata["isLeader"] is False

    apply = {
        "clusterName": "c1",
        "brokerName": "isolated",
        "appliedBrokerId": 1,
        "registerCheckCode": "127.0.0.1:10999;1",
    }
    status, body = leader.post("/v1/brokers/apply-id", apply, timeout=8)
    assert status in (421, 503), body
    assert leader.state()["raft"]["commit_index"] == commit_before
    assert "isolated" not in groups_of(leader.state()["state"])

    for follower in followers:
        assert follower.proc is not None
        follower.proc.resume()
    new_leader = cluster.leader(timeout=5)
    state = groups_of(cluster.wait_same_state(cluster.nodes, timeout=5))
    assert set(state) == {"b1"}
    status, body = new_leader.post("/v1/brokers/apply-id", {**apply, "brokerName": "healed"})
    assert status == 200, body
