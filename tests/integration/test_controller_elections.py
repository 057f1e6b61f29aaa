"""Controller-triggered, designated and session-driven elections on 3 real ``mqcontroller`` processes.

docs/reference-behaviour.md §3.4 (inactive-master scan), §5.4, §6, §7 (heartbeat expiry, controller trigger,
role-change push), docs/architecture.md §3 (broker session, admin token). One cluster serves the whole module;
each test uses its own broker sets, and a test that changes a live config key restores it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.controller_cluster import (
    ControllerCluster,
    HeartbeatSender,
    Node,
    heartbeat,
    register_broker,
)

pytestmark = pytest.mark.integration

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HB_TIMEOUT_MS = 600  # short heartbeat timeout: the expiry scan runs every 200 ms


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerCluster]:
    with ProcessGroup() as group:
        c = ControllerCluster(group, tmp_path_factory.mktemp("elections"), settings={"adminAuthToken": TOKEN})
        c.start()
        c.leader(timeout=5)
        yield c


def _leader(cluster: ControllerCluster) -> Node:
    return cluster.leader(timeout=5)


def _replica_info(cluster: ControllerCluster, name: str) -> dict[str, Any]:
    status, body = _leader(cluster).get(f"/v1/groups/{name}/replica-info")
    assert status == 200, body
    return body


def _alive(cluster: ControllerCluster, name: str) -> dict[int, bool]:
    status, body = _leader(cluster).get(f"/v1/sync-state-data?brokerName={name}")
    assert status == 200, body
    info = body["replicasInfoTable"][name]
    return {r["brokerId"]: r["alive"] for r in info["inSyncReplicas"] + info["notInSyncReplicas"]}


def _setup_set(cluster: ControllerCluster, name: str, beats: HeartbeatSender, sss: list[int]) -> None:
    """Three registered replicas with heartbeats, broker 1 master, the given SyncStateSet."""
    leader = _leader(cluster)
    assert [register_broker(leader, name) for _ in range(3)] == [1, 2, 3]
    beats.send_once()
    wait_until(lambda: all(_alive(cluster, name).values()), timeout=3, message=f"{name} replicas alive")
    status, body = leader.post(f"/v1/groups/{name}/elect", {"clusterName": "c1", "brokerId": 1})
    assert status == 200 and body["masterBrokerId"] == 1, body
    if sss != [1]:
        alter = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": sss, "syncStateSetEpoch": 1}
        status, body = leader.post(f"/v1/groups/{name}/sync-state-set", alter)
        assert status == 200, body


def _set_config(cluster: ControllerCluster, values: dict[str, Any]) -> None:
    for node in cluster.alive():
        status, body = node.call("PUT", "/v1/controller/config", values, headers=AUTH)
        assert status == 200, body


def test_master_heartbeat_timeout_elects_the_best_of_the_sync_state_set(cluster: ControllerCluster) -> None:
    with HeartbeatSender(cluster, interval=0.1) as beats:
        beats.set(heartbeat("hb", 1, epoch=1, max_offset=100, timeout_ms=HB_TIMEOUT_MS))
        beats.set(heartbeat("hb", 2, epoch=1, max_offset=90, timeout_ms=HB_TIMEOUT_MS))
        beats.set(heartbeat("hb", 3, epoch=1, max_offset=100, timeout_ms=HB_TIMEOUT_MS))
        _setup_set(cluster, "hb", beats, [1, 2, 3])

        beats.drop("hb", 1)  # the master hangs: no more heartbeats, no session close
        stopped = time.monotonic()
        info = wait_until(
            lambda: (i := _replica_info(cluster, "hb"))["masterBrokerId"] != 1 and i,
            timeout=HB_TIMEOUT_MS / 1000 + 2.0,
            message="controller elects a new master after the heartbeat timeout",
        )
        elapsed = time.monotonic() - stopped
    # docs/reference-behaviour.md §6: same epoch, higher maxOffset wins -> 3; SyncStateSet becomes {3}.
    assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSet"]) == (3, 2, [3])
    assert elapsed < HB_TIMEOUT_MS / 1000 + 1.5, elapsed


def test_unclean_election_only_when_enabled(cluster: ControllerCluster) -> None:
    with HeartbeatSender(cluster, interval=0.1) as beats:
        for name in ("uc-off", "uc-on"):
            beats.set(heartbeat(name, 1, timeout_ms=HB_TIMEOUT_MS))
            beats.set(heartbeat(name, 2, max_offset=5, timeout_ms=HB_TIMEOUT_MS))
            beats.set(heartbeat(name, 3, max_offset=9, timeout_ms=HB_TIMEOUT_MS))
            _setup_set(cluster, name, beats, [1])  # only the master is in sync

        # Disabled (default): no candidate in {1} -> the master is cleared, masterEpoch+1
        # (docs/reference-behaviour.md §5.4 7).
        beats.drop("uc-off", 1)
        info = wait_until(
            lambda: (i := _replica_info(cluster, "uc-off"))["masterEpoch"] == 2 and i,
            timeout=3,
            message="controller election without a candidate",
        )
        assert info["masterBrokerId"] is None and info["syncStateSet"] == [1]
        time.sleep(0.7)  # no retries bump the epoch again (2004 is a final answer)
        assert _replica_info(cluster, "uc-off")["masterEpoch"] == 2

        # Enabled (live config, every node): the best live replica outside the SyncStateSet wins.
        _set_config(cluster, {"enableElectUncleanMaster": True})
        try:
            beats.drop("uc-on", 1)
            info = wait_until(
                lambda: (
                    (i := _replica_info(cluster, "uc-on"))["masterBrokerId"] is not None
                    and i["masterEpoch"] == 2
                    and i
                ),
                timeout=3,
                message="unclean controller election",
            )
            assert (info["masterBrokerId"], info["syncStateSet"]) == (3, [3])  # highest maxOffset

            # A broker trigger on the set left without a master now elects too.
            status, body = _leader(cluster).post(
                "/v1/groups/uc-off/elect", {"clusterName": "c1", "brokerId": 2}
            )
            assert status == 200, body
            assert (body["masterBrokerId"], body["masterEpoch"]) == (3, 3)
        finally:
            _set_config(cluster, {"enableElectUncleanMaster": False})


def test_designated_election_needs_the_admin_token(cluster: ControllerCluster) -> None:
    with HeartbeatSender(cluster, interval=0.1) as beats:
        for broker_id in (1, 2, 3):
            beats.set(heartbeat("ds", broker_id, timeout_ms=5000))
        _setup_set(cluster, "ds", beats, [1, 2, 3])
        leader = _leader(cluster)
        designate = {"clusterName": "c1", "brokerId": 2, "designateElect": True}

        status, body = leader.post("/v1/groups/ds/elect", designate)
        assert (status, body["code"]) == (401, 16), body
        status, body = leader.post("/v1/groups/ds/elect", designate, headers={"Authorization": "Bearer nope"})
        assert (status, body["code"]) == (403, 16), body
        assert _replica_info(cluster, "ds")["masterBrokerId"] == 1

        status, body = leader.post("/v1/groups/ds/elect", designate, headers=AUTH)
        assert status == 200, body
        assert (body["masterBrokerId"], body["masterEpoch"], body["syncStateSet"]) == (2, 2, [2])

        # Designating the current (alive) master: 2011; designating one outside the set: 2012.
        status, body = leader.post("/v1/groups/ds/elect", designate, headers=AUTH)
        assert (status, body["code"]) == (409, 2011), body
        status, body = leader.post("/v1/groups/ds/elect", {**designate, "brokerId": 3}, headers=AUTH)
        assert (status, body["code"]) == (409, 2012), body
        # A broker trigger needs no token.
        status, body = leader.post("/v1/groups/ds/elect", {"clusterName": "c1", "brokerId": 3})
        assert (status, body["code"]) == (409, 2011), body


def test_inactive_master_scan_reelects_a_master_the_leader_never_heard_of(cluster: ControllerCluster) -> None:
    with HeartbeatSender(cluster, interval=0.1) as beats:
        beats.set(heartbeat("im", 2, timeout_ms=5000))
        beats.set(heartbeat("im", 3, timeout_ms=5000))
        leader = _leader(cluster)
        assert [register_broker(leader, "im") for _ in range(3)] == [1, 2, 3]
        # First election: the registered requester wins without a liveness check (docs/reference-behaviour.md
        # §5.4 step 3).
        status, body = leader.post("/v1/groups/im/elect", {"clusterName": "c1", "brokerId": 1})
        assert status == 200 and body["masterBrokerId"] == 1, body
        # Master 1 never heartbeats while 2 and 3 do: the leader's scan (docs/reference-behaviour.md §3.4)
        # triggers an election; {1} has no live member and unclean is off, so the master is cleared.
        info = wait_until(
            lambda: (i := _replica_info(cluster, "im"))["masterEpoch"] == 2 and i,
            timeout=3,
            message="inactive-master scan triggers an election",
        )
        assert info["masterBrokerId"] is None


async def _open_session(http: aiohttp.ClientSession, node: Node, hb: dict[str, Any]) -> Any:
    ws = await http.ws_connect(node.url + "/v1/brokers/session")
    await ws.send_str(json.dumps({"type": "heartbeat", **hb}))
    return ws


async def _next_push(ws: Any, timeout: float, master_epoch: int) -> dict[str, Any]:
    """The next roleChanged push of ``master_epoch`` (earlier ones are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        msg = await asyncio.wait_for(ws.receive(), max(0.01, deadline - time.monotonic()))
        assert msg.type == aiohttp.WSMsgType.TEXT, msg
        data = json.loads(msg.data)
        if data.get("type") == "roleChanged" and data["masterEpoch"] >= master_epoch:
            return data


# A stand-in broker process: keeps a session to every controller and heartbeats over them.
BROKER_PROCESS = """
import asyncio, sys
import aiohttp

async def main(heartbeat, urls):
    async with aiohttp.ClientSession() as http:
        sockets = [await http.ws_connect(url + "/v1/brokers/session") for url in urls]
        while True:
            for ws in sockets:
                await ws.send_str(heartbeat)
            await asyncio.sleep(0.2)

asyncio.run(main(sys.argv[1], sys.argv[2:]))
"""


async def _session_scenario(cluster: ControllerCluster, group: ProcessGroup) -> None:
    leader = _leader(cluster)
    ids = [register_broker(leader, "ss") for _ in range(3)]
    assert ids == [1, 2, 3]
    # Broker 1 (the future master) is a real process; 2 and 3 are sessions held by this test.
    # Heartbeats only go over sessions, with a long timeout: only the session close reveals the crash.
    hb1 = heartbeat("ss", 1, max_offset=10, timeout_ms=30_000)
    broker1 = group.start_python(
        ["-c", BROKER_PROCESS, json.dumps(hb1), *(n.url for n in cluster.alive())], name="broker-ss-1"
    )
    async with aiohttp.ClientSession() as http:
        sessions: dict[int, list[Any]] = {}
        for broker_id in (2, 3):
            hb = heartbeat("ss", broker_id, max_offset=10 * broker_id, timeout_ms=30_000)
            sessions[broker_id] = [await _open_session(http, node, hb) for node in cluster.alive()]
        leader_index = cluster.alive().index(leader)

        # A bad message gets an error frame; the session stays open.
        await sessions[3][leader_index].send_str("{not json")
        msg = await asyncio.wait_for(sessions[3][leader_index].receive(), 2)
        error = json.loads(msg.data)
        assert (error["type"], error["code"]) == ("error", 2005), error

        deadline = time.monotonic() + 5
        while not all(_alive(cluster, "ss").values()):
            assert time.monotonic() < deadline, "session heartbeats not recorded"
            await asyncio.sleep(0.05)

        status, body = leader.post("/v1/groups/ss/elect", {"clusterName": "c1", "brokerId": 1})
        assert status == 200, body
        # Role-change push of that election to every live member over its session (docs/reference-behaviour.md
        # §7.4).
        push = await _next_push(sessions[2][leader_index], timeout=2, master_epoch=1)
        assert (push["brokerName"], push["masterBrokerId"], push["masterEpoch"]) == ("ss", 1, 1)
        assert push["masterHaAddress"] == "127.0.0.1:20901" and push["syncStateSet"] == [1]
        alter = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1, 2, 3], "syncStateSetEpoch": 1}
        status, body = leader.post("/v1/groups/ss/sync-state-set", alter)
        assert status == 200, body

        # The master crashes (kill -9): its sessions drop and the leader elects at once, not after 30 s.
        broker1.kill()
        killed_at = time.monotonic()
        push = await _next_push(sessions[3][leader_index], timeout=2, master_epoch=2)
        elapsed = time.monotonic() - killed_at
        assert (push["masterBrokerId"], push["masterEpoch"], push["syncStateSet"]) == (3, 2, [3])
        print(f"master kill -9 -> roleChanged push of the new master: {elapsed * 1000:.0f} ms")
        assert elapsed < 1.0, elapsed
        info = _replica_info(cluster, "ss")
        assert (info["masterBrokerId"], info["masterEpoch"]) == (3, 2)

        # A new process of broker 2 on a new session: closing the old session drops nothing.
        hb2 = heartbeat("ss", 2, max_offset=20, timeout_ms=30_000)
        fresh = await _open_session(http, leader, hb2)
        await asyncio.sleep(0.2)
        await sessions[2][leader_index].close()
        await asyncio.sleep(0.3)
        assert _alive(cluster, "ss")[2] is True
        for ws in [fresh, *sessions[2], *sessions[3]]:
            await ws.close()


def test_session_close_of_the_master_elects_at_once_and_pushes_the_role_change(
    cluster: ControllerCluster,
) -> None:
    with ProcessGroup() as group:
        asyncio.run(_session_scenario(cluster, group))


# -- issue 25: the election rule (docs/architecture.md §3.2) on real controllers -----------------------

INC = {1: "a" * 32, 2: "b" * 32, 3: "c" * 32}


def _metric(node: Node, name: str, broker_name: str) -> float | None:
    import urllib.request

    text = urllib.request.urlopen(f"http://{node.address}/metrics", timeout=2).read().decode()
    prefix = f'{name}{{broker_name="{broker_name}"}} '
    return next((float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)), None)


def test_lossy_survivors_wait_then_the_loss_is_declared_after_the_timeout(cluster: ControllerCluster) -> None:
    name = "lossy"
    with HeartbeatSender(cluster, interval=0.1) as beats:
        for broker_id in (1, 2, 3):
            beats.set(
                {
                    **heartbeat(name, broker_id, epoch=1, max_offset=100, timeout_ms=HB_TIMEOUT_MS),
                    "incarnation": INC[broker_id],
                }
            )
        _setup_set(cluster, name, beats, [1, 2, 3])
        leader = _leader(cluster)
        # The master shrinks the set to itself with ack point 100: 2 and 3 join the ELR credited 100.
        # Whether the expiry scan clears the dead master first or the lossy restart triggers the
        # election, the set waits, and only the loss election below makes 1 master in a new epoch.
        shrink = {
            "masterBrokerId": 1,
            "masterEpoch": 1,
            "syncStateSet": [1],
            "syncStateSetEpoch": 2,
            "confirmOffset": 100,
        }
        status, body = leader.post(f"/v1/groups/{name}/sync-state-set", shrink)
        assert status == 200, body
        # 2 and 3 go down; the master dies; it comes back having lost [60, 100).
        beats.drop(name, 2)
        beats.drop(name, 3)
        beats.drop(name, 1)
        wait_until(lambda: not any(_alive(cluster, name).values()), timeout=5, message="all down")
        lossy = heartbeat(name, 1, epoch=1, max_offset=60, timeout_ms=HB_TIMEOUT_MS)
        beats.set(
            {**lossy, "incarnation": "d" * 32, "lossyRecovery": True, "confirmOffsetBeforeRecovery": 100}
        )
        beats.send_once()
        status, body = _leader(cluster).post(f"/v1/groups/{name}/elect", {"clusterName": "c1", "brokerId": 1})
        assert body["code"] == 2012 and "broker(s) 2, 3 not alive" in body["remark"], body
        assert _metric(_leader(cluster), "mqha_controller_election_waiting", name) == 1.0
        # A short timeout (live key): the next attempt elects 1 and declares [60, 100) lost.
        _set_config(cluster, {"uncleanRecoveryTimeoutMills": 300})
        try:
            info = wait_until(
                lambda: (
                    (i := _replica_info(cluster, name))["masterBrokerId"] == 1 and i["masterEpoch"] > 1 and i
                ),
                timeout=5,
                message="the loss election after the timeout",
            )
        finally:
            _set_config(cluster, {"uncleanRecoveryTimeoutMills": 300_000})
    group = next(g for g in _leader(cluster).state()["state"]["groups"] if g["brokerName"] == name)
    assert group["ackedWatermark"] == 60 and info["syncStateSet"] == [1]
    assert _metric(_leader(cluster), "mqha_controller_acked_data_lost_total", name) == 1.0
    assert _metric(_leader(cluster), "mqha_controller_election_waiting", name) == 0.0


def test_an_expansion_must_name_the_incarnation_alive_now(cluster: ControllerCluster) -> None:
    name = "incarnations"
    with HeartbeatSender(cluster, interval=0.1) as beats:
        for broker_id in (1, 2, 3):
            beats.set({**heartbeat(name, broker_id, timeout_ms=60_000), "incarnation": INC[broker_id]})
        _setup_set(cluster, name, beats, [1])
        expand = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1, 2], "syncStateSetEpoch": 1}
        # Broker 2 restarted (new incarnation) after the master saw its old process catch up: refused.
        beats.set({**heartbeat(name, 2, timeout_ms=60_000), "incarnation": "e" * 32})
        beats.send_once()
        status, body = _leader(cluster).post(
            f"/v1/groups/{name}/sync-state-set", {**expand, "memberIncarnations": {"2": INC[2]}}
        )
        assert body["code"] == 2003 and "restarted since" in body["remark"], body
        # The master saw the new process catch up: accepted.
        status, body = _leader(cluster).post(
            f"/v1/groups/{name}/sync-state-set", {**expand, "memberIncarnations": {"2": "e" * 32}}
        )
        assert status == 200 and body["syncStateSet"] == [1, 2], body
