"""Issue 23 part 4 against a real mqcontroller: invalid input is 400 (code 2005) and never reaches the log.

Reproduces the attack: broker sets named ``""``, ``"\\x00"``, 100 kB of ``A`` or ``a/b``, ids ``2**64-1``,
``2**63``, ``-5`` and an id that leaves no next id were accepted (or made ``next-id`` answer 500 for good).
Each refusal leaves the Raft log as it was (same applied index, same groups), and ``next-id`` keeps
answering 200 across a restart (docs/architecture.md §8).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.wire.types import MAX_BROKER_ID
from tests.helpers.processes import ProcessGroup
from tests.integration.controller_cluster import ControllerCluster, Node

pytestmark = pytest.mark.integration

CHECK_CODE = "127.0.0.1:10911;1700000000000"
BAD_NAMES = ["", "\x00", "A" * 100_000, "a/b", "a b", "a.b", "é", "A" * 128, "bs1\n"]
BAD_IDS = [2**64 - 1, 2**63, 2**63 - 1, -5, 1.5, True, "1", None]
BAD_ADDRESSES = [
    "",
    "x",
    "127.0.0.1",
    "127.0.0.1:0",
    "127.0.0.1:65536",
    "a b:1",
    "h\x00:1",
    ":1",
    "[::1:1",
    "127.0.0.1:1\n",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerCluster]:
    with ProcessGroup() as group:
        one = ControllerCluster(group, Path(tmp_path_factory.mktemp("validation")), size=1)
        one.start()
        yield one


def _apply(node: Node, name: Any = "bs1", broker_id: Any = 1, **extra: Any) -> tuple[int, Any]:
    body = {
        "clusterName": "c1",
        "brokerName": name,
        "appliedBrokerId": broker_id,
        "registerCheckCode": CHECK_CODE,
    }
    return node.post("/v1/brokers/apply-id", {**body, **extra})


def _log_state(node: Node) -> tuple[Any, Any]:
    """What the log decided: the applied index and every group (``GET /v1/groups`` too)."""
    status, groups = node.get("/v1/groups")
    assert status == 200, groups
    return node.state()["state"], groups["clusters"]


def _refused(answer: tuple[int, Any]) -> str:
    status, body = answer
    assert status == 400, body
    assert body["code"] == 2005 and body["codeName"] == "CONTROLLER_INVALID_REQUEST", body
    assert isinstance(body["remark"], str) and body["remark"]
    return str(body["remark"])


def test_bad_names_ids_and_addresses_are_400_and_leave_the_log_alone(cluster: ControllerCluster) -> None:
    node = cluster.leader()
    status, body = _apply(node, "bs1", 1)
    assert status == 200, body
    before = _log_state(node)
    for name in BAD_NAMES:
        assert "brokerName" in _refused(_apply(node, name, 2))
        assert "clusterName" in _refused(_apply(node, "bs1", 2, clusterName=name))
    for broker_id in BAD_IDS:
        assert "appliedBrokerId" in _refused(_apply(node, "bs1", broker_id))
    for address in BAD_ADDRESSES:
        assert "registerCheckCode" in _refused(_apply(node, "bs1", 2, registerCheckCode=f"{address};1"))
        register = {"clusterName": "c1", "brokerName": "bs1", "brokerId": 1, "brokerAddress": address}
        assert "brokerAddress" in _refused(node.post("/v1/brokers/register", register))
        register_ha = {**register, "brokerAddress": "127.0.0.1:10911", "haAddress": address}
        assert "haAddress" in _refused(node.post("/v1/brokers/register", register_ha))
        beat = {"clusterName": "c1", "brokerName": "bs1", "brokerId": 1, "brokerAddr": address}
        assert "brokerAddr" in _refused(node.post("/v1/brokers/heartbeat", beat))
    # Names in the query string and in the path follow the same rule.
    for query in (
        "brokerName=a%2Fb&clusterName=c1",
        "brokerName=&clusterName=c1",
        "brokerName=bs1&clusterName=%00",
    ):
        _refused(node.get(f"/v1/brokers/next-id?{query}"))
    _refused(node.get("/v1/sync-state-data?brokerName=a.b"))
    for path in ("a.b", "%00", "a%20b", "A" * 128):
        assert "brokerName" in _refused(node.post(f"/v1/groups/{path}/elect", {}))
        _refused(
            node.post(
                f"/v1/groups/{path}/sync-state-set",
                {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSet": [1], "syncStateSetEpoch": 1},
            )
        )
        _refused(node.get(f"/v1/groups/{path}/replica-info"))
    assert _log_state(node) == before


def test_bodies_of_any_depth_or_type_are_400(cluster: ControllerCluster) -> None:
    node = cluster.leader()
    before = _log_state(node)
    deep = b"[" * 100_000 + b"]" * 100_000
    for raw in (deep, b'{"clusterName":' + deep + b"}", b"[]", b"1", b'"x"', b"null", b"\xff\xfe", b"{"):
        _refused(node.post("/v1/brokers/apply-id", raw=raw))
        _refused(node.post("/v1/groups/bs1/elect", raw=raw))
    for raw in (deep, b'{"a":' * 40 + b"1" + b"}" * 40):
        assert "nested" in _refused(node.call("PUT", "/v1/controller/config", raw=raw))
    _refused(node.call("PUT", "/v1/controller/config", {"scanNotActiveBrokerInterval": 10**5000 // 10**4000}))
    _refused(node.call("PUT", "/v1/controller/config", {"scanNotActiveBrokerInterval": -1}))
    _refused(node.call("PUT", "/v1/controller/config", {"maxRequestBodyBytes": 0}))
    assert _log_state(node) == before


def test_next_id_always_fits_and_answers_across_a_restart(cluster: ControllerCluster) -> None:
    node = cluster.leader()
    assert _apply(node, "full", 1)[0] == 200
    # The largest id a request may carry: the set's next id is 2^63-1, still a Java long, and the set is full.
    status, body = _apply(node, "full", MAX_BROKER_ID, registerCheckCode="127.0.0.1:10912;1")
    assert status == 200, body
    assert "appliedBrokerId" in _refused(_apply(node, "full", MAX_BROKER_ID + 1))
    before = _log_state(node)

    def next_ids(target: Node) -> dict[str, int]:
        answers = {}
        for name in ("bs1", "full", "unknown"):
            status, body = target.get(f"/v1/brokers/next-id?clusterName=c1&brokerName={name}")
            assert status == 200, body
            answers[name] = body["nextBrokerId"]
        return answers

    assert next_ids(node) == {"bs1": 2, "full": 2**63 - 1, "unknown": 1}
    assert node.proc is not None
    node.proc.kill()
    cluster.start([node.index])
    restarted = cluster.leader(timeout=10)
    assert next_ids(restarted) == {"bs1": 2, "full": 2**63 - 1, "unknown": 1}
    assert _log_state(restarted)[1] == before[1]
