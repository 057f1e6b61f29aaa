"""ReplicasManager against 3 real ``mqcontroller`` processes (docs/reference-behaviour.md §9,
docs/architecture.md §3).

Three managers run in this test process, each with a :class:`RecordingHooks` broker: a real object
that records every hook call and answers with the role and progress the test sets (no store, no HA
links -- those belong to the broker tests). Covered: first broker registers and is elected, the
others follow it; the master's SyncStateSet check grows the set; closing the master's sessions
(stopping its manager) makes the controller elect a slave at masterEpoch+1 and push it; a restart
resumes from the identity file with the same id; a controller outage fences nobody; an identity file
of another broker set refuses to start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.broker.config import BROKER_CONFIG
from mqha.errors import StorageError
from mqha.replicas_manager.client import ControllerClient
from mqha.replicas_manager.hooks import BrokerProgress, MasterInfo
from mqha.replicas_manager.planner_states import RegisterState, State
from mqha.replicas_manager.runner import ReplicasManager
from tests.helpers.processes import ProcessGroup, free_port
from tests.helpers.run_async import run_async
from tests.integration.controller_cluster import ControllerCluster

pytestmark = pytest.mark.integration

TIMEOUT = 10.0


async def eventually(
    predicate: Callable[[], Any], timeout: float = TIMEOUT, message: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message}: not within {timeout:g} s")
        await asyncio.sleep(0.02)


class RecordingHooks:
    """A broker stand-in implementing ``BrokerHooks``: records calls, answers what the test sets."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fenced: bool | None = None
        self.broker_id: int | None = None
        self.role = "NONE"
        self.epoch = 0
        self.master: MasterInfo | None = None
        self.sync_state_set: frozenset[int] = frozenset()
        self.wanted_sync_state_set: frozenset[int] | None = None  # None: keep the confirmed set
        self.current_progress = BrokerProgress(last_epoch=-1, max_offset=0, confirm_offset=0)

    def progress(self) -> BrokerProgress:
        return self.current_progress

    def set_broker_controller_id(self, broker_id: int) -> None:
        self.calls.append(("set_broker_controller_id", broker_id))
        self.broker_id = broker_id

    async def change_to_master(
        self, epoch: int, sync_state_set_epoch: int, sync_state_set: frozenset[int]
    ) -> bool:
        self.calls.append(("change_to_master", epoch, sync_state_set_epoch, sync_state_set))
        self.role, self.epoch, self.master, self.sync_state_set = "MASTER", epoch, None, sync_state_set
        self.current_progress = BrokerProgress(epoch, self.current_progress.max_offset, 0)
        return True

    async def change_to_slave(self, master: MasterInfo, epoch: int) -> bool:
        self.calls.append(("change_to_slave", master, epoch))
        self.role, self.epoch, self.master = "SLAVE", epoch, master
        self.current_progress = BrokerProgress(epoch, self.current_progress.max_offset, 0)
        return True

    def apply_sync_state_set(self, sync_state_set: frozenset[int], sync_state_set_epoch: int) -> None:
        self.calls.append(("apply_sync_state_set", sync_state_set, sync_state_set_epoch))
        self.sync_state_set = sync_state_set

    def maybe_shrink_sync_state_set(self) -> frozenset[int]:
        if self.role != "MASTER":
            return frozenset()
        return self.wanted_sync_state_set or self.sync_state_set

    def set_fenced(self, fenced: bool) -> None:
        self.calls.append(("set_fenced", fenced))
        self.fenced = fenced

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[0] == name]


def broker_config(base: Path, index: int, cluster: ControllerCluster, **extra: str) -> dict[str, Any]:
    given = {
        "brokerClusterName": "c1",
        "brokerName": "b1",
        "brokerIP1": "127.0.0.1",
        "listenPort": str(30911 + 10 * index),  # nothing listens there: the controller only stores it
        "storePathRootDir": str(base / f"broker{index}"),
        "enableControllerMode": "true",
        "controllerAddr": ";".join(node.address for node in cluster.nodes),
        "syncBrokerMetadataPeriod": "300",
        "checkSyncStateSetPeriod": "300",
        "syncControllerMetadataPeriod": "2000",
        "brokerHeartbeatInterval": "200",
        "controllerHeartBeatTimeoutMills": "3000",
        **extra,
    }
    return BROKER_CONFIG.resolve(given)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ControllerCluster]:
    with ProcessGroup() as group:
        c = ControllerCluster(group, tmp_path / "controllers", args=("--log-level", "WARNING"))
        c.start()
        c.leader(timeout=5)
        yield c


async def start_manager(config: dict[str, Any]) -> tuple[ReplicasManager, RecordingHooks]:
    hooks = RecordingHooks()
    manager = ReplicasManager(config, hooks, seed=0)
    await manager.start()
    return manager, hooks


async def leader_get(cluster: ControllerCluster, path: str) -> dict[str, Any]:
    def get() -> dict[str, Any]:
        status, body = cluster.leader(timeout=5).get(path)
        assert status == 200, body
        return body

    return await asyncio.to_thread(get)


@run_async(timeout=60)
async def test_register_elect_follow_failover_by_push_and_restart_from_files(
    cluster: ControllerCluster, tmp_path: Path
) -> None:
    configs = [broker_config(tmp_path, i, cluster) for i in range(3)]
    managers: list[ReplicasManager] = []
    try:
        # The first broker registers (id 1) and, with no master, elects itself (docs/reference-behaviour.md
        # §9.2).
        m1, h1 = await start_manager(configs[0])
        managers.append(m1)
        assert h1.calls[0] == ("set_fenced", True)
        assert await m1.wait_running(TIMEOUT)
        assert (
            m1.status.broker_controller_id,
            m1.status.master_broker_id,
            m1.status.master_epoch,
            m1.status.role,
        ) == (1, 1, 1, "MASTER")
        assert h1.named("change_to_master") == [("change_to_master", 1, 1, frozenset({1}))]
        assert h1.fenced is False and m1.status.state is State.RUNNING
        written = Path(configs[0]["storePathBrokerIdentity"]).read_text()
        assert written.startswith("c1#b1#1#") and written.count("#") == 4  # store id and checksum
        assert not Path(configs[0]["storePathBrokerIdentity"] + "-temp").exists()

        # The others get ids 2 and 3 and follow broker 1 (registration names the live master).
        m2, h2 = await start_manager(configs[1])
        m3, h3 = await start_manager(configs[2])
        managers += [m2, m3]
        assert await m2.wait_running(TIMEOUT) and await m3.wait_running(TIMEOUT)
        # Started together, they race for the next id: the loser's apply-id fails (2014) and it
        # starts over with a new id (docs/reference-behaviour.md §9.3 step 4), so either may end up with 2.
        assert {m2.status.broker_controller_id, m3.status.broker_controller_id} == {2, 3}
        for manager, hooks in ((m2, h2), (m3, h3)):
            assert (manager.status.role, manager.status.master_epoch) == ("SLAVE", 1)
            assert hooks.master == MasterInfo(1, "127.0.0.1:30911", "127.0.0.1:30912")
            assert not hooks.named("change_to_master")
        await eventually(
            lambda: all(s["state"] == "open" for m in managers for s in m.status.sessions().values()),
            message="a session to every controller",
        )
        assert m1.status.controller_leader == (await asyncio.to_thread(cluster.leader, 5)).address

        # The master's SyncStateSet check asks for the replicas its HA layer has in sync
        # (docs/reference-behaviour.md §9.5).
        h1.wanted_sync_state_set = frozenset({1, 2, 3})
        await eventually(
            lambda: m1.status.sync_state_set == {1, 2, 3}, message="SyncStateSet grows to {1,2,3}"
        )
        assert h1.named("apply_sync_state_set")[-1] == ("apply_sync_state_set", frozenset({1, 2, 3}), 2)
        info = await leader_get(cluster, "/v1/groups/b1/replica-info")
        assert info["syncStateSet"] == [1, 2, 3] and info["syncStateSetEpoch"] == 2

        # The master's sessions close: the controller elects a slave at once and pushes the change.
        await m1.stop()
        managers.remove(m1)
        assert h1.calls[-1] == ("set_fenced", True)
        winner = await eventually(
            lambda: next((m for m in (m2, m3) if m.status.role == "MASTER"), None),
            message="a slave becomes master",
        )
        other = m3 if winner is m2 else m2
        assert winner.status.master_epoch == 2
        await eventually(
            lambda: (
                other.status.master_epoch == 2
                and other.status.master_broker_id == winner.status.broker_controller_id
            )
        )
        assert (
            sum(s["pushes"] for m in (m2, m3) for s in m.status.sessions().values()) >= 1
        )  # by push, not by sync
        winner_hooks = h2 if winner is m2 else h3
        assert winner_hooks.named("change_to_master")[-1][1] == 2
        assert winner_hooks.fenced is False  # never fenced again after RUNNING

        # Restart of the old master: same id from its identity file, no new id, follows the new master.
        m1b, h1b = await start_manager(configs[0])
        managers.append(m1b)
        assert h1b.calls[:2] == [("set_fenced", True), ("set_broker_controller_id", 1)]
        assert m1b.status.register_state in (
            RegisterState.CREATE_METADATA_FILE_DONE,
            RegisterState.REGISTERED,
        )
        assert await m1b.wait_running(TIMEOUT)
        assert (m1b.status.broker_controller_id, m1b.status.role, m1b.status.master_epoch) == (1, "SLAVE", 2)
        assert h1b.master is not None and h1b.master.broker_id == winner.status.broker_controller_id
        assert not Path(configs[0]["storePathBrokerIdentity"] + "-temp").exists()
        next_id = await leader_get(cluster, "/v1/brokers/next-id?clusterName=c1&brokerName=b1")
        assert next_id["nextBrokerId"] == 4  # no fourth id was handed out
    finally:
        for manager in managers:
            await manager.stop()


@run_async(timeout=60)
async def test_controller_outage_after_running_fences_nobody(
    cluster: ControllerCluster, tmp_path: Path
) -> None:
    m1, h1 = await start_manager(broker_config(tmp_path, 0, cluster))
    assert await m1.wait_running(TIMEOUT)
    m2, h2 = await start_manager(broker_config(tmp_path, 1, cluster))
    try:
        assert await m2.wait_running(TIMEOUT)
        assert (m1.status.role, m2.status.role) == ("MASTER", "SLAVE")
        await asyncio.to_thread(cluster.group.stop_all)  # every controller down
        await eventually(
            lambda: all(s["state"] != "open" for m in (m1, m2) for s in m.status.sessions().values()),
            message="sessions lost",
        )
        await asyncio.sleep(2.0)  # several heartbeat, sync and check periods without a controller
        for manager, hooks in ((m1, h1), (m2, h2)):
            assert manager.status.state is State.RUNNING
            assert hooks.fenced is False
            assert hooks.named("set_fenced") == [("set_fenced", True), ("set_fenced", False)]
        assert (m1.status.role, m1.status.master_epoch, m2.status.role, m2.status.master_epoch) == (
            "MASTER",
            1,
            "SLAVE",
            1,
        )
    finally:
        await m1.stop()
        await m2.stop()


@run_async(timeout=20)
async def test_identity_file_of_another_broker_set_refuses_to_start(tmp_path: Path) -> None:
    given = {
        "brokerName": "b1",
        "brokerClusterName": "c1",
        "enableControllerMode": "true",
        "controllerAddr": "127.0.0.1:1",  # never contacted: the check comes first
        "storePathRootDir": str(tmp_path),
    }
    config = BROKER_CONFIG.resolve(given)
    path = Path(config["storePathBrokerIdentity"])
    path.write_text("otherCluster#b1#2")
    hooks = RecordingHooks()
    manager = ReplicasManager(config, hooks)
    with pytest.raises(StorageError) as info:
        await manager.start()
    message = str(info.value)
    assert str(path) in message and "'otherCluster'" in message and "'c1'" in message
    assert "\n" not in message
    assert hooks.calls == []  # nothing happened to the broker
    await manager.stop()

    # The same for a temp file naming another broker (and the metadata file absent).
    path.unlink()
    Path(str(path) + "-temp").write_text("c1#b9#2#127.0.0.1:1;1")
    with pytest.raises(StorageError, match=r"brokerName='b9'.*brokerName='b1'"):
        await ReplicasManager(config, RecordingHooks()).start()


@run_async(timeout=20)
async def test_identity_files_are_written_atomically_and_resume_from_temp(tmp_path: Path) -> None:
    from mqha.replicas_manager import identity
    from mqha.replicas_manager.actions import BrokerIdentity, TempBrokerIdentity

    path = str(tmp_path / "store" / "brokerIdentity")
    assert identity.load(path, "c1", "b1") == (None, None)
    temp = TempBrokerIdentity("c1", "b1", 4, "127.0.0.1:1;5")
    identity.write_temp_identity(path, temp)
    assert identity.load(path, "c1", "b1") == (None, temp)
    identity.write_identity(path, BrokerIdentity("c1", "b1", 4))
    assert identity.load(path, "c1", "b1") == (BrokerIdentity("c1", "b1", 4), None)  # metadata wins
    identity.delete(path + "-temp")
    identity.delete(path + "-temp")  # a missing file is fine
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["brokerIdentity"]  # no leftovers
    Path(path).write_text("c1#b1#")  # not "loaded": ignored, as in the reference
    assert identity.load(path, "c1", "b1") == (None, None)


@run_async(timeout=30)
async def test_client_follows_a_redirect_and_survives_a_dead_controller(cluster: ControllerCluster) -> None:
    leader = await asyncio.to_thread(cluster.leader, 5)
    follower = next(node for node in cluster.nodes if node is not leader)
    dead = f"127.0.0.1:{free_port()}"  # listed but nothing listens there
    client = ControllerClient(
        [dead, *(node.address for node in cluster.nodes)], on_push=lambda address, message: None
    )
    await client.start()
    params = {"clusterName": "c1", "brokerName": "zz"}
    try:
        client.leader = follower.address  # 421 with leaderAddress: followed once
        reply = await client.call("GET", "/v1/brokers/next-id", params=params)
        assert reply is not None and reply.ok and reply.payload["nextBrokerId"] == 1
        assert client.leader == leader.address

        client.leader = dead  # connection refused: forgotten, rediscovered, retried
        reply = await client.call("GET", "/v1/brokers/next-id", params=params)
        assert reply is not None and reply.ok and client.leader == leader.address

        # Every reachable controller gets a session; the dead one keeps retrying.
        await eventually(
            lambda: all(
                client.heartbeats.sessions()[node.address]["state"] == "open" for node in cluster.nodes
            ),
            message="sessions open",
        )
        dead_session = client.heartbeats.sessions()[dead]
        assert dead_session["state"] != "open" and "connect" in (dead_session["lastError"] or "")
        body = {"clusterName": "c1", "brokerName": "zz", "brokerAddr": "127.0.0.1:1", "brokerId": 1}
        assert await client.heartbeats.send_heartbeat(body) == 3
        assert await client.heartbeats.post_heartbeat_all(body) == 3
    finally:
        await client.close()
    assert all(session["state"] == "closed" for session in client.heartbeats.sessions().values())
