"""``apply``: the compare-and-set of each record type (docs/reference-behaviour.md §4 plus our fencing), and
that it never raises."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec
import pytest

from mqha.codes import ResponseCode as C
from mqha.controller.apply import Outcome, apply, apply_encoded, replay
from mqha.controller.records import (
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    ElectMasterRecord,
    NoopRecord,
    UpdateBrokerAddressRecord,
    encode_record,
)
from mqha.controller.state import BrokerGroupState, ControllerState, ReplicaInfo

R1 = ReplicaInfo("a1", "h1", "a1;1")
R2 = ReplicaInfo("a2", None, "a2;2")
R3 = ReplicaInfo("a3", None, "a3;3")
G1 = BrokerGroupState("c1", "g1", {1: R1, 2: R2, 3: R3}, 1, 4, frozenset({1, 2}), 7)
S = ControllerState({"g1": G1}, applied_index=20)
EMPTY = ControllerState.empty()


def rejected(state: ControllerState, record: Any, code: C, remark: str) -> tuple[ControllerState, Outcome]:
    return replace(state, applied_index=21), Outcome(
        code, remark, 21, record, record.broker_name, state.group("g1")
    )


def accepted(
    state: ControllerState, record: Any, group: BrokerGroupState | None
) -> tuple[ControllerState, Outcome]:
    groups = dict(state.groups)
    if group is None:
        groups.pop("g1", None)
    else:
        groups["g1"] = group
    return ControllerState(groups, 21), Outcome(C.SUCCESS, "", 21, record, "g1", group)


# --- bookkeeping ----------------------------------------------------------------------------------


def test_noop_only_advances_applied_index() -> None:
    assert apply(S, NoopRecord("n0/term3"), 21) == (
        replace(S, applied_index=21),
        Outcome(C.SUCCESS, "", 21, NoopRecord("n0/term3")),
    )


def test_applied_index_never_moves_backwards() -> None:
    state, outcome = apply(S, NoopRecord(), 5)
    assert state.applied_index == 20
    assert outcome.raft_index == 5


def test_not_a_record_is_a_system_error_outcome() -> None:
    state, outcome = apply(S, "hello", 21)  # type: ignore[arg-type]
    assert (state, outcome.code, outcome.record) == (replace(S, applied_index=21), C.SYSTEM_ERROR, None)


def test_a_broken_record_is_caught_not_raised() -> None:
    broken = AlterSyncStateSetRecord("g1", 1, frozenset({1}), 4, 7)
    msgspec.structs.force_setattr(broken, "new_sync_state_set", None)  # simulate a bug upstream
    state, outcome = apply(S, broken, 21)
    assert outcome.code == C.SYSTEM_ERROR
    assert "internal error applying AlterSyncStateSetRecord" in outcome.remark
    assert state == replace(S, applied_index=21)


@pytest.mark.parametrize("data", [b"", b"\xff\xfe", b"[]", b"{}", b'{"record":"Nope","version":1}', b"null"])
def test_apply_encoded_undecodable_is_a_system_error_outcome(data: bytes) -> None:
    state, outcome = apply_encoded(S, data, 21)
    assert state == replace(S, applied_index=21)
    assert outcome.code == C.SYSTEM_ERROR
    assert outcome.remark.startswith("undecodable record")


def test_apply_encoded_applies_a_valid_record() -> None:
    record = ElectMasterRecord("c1", "g1", 2, 4, 7)
    assert apply_encoded(S, encode_record(record), 21) == apply(S, record, 21)


def test_replay_numbers_entries_from_first_index() -> None:
    state = replay([ApplyBrokerIdRecord("c1", "g1", 1, "a1", "a1;1"), NoopRecord()])
    assert state.applied_index == 2
    assert state.group("g1") == BrokerGroupState("c1", "g1", {1: ReplicaInfo("a1", None, "a1;1")})


# --- ApplyBrokerIdRecord --------------------------------------------------------------------------


def test_apply_id_creates_unknown_set() -> None:
    record = ApplyBrokerIdRecord("c1", "g9", 1, "x", "x;1")
    state, outcome = apply(S, record, 21)
    assert state.group("g9") == BrokerGroupState("c1", "g9", {1: ReplicaInfo("x", None, "x;1")})
    assert outcome == Outcome(C.SUCCESS, "", 21, record, "g9", state.group("g9"))


def test_apply_id_adds_free_id() -> None:
    record = ApplyBrokerIdRecord("c1", "g1", 4, "a4", "a4;4")
    new_group = replace(G1, replicas={**G1.replicas, 4: ReplicaInfo("a4", None, "a4;4")})
    assert apply(S, record, 21) == accepted(S, record, new_group)


def test_apply_id_same_check_code_is_a_no_op() -> None:
    record = ApplyBrokerIdRecord("c1", "g1", 2, "a2-new", "a2;2")
    assert apply(S, record, 21) == accepted(S, record, G1)


def test_apply_id_taken_by_another_check_code_rejected_2014() -> None:
    record = ApplyBrokerIdRecord("c1", "g1", 2, "zz", "zz;9")
    assert apply(S, record, 21) == rejected(
        S, record, C.CONTROLLER_BROKER_ID_INVALID, "Fail to apply brokerId: 2 in broker-set: g1"
    )


# --- UpdateBrokerAddressRecord --------------------------------------------------------------------


def test_update_address_keeps_check_code_and_ha_when_none() -> None:
    record = UpdateBrokerAddressRecord("c1", "g1", 1, "new", None)
    new_group = replace(G1, replicas={**G1.replicas, 1: ReplicaInfo("new", "h1", "a1;1")})
    assert apply(S, record, 21) == accepted(S, record, new_group)


def test_update_address_sets_ha() -> None:
    record = UpdateBrokerAddressRecord("c1", "g1", 2, "a2", "h2")
    state, _ = apply(S, record, 21)
    assert state.groups["g1"].replicas[2] == ReplicaInfo("a2", "h2", "a2;2")


def test_update_address_unknown_set_or_id_rejected_2010() -> None:
    record = UpdateBrokerAddressRecord("c1", "g9", 1, "x")
    assert apply(S, record, 21)[1].code == C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    record = UpdateBrokerAddressRecord("c1", "g1", 9, "x")
    assert apply(S, record, 21) == rejected(
        S,
        record,
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        "BrokerId: 9 hasn't been registered in broker-set: g1",
    )


# --- ElectMasterRecord ----------------------------------------------------------------------------


def test_elect_sets_master_and_sss_bumping_both_epochs() -> None:
    record = ElectMasterRecord("c1", "g1", 2, 4, 7)
    new_group = replace(
        G1, master_broker_id=2, master_epoch=5, sync_state_set=frozenset({2}), sync_state_set_epoch=8
    )
    assert apply(S, record, 21) == accepted(S, record, new_group)


def test_elect_none_clears_master_keeps_sss() -> None:
    record = ElectMasterRecord("c1", "g1", None, 4, 7)
    assert apply(S, record, 21) == accepted(S, record, replace(G1, master_broker_id=None, master_epoch=5))


def test_elect_unknown_set_rejected_2010() -> None:
    record = ElectMasterRecord("c1", "g9", 2, 0, 0)
    assert apply(S, record, 21)[1].code == C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_elect_stale_master_epoch_fenced_2000() -> None:
    record = ElectMasterRecord("c1", "g1", 2, 3, 7)
    assert apply(S, record, 21) == rejected(
        S,
        record,
        C.CONTROLLER_FENCED_MASTER_EPOCH,
        "Fenced: decided against masterEpoch 3, but the current masterEpoch of g1 is 4",
    )


def test_elect_stale_sss_epoch_fenced_2001() -> None:
    record = ElectMasterRecord("c1", "g1", 2, 4, 6)
    assert apply(S, record, 21)[1].code == C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH


def test_elect_unregistered_candidate_rejected_2012() -> None:
    record = ElectMasterRecord("c1", "g1", 9, 4, 7)
    assert apply(S, record, 21) == rejected(
        S,
        record,
        C.CONTROLLER_ELECT_MASTER_FAILED,
        "Failed to elect a new master: broker 9 is no longer registered in g1",
    )


# --- AlterSyncStateSetRecord ----------------------------------------------------------------------


def test_alter_replaces_sss_bumping_its_epoch_only() -> None:
    record = AlterSyncStateSetRecord("g1", 1, frozenset({1, 3}), 4, 7)
    new_group = replace(G1, sync_state_set=frozenset({1, 3}), sync_state_set_epoch=8)
    assert apply(S, record, 21) == accepted(S, record, new_group)


@pytest.mark.parametrize(
    ("record", "code"),
    [
        (AlterSyncStateSetRecord("g9", 1, frozenset({1}), 4, 7), C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        (AlterSyncStateSetRecord("g1", 2, frozenset({2}), 4, 7), C.CONTROLLER_INVALID_MASTER),
        (AlterSyncStateSetRecord("g1", 1, frozenset({1}), 3, 7), C.CONTROLLER_FENCED_MASTER_EPOCH),
        (AlterSyncStateSetRecord("g1", 1, frozenset({1}), 4, 6), C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        (AlterSyncStateSetRecord("g1", 1, frozenset({1, 9}), 4, 7), C.CONTROLLER_INVALID_REPLICAS),
        (AlterSyncStateSetRecord("g1", 1, frozenset({2, 3}), 4, 7), C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    ],
)
def test_alter_cas_rejections_leave_groups_unchanged(record: AlterSyncStateSetRecord, code: C) -> None:
    state, outcome = apply(S, record, 21)
    assert outcome.code == code
    assert state == replace(S, applied_index=21)


def test_alter_without_master_rejected_2002() -> None:
    no_master = ControllerState({"g1": replace(G1, master_broker_id=None)})
    _, outcome = apply(no_master, AlterSyncStateSetRecord("g1", 1, frozenset({1}), 4, 7), 1)
    assert outcome.code == C.CONTROLLER_INVALID_MASTER


# --- CleanBrokerDataRecord ------------------------------------------------------------------------


def test_clean_whole_set() -> None:
    record = CleanBrokerDataRecord("c1", "g1", None, 4, 7)
    assert apply(S, record, 21) == accepted(S, record, None)


def test_clean_empty_id_set_means_whole_set() -> None:
    record = CleanBrokerDataRecord("c1", "g1", frozenset(), 4, 7)
    assert apply(S, record, 21) == accepted(S, record, None)


def test_clean_partial_no_epoch_change() -> None:
    record = CleanBrokerDataRecord("c1", "g1", frozenset({2, 9}), 4, 7)
    new_group = replace(G1, replicas={1: R1, 3: R3}, sync_state_set=frozenset({1}))
    assert apply(S, record, 21) == accepted(S, record, new_group)


def test_clean_partial_of_the_master_clears_it_and_bumps_master_epoch() -> None:
    record = CleanBrokerDataRecord("c1", "g1", frozenset({1}), 4, 7)
    new_group = replace(
        G1, replicas={2: R2, 3: R3}, master_broker_id=None, master_epoch=5, sync_state_set=frozenset({2})
    )
    assert apply(S, record, 21) == accepted(S, record, new_group)


def test_clean_partial_emptying_sss_keeps_set_while_replicas_remain() -> None:
    record = CleanBrokerDataRecord("c1", "g1", frozenset({1, 2}), 4, 7)
    state, outcome = apply(S, record, 21)
    assert outcome.group == replace(
        G1, replicas={3: R3}, master_broker_id=None, master_epoch=5, sync_state_set=frozenset()
    )
    assert state.group("g1") == outcome.group


def test_clean_partial_of_every_replica_removes_the_set() -> None:
    record = CleanBrokerDataRecord("c1", "g1", frozenset({1, 2, 3}), 4, 7)
    assert apply(S, record, 21) == accepted(S, record, None)


def test_clean_unknown_set_rejected_2009() -> None:
    record = CleanBrokerDataRecord("c1", "g9", None, 0, 0)
    state, outcome = apply(S, record, 21)
    assert (outcome.code, outcome.remark) == (
        C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        "Broker g9 is not existed,clean broker data failure.",
    )
    assert state.groups == S.groups


@pytest.mark.parametrize(
    ("epochs", "code"),
    [((3, 7), C.CONTROLLER_FENCED_MASTER_EPOCH), ((4, 8), C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH)],
)
def test_clean_stale_epochs_fenced(epochs: tuple[int, int], code: C) -> None:
    record = CleanBrokerDataRecord("c1", "g1", None, *epochs)
    state, outcome = apply(S, record, 21)
    assert outcome.code == code
    assert state.groups == S.groups
