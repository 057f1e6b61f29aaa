"""Issue 23: the broker client API with ``authenticationEnabled=true``, with real processes on 127.0.0.1.

Puts and reads need HTTP Basic credentials of ``initAuthenticationUser``; the final-log dump needs the
broker's ``adminAuthToken`` (auth on or off); public state stays open; a refused request changes
nothing. Secrets never appear in ``mqbroker -p`` output or the broker's log. The controllers run with
authentication off here (their side is tested elsewhere); the brokers with it on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqha.client import SendStatus, SyncConsumer, SyncProducer, User
from mqha.security.credentials import MASK
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_NAME, BROKER_TEST_SETTINGS, Broker, mqbroker_command
from tests.integration.controller_cluster import ControllerCluster
from tests.integration.ha_nodes import Node

pytestmark = pytest.mark.integration

USER = User("alice", "alice-password-1")
ADMIN_TOKEN = "broker-admin-token-1"
INNER_SECRET = "inner-secret-key-1"
SECRETS = (USER.password, ADMIN_TOKEN, INNER_SECRET)

AUTH_SETTINGS = {
    **BROKER_TEST_SETTINGS,
    "authenticationEnabled": "true",
    "innerClientAuthenticationCredentials": json.dumps({"accessKey": "brokers", "secretKey": INNER_SECRET}),
    "initAuthenticationUser": json.dumps({"username": USER.username, "password": USER.password}),
    "adminAuthToken": ADMIN_TOKEN,
}


def basic(username: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()}


GOOD = basic(USER.username, USER.password)


def call(
    method: str, url: str, body: Any = None, headers: Mapping[str, str] | None = None
) -> tuple[int, Any, Mapping[str, str]]:
    """One request: (status, decoded JSON or text, response headers)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=10.0) as response:
            status, payload, got = response.status, response.read(), response.headers
    except urllib.error.HTTPError as err:
        status, payload, got = err.code, err.read(), err.headers
    try:
        return status, json.loads(payload), got
    except ValueError:
        return status, payload.decode(errors="replace"), got


@dataclass
class AuthCluster:
    controllers: ControllerCluster
    master: Broker
    slave: Broker

    @property
    def controller_addr(self) -> str:
        return ";".join(n.address for n in self.controllers.nodes)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    base = tmp_path_factory.mktemp("broker-auth")
    with ProcessGroup() as group:
        controllers = ControllerCluster(group, base / "controllers", size=1)
        controllers.start()
        controllers.leader(timeout=10)
        addr = ";".join(n.address for n in controllers.nodes)
        master, slave = (Broker(f"b{i}", base / f"b{i}", AUTH_SETTINGS) for i in range(2))
        master.start(group, addr)
        wait_until(lambda: (master.try_status() or {}).get("role") == "MASTER", 20, message="master")
        slave.start(group, addr)
        wait_until(
            lambda: len((master.try_status() or {}).get("localSyncStateSet", [])) == 2,
            30,
            message="SyncStateSet of 2",
        )
        yield AuthCluster(controllers, master, slave)


def max_offset(broker: Broker) -> int:
    return int(broker.status()["maxOffset"])


def assert_refused(status: int, body: Any, headers: Mapping[str, str], http: int = 401) -> None:
    assert status == http, body
    assert body["code"] == 16 and body["codeName"] == "NO_PERMISSION" and body["remark"], body
    if http == 401 and "Basic" in str(headers.get("WWW-Authenticate")):
        assert headers["WWW-Authenticate"] == 'Basic realm="mqha"'


def test_puts_and_reads_without_the_right_user_are_refused_and_change_nothing(cluster: AuthCluster) -> None:
    master = cluster.master
    before = max_offset(master)
    put = {"topic": "orders", "body": "intruder"}
    wrong = (
        {},
        basic(USER.username, "wrong-password"),
        basic("mallory", USER.password),
        {"Authorization": "Basic !!!"},
        {"Authorization": f"Bearer {ADMIN_TOKEN}"},  # the admin token is not a broker user
    )
    for headers in wrong:
        status, body, got = call("POST", master.url + "/v1/messages", put, headers)
        assert_refused(status, body, got)
        assert got["WWW-Authenticate"] == 'Basic realm="mqha"'
        for broker in (master, cluster.slave):
            status, body, got = call("GET", broker.url + "/v1/messages?offset=0", headers=headers)
            assert_refused(status, body, got)
    # Refused from the headers: an unauthenticated body is never parsed (garbage gets 401, not 400).
    status, body, got = call("POST", master.url + "/v1/messages", {"not": "a message"})
    assert_refused(status, body, got)
    assert max_offset(master) == before
    metrics = call("GET", master.url + "/metrics")[1]
    assert "intruder" not in metrics
    refused = 'mqha_broker_refused_requests_total{broker_name="bs1",http_status="401",route="put"}'
    assert f"{refused} {len(wrong) + 1}.0" in metrics


def test_the_right_user_puts_and_reads(cluster: AuthCluster) -> None:
    master = cluster.master
    status, body, _ = call("POST", master.url + "/v1/messages", {"topic": "orders", "body": "hello"}, GOOD)
    assert status == 200 and body["status"] == "PUT_OK", body
    offset = body["offset"]
    status, read, _ = call("GET", f"{master.url}/v1/messages?offset={offset}", headers=GOOD)
    assert status == 200 and read["messages"][0]["body"] == "hello", read
    # The Python client with ``user=``: routed through the controllers, puts and reads work.
    with SyncProducer(cluster.controller_addr, BROKER_NAME, user=USER, send_timeout=10) as producer:
        result = producer.send("orders", "from-client")
        assert result.status is SendStatus.PUT_OK, result
    with SyncConsumer(cluster.controller_addr, BROKER_NAME, user=USER, offset=result.offset) as consumer:
        messages = consumer.poll(timeout=10)
        assert [m.body for m in messages][:1] == [b"from-client"]


def test_the_client_without_a_user_fails_at_once(cluster: AuthCluster) -> None:
    before = max_offset(cluster.master)
    with SyncProducer(cluster.controller_addr, BROKER_NAME, send_timeout=10) as producer:
        result = producer.send("orders", "anonymous")
    assert result.status is SendStatus.FAILED and "NO_PERMISSION" in (result.error or ""), result
    assert result.attempts == 1
    assert max_offset(cluster.master) == before


def test_final_log_needs_the_admin_token(cluster: AuthCluster) -> None:
    url = cluster.slave.url + "/v1/history/final-log"
    status, body, got = call("POST", url)
    assert_refused(status, body, got, 401)
    status, body, got = call("POST", url, headers={"Authorization": "Bearer not-the-token"})
    assert_refused(status, body, got, 403)
    status, body, got = call("POST", url, headers=GOOD)  # a broker user is not an admin
    assert_refused(status, body, got, 401)
    status, body, _ = call("POST", url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200 and body["rows"] >= 0, body


def test_public_state_stays_open(cluster: AuthCluster) -> None:
    for broker in (cluster.master, cluster.slave):
        for path in ("/healthz", "/metrics", "/v1/status", "/v1/ha/status", "/v1/epochs"):
            status, body, _ = call("GET", broker.url + path)
            assert status == 200, (path, body)
            assert not any(secret in json.dumps(body) for secret in SECRETS), path


def test_secrets_are_masked_in_print_config_and_never_logged(cluster: AuthCluster) -> None:
    master = cluster.master
    printed = subprocess.run(
        [*mqbroker_command(), "-c", str(master.base / "broker.conf"), "-p"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    for key in ("adminAuthToken", "innerClientAuthenticationCredentials", "initAuthenticationUser"):
        assert f"{key}={MASK}\n" in printed
    assert "authenticationEnabled=true" in printed
    logs = (master.base / "broker.log").read_text() + (cluster.slave.base / "broker.log").read_text()
    for secret in SECRETS:
        assert secret not in printed and secret not in logs


def test_with_authentication_off_the_admin_token_still_guards_final_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await Node.start(tmp_path / "a", 1, http=True, adminAuthToken=ADMIN_TOKEN)
        try:
            assert await node.become_master(1)
            # urllib blocks: it runs in a thread while the node serves on this loop.
            put = {"topic": "t", "body": "open"}
            status, body, _ = await asyncio.to_thread(call, "POST", node.url + "/v1/messages", put)
            assert status == 200 and body["status"] == "PUT_OK", body  # auth off: puts stay open
            status, body, _ = await asyncio.to_thread(call, "GET", node.url + "/v1/messages?offset=0")
            assert status == 200 and body["messages"], body
            status, body, got = await asyncio.to_thread(call, "POST", node.url + "/v1/history/final-log")
            assert_refused(status, body, got, 401)
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_the_cluster_tools_use_the_brokers_user(tmp_path: Path) -> None:
    """A local cluster whose brokers require a user: the workloads and the final-log dump read the
    user from the cluster's broker settings and keep working."""
    from mqha.cluster.checking import dump_final_logs
    from mqha.cluster.client_auth import broker_user
    from mqha.cluster.local import LocalCluster
    from mqha.cluster.workload import ConsumeWorkload, ProduceWorkload

    secrets = {k: AUTH_SETTINGS[k] for k in ("authenticationEnabled", "innerClientAuthenticationCredentials")}
    settings = {**secrets, "initAuthenticationUser": AUTH_SETTINGS["initAuthenticationUser"]}
    with LocalCluster(
        tmp_path / "run", controllers=1, groups=1, replicas=1, broker_settings=settings, log_level="WARNING"
    ) as cluster:
        group = cluster.groups[0]
        user = broker_user(cluster.broker_settings)
        assert user == USER
        consumer = ConsumeWorkload(cluster.controller_addresses, group, user=user).start()
        with ProduceWorkload(cluster.controller_addresses, group, concurrency=1, user=user) as workload:
            workload.wait_acked(20, timeout=30)
        assert consumer.catch_up(1, timeout=20) and consumer.errors == 0
        consumer.stop()
        dumped = dump_final_logs(cluster, tmp_path / "dump.db")
        assert sum(len(rows) for rows in dumped.values()) >= 20
