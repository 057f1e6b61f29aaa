"""Record log format and snapshot format: round trips, strict decoding, picklability."""

from __future__ import annotations

import json
import pickle

import pytest

from mqha.controller.records import (
    RECORD_TYPES,
    AclEntry,
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    ConsumerOffsetEntry,
    DeleteAclUserRecord,
    DeleteTopicRecord,
    ElectMasterRecord,
    NoopRecord,
    PutAclPolicyRecord,
    PutAclUserRecord,
    RecordFormatError,
    UpdateBrokerAddressRecord,
    UpdateConsumerOffsetRecord,
    UpdateTopicRecord,
    decode_record,
    encode_record,
)
from mqha.controller.state import (
    BrokerGroupState,
    ControllerState,
    FrozenMap,
    ReplicaInfo,
    SnapshotFormatError,
    decode_state,
    encode_state,
)

EVERY_RECORD = [
    NoopRecord(),
    NoopRecord("n1/7"),
    ApplyBrokerIdRecord("c1", "g1", 1, "a:1", "a:1;123"),
    UpdateBrokerAddressRecord("c1", "g1", 1, "a:2", None),
    UpdateBrokerAddressRecord("c1", "g1", 1, "a:2", "a:3"),
    ElectMasterRecord("c1", "g1", 2, 3, 4, unclean=True),
    ElectMasterRecord("c1", "g1", None, 3, 4),
    AlterSyncStateSetRecord("g1", 1, frozenset({3, 1}), 2, 5),
    AlterSyncStateSetRecord("g1", 1, frozenset({3, 1}), 2, 5, confirm_offset=700, release_eligible=True),
    CleanBrokerDataRecord(None, "g1", None, 0, 0),
    CleanBrokerDataRecord("c1", "g1", frozenset({2}), 1, 1),
    UpdateTopicRecord("t1", ("g1", "g2"), 8, 2, 6),
    DeleteTopicRecord("t1", ("g2",)),
    UpdateConsumerOffsetRecord((ConsumerOffsetEntry("cg", "t1", "g1", 0, 10),)),
    PutAclUserRecord("app", "Normal", "v1.sealed"),
    DeleteAclUserRecord("app"),
    PutAclPolicyRecord("app", (AclEntry("Topic:A", ("Pub", "Sub"), "Allow", ("10.0.0.0/8",)),)),
    PutAclPolicyRecord("app", ()),
]


def test_every_record_type_has_an_example() -> None:
    assert {type(r) for r in EVERY_RECORD} == set(RECORD_TYPES)


@pytest.mark.parametrize("record", EVERY_RECORD, ids=lambda r: type(r).__name__)
def test_record_round_trip_and_pickle(record: object) -> None:
    data = encode_record(record)  # type: ignore[arg-type]
    assert decode_record(data) == record
    assert pickle.loads(pickle.dumps(record)) == record


def test_record_encoding_is_readable_versioned_json() -> None:
    data = encode_record(AlterSyncStateSetRecord("g1", 1, frozenset({3, 1}), 2, 5))
    assert json.loads(data) == {
        "record": "AlterSyncStateSet",
        "version": 3,
        "brokerName": "g1",
        "masterBrokerId": 1,
        "newSyncStateSet": [1, 3],
        "expectedMasterEpoch": 2,
        "expectedSyncStateSetEpoch": 5,
        "confirmOffset": None,
        "releaseEligible": False,
    }


def elect_doc(**changes: object) -> bytes:
    doc: dict[str, object] = json.loads(encode_record(ElectMasterRecord("c1", "g1", 2, 3, 4)))
    doc.update(changes)
    return json.dumps({k: v for k, v in doc.items() if v != "DROP"}).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x80", "not JSON"),
        (b"{", "not JSON"),
        (b"[1]", "must be a JSON object"),
        (elect_doc(record="Bogus"), "unknown record type"),
        (elect_doc(record=None), "unknown record type"),
        (elect_doc(version=3), "newer than 2"),
        (elect_doc(version=0), "bad version"),
        (elect_doc(version=True), "bad version"),
        (elect_doc(extra=1), "unknown field 'extra'"),
        (elect_doc(brokerName="DROP"), "missing field 'brokerName'"),
        (elect_doc(newMasterBrokerId="2"), "field 'newMasterBrokerId': expected an integer"),
        (elect_doc(expectedMasterEpoch=True), "field 'expectedMasterEpoch': expected an integer"),
        (elect_doc(unclean=1), "field 'unclean': expected a boolean"),
        (elect_doc(clusterName=3), "field 'clusterName': expected a string"),
    ],
)
def test_decode_record_rejects(data: bytes, message: str) -> None:
    with pytest.raises(RecordFormatError, match=message):
        decode_record(data)


def test_decode_record_rejects_bad_id_arrays_and_non_bytes() -> None:
    doc = json.loads(encode_record(CleanBrokerDataRecord("c1", "g1", frozenset({1}), 0, 0)))
    doc["brokerIds"] = [1, "2"]
    with pytest.raises(RecordFormatError, match="array of integers"):
        decode_record(json.dumps(doc).encode())
    with pytest.raises(RecordFormatError, match="expected bytes"):
        decode_record("text")  # type: ignore[arg-type]


# --- state ----------------------------------------------------------------------------------------

G1 = BrokerGroupState(
    "c1",
    "g1",
    {2: ReplicaInfo("a2", "h2", "a2;2"), 1: ReplicaInfo("a1", None, "a1;1")},
    master_broker_id=1,
    master_epoch=3,
    sync_state_set=frozenset({1, 2}),
    sync_state_set_epoch=5,
)
G2 = BrokerGroupState("c2", "g2", {1: ReplicaInfo("b1")})
STATE = ControllerState({"g2": G2, "g1": G1}, applied_index=42)


def test_snapshot_round_trip_and_is_canonical() -> None:
    data = encode_state(STATE)
    assert decode_state(data) == STATE
    assert encode_state(decode_state(data)) == data
    assert encode_state(ControllerState({"g1": G1, "g2": G2}, 42)) == data


def test_state_is_hashable_and_picklable() -> None:
    assert pickle.loads(pickle.dumps(STATE)) == STATE
    assert hash(STATE) == hash(ControllerState({"g1": G1, "g2": G2}, 42))


def test_empty_state() -> None:
    assert ControllerState.empty() == ControllerState({}, 0)
    assert decode_state(encode_state(ControllerState.empty())) == ControllerState.empty()


def test_group_helpers() -> None:
    assert G1.next_broker_id == 3
    assert BrokerGroupState("c", "g").next_broker_id == 1
    assert (G1.master_address, G1.master_ha_address) == ("a1", None)
    assert G1.address_of(None) is None
    assert G1.ha_address_of(2) == "h2"
    assert G1.describe() == "g1(c1) master=1 masterEpoch=3 sss=[1,2] sssEpoch=5 replicas=[1@a1,2@a2/h2]"
    assert STATE.groups_of_cluster("c2") == [G2]


def test_frozen_map() -> None:
    m = FrozenMap({1: "a"})
    assert m.set(2, "b") == {1: "a", 2: "b"}
    assert m == {1: "a"}
    assert m.remove(1) == {}
    assert m != [1]
    assert repr(m) == "FrozenMap({1: 'a'})"
    with pytest.raises(TypeError):
        m[3] = "c"  # type: ignore[index]


def snapshot_doc(**changes: object) -> bytes:
    doc = json.loads(encode_state(STATE))
    doc.update(changes)
    return json.dumps(doc).encode()


def group_doc(**changes: object) -> bytes:
    doc = json.loads(encode_state(STATE))
    doc["groups"][0].update(changes)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff", "not JSON"),
        (b"[]", "not a controller state snapshot"),
        (snapshot_doc(format="other"), "not a controller state snapshot"),
        (snapshot_doc(version=6), "unsupported snapshot version 6"),
        (
            snapshot_doc(appliedIndex="1"),
            "field 'appliedIndex' of StateSnapshot: expected an integer, got string",
        ),
        (
            snapshot_doc(groups=[1]),
            "field 'groups' of StateSnapshot: expected an array of objects, found integer",
        ),
        (snapshot_doc(groups={}), "field 'groups' of StateSnapshot: expected an array, got object"),
        (
            group_doc(masterEpoch=True),
            r"field 'groups\[0\]\.masterEpoch' of StateSnapshot: expected an integer, got boolean",
        ),
        (
            group_doc(syncStateSet=["1"]),
            r"field 'groups\[0\]\.syncStateSet\[0\]' of StateSnapshot: expected an integer, got string",
        ),
        (
            group_doc(replicas=[1]),
            r"field 'groups\[0\]\.replicas\[0\]' of StateSnapshot: expected an object, got integer",
        ),
        (
            group_doc(replicas=[{"brokerId": 1}]),
            r"missing required field 'address' in StateSnapshot at 'groups\[0\]\.replicas\[0\]'",
        ),
        (
            group_doc(
                replicas=[
                    {"brokerId": 1, "address": "a", "haAddress": None, "registerCheckCode": ""},
                    {"brokerId": 1, "address": "b", "haAddress": None, "registerCheckCode": ""},
                ]
            ),
            "duplicate broker id 1",
        ),
    ],
)
def test_decode_state_rejects(data: bytes, message: str) -> None:
    with pytest.raises(SnapshotFormatError, match=message):
        decode_state(data)


def test_decode_state_rejects_duplicate_groups() -> None:
    doc = json.loads(encode_state(STATE))
    doc["groups"].append(doc["groups"][0])
    with pytest.raises(SnapshotFormatError, match="duplicate broker set g1"):
        decode_state(json.dumps(doc).encode())


def test_acl_users_and_policies_round_trip_and_a_state_without_them_stays_version_4() -> None:
    from mqha.controller.apply import replay

    state = replay(
        [
            UpdateConsumerOffsetRecord((ConsumerOffsetEntry("cg", "t1", "g1", 0, 10),)),
            PutAclUserRecord("app", "Normal", "v1.sealed"),
            PutAclPolicyRecord("app", (AclEntry("Topic:A", ("Pub",), "Allow"),)),
            PutAclUserRecord("ops", "Super", "v1.other"),
        ]
    )
    data = encode_state(state)
    assert json.loads(data)["version"] == 5
    assert decode_state(data) == state and encode_state(decode_state(data)) == data
    assert "v1.sealed" in data.decode() and repr(state.acl_users["app"]).endswith("sealed_password=***)")
    # Deleting a user deletes its policy; a state left without ACLs is written as version 4 again.
    without = replay([DeleteAclUserRecord("app"), DeleteAclUserRecord("ops")], state, 5)
    assert not without.acl_users and not without.acl_policies
    assert json.loads(encode_state(without))["version"] == 4
    # An empty policy removes the subject's entry; a duplicate user in a snapshot is refused.
    assert not replay([PutAclPolicyRecord("app", ())], state, 5).acl_policies
    doc = json.loads(data)
    doc["aclUsers"].append(doc["aclUsers"][0])
    with pytest.raises(SnapshotFormatError, match="duplicate ACL user"):
        decode_state(json.dumps(doc).encode())
