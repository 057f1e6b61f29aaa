"""Route table, OpenAPI document and the pure helpers of the controller's shells (no sockets, no Raft)."""

from __future__ import annotations

import json

import pytest

from mqha.controller import openapi
from mqha.controller.config import CONTROLLER_CONFIG
from mqha.controller.config_store import check_config
from mqha.controller.election import Event, scan_event
from mqha.controller.http_api import ROUTES
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.state import BrokerGroupState, ControllerState, ReplicaInfo
from mqha.controller.status_views import peers_text
from mqha.controller.write_path import elect_trigger
from mqha.errors import ConfigError
from mqha.wire.controller_api import ApplyBrokerIdRequest, ElectMasterRequest


def test_openapi_documents_exactly_the_served_routes() -> None:
    served = [(method, path, name) for method, path, name, _ in ROUTES]
    assert sorted(openapi.route_list()) == sorted(served)
    assert len(set(served)) == len(served)


def test_openapi_document_is_json_and_request_schemas_follow_the_wire_types() -> None:
    doc = json.loads(json.dumps(openapi.document()))
    assert doc["openapi"] == "3.1.0"
    schema = openapi.request_schema(ApplyBrokerIdRequest)
    assert schema["required"] == ["clusterName", "brokerName", "appliedBrokerId", "registerCheckCode"]
    assert schema["properties"]["appliedBrokerId"] == {"type": "integer", "minimum": -1, "maximum": 2**63 - 2}
    assert schema["additionalProperties"] is False
    elect = openapi.request_schema(ElectMasterRequest, ("brokerName",))
    assert elect["required"] == []
    assert elect["properties"]["brokerId"]["anyOf"][1] == {"type": "null"}
    assert elect["properties"]["designateElect"] == {"type": "boolean", "default": False}


def test_elect_trigger_names_the_three_producers_of_spec_5_4() -> None:
    assert elect_trigger(ElectMasterRequest(broker_name="b", broker_id=2)) == "broker"
    assert elect_trigger(ElectMasterRequest(broker_name="b", broker_id=2, designate_elect=True)) == "admin"
    assert elect_trigger(ElectMasterRequest(broker_name="b")) == "controller"
    assert elect_trigger(ElectMasterRequest(broker_name="b", broker_id=-1)) == "controller"


def _group(name: str, master: int | None) -> BrokerGroupState:
    replicas = {i: ReplicaInfo(f"127.0.0.1:{i}") for i in (1, 2, 3)}
    sss = frozenset({master}) if master else frozenset()
    return BrokerGroupState("c", name, replicas, master, 1 if master else 0, sss, 1 if master else 0)


def _alive(*keys: tuple[str, int]) -> LivenessSnapshot:
    return LivenessSnapshot.of(
        1000, [BrokerLiveInfo("c", name, broker_id, "a", last_seen_ms=1000) for name, broker_id in keys]
    )


def test_inactive_master_scan_spec_3_4() -> None:
    state = ControllerState(
        {
            "dead-master": _group("dead-master", 1),  # master dead, 2 alive -> re-elect
            "all-dead": _group("all-dead", 1),  # nobody alive -> leave alone
            "alive-master": _group("alive-master", 1),  # master alive -> leave alone
            "no-master": _group("no-master", None),  # no master -> nothing to re-elect
        }
    )
    liveness = _alive(("dead-master", 2), ("alive-master", 1), ("no-master", 2))
    lost = [
        name
        for name, group in sorted(state.groups.items())
        if scan_event(group, liveness) is Event.SCAN_MASTER_LOST
    ]
    assert lost == ["dead-master"]


def _config(**overrides: str) -> dict[str, object]:
    given = {"controllerDLegerPeers": "n0-127.0.0.1:9878;n1-127.0.0.1:9888", "controllerDLegerSelfId": "n0"}
    return CONTROLLER_CONFIG.resolve({**given, **overrides})


def test_check_config_names_the_offending_key() -> None:
    check_config(_config())
    for key, value in (
        ("scanNotActiveBrokerInterval", "0"),
        ("scanInactiveMasterInterval", "-5"),
        ("maxRequestBodyBytes", "0"),
        ("controllerRaftMinTimeoutMills", "100"),
        ("controllerRaftMaxTimeoutMills", "200"),
        ("brokerSessionPingMills", "-1"),
    ):
        with pytest.raises(ConfigError) as err:
            check_config(_config(**{key: value}))
        assert err.value.key == key


def test_peers_text_is_spec_5_8_format() -> None:
    peers = [("n0", "127.0.0.1:9878"), ("n1", "127.0.0.1:9888")]
    assert peers_text(peers) == "n0:127.0.0.1:9878;n1:127.0.0.1:9888;"
