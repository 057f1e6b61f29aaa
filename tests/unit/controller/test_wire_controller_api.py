"""``mqha.wire.controller_api``: strict request parsing (2005 naming the field), reply round trips."""

from __future__ import annotations

from typing import Any

import pytest

from mqha.codes import ResponseCode
from mqha.errors import RemoteProtocolError, RequestError
from mqha.wire.controller_api import (
    AlterSyncStateSetPayload,
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    BrokerHeartbeatRequest,
    BrokerMemberGroup,
    CleanBrokerDataRequest,
    ElectMasterPayload,
    ElectMasterRequest,
    GetNextBrokerIdRequest,
    GetReplicaInfoRequest,
    GetSyncStateDataRequest,
    NextBrokerIdPayload,
    RegisterBrokerPayload,
    RegisterBrokerRequest,
    ReplicaIdentity,
    ReplicaInfoPayload,
    ReplicasInfo,
    Reply,
    SyncStateDataPayload,
)

REQUESTS: list[Any] = [
    GetNextBrokerIdRequest(cluster_name="c", broker_name="g"),
    ApplyBrokerIdRequest(cluster_name="c", broker_name="g", applied_broker_id=1, register_check_code="a:1;5"),
    RegisterBrokerRequest(
        cluster_name="c", broker_name="g", broker_id=1, broker_address="a:1", ha_address="a:2"
    ),
    RegisterBrokerRequest(cluster_name="c", broker_name="g", broker_id=1, broker_address="a:1"),
    BrokerHeartbeatRequest(
        cluster_name="c",
        broker_name="g",
        broker_addr="a:1",
        broker_id=1,
        epoch=2,
        max_offset=3,
        confirm_offset=4,
        heartbeat_timeout_mills=5,
        election_priority=6,
    ),
    ElectMasterRequest(broker_name="g", cluster_name="c", broker_id=2, designate_elect=True),
    ElectMasterRequest(broker_name="g"),
    AlterSyncStateSetRequest(
        broker_name="g",
        master_broker_id=1,
        master_epoch=2,
        sync_state_set=frozenset({1, 3}),
        sync_state_set_epoch=4,
    ),
    GetReplicaInfoRequest(broker_name="g"),
    GetSyncStateDataRequest(broker_names=("g", "h")),
    GetSyncStateDataRequest(cluster_name="c"),
    CleanBrokerDataRequest(broker_name="g", cluster_name="c", broker_controller_ids_to_clean=(1, 2)),
    CleanBrokerDataRequest(broker_name="g", broker_controller_ids_to_clean="1;2", clean_living_broker=True),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_request_round_trip(request_: Any) -> None:
    assert type(request_).from_json(request_.to_json()) == request_


def test_request_json_uses_camel_case_names() -> None:
    assert ApplyBrokerIdRequest(
        cluster_name="c", broker_name="g", applied_broker_id=1, register_check_code="a:1;5"
    ).to_json() == {"clusterName": "c", "brokerName": "g", "appliedBrokerId": 1, "registerCheckCode": "a:1;5"}
    assert (
        ApplyBrokerIdRequest.from_json(
            {"clusterName": "c", "brokerName": "g", "appliedBrokerId": 1, "registerCheckCode": "a:1;5"}
        ).broker_address
        == "a:1"
    )


def invalid(cls: Any, obj: object, remark: str) -> None:
    with pytest.raises(RequestError) as caught:
        cls.from_json(obj)
    assert caught.value.code == ResponseCode.CONTROLLER_INVALID_REQUEST
    assert caught.value.remark == remark
    assert caught.value.http_status == 400


GOOD_ALTER = {
    "brokerName": "g",
    "masterBrokerId": 1,
    "masterEpoch": 2,
    "syncStateSet": [1],
    "syncStateSetEpoch": 3,
}


@pytest.mark.parametrize(
    ("obj", "remark"),
    [
        ([], "AlterSyncStateSetRequest must be a JSON object, got array"),
        ({**GOOD_ALTER, "x": 1}, "unknown field 'x' in AlterSyncStateSetRequest"),
        (
            {k: v for k, v in GOOD_ALTER.items() if k != "masterEpoch"},
            "missing required field 'masterEpoch' in AlterSyncStateSetRequest",
        ),
        (
            {**GOOD_ALTER, "masterEpoch": "2"},
            "field 'masterEpoch' of AlterSyncStateSetRequest: expected an integer, got string",
        ),
        (
            {**GOOD_ALTER, "masterEpoch": True},
            "field 'masterEpoch' of AlterSyncStateSetRequest: expected an integer, got boolean",
        ),
        (
            {**GOOD_ALTER, "masterEpoch": 2.0},
            "field 'masterEpoch' of AlterSyncStateSetRequest: expected an integer, got number",
        ),
        (
            {**GOOD_ALTER, "masterEpoch": None},
            "field 'masterEpoch' of AlterSyncStateSetRequest: expected an integer, got null",
        ),
        (
            {**GOOD_ALTER, "syncStateSet": 1},
            "field 'syncStateSet' of AlterSyncStateSetRequest: expected an array of integers, got integer",
        ),
        (
            {**GOOD_ALTER, "syncStateSet": [1, "2"]},
            "field 'syncStateSet' of AlterSyncStateSetRequest: expected an array of integers, found string",
        ),
        (
            {**GOOD_ALTER, "brokerName": 5},
            "field 'brokerName' of AlterSyncStateSetRequest: expected a string, got integer",
        ),
    ],
)
def test_strict_request_validation_2005_names_the_field(obj: object, remark: str) -> None:
    invalid(AlterSyncStateSetRequest, obj, remark)


def test_elect_bool_and_nullable_fields() -> None:
    invalid(
        ElectMasterRequest,
        {"designateElect": "yes"},
        "field 'designateElect' of ElectMasterRequest: expected a boolean, got string",
    )
    assert ElectMasterRequest.from_json({"brokerId": None}).requested_id is None
    assert ElectMasterRequest.from_json({"brokerId": -1}).requested_id is None
    assert ElectMasterRequest.from_json({"brokerId": 0}).requested_id == 0


def test_5_9_heartbeat_without_broker_id_2005() -> None:
    invalid(
        BrokerHeartbeatRequest,
        {"clusterName": "c", "brokerName": "g", "brokerAddr": "a:1"},
        "Heart beat with empty brokerId",
    )
    invalid(
        BrokerHeartbeatRequest,
        {"clusterName": "c", "brokerName": "g", "brokerAddr": "a:1", "brokerId": None},
        "Heart beat with empty brokerId",
    )
    invalid(BrokerHeartbeatRequest, "x", "BrokerHeartbeatRequest must be a JSON object, got string")


def test_5_9_heartbeat_null_optional_fields_take_defaults() -> None:
    request = BrokerHeartbeatRequest.from_json(
        {
            "clusterName": "c",
            "brokerName": "g",
            "brokerAddr": "a:1",
            "brokerId": 1,
            "epoch": None,
            "electionPriority": None,
        }
    )
    assert (
        request.epoch,
        request.max_offset,
        request.heartbeat_timeout_mills,
        request.election_priority,
    ) == (
        -1,
        -1,
        10_000,
        2**31 - 1,
    )


def test_clean_ids_as_list_or_text() -> None:
    assert CleanBrokerDataRequest.from_json(
        {"brokerControllerIdsToClean": [1, 2]}
    ).broker_controller_ids_to_clean == (1, 2)
    assert (
        CleanBrokerDataRequest.from_json({"brokerControllerIdsToClean": "1;x"}).broker_controller_ids_to_clean
        == "1;x"
    )
    assert (
        CleanBrokerDataRequest.from_json({"brokerControllerIdsToClean": None}).broker_controller_ids_to_clean
        is None
    )
    invalid(
        CleanBrokerDataRequest,
        {"brokerControllerIdsToClean": 1},
        "field 'brokerControllerIdsToClean' of CleanBrokerDataRequest: "
        "expected an array of integers or a ';'-separated string, got integer",
    )
    invalid(
        CleanBrokerDataRequest,
        {"brokerControllerIdsToClean": [True]},
        "field 'brokerControllerIdsToClean' of CleanBrokerDataRequest: "
        "expected an array of integers, found boolean",
    )


def test_sync_state_data_names_must_be_strings() -> None:
    invalid(
        GetSyncStateDataRequest,
        {"brokerNames": "g"},
        "field 'brokerNames' of GetSyncStateDataRequest: expected an array of strings, got string",
    )
    invalid(
        GetSyncStateDataRequest,
        {"brokerNames": [1]},
        "field 'brokerNames' of GetSyncStateDataRequest: expected an array of strings, found integer",
    )


# --- replies --------------------------------------------------------------------------------------

PAYLOADS: list[Any] = [
    NextBrokerIdPayload(cluster_name="c", broker_name="g", next_broker_id=3),
    RegisterBrokerPayload(cluster_name="c", broker_name="g", sync_state_set=frozenset({1})),
    ElectMasterPayload(
        master_broker_id=1,
        master_address="a",
        master_epoch=2,
        sync_state_set_epoch=3,
        sync_state_set=frozenset({1}),
        broker_member_group=BrokerMemberGroup(cluster="c", broker_name="g", broker_addrs={1: "a", 2: "b"}),
    ),
    ElectMasterPayload(),
    AlterSyncStateSetPayload(
        new_sync_state_set_epoch=4, sync_state_set=frozenset({1, 2}), sync_state_set_epoch=4
    ),
    ReplicaInfoPayload(master_epoch=3),
    SyncStateDataPayload(
        replicas_info_table={
            "g": ReplicasInfo(
                master_broker_id=1,
                in_sync_replicas=(
                    ReplicaIdentity(broker_name="g", broker_id=1, broker_address="a", alive=True),
                ),
            )
        }
    ),
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_payload_round_trip_ignoring_envelope_fields(payload: Any) -> None:
    body = Reply(ResponseCode.SUCCESS, "ok", payload.to_json()).to_json()
    assert type(payload).from_json(body) == payload


def test_member_group_keys_are_decimal_id_strings() -> None:
    group = BrokerMemberGroup(cluster="c", broker_name="g", broker_addrs={2: "b", 1: "a"})
    assert group.to_json() == {"cluster": "c", "brokerName": "g", "brokerAddrs": {"1": "a", "2": "b"}}
    with pytest.raises(RemoteProtocolError, match="integer keys"):
        BrokerMemberGroup.from_json({"cluster": "c", "brokerName": "g", "brokerAddrs": {"x": "a"}})


def test_payload_type_errors_are_remote_protocol_errors() -> None:
    with pytest.raises(RemoteProtocolError, match="field 'nextBrokerId'"):
        NextBrokerIdPayload.from_json({"clusterName": "c", "brokerName": "g", "nextBrokerId": "3"})
    with pytest.raises(RemoteProtocolError, match="must be a JSON object"):
        ReplicasInfo.from_json(None)
    with pytest.raises(RemoteProtocolError, match="expected an array"):
        ReplicasInfo.from_json({"inSyncReplicas": {}})
    with pytest.raises(RemoteProtocolError, match="expected an object"):
        SyncStateDataPayload.from_json({"replicasInfoTable": []})
    with pytest.raises(RemoteProtocolError, match="expected an object"):
        BrokerMemberGroup.from_json({"cluster": "c", "brokerName": "g", "brokerAddrs": []})


def test_reply_envelope() -> None:
    reply = Reply(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, "still", {"masterBrokerId": 1})
    body = reply.to_json()
    assert body == {
        "code": 2011,
        "codeName": "CONTROLLER_MASTER_STILL_EXIST",
        "remark": "still",
        "masterBrokerId": 1,
    }
    assert Reply.from_json(body) == reply
    assert not reply.ok
    assert Reply(ResponseCode.SUCCESS).ok
    assert Reply.from_json({"code": 0, "remark": None}) == Reply(ResponseCode.SUCCESS)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], "reply must be a JSON object"),
        ({"code": "0"}, "expected an integer"),
        ({"code": True}, "expected an integer"),
        ({"code": 4242}, "unknown response code 4242"),
        ({"code": 0, "remark": 1}, "field 'remark'"),
    ],
)
def test_reply_from_json_rejects(obj: object, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message):
        Reply.from_json(obj)
