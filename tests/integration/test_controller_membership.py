"""Controllers replaced and scaled online under a produce load (issue 24 "Done when"; docs/raft.md §10).

Real controllers, a broker set of three real brokers, and a producer thread putting small batches to the
master the whole time. The documented procedures (DESIGN: disk replacement, scaling 3 -> 5 -> 3) run with
the admin routes a ``mqadmin addControllerPeer / removeControllerPeer`` uses. No broker fails in these
tests, so no put may fail, and no decision the controllers made may change: the replica-info of the broker
set and ``/v1/groups`` are the same before and after.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.processes import ProcessGroup, wait_healthy, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster, Node, api_port
from tests.integration.test_controller_storage import (
    _post_until,
    _quorum,
    _restart,
    _storage,
    _storage_or_none,
)

pytestmark = pytest.mark.integration

SET_NAME = "bs1"


@dataclass
class Outcome:
    """One put: when it ended, on which broker, and how."""

    at: float
    broker: str
    ok: bool
    detail: str


class Producer(threading.Thread):
    """Puts small batches to the set's current master until stopped; records every put's outcome."""

    def __init__(self, brokers: list[Broker]) -> None:
        super().__init__(daemon=True, name="producer")
        self.brokers = brokers
        self.outcomes: list[Outcome] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        counter = itertools.count()
        master: Broker | None = None
        while not self.stop_event.is_set():
            master = master or self._master()
            if master is None:
                self.stop_event.wait(0.05)
                continue
            bodies = [f"m{next(counter)}" for _ in range(3)]
            try:
                code, reply = master.put(bodies)
                ok = code == 200 and reply.get("status") == "PUT_OK"
                detail = f"{code} {reply.get('status')} {reply.get('remark', '')}"
            except OSError as exc:
                ok, detail = False, repr(exc)
            self.outcomes.append(Outcome(time.monotonic(), master.name, ok, detail))
            if not ok:
                master = None  # ask again who the master is
            self.stop_event.wait(0.02)

    def _master(self) -> Broker | None:
        for broker in self.brokers:
            status = broker.try_status()
            if status is not None and status["role"] == "MASTER" and not status["fenced"]:
                return broker
        return None

    def acked(self) -> int:
        return sum(o.ok for o in self.outcomes)

    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def wait_acked(self, more: int, timeout: float = 10.0) -> None:
        target = self.acked() + more
        wait_until(lambda: self.acked() >= target, timeout, message=f"{more} more acknowledged puts")

    def finish(self) -> None:
        self.stop_event.set()
        self.join(15)


def _start_brokers(group: ProcessGroup, base: Path, controllers: str) -> list[Broker]:
    """Three brokers of ``SET_NAME``; returns once the first one is master with a SyncStateSet of 3."""
    brokers = [
        Broker(f"b{i}", base / f"b{i}", {**BROKER_TEST_SETTINGS, "brokerName": SET_NAME}) for i in range(3)
    ]
    brokers[0].start(group, controllers)
    wait_until(lambda: (brokers[0].try_status() or {}).get("role") == "MASTER", 20, message="a master")
    for broker in brokers[1:]:
        broker.launch(group, controllers)
    wait_healthy([(b.proc, b.url) for b in brokers[1:]])
    wait_until(
        lambda: len((brokers[0].try_status() or {}).get("localSyncStateSet", [])) == 3,
        30,
        interval=0.05,
        message="SyncStateSet of 3",
    )
    return brokers


def _decisions(cluster: ControllerCluster) -> dict[str, Any]:
    """What the serving leader decided: ``/v1/groups`` and the replica-info of every broker set."""
    leader = cluster.leader(timeout=15)
    status, groups = leader.get("/v1/groups", timeout=2.0)
    assert status == 200, groups
    names = sorted(name for names in groups["clusters"].values() for name in names)
    assert names == [SET_NAME], groups
    infos = {}
    for name in names:
        status, info = leader.get(f"/v1/groups/{name}/replica-info", timeout=2.0)
        assert status == 200, info
        infos[name] = info
    return {"groups": groups, "replicaInfo": infos}


def _wait_voters(cluster: ControllerCluster, nodes: list[Node], timeout: float = 20.0) -> None:
    """Until the serving leader's voter set is the current stores of ``nodes``, every one a voter."""
    expected = {_storage(n)["raftId"] for n in nodes}

    def done() -> bool:
        voters = {v["raftId"] for v in _quorum(cluster.leader(timeout=10))["voters"]}
        return voters == expected and all(_storage(n)["role"] == "voter" for n in nodes)

    wait_until(done, timeout, interval=0.1, message=f"voters {sorted(expected)}")


def _wait_observer(node: Node, old_raft_id: str | None = None) -> str:
    """Until ``node`` answers as an observer (with a store other than ``old_raft_id``); its raftId."""

    def observer() -> str | None:
        storage = _storage_or_none(node) or {}
        fresh = storage.get("raftId") not in (None, old_raft_id)
        return storage["raftId"] if storage.get("role") == "observer" and fresh else None

    return wait_until(observer, 20, interval=0.1, message=f"{node.node_id} is an observer")


def _add(cluster: ControllerCluster, node: Node) -> None:
    """addControllerPeer: the leader adds ``node``'s store once it caught up; ``node`` re-execs as a voter."""
    _post_until(cluster, "/v1/controller/peers/add", {"raftId": _storage(node)["raftId"]})
    wait_until(
        lambda: (_storage_or_none(node) or {}).get("role") == "voter", 20, message=f"{node.node_id} votes"
    )
    wait_healthy([(node.proc, node.url)], 20)


def _replace_disk(cluster: ControllerCluster, node: Node) -> None:
    """The disk replacement procedure: stop, wipe, start (observer), remove the old store, add the new."""
    old = _storage(node)["raftId"]
    assert node.proc is not None
    node.proc.kill()
    shutil.rmtree(node.store)
    _restart(cluster, node)
    new = _wait_observer(node, old)
    voters = {v["raftId"] for v in _quorum(cluster.leader(timeout=15, among=cluster.alive()))["voters"]}
    assert old in voters and new not in voters, "a wiped store must not vote before it is added"
    _post_until(cluster, "/v1/controller/peers/remove", {"address": node.address})
    _add(cluster, node)
    _wait_voters(cluster, cluster.nodes)
    cluster.wait_same_state(cluster.nodes, timeout=15)


def _kill_and_restart(cluster: ControllerCluster, node: Node) -> None:
    """kill -9 ``node``: the others still elect a serving leader, with the same voter set; restart it."""
    voters = {v["raftId"] for v in _quorum(cluster.leader(timeout=10))["voters"]}
    assert node.proc is not None
    node.proc.kill()
    serving = cluster.leader(timeout=15)
    assert serving is not node
    assert {v["raftId"] for v in _quorum(serving)["voters"]} == voters
    _restart(cluster, node)
    wait_healthy([(node.proc, node.url)], 20)
    cluster.wait_same_state(cluster.nodes, timeout=15)


def _remove(cluster: ControllerCluster, node: Node, timeout: float = 20.0) -> list[str]:
    """removeControllerPeer ``node`` through the serving leader until it answers 200; returns the nodes
    that, being the leader, answered 2007 (handed leadership over) on the way."""
    handed_over = []

    def attempt() -> bool | None:
        leader = cluster.leader(timeout=10)
        status, body = leader.post("/v1/controller/peers/remove", {"address": node.address})
        if leader is node and body.get("code") == 2007:
            handed_over.append(node.node_id)
        return status == 200 or None

    wait_until(attempt, timeout, interval=0.2, message=f"remove {node.node_id}")
    return handed_over


@contextlib.contextmanager
def _under_load(cluster: ControllerCluster, brokers: list[Broker], at_least: int) -> Iterator[Producer]:
    """Runs the body with the producer putting; then no put may have failed (at least ``at_least`` acked)
    and the controllers' decisions must be what they were before."""
    producer = Producer(brokers)
    producer.start()
    try:
        producer.wait_acked(20)
        before = _decisions(cluster)
        yield producer
        producer.wait_acked(20)
        after = _decisions(cluster)
    finally:
        producer.finish()
    assert after == before
    failed = producer.failed()
    assert not failed, f"{len(failed)} of {len(producer.outcomes)} puts failed, first: {failed[:5]}"
    assert producer.acked() >= at_least, f"only {producer.acked()} acknowledged puts"


def test_a_controller_disk_is_replaced_under_a_produce_load(group: ProcessGroup, tmp_path: Path) -> None:
    started = time.monotonic()
    cluster = ControllerCluster(group, tmp_path / "controllers")
    cluster.start()
    cluster.leader(timeout=10)
    brokers = _start_brokers(group, tmp_path, ";".join(n.address for n in cluster.nodes))
    with _under_load(cluster, brokers, at_least=60) as producer:
        # Round 1: a follower's disk; round 2: the leader's.
        leader = cluster.leader(timeout=10)
        _replace_disk(cluster, cluster.followers(leader)[0])
        producer.wait_acked(20)
        _replace_disk(cluster, cluster.leader(timeout=10))
    print(f"disk replacement: {producer.acked()} puts acked in {time.monotonic() - started:.1f} s")


def test_controllers_scale_from_3_to_5_and_back_under_a_produce_load(
    group: ProcessGroup, tmp_path: Path
) -> None:
    started = time.monotonic()
    # n0..n2 bootstrap with a 3-peer config; n3 and n4 get a 5-peer config (the voter set lives in
    # the log, not in the config: n0..n2 need no new config to count n3 and n4).
    cluster = ControllerCluster(group, tmp_path / "controllers")
    cluster.start()
    cluster.leader(timeout=10)
    old = list(cluster.nodes)
    new = [Node(i, f"n{i}", api_port(), cluster.base_dir / f"n{i}") for i in (3, 4)]
    cluster.nodes.extend(new)
    for node in new:
        cluster.write_config(node)
    brokers = _start_brokers(group, tmp_path, ";".join(n.address for n in old))
    with _under_load(cluster, brokers, at_least=80) as producer:
        # 3 -> 5: the new nodes find the cluster and join as observers, then are added one at a time.
        for node in new:
            _restart(cluster, node)
        for node in new:
            _wait_observer(node)
        for node in new:
            _add(cluster, node)
        _wait_voters(cluster, cluster.nodes)
        assert len(_quorum(cluster.leader(timeout=10))["voters"]) == 5
        cluster.wait_same_state(cluster.nodes, timeout=15)
        producer.wait_acked(20)

        # The 5-voter quorum serves with an old controller down: kill the leader while an old node leads
        # (a few times at most, so that a new node leads when it is removed below), restart it.
        for kills in range(4):
            leader = cluster.leader(timeout=10)
            if leader in new and kills:
                break
            _kill_and_restart(cluster, leader if leader in old else old[0])
        producer.wait_acked(20)

        # 5 -> 3: remove n4 then n3, stopping each once it is out. A leader asked to remove itself hands
        # leadership over and answers 2007: retry on the new leader.
        handed_over = []
        for node in reversed(new):
            handed_over += _remove(cluster, node)
            assert node.proc is not None
            node.proc.stop()
        cluster.nodes[:] = old
        _wait_voters(cluster, old)
        cluster.wait_same_state(old, timeout=15)
    print(
        f"scale 3 -> 5 -> 3: {producer.acked()} puts acked in {time.monotonic() - started:.1f} s;"
        f" leaders that handed over when removed: {handed_over}"
    )
