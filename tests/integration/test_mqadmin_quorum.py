"""mqadmin's voter-set commands (getControllerQuorum, addControllerPeer, removeControllerPeer) as a
subprocess against 3 real ``mqcontroller`` processes with ``authenticationEnabled=true``
(docs/architecture.md §6.1, docs/raft.md §10).

The disk-replacement procedure end to end: stop a controller, wipe its store, start it again (it
comes up as an observer of the cluster, never a voter), remove its old identity from the voter set,
add its new one; it then votes under its new storageId. Removing the leader itself goes through its
hand-over (2007, retried on the new leader). Without the admin token both changes are refused and the
voter set stays as it was.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.controller_cluster import ControllerCluster, Node
from tests.integration.test_controller_auth import ADMIN_TOKEN, AUTH_SETTINGS
from tests.integration.test_mqadmin import fails, mqadmin, ok

pytestmark = pytest.mark.integration

TOKEN = ("--token", ADMIN_TOKEN)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerCluster]:
    with ProcessGroup() as group:
        controllers = ControllerCluster(
            group,
            tmp_path_factory.mktemp("quorum"),
            settings={**AUTH_SETTINGS, "adminAuthToken": ADMIN_TOKEN},
        )
        controllers.start()
        controllers.leader(timeout=10)
        yield controllers


def addresses(cluster: ControllerCluster) -> str:
    return ";".join(n.address for n in cluster.nodes)


def storage(node: Node) -> dict[str, Any] | None:
    try:
        status, body = node.get("/v1/controller/storage", timeout=1.0)
    except OSError:
        return None
    return body if status == 200 else None


def healthy(node: Node) -> bool:
    try:
        return node.get("/healthz", timeout=1.0)[0] == 200
    except OSError:
        return False


def quorum(cluster: ControllerCluster) -> dict[str, Any]:
    lines = ok("getControllerQuorum", "-a", addresses(cluster), "--json")
    return json.loads(lines[0])


def voters(cluster: ControllerCluster) -> dict[str, str]:
    """API address -> storageId of every voter, as the leader sees them."""
    return {v["apiAddress"]: v["storageId"] for v in quorum(cluster)["voters"]}


def wipe_and_restart(cluster: ControllerCluster, node: Node) -> dict[str, Any]:
    """Stop ``node``, wipe its store, start it again; returns its new storage identity (an observer)."""
    assert node.proc is not None
    node.proc.stop()
    shutil.rmtree(node.store)
    cluster.start([node.index], timeout=30)  # /healthz: its Raft member runs (as an observer)
    identity = wait_until(lambda: storage(node), 10, message="storage identity")
    assert identity["role"] == "observer", identity
    return identity


def wait_voter(node: Node, storage_id: str) -> None:
    """The observer sees itself added, saves role=voter and re-execs itself (same pid)."""
    wait_until(
        lambda: (s := storage(node)) is not None and s["role"] == "voter" and s["storageId"] == storage_id,
        30,
        interval=0.1,
        message=f"{node.node_id} a voter",
    )
    wait_until(lambda: healthy(node), 30, interval=0.1, message=f"{node.node_id} healthy again")


def test_the_quorum_lists_the_three_bootstrap_voters(cluster: ControllerCluster) -> None:
    text = ok("getControllerQuorum", "-a", cluster.nodes[0].address)
    ids = {s["storageId"] for n in cluster.nodes if (s := storage(n)) is not None}
    voter_lines = [line for line in text if line.startswith("#Voter:\t")]
    assert len(voter_lines) == 3, text
    assert {line.split("\t")[1].split("/")[1] for line in voter_lines} == ids
    cluster_id = storage(cluster.nodes[0])["clusterId"]  # type: ignore[index]
    assert text[1] == f"#ClusterId\t{cluster_id}"
    assert text[2].startswith("#LeaderId\tn")
    got = quorum(cluster)
    assert got["clusterId"] == cluster_id and len(got["voters"]) == 3 and got["observers"] == []


def test_a_wiped_controller_rejoins_as_an_observer_and_is_replaced_online(cluster: ControllerCluster) -> None:
    n2 = cluster.nodes[2]
    old_id = storage(n2)["storageId"]  # type: ignore[index]
    identity = wipe_and_restart(cluster, n2)
    assert identity["storageId"] != old_id
    assert voters(cluster)[n2.address] == old_id  # the old identity still votes (it is down)
    observers = quorum(cluster)["observers"]
    assert [o["raftId"] for o in observers] == [identity["raftId"]], observers

    # Without the token: refused, nothing changes.
    fails("removeControllerPeer", "-a", addresses(cluster), "-p", n2.address, code=16, mentions="--token")
    fails("addControllerPeer", "-a", addresses(cluster), "-p", n2.address, code=16, mentions="--token")
    assert voters(cluster)[n2.address] == old_id

    # Adding before the old identity is removed: the controller says to remove it first.
    fails("addControllerPeer", "-a", addresses(cluster), "-p", n2.address, *TOKEN, mentions="remove it first")

    (line, _) = ok("removeControllerPeer", "-a", cluster.nodes[0].address, "-p", n2.address, *TOKEN)
    assert line.startswith(f"remove controller peer success! {n2.address} is not a voter"), line
    assert n2.address not in voters(cluster)
    (line, _) = ok("addControllerPeer", "-a", cluster.nodes[0].address, "-p", n2.address, *TOKEN)
    assert line.startswith(f"add controller peer success! {identity['raftId']} is a voter; voters: ["), line
    assert identity["raftId"] in line.partition("voters: ")[2]
    wait_voter(n2, identity["storageId"])
    assert voters(cluster) == {n.address: storage(n)["storageId"] for n in cluster.nodes}  # type: ignore[index]
    # A second add is refused clearly: it is a voter now.
    fails("addControllerPeer", "-a", addresses(cluster), "-p", n2.address, *TOKEN, mentions="already a voter")


def test_the_leader_removes_itself_through_a_hand_over(cluster: ControllerCluster) -> None:
    leader = cluster.leader(timeout=10)
    others = [n for n in cluster.nodes if n is not leader]
    (line, _) = ok("removeControllerPeer", "-a", addresses(cluster), "-p", leader.address, *TOKEN)
    assert line.startswith(f"remove controller peer success! {leader.address} is not a voter"), line
    after = cluster.leader(timeout=10, among=others)
    assert set(voters(cluster)) == {n.address for n in others}
    assert after is not leader
    # Removing it again is a no-op success (the controller may be down: it is never contacted).
    assert leader.proc is not None
    leader.proc.stop()
    done = mqadmin("removeControllerPeer", "-a", others[0].address, "-p", leader.address, *TOKEN)
    assert done.returncode == 0, done.stderr
    # Its store knows an identity the cluster dropped: it comes back only with a blank store.
    identity = wipe_and_restart(cluster, leader)
    (line, _) = ok("addControllerPeer", "-a", others[0].address, "-p", leader.address, *TOKEN)
    wait_voter(leader, identity["storageId"])
    assert len(voters(cluster)) == 3


def test_adding_a_controller_that_cannot_be_reached_fails_at_once(cluster: ControllerCluster) -> None:
    stderr = fails(
        "addControllerPeer", "-a", addresses(cluster), "-p", "127.0.0.1:1", *TOKEN, exit_code=3, code=10001
    )
    assert "cannot read the storage identity of 127.0.0.1:1" in stderr
