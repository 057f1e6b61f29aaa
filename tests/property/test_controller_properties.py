"""Hypothesis properties of the controller core (docs/architecture.md §11 rules 3, 4; docs/architecture.md §5
invariants).

- replaying any record sequence from empty is deterministic, and snapshot-at-any-point + replay of the
  rest equals the full replay; every record and every state round-trips through its codec;
- masterEpoch and syncStateSetEpoch never decrease while a set exists;
- after any entry the master (when set) is registered and in the SyncStateSet, and the SyncStateSet
  only holds registered ids (``master_outside_sss`` can never fire);
- ``apply`` / ``apply_encoded`` never raise, whatever they are given, and a rejection changes no group;
- a decision applied to the state it was decided on is accepted, and its final reply equals the
  leader's prediction.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqha.codes import ResponseCode
from mqha.controller.apply import apply, apply_encoded, replay
from mqha.controller.election import ElectionPolicy
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.operations import (
    handle_alter_sync_state_set,
    handle_apply_broker_id,
    handle_clean_broker_data,
    handle_elect_master,
    handle_register_broker,
    reply_from_outcome,
)
from mqha.controller.records import (
    RECORD_TYPES,
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    ConsumerOffsetEntry,
    DeleteTopicRecord,
    ElectMasterRecord,
    NoopRecord,
    Record,
    UpdateBrokerAddressRecord,
    UpdateConsumerOffsetRecord,
    UpdateTopicRecord,
    decode_record,
    encode_record,
)
from mqha.controller.result import ControllerResult
from mqha.controller.state import ControllerState, decode_state, encode_state
from mqha.wire.controller_api import (
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    CleanBrokerDataRequest,
    ElectMasterRequest,
    RegisterBrokerRequest,
)
from mqha.wire.records import AclEntry, DeleteAclUserRecord, PutAclPolicyRecord, PutAclUserRecord

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GROUPS = st.sampled_from(["g1", "g2"])
IDS = st.integers(min_value=0, max_value=5)
ID_SETS = st.frozensets(IDS, max_size=4)
EPOCHS = st.integers(min_value=0, max_value=6)
ADDRS = st.sampled_from(["a:1", "a:2", "b:1"])
CODES = st.sampled_from(["a:1;1", "a:2;2", "b:1;3"])
CLUSTERS = st.sampled_from(["c1", "c2"])


# --------------------------------------------------------------------------------------------------
# Record sequences. Expected epochs are either the current ones (so CAS passes and the interesting
# paths run) or arbitrary (so fencing runs): the sequence is built while it is applied.


# ApplyBrokerId first (Hypothesis shrinks towards the first choice) and twice as likely: most
# interesting records need registered replicas.
KINDS = (
    ApplyBrokerIdRecord,
    ElectMasterRecord,
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    UpdateBrokerAddressRecord,
    NoopRecord,
)


# A set with three replicas and master 1: starting from it half of the time makes the master's
# paths (alter, re-election, partial clean of the master) common.
BOOTSTRAP: tuple[Record, ...] = (
    ApplyBrokerIdRecord("c1", "g1", 1, "a:1", "a:1;1"),
    ApplyBrokerIdRecord("c1", "g1", 2, "a:2", "a:2;2"),
    ApplyBrokerIdRecord("c1", "g1", 3, "b:1", "b:1;3"),
    ElectMasterRecord("c1", "g1", 1, 0, 0),
)


@st.composite
def record_sequences(draw: st.DrawFn) -> list[Record]:
    records: list[Record] = list(BOOTSTRAP) if draw(st.booleans()) else []
    state = replay(records)
    for _ in range(draw(st.integers(min_value=0, max_value=25))):
        name = draw(st.sampled_from(sorted(state.groups)) | GROUPS) if state.groups else draw(GROUPS)
        group = state.group(name)
        # Mostly fresh (3 in 4): the CAS passes and the interesting paths run.
        fresh = group is not None and draw(st.sampled_from([True, True, True, False]))
        master_epoch = group.master_epoch if fresh and group else draw(EPOCHS)
        sss_epoch = group.sync_state_set_epoch if fresh and group else draw(EPOCHS)
        known = sorted(group.replicas) if group else []
        some_id = draw(st.sampled_from(known) | IDS) if known else draw(IDS)
        kind = draw(st.sampled_from(KINDS))
        record: Record
        if kind is NoopRecord:
            record = NoopRecord(draw(st.sampled_from(["", "n1/2"])))
        elif kind is ApplyBrokerIdRecord:
            record = ApplyBrokerIdRecord(draw(CLUSTERS), name, some_id, draw(ADDRS), draw(CODES))
        elif kind is UpdateBrokerAddressRecord:
            record = UpdateBrokerAddressRecord(
                draw(CLUSTERS), name, some_id, draw(ADDRS), draw(st.none() | ADDRS)
            )
        elif kind is ElectMasterRecord:
            new_master = draw(st.sampled_from([some_id, some_id, some_id, None]))
            record = ElectMasterRecord(
                draw(CLUSTERS), name, new_master, master_epoch, sss_epoch, draw(st.booleans())
            )
        elif kind is AlterSyncStateSetRecord:
            master = (
                group.master_broker_id if group and group.master_broker_id is not None and fresh else some_id
            )
            members = draw(st.frozensets(st.sampled_from(known), max_size=4)) if known else draw(ID_SETS)
            if draw(st.sampled_from([True, True, True, False])):
                members |= {master}
            record = AlterSyncStateSetRecord(name, master, members, master_epoch, sss_epoch)
        else:
            ids = draw(st.none() | (st.frozensets(st.sampled_from(known), max_size=3) if known else ID_SETS))
            record = CleanBrokerDataRecord(draw(st.none() | CLUSTERS), name, ids, master_epoch, sss_epoch)
        state, _ = apply(state, record, len(records) + 1)
        records.append(record)
    return records


def check_invariants(state: ControllerState) -> None:
    for name, group in state.groups.items():
        assert group.broker_name == name
        assert group.replicas, "a set exists only with registered replicas"
        assert group.sync_state_set <= set(group.replicas), "SyncStateSet holds only registered ids"
        if group.master_broker_id is not None:
            assert group.master_broker_id in group.replicas
            assert group.master_broker_id in group.sync_state_set, "master_outside_sss"
        assert group.master_epoch >= 0
        assert group.sync_state_set_epoch >= 0


@FAST
@given(record_sequences())
def test_replay_is_deterministic_and_invariants_hold_after_every_entry(records: list[Record]) -> None:
    state = ControllerState.empty()
    for index, record in enumerate(records, start=1):
        before = state
        state, outcome = apply(state, record, index)
        check_invariants(state)
        assert state.applied_index == index
        if not outcome.accepted:
            assert state.groups == before.groups, "a rejected record changes no group"
        for name, old in before.groups.items():
            new = state.group(name)
            if new is not None:
                assert new.master_epoch >= old.master_epoch
                assert new.sync_state_set_epoch >= old.sync_state_set_epoch
    assert replay(records) == state
    assert replay(records) == replay(records)


@FAST
@given(record_sequences(), st.data())
def test_snapshot_at_any_point_plus_replay_of_the_rest_equals_full_replay(
    records: list[Record], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(records)))
    head = replay(records[:cut])
    restored = decode_state(encode_state(head))
    assert restored == head
    assert replay(records[cut:], restored, first_index=cut + 1) == replay(records)


@FAST
@given(record_sequences())
def test_every_record_round_trips_and_encoded_apply_equals_apply(records: list[Record]) -> None:
    state = ControllerState.empty()
    for index, record in enumerate(records, start=1):
        data = encode_record(record)
        assert decode_record(data) == record
        assert apply_encoded(state, data, index) == apply(state, record, index)
        state, _ = apply(state, record, index)


# --------------------------------------------------------------------------------------------------
# Garbage never raises.

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
SOME_STATE = replay(
    [
        ApplyBrokerIdRecord("c1", "g1", 1, "a:1", "a:1;1"),
        ApplyBrokerIdRecord("c1", "g1", 2, "a:2", "a:2;2"),
        ElectMasterRecord("c1", "g1", 1, 0, 0),
        AlterSyncStateSetRecord("g1", 1, frozenset({1, 2}), 1, 1),
    ]
)
VALID = [
    NoopRecord("x"),
    ApplyBrokerIdRecord("c1", "g1", 3, "a:3", "a:3;3"),
    UpdateBrokerAddressRecord("c1", "g1", 2, "z", "h"),
    ElectMasterRecord("c1", "g1", 2, 1, 2),
    AlterSyncStateSetRecord("g1", 1, frozenset({1}), 1, 2),
    CleanBrokerDataRecord("c1", "g1", frozenset({2}), 1, 2),
    UpdateTopicRecord("t1", ("g1",), 4, 4, 6),
    DeleteTopicRecord("t1", ("g1",)),
    UpdateConsumerOffsetRecord((ConsumerOffsetEntry("cg", "t1", "g1", 0, 10),)),
    PutAclUserRecord("u1", "Normal", "sealed"),
    DeleteAclUserRecord("u1"),
    PutAclPolicyRecord("u1", (AclEntry("Topic:t1", ("Pub",), "Allow"),)),
]


@FAST
@given(st.binary(max_size=64))
def test_apply_encoded_never_raises_on_bytes(data: bytes) -> None:
    state, outcome = apply_encoded(SOME_STATE, data, 99)
    assert state.applied_index == 99
    if not outcome.accepted:
        assert state.groups == SOME_STATE.groups


@FAST
@given(st.sampled_from(VALID), st.data())
def test_apply_encoded_never_raises_on_mutated_records(record: Record, data: st.DataObject) -> None:
    doc: dict[str, Any] = json.loads(encode_record(record))
    key = data.draw(st.sampled_from(sorted(doc)) | st.text(max_size=4))
    doc[key] = data.draw(JSON)
    state, outcome = apply_encoded(SOME_STATE, json.dumps(doc).encode(), 99)
    check_invariants(state)
    if not outcome.accepted:
        assert state.groups == SOME_STATE.groups


@FAST
@given(st.sampled_from(RECORD_TYPES), st.data())
def test_apply_never_raises_on_ill_typed_records(cls: type[Any], data: st.DataObject) -> None:
    # Records are frozen msgspec structs: build one with arbitrary JSON values in every field.
    record = msgspec.structs.replace(next(valid for valid in VALID if type(valid) is cls))
    for field in msgspec.structs.fields(cls):
        msgspec.structs.force_setattr(record, field.name, data.draw(JSON))
    state, outcome = apply(SOME_STATE, record, 99)
    assert state.applied_index == 99
    if outcome.code == ResponseCode.SYSTEM_ERROR:
        assert state.groups == SOME_STATE.groups


# --------------------------------------------------------------------------------------------------
# Decisions: through the handle_* API with random liveness; prediction == final reply.

NOW = 50_000


@st.composite
def liveness(draw: st.DrawFn) -> LivenessSnapshot:
    infos = [
        BrokerLiveInfo(
            "c1",
            name,
            broker_id,
            "x",
            draw(st.integers(-1, 3)),
            draw(st.integers(-1, 100)),
            -1,
            draw(st.integers(0, 3)),
            10_000,
            NOW,
        )
        for name in ("g1", "g2")
        for broker_id in range(1, 5)
        if draw(st.booleans())
    ]
    return LivenessSnapshot.of(NOW, infos)


@st.composite
def decision(draw: st.DrawFn, state: ControllerState) -> ControllerResult:
    name = draw(st.sampled_from(sorted(state.groups)) | GROUPS) if state.groups else draw(GROUPS)
    view = draw(liveness())
    group = state.group(name)
    known = sorted(group.replicas) if group else []
    broker_id = draw(st.sampled_from(known) | st.integers(-1, 5)) if known else draw(st.integers(-1, 5))
    kind = draw(st.sampled_from(["apply-id", "elect", "alter", "apply-id", "register", "alter", "clean"]))
    if kind == "apply-id":
        next_id = group.next_broker_id if group else 1
        wanted = draw(st.just(next_id) | st.integers(0, 5))
        request = ApplyBrokerIdRequest(
            cluster_name="c1", broker_name=name, applied_broker_id=wanted, register_check_code=draw(CODES)
        )
        return handle_apply_broker_id(state, request)
    if kind == "register":
        register = RegisterBrokerRequest(
            cluster_name="c1",
            broker_name=name,
            broker_id=broker_id,
            broker_address=draw(ADDRS),
            ha_address=draw(st.none() | ADDRS),
        )
        return handle_register_broker(state, register, view)
    if kind == "elect":
        elect = ElectMasterRequest(
            broker_name=name,
            broker_id=draw(st.sampled_from([broker_id, broker_id, None])),
            designate_elect=draw(st.booleans()),
        )
        return handle_elect_master(state, elect, view, ElectionPolicy(draw(st.booleans())))
    if kind == "alter":
        master = group.master_broker_id if group and group.master_broker_id is not None else broker_id
        live_ids = [i for i in range(1, 5) if view.is_alive(name, i)]
        members = draw(st.frozensets(st.sampled_from(live_ids))) if live_ids else frozenset()
        alter = AlterSyncStateSetRequest(
            broker_name=name,
            master_broker_id=draw(st.just(master) | IDS),
            master_epoch=group.master_epoch if group else 0,
            sync_state_set=draw(st.just(members) | ID_SETS) | {master},
            sync_state_set_epoch=group.sync_state_set_epoch if group else 0,
        )
        return handle_alter_sync_state_set(state, alter, view)
    clean = CleanBrokerDataRequest(
        broker_name=name,
        broker_controller_ids_to_clean=draw(st.none() | st.lists(IDS, max_size=2).map(tuple)),
        clean_living_broker=draw(st.booleans()),
    )
    return handle_clean_broker_data(state, clean, view)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_decisions_applied_at_once_are_accepted_and_reply_as_predicted(data: st.DataObject) -> None:
    state = replay(BOOTSTRAP) if data.draw(st.booleans()) else ControllerState.empty()
    for _ in range(data.draw(st.integers(min_value=1, max_value=30))):
        result = data.draw(decision(state))
        if result.reply.code not in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE):
            assert result.records == (), "a rejected decision writes nothing"
        assert len(result.records) <= 1
        for record in result.records:
            before = state
            state, outcome = apply(state, record, state.applied_index + 1)
            assert outcome.accepted, outcome.remark
            assert reply_from_outcome(result, outcome) == result.reply
            check_invariants(state)
            for name, old in before.groups.items():
                new = state.group(name)
                if new is not None:
                    assert new.master_epoch >= old.master_epoch
                    assert new.sync_state_set_epoch >= old.sync_state_set_epoch
