"""Issue 23 with real processes: the controller API with ``authenticationEnabled=true``.

3 ``mqcontroller`` + 2 ``mqbroker`` of one set, all with the same ``innerClientAuthenticationCredentials``
(brokers sign every controller call) and the controllers with an ``adminAuthToken``. An attacker on
the network -- no secret, a wrong secret, a captured signed request replayed, an expired one, the
brokers' own credentials on an admin call -- is refused (401/403, code 16) on every mutating path,
and the applied state stays as it was. The authenticated cluster still fails over by itself.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mqha.security.basic import basic_header
from mqha.security.credentials import InnerCredentials, User, render_inner_credentials, render_user
from mqha.security.signing import sign
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_NAME, BROKER_TEST_SETTINGS, CLUSTER_NAME, Broker
from tests.integration.controller_cluster import ControllerCluster, Node, request
from tests.integration.test_mqadmin import TOKEN_ENV, fails, ok

pytestmark = pytest.mark.integration

CREDENTIALS = InnerCredentials("mqha-inner", "inner-secret-key-0123")
WRONG = InnerCredentials("mqha-inner", "not-the-secret-key")
USER = User("alice", "alice-password")
ADMIN_TOKEN = "admin-token-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
AUTH_SETTINGS = {
    "authenticationEnabled": "true",
    "innerClientAuthenticationCredentials": render_inner_credentials(CREDENTIALS),
}
BROKER_SETTINGS = {
    **BROKER_TEST_SETTINGS,
    **AUTH_SETTINGS,
    "initAuthenticationUser": render_user(USER),
    "slaveTimeout": "1000",
    "controllerHeartBeatTimeoutMills": "3000",
}


def signed(
    node: Node,
    method: str,
    path: str,
    body: Any = None,
    *,
    credentials: InnerCredentials = CREDENTIALS,
    age_ms: int = 0,
    nonce: str | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """``method path`` with a signature over the exact body bytes; also returns the headers used."""
    raw = b"" if body is None else json.dumps(body).encode()
    headers = signature(method, path, raw, node=node, credentials=credentials, age_ms=age_ms, nonce=nonce)
    status, reply = node.call(method, path, raw=raw if body is not None else None, headers=headers)
    return status, reply, headers


def signature(
    method: str,
    path: str,
    raw: bytes,
    *,
    node: Node,
    credentials: InnerCredentials = CREDENTIALS,
    age_ms: int = 0,
    nonce: str | None = None,
) -> dict[str, str]:
    """The ``Authorization`` header of one request to ``node``, as a broker makes it."""
    now_ms = int(time.time() * 1000)
    nonce = nonce or secrets.token_hex(16)
    proof = sign(credentials, method, node.address, path, raw, timestamp_ms=now_ms - age_ms, nonce=nonce)
    return {"Authorization": proof}


class AuthCluster:
    """The controllers and brokers of this module, and what an observer reads of their state."""

    def __init__(self, group: ProcessGroup, base: Path) -> None:
        self.group = group
        self.base = base
        self.controllers = ControllerCluster(
            group, base / "controllers", settings={**AUTH_SETTINGS, "adminAuthToken": ADMIN_TOKEN}
        )
        self.brokers = [Broker(f"b{i}", base / f"b{i}", BROKER_SETTINGS) for i in range(2)]

    @property
    def controller_addr(self) -> str:
        return ";".join(n.address for n in self.controllers.nodes)

    def leader(self) -> Node:
        return self.controllers.leader(timeout=10)

    def replica_info(self) -> dict[str, Any]:
        status, body = self.leader().get(f"/v1/groups/{BROKER_NAME}/replica-info")
        assert status == 200, body
        return body

    def snapshot(self) -> tuple[Any, ...]:
        """The public state an attack must not change."""
        leader = self.leader()
        groups = leader.get("/v1/groups")
        sync = leader.get(f"/v1/sync-state-data?brokerName={BROKER_NAME}")
        return groups, self.replica_info(), sync

    def master(self, timeout: float = 30.0, exclude: Broker | None = None) -> Broker:
        def find() -> Broker | None:
            found = [
                b
                for b in self.brokers
                if b is not exclude
                and (s := b.try_status()) is not None
                and s["role"] == "MASTER"
                and not s["fenced"]
            ]
            return found[0] if len(found) == 1 else None

        return wait_until(find, timeout, interval=0.05, message="exactly one unfenced master")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    with ProcessGroup() as group:
        auth = AuthCluster(group, tmp_path_factory.mktemp("ctlauth"))
        auth.controllers.start()
        auth.leader()
        for broker in auth.brokers:
            broker.start(group, auth.controller_addr)
        master = auth.master()

        def in_sync() -> bool:
            info = auth.replica_info()
            return len(info["syncStateSet"]) == 2 and info["masterAddress"] == master.address

        wait_until(in_sync, 30, interval=0.1, message="both brokers registered, in the SyncStateSet")
        yield auth


def _refused(result: tuple[int, Any] | tuple[int, Any, Any], status: int, words: str = "") -> None:
    code, body = result[0], result[1]
    assert code == status, body
    assert body["code"] == 16 and body["codeName"] == "NO_PERMISSION", body
    assert words in body["remark"], body


def _fake_broker_calls(master_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    """The chained takeover of the issue: a fake broker re-points the master's id and gets elected."""
    fake = "127.0.0.1:1"
    return [
        (
            "POST",
            "/v1/brokers/apply-id",
            {
                "clusterName": CLUSTER_NAME,
                "brokerName": BROKER_NAME,
                "appliedBrokerId": 9,
                "registerCheckCode": f"{fake};1",
            },
        ),
        (
            "POST",
            "/v1/brokers/register",
            {
                "clusterName": CLUSTER_NAME,
                "brokerName": BROKER_NAME,
                "brokerId": master_id,
                "brokerAddress": fake,
                "haAddress": "127.0.0.1:2",
            },
        ),
        (
            "POST",
            "/v1/brokers/heartbeat",
            {
                "clusterName": CLUSTER_NAME,
                "brokerName": BROKER_NAME,
                "brokerAddr": fake,
                "brokerId": 9,
                "epoch": 99,
                "maxOffset": 10**12,
            },
        ),
        (
            "POST",
            f"/v1/groups/{BROKER_NAME}/sync-state-set",
            {"masterBrokerId": 9, "masterEpoch": 99, "syncStateSet": [9], "syncStateSetEpoch": 99},
        ),
        ("POST", f"/v1/groups/{BROKER_NAME}/elect", {"clusterName": CLUSTER_NAME, "brokerId": 9}),
    ]


def test_unsigned_and_wrongly_signed_broker_calls_are_refused_and_change_nothing(
    cluster: AuthCluster,
) -> None:
    before = cluster.snapshot()
    master_id = before[1]["masterBrokerId"]
    for node in cluster.controllers.nodes:
        for method, path, body in _fake_broker_calls(master_id):
            _refused(node.call(method, path, body), 401, "signed")
            _refused(signed(node, method, path, body, credentials=WRONG), 401, "wrong signature")
            unknown = InnerCredentials("someone-else", CREDENTIALS.secret_key)
            _refused(signed(node, method, path, body, credentials=unknown), 401, "unknown access key")
            # A signature of another path, or of another body, does not cover this one.
            headers = signature(method, "/v1/groups/x/elect", json.dumps(body).encode(), node=node)
            _refused(node.call(method, path, body, headers=headers), 401, "wrong signature")
            headers = signature(method, path, b'{"x": 1}', node=node)
            _refused(node.call(method, path, body, headers=headers), 401, "not the one signed")
            _refused(node.call(method, path, body, headers={"Authorization": "Bearer guess"}), 403)
            _refused(node.call(method, path, body, headers={"Authorization": "Basic YTpi"}), 401)
    assert cluster.snapshot() == before


def test_expired_and_replayed_signatures_are_refused(cluster: AuthCluster) -> None:
    before = cluster.snapshot()
    master_id = before[1]["masterBrokerId"]
    leader = cluster.leader()
    for method, path, body in _fake_broker_calls(master_id):
        _refused(signed(leader, method, path, body, age_ms=5 * 60_000), 401, "timestamp")
    # A genuine signed heartbeat of the real master, captured and sent again: the copy is refused.
    master = (
        cluster.brokers[0] if cluster.brokers[0].address == before[1]["masterAddress"] else cluster.brokers[1]
    )
    beat = {
        "clusterName": CLUSTER_NAME,
        "brokerName": BROKER_NAME,
        "brokerAddr": master.address,
        "brokerId": master_id,
        # the master's own process: another one is refused while it lives (docs/architecture.md §3.2)
        "incarnation": master.status()["startReport"]["incarnation"],
    }
    raw = json.dumps(beat).encode()
    status, reply, headers = signed(leader, "POST", "/v1/brokers/heartbeat", beat)
    assert status == 200, reply
    _refused(leader.call("POST", "/v1/brokers/heartbeat", raw=raw, headers=headers), 401, "replay")
    assert cluster.snapshot() == before


async def upgrade(node: Node, headers: dict[str, str]) -> int:
    """The HTTP status of a session upgrade with ``headers`` (101: a broker session was opened)."""
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(f"{node.url}/v1/brokers/session", headers=headers) as ws:
                await ws.close()
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_session_upgrade_needs_a_signature(cluster: AuthCluster) -> None:
    node = cluster.controllers.nodes[0]
    good = signature("GET", "/v1/brokers/session", b"", node=node)
    bad = signature("GET", "/v1/brokers/session", b"", node=node, credentials=WRONG)
    assert asyncio.run(upgrade(node, {})) == 401
    assert asyncio.run(upgrade(node, bad)) == 401
    assert asyncio.run(upgrade(node, good)) == 101
    assert asyncio.run(upgrade(node, good)) == 401  # replayed
    assert asyncio.run(upgrade(node, ADMIN)) == 101  # an operator may do what a broker can


def test_a_signature_made_for_one_controller_is_refused_by_another(cluster: AuthCluster) -> None:
    """Issue 45 finding 5: a session upgrade captured on its way to a follower and replayed to the leader
    (within the window, so no nonce cache of the leader has seen it) must not open a broker session."""
    leader = cluster.leader()
    follower = next(n for n in cluster.controllers.nodes if n.address != leader.address)
    captured = signature("GET", "/v1/brokers/session", b"", node=follower)
    assert asyncio.run(upgrade(follower, captured)) == 101  # the genuine use
    assert asyncio.run(upgrade(leader, captured)) == 401  # the replay elsewhere
    # The same for a plain call: a heartbeat signed for the follower does nothing at the leader.
    master_id = cluster.replica_info()["masterBrokerId"]
    beat = {
        "clusterName": CLUSTER_NAME,
        "brokerName": BROKER_NAME,
        "brokerAddr": "127.0.0.1:1",
        "brokerId": master_id,
    }
    raw = json.dumps(beat).encode()
    headers = signature("POST", "/v1/brokers/heartbeat", raw, node=follower)
    _refused(leader.call("POST", "/v1/brokers/heartbeat", raw=raw, headers=headers), 401, "not for this node")


def test_a_signature_captured_before_a_restart_is_refused_after_it(cluster: AuthCluster) -> None:
    """A signed session upgrade captured on its way to a controller and replayed to that same controller
    right after it restarted (its nonce cache is in memory, and the signature is still within its 60 s
    window) must not open a broker session: a controller refuses signatures dated before its start."""
    leader = cluster.leader()
    follower = next(n for n in cluster.controllers.nodes if n.address != leader.address)
    captured = signature("GET", "/v1/brokers/session", b"", node=follower)
    assert asyncio.run(upgrade(follower, captured)) == 101  # the genuine use
    assert follower.proc is not None
    follower.proc.stop()
    cluster.controllers.start([follower.index])
    assert asyncio.run(upgrade(follower, captured)) == 401  # the replay after the restart
    fresh = signature("GET", "/v1/brokers/session", b"", node=follower)
    assert asyncio.run(upgrade(follower, fresh)) == 101  # a broker's next signature is good
    cluster.leader()


def test_admin_calls_need_the_admin_token_not_broker_credentials(cluster: AuthCluster) -> None:
    before = cluster.snapshot()
    master_id = before[1]["masterBrokerId"]
    leader = cluster.leader()
    admin_calls = [
        ("PUT", "/v1/controller/config", {"electMasterMaxRetryCount": 7}),
        ("POST", f"/v1/groups/{BROKER_NAME}/clean", {"cleanLivingBroker": True}),
        ("POST", f"/v1/groups/{BROKER_NAME}/elect", {"brokerId": master_id, "designateElect": True}),
    ]
    for method, path, body in admin_calls:
        _refused(leader.call(method, path, body), 401)
        _refused(leader.call(method, path, body, headers={"Authorization": "Bearer wrong-token"}), 403)
        _refused(signed(leader, method, path, body), 403, "admin")
    assert cluster.snapshot() == before
    status, config = leader.get("/v1/controller/config")
    assert status == 200 and config["config"]["electMasterMaxRetryCount"] != 7
    assert config["config"]["innerClientAuthenticationCredentials"] == "******"
    # Unknown routes are the router's 404/405 whoever asks.
    assert leader.post("/v1/nope", {})[0] == 404
    assert leader.call("DELETE", "/v1/brokers/apply-id")[0] == 405
    # Public state stays readable without credentials.
    for path in ("/v1/controller/metadata", "/v1/controller/status", "/healthz", "/metrics", "/openapi.json"):
        assert leader.get(path)[0] == 200, path
    # The admin token is accepted on the admin calls and on broker paths.
    status, body = leader.call("PUT", "/v1/controller/config", {"electMasterMaxRetryCount": 3}, headers=ADMIN)
    assert status == 200, body


def test_mqadmin_works_with_the_admin_token(cluster: AuthCluster) -> None:
    """Every controller command of mqadmin with --token (or $MQHA_ADMIN_TOKEN); the mutating ones
    are refused without it. The mutating calls here are refused by the decision, not by auth."""
    before = cluster.snapshot()
    addr = cluster.controller_addr
    master_id = str(before[1]["masterBrokerId"])
    token = ("--token", ADMIN_TOKEN)
    set_args = ("-bn", BROKER_NAME, "-c", CLUSTER_NAME)
    assert ok("getControllerMetaData", "-a", addr)
    assert ok("getSyncStateSet", "-a", addr, "-b", BROKER_NAME)
    assert ok("getControllerConfig", "-a", addr)
    update = ("updateControllerConfig", "-a", addr, "-k", "electMasterMaxRetryCount", "-v", "3")
    assert ok(*update, *token)
    assert ok(*update, env={TOKEN_ENV: ADMIN_TOKEN})
    fails(*update, code=16, mentions="--token")
    fails("electMaster", "-a", addr, "-b", master_id, *set_args, code=16, mentions="--token")
    fails("electMaster", "-a", addr, "-b", "9", *set_args, *token, code=2012)  # not a replica: past auth
    fails("cleanBrokerMetadata", "-a", addr, "-b", master_id, *set_args, code=16, mentions="--token")
    fails("cleanBrokerMetadata", "-a", addr, "-b", master_id, *set_args, *token, code=2009)  # alive
    assert cluster.snapshot() == before


def test_a_broker_with_the_wrong_secret_never_joins(cluster: AuthCluster) -> None:
    settings = {
        **BROKER_SETTINGS,
        "brokerName": "intruder",
        "innerClientAuthenticationCredentials": render_inner_credentials(WRONG),
    }
    intruder = Broker("intruder", cluster.base / "intruder", settings)
    intruder.start(cluster.group, cluster.controller_addr)
    try:
        time.sleep(3)  # a broker with the right secret registers within a second
        status, groups = cluster.leader().get("/v1/groups")
        assert status == 200 and "intruder" not in json.dumps(groups), groups
        assert intruder.status()["role"] != "MASTER"
    finally:
        assert intruder.proc is not None
        intruder.proc.kill()


def test_the_authenticated_cluster_fails_over_by_itself(cluster: AuthCluster) -> None:
    old = cluster.master()
    before = cluster.replica_info()
    assert old.proc is not None
    old.proc.kill()
    new = cluster.master(exclude=old)

    def elected() -> dict[str, Any] | None:
        info = cluster.replica_info()
        return info if info["masterAddress"] == new.address else None

    info = wait_until(elected, 30, interval=0.1, message="the controllers elect the surviving broker")
    assert info["masterEpoch"] > before["masterEpoch"]
    payload = {"messages": [{"topic": "orders", "body": "after-failover"}]}

    def put() -> dict[str, Any] | None:
        status, reply = request(
            "POST", new.url + "/v1/messages", payload, headers={"Authorization": basic_header(USER)}
        )
        return reply if status == 200 and reply["results"][0]["status"] == "PUT_OK" else None

    wait_until(put, 20, interval=0.2, message="the new master takes puts")
