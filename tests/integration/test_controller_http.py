"""The controller's HTTP contract on real ``mqcontroller`` processes (docs/architecture.md §3,
docs/reference-behaviour.md §5.8, §5.11).

Bad input of every kind gets the documented status and code, the node keeps serving, and the
replicated state does not change. Also: config get/update with the blacklist and the admin token,
metadata, groups, metrics, healthz, openapi, and the ``mqcontroller`` command line.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.controller import openapi
from tests.helpers.processes import ProcessGroup
from tests.integration.controller_cluster import (
    ControllerCluster,
    HeartbeatSender,
    Node,
    heartbeat,
    mqcontroller_command,
    register_broker,
)

pytestmark = pytest.mark.integration

TOKEN = "t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BODY_LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerCluster]:
    # Also: Raft traffic encrypted (controllerRaftPassword) and linearizable reads (processReadEvent).
    settings = {
        "adminAuthToken": TOKEN,
        "maxRequestBodyBytes": str(BODY_LIMIT),
        "controllerRaftPassword": "raft-pw",
        "processReadEvent": "true",
    }
    with ProcessGroup() as group:
        c = ControllerCluster(group, tmp_path_factory.mktemp("http"), settings=settings)
        c.start()
        leader = c.leader(timeout=5)
        assert [register_broker(leader, "b1") for _ in range(3)] == [1, 2, 3]
        with HeartbeatSender(c) as beats:
            for broker_id in (1, 2, 3):
                beats.set(heartbeat("b1", broker_id, timeout_ms=600_000))
            beats.send_once()
        status, body = leader.post("/v1/groups/b1/elect", {"clusterName": "c1", "brokerId": 1})
        assert status == 200, body
        c.wait_same_state(c.nodes)
        yield c


def _expect(answer: tuple[int, Any], status: int, code: int, mentions: str | None = None) -> dict[str, Any]:
    got_status, body = answer
    assert isinstance(body, dict), answer
    assert (got_status, body["code"]) == (status, code), answer
    assert {"code", "codeName", "remark"} <= set(body)
    if mentions is not None:
        assert mentions in body["remark"], body
    return body


APPLY = {"clusterName": "c1", "brokerName": "b1", "appliedBrokerId": 4, "registerCheckCode": "127.0.0.1:1;1"}


def test_bad_input_is_refused_and_changes_nothing(cluster: ControllerCluster) -> None:
    leader = cluster.leader()
    before = cluster.wait_same_state(cluster.nodes)

    # Malformed JSON, empty body, not an object.
    _expect(leader.post("/v1/brokers/apply-id", raw=b'{"clusterName": '), 400, 2005, "malformed JSON")
    _expect(leader.post("/v1/brokers/apply-id", raw=b""), 400, 2005, "empty")
    _expect(leader.post("/v1/brokers/apply-id", raw=b"\xff\xfe"), 400, 2005)
    _expect(leader.post("/v1/brokers/apply-id", [APPLY]), 400, 2005)
    # Wrong types, missing and unknown fields: the remark names the field.
    _expect(
        leader.post("/v1/brokers/apply-id", {**APPLY, "appliedBrokerId": "4"}), 400, 2005, "appliedBrokerId"
    )
    _expect(
        leader.post("/v1/brokers/apply-id", {**APPLY, "appliedBrokerId": True}), 400, 2005, "appliedBrokerId"
    )
    _expect(
        leader.post("/v1/brokers/apply-id", {**APPLY, "appliedBrokerId": 4.0}), 400, 2005, "appliedBrokerId"
    )
    missing = {k: v for k, v in APPLY.items() if k != "registerCheckCode"}
    _expect(leader.post("/v1/brokers/apply-id", missing), 400, 2005, "registerCheckCode")
    _expect(leader.post("/v1/brokers/apply-id", {**APPLY, "extra": 1}), 400, 2005, "extra")
    alter = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1, "2"], "syncStateSetEpoch": 1}
    _expect(leader.post("/v1/groups/b1/sync-state-set", alter), 400, 2005, "syncStateSet")
    _expect(
        leader.post("/v1/groups/b1/elect", {"brokerName": "other", "brokerId": 1}), 400, 2005, "brokerName"
    )
    _expect(leader.post("/v1/groups/b1/elect", {"brokerId": 1, "designateElect": "yes"}), 400, 2005)
    _expect(leader.post("/v1/brokers/heartbeat", {"clusterName": "c1", "brokerName": "b1"}), 400, 2005)
    # Query strings are strict too.
    _expect(leader.get("/v1/brokers/next-id?clusterName=c1"), 400, 2005, "brokerName")
    _expect(leader.get("/v1/brokers/next-id?clusterName=c1&brokerName=b1&x=1"), 400, 2005, "'x'")
    _expect(leader.get("/v1/sync-state-data?clusterName=a&clusterName=b"), 400, 2005, "more than once")
    _expect(leader.get("/v1/groups/b1/replica-info?verbose=1"), 400, 2005)
    # A huge body: 413, whether announced by Content-Length or streamed chunked.
    huge = {**APPLY, "registerCheckCode": "x" * (4 * BODY_LIMIT)}
    _expect(leader.post("/v1/brokers/apply-id", huge), 413, 2005, str(BODY_LIMIT))
    assert _chunked_post(leader, "/v1/brokers/apply-id", b" " * (2 * BODY_LIMIT)) == 413
    # Unknown broker sets.
    _expect(leader.get("/v1/groups/nope/replica-info"), 404, 2008)
    register = {"clusterName": "c1", "brokerName": "nope", "brokerId": 1, "brokerAddress": "127.0.0.1:1"}
    _expect(leader.post("/v1/brokers/register", register), 404, 2010)
    _expect(leader.post("/v1/groups/nope/elect", {"clusterName": "c1", "brokerId": 1}), 404, 2010)
    _expect(
        leader.post(
            "/v1/groups/nope/sync-state-set",
            {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1], "syncStateSetEpoch": 0},
        ),
        409,
        2013,
    )
    _expect(
        leader.post("/v1/groups/nope/clean", {"cleanLivingBroker": True}, headers=AUTH),
        409,
        2009,
    )
    _expect(leader.post("/v1/brokers/apply-id", {**APPLY, "brokerName": "nope"}), 409, 2014)
    _expect(leader.get("/v1/brokers/session"), 400, 2005, "WebSocket")  # not an upgrade
    # Unknown routes and methods.
    _expect(leader.get("/v1/nothing"), 404, 3)
    _expect(leader.call("DELETE", "/v1/groups/b1/replica-info"), 405, 3)
    # Admin calls without / with a wrong token.
    _expect(leader.post("/v1/groups/b1/clean", {"cleanLivingBroker": True}), 401, 16)
    _expect(
        leader.post("/v1/groups/b1/clean", {"cleanLivingBroker": True}, headers={"Authorization": "x"}),
        403,
        16,
    )

    # Requests to a follower: 421 naming the leader's API address; heartbeats are fine anywhere.
    for follower in cluster.followers(leader):
        body = _expect(follower.post("/v1/brokers/apply-id", APPLY), 421, 2007)
        assert (body["leaderAddress"], body["leaderId"]) == (leader.address, leader.node_id)
        _expect(follower.get("/v1/groups/b1/replica-info"), 421, 2007)
        _expect(follower.get("/v1/brokers/next-id?clusterName=c1&brokerName=b1"), 421, 2007)
        _expect(follower.post("/v1/brokers/heartbeat", heartbeat("b1", 1, timeout_ms=600_000)), 200, 0)

    # Every node keeps serving, and nothing changed anywhere.
    for node in cluster.nodes:
        _expect(node.get("/healthz"), 200, 0)
    info = _expect(leader.get("/v1/groups/b1/replica-info"), 200, 0)
    assert (info["masterBrokerId"], info["masterEpoch"]) == (1, 1)
    after = cluster.wait_same_state(cluster.nodes)
    assert after["groups"] == before["groups"]


def _chunked_post(node: Node, path: str, payload: bytes) -> int:
    """POST with Transfer-Encoding: chunked (no Content-Length); returns the HTTP status."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        sock.sendall(head.encode())
        try:
            for start in range(0, len(payload), 8192):
                chunk = payload[start : start + 8192]
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server may answer and close before the whole body is sent
        answer = b""
        while b"\r\n" not in answer:
            data = sock.recv(4096)
            if not data:
                break
            answer += data
    return int(answer.split(b" ", 2)[1])


def test_metadata_groups_metrics_healthz_and_openapi(cluster: ControllerCluster) -> None:
    leader = cluster.leader()
    peers = "".join(f"{n.node_id}:{n.address};" for n in cluster.nodes)
    for node in cluster.nodes:
        body = _expect(node.get("/v1/controller/metadata"), 200, 0)
        assert body["group"] == "test-group" and body["peers"] == peers
        assert (body["leaderId"], body["leaderAddress"]) == (leader.node_id, leader.address)
        assert body["isLeader"] is (node is leader)
    body = _expect(leader.get("/v1/groups"), 200, 0)
    assert body["clusters"] == {"c1": ["b1"]}

    status, text = leader.get("/metrics")
    assert status == 200 and isinstance(text, str)
    for needle in (
        "mqha_controller_is_leader 1.0",
        'mqha_controller_requests_total{api="getControllerMetadata",code="SUCCESS"}',
        'mqha_controller_request_duration_seconds_bucket{api="electMaster"',
        'mqha_controller_elections_total{result="SUCCESS",trigger="broker"} 1.0',
        "mqha_controller_broker_groups 1.0",
        'mqha_controller_sync_state_set_size{broker_name="b1"} 1.0',
        "mqha_controller_raft_term ",
        "mqha_controller_raft_commit_index ",
        "mqha_controller_live_brokers 3.0",
    ):
        assert needle in text, needle
    follower = cluster.followers(leader)[0]
    assert "mqha_controller_is_leader 0.0" in follower.get("/metrics")[1]

    status, doc = leader.get("/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    assert doc == openapi.document()


def test_config_get_update_blacklist_token_and_persistence(cluster: ControllerCluster) -> None:
    node = cluster.nodes[0]
    body = _expect(node.get("/v1/controller/config"), 200, 0)
    assert body["config"]["adminAuthToken"] == "******"  # secrets are not handed out
    assert body["config"]["controllerRaftPassword"] == "******"
    assert body["config"]["electMasterMaxRetryCount"] == 3

    _expect(node.call("PUT", "/v1/controller/config", {"electMasterMaxRetryCount": 5}), 401, 16)
    _expect(node.call("PUT", "/v1/controller/config", {"configStorePath": "/tmp/x"}, headers=AUTH), 403, 16)
    _expect(node.call("PUT", "/v1/controller/config", {"rocketmqHome": "/x"}, headers=AUTH), 403, 16)
    _expect(node.call("PUT", "/v1/controller/config", {"noSuchKey": 1}, headers=AUTH), 400, 2005, "noSuchKey")
    _expect(
        node.call("PUT", "/v1/controller/config", {"scanInactiveMasterInterval": "soon"}, headers=AUTH),
        400,
        2005,
        "scanInactiveMasterInterval",
    )
    _expect(
        node.call("PUT", "/v1/controller/config", {"scanInactiveMasterInterval": 0}, headers=AUTH),
        400,
        2005,
        "scanInactiveMasterInterval",
    )
    _expect(node.call("PUT", "/v1/controller/config", {"x": [1]}, headers=AUTH), 400, 2005)
    assert _expect(node.get("/v1/controller/config"), 200, 0)["config"]["electMasterMaxRetryCount"] == 3

    body = _expect(
        node.call(
            "PUT",
            "/v1/controller/config",
            {"electMasterMaxRetryCount": "5", "controllerRaftMinTimeoutMills": 250},
            headers=AUTH,
        ),
        200,
        0,
    )
    assert "controllerRaftMinTimeoutMills" in body["remark"]  # needs a restart, and says so
    config = _expect(node.get("/v1/controller/config"), 200, 0)["config"]
    assert (config["electMasterMaxRetryCount"], config["controllerRaftMinTimeoutMills"]) == (5, 250)
    persisted = (node.base / "controller.properties").read_text()
    assert "electMasterMaxRetryCount=5\n" in persisted and "controllerRaftMinTimeoutMills=250\n" in persisted
    # Only the changed keys are saved (the -c file holds the rest); a refused key changes nothing.
    assert "adminAuthToken" not in persisted and "controllerDLegerPeers" not in persisted
    _expect(
        node.call("PUT", "/v1/controller/config", {"mappedFileSize": 4096}, headers=AUTH),
        400,
        2005,
        "mqha does not support",
    )
    # Only this node changed (docs/reference-behaviour.md §5.11: the admin tool sends to every address).
    other = _expect(cluster.nodes[1].get("/v1/controller/config"), 200, 0)["config"]
    assert other["electMasterMaxRetryCount"] == 3
    _expect(
        node.call(
            "PUT",
            "/v1/controller/config",
            {"electMasterMaxRetryCount": 3, "controllerRaftMinTimeoutMills": 200},
            headers=AUTH,
        ),
        200,
        0,
    )


def test_command_line_print_config_errors_and_sigterm(tmp_path: Path) -> None:
    with ProcessGroup() as group:
        cluster = ControllerCluster(group, tmp_path, size=1)
        node = cluster.nodes[0]
        printed = subprocess.run(
            [*mqcontroller_command(), "-c", str(node.conf), "-p"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert printed.returncode == 0, printed.stderr
        assert f"controllerDLegerSelfId={node.node_id}\n" in printed.stdout
        assert "scanNotActiveBrokerInterval=200\n" in printed.stdout
        assert "enableElectUncleanMaster=false\n" in printed.stdout

        for bad, key in (
            ("noSuchKey=1\n", "noSuchKey"),
            ("scanInactiveMasterInterval=fast\n", "scanInactiveMasterInterval"),
            ("controllerDLegerSelfId=n9\n", "controllerDLegerSelfId"),
            ("scanNotActiveBrokerInterval=0\n", "scanNotActiveBrokerInterval"),
        ):
            conf = tmp_path / f"bad-{key}.conf"
            conf.write_text(node.conf.read_text() + bad)
            result = subprocess.run(
                [*mqcontroller_command(), "-c", str(conf)],
                check=False,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert result.returncode == 1, result
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and key in lines[0] and "Traceback" not in result.stderr, result.stderr

        # A one-node cluster serves; SIGTERM stops it gracefully (exit 0) and promptly.
        cluster.start()
        leader = cluster.leader(timeout=5)
        assert register_broker(leader, "solo") == 1
        # Without an adminAuthToken, nobody can set one through the API and lock operators out, nor
        # read or change any other secret (docs/architecture.md §12).
        for secret in ("adminAuthToken", "controllerRaftPassword", "innerClientAuthenticationCredentials"):
            _expect(leader.call("PUT", "/v1/controller/config", {secret: "attacker-chosen-1"}), 403, 16)
        assert _expect(leader.get("/v1/controller/config"), 200, 0)["config"]["adminAuthToken"] == ""
        _expect(leader.call("PUT", "/v1/controller/config", {"electMasterMaxRetryCount": 4}), 200, 0)
        assert node.proc is not None
        started = time.monotonic()
        returncode = node.proc.stop(timeout=5)  # SIGTERM; SIGKILL (-9) only after 5 s
        assert returncode == 0, node.proc.log_tail()
        assert time.monotonic() - started < 5
        assert "stopped" in node.log_path.read_text()
