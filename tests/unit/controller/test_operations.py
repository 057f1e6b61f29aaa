"""docs/reference-behaviour.md §5 API by API, every branch in the spec's check order; worked examples of §6
end to end.

Named states are built once (``G1_*``); each test calls one ``handle_*``, compares the whole result,
and applies the result's records with ``apply`` (as the reference's ReplicasInfoManagerTest does).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec
import pytest

from mqha.codes import ResponseCode as C
from mqha.controller.apply import apply
from mqha.controller.election import ElectionPolicy
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.operations import (
    handle_alter_sync_state_set,
    handle_apply_broker_id,
    handle_clean_broker_data,
    handle_elect_master,
    handle_get_next_broker_id,
    handle_get_replica_info,
    handle_get_sync_state_data,
    handle_register_broker,
    reply_from_outcome,
)
from mqha.controller.records import (
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    ElectMasterRecord,
    UpdateBrokerAddressRecord,
)
from mqha.controller.result import ControllerResult, Reply
from mqha.controller.state import BrokerGroupState, ControllerState, ReplicaInfo
from mqha.wire.controller_api import (
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    CleanBrokerDataRequest,
    ElectMasterRequest,
    GetNextBrokerIdRequest,
    GetReplicaInfoRequest,
    GetSyncStateDataRequest,
    RegisterBrokerRequest,
)

NOW = 1_000_000
CLEAN = ElectionPolicy(enable_elect_unclean_master=False)
UNCLEAN = ElectionPolicy(enable_elect_unclean_master=True)


def hb(
    broker_id: int, epoch: int = -1, offset: int = -1, prio: int = 2**31 - 1, name: str = "g1"
) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        "c1", name, broker_id, f"10.0.0.{broker_id}:10911", epoch, offset, -1, prio, 10_000, NOW
    )


def alive(*infos: BrokerLiveInfo | int) -> LivenessSnapshot:
    return LivenessSnapshot.of(NOW, [hb(i) if isinstance(i, int) else i for i in infos])


NOBODY = LivenessSnapshot(NOW)


def replicas(*ids: int) -> dict[int, ReplicaInfo]:
    return {i: ReplicaInfo(f"10.0.0.{i}:10911", f"10.0.0.{i}:10912", f"10.0.0.{i}:10911;{i}") for i in ids}


def group(**changes: Any) -> BrokerGroupState:
    base: dict[str, Any] = {"cluster_name": "c1", "broker_name": "g1", "replicas": replicas(1, 2, 3)}
    base.update(changes)
    return BrokerGroupState(**base)


def state_of(*groups: BrokerGroupState) -> ControllerState:
    return ControllerState(groups={g.broker_name: g for g in groups}, applied_index=10)


EMPTY = ControllerState.empty()
# Registered 1, 2, 3; never had a master.
G1_NEW = state_of(group())
# Master 1, everyone in sync.
G1_MASTER1 = state_of(
    group(master_broker_id=1, master_epoch=1, sync_state_set={1, 2, 3}, sync_state_set_epoch=2)
)
# Master 1, alone in the SyncStateSet.
G1_MASTER1_ALONE = state_of(
    group(master_broker_id=1, master_epoch=1, sync_state_set={1}, sync_state_set_epoch=1)
)
# The master was cleared by a controller-triggered election that found nobody.
G1_NO_MASTER = state_of(
    group(master_broker_id=None, master_epoch=2, sync_state_set={1}, sync_state_set_epoch=1)
)


def commit(state: ControllerState, result: ControllerResult) -> tuple[ControllerState, Reply]:
    """Apply the result's records (the committed log) and build the final reply from the outcome."""
    reply = result.reply
    for index, record in enumerate(result.records, start=state.applied_index + 1):
        state, outcome = apply(state, record, index)
        reply = reply_from_outcome(result, outcome)
    return state, reply


def g1(state: ControllerState) -> BrokerGroupState:
    found = state.group("g1")
    assert found is not None
    return found


def elect_req(broker_id: int | None = None, designate: bool = False) -> ElectMasterRequest:
    return ElectMasterRequest(
        broker_name="g1", cluster_name="c1", broker_id=broker_id, designate_elect=designate
    )


def alter_req(
    new_set: set[int], master: int = 1, master_epoch: int = 1, sss_epoch: int = 2, name: str = "g1"
) -> AlterSyncStateSetRequest:
    return AlterSyncStateSetRequest(
        broker_name=name,
        master_broker_id=master,
        master_epoch=master_epoch,
        sync_state_set=frozenset(new_set),
        sync_state_set_epoch=sss_epoch,
    )


def reject(code: C, remark: str, payload: dict[str, Any] | None = None) -> ControllerResult:
    return ControllerResult((), Reply(code, remark, payload or {}))


NULL_ELECT = {
    "masterBrokerId": None,
    "masterAddress": None,
    "masterHaAddress": None,
    "masterEpoch": None,
    "syncStateSetEpoch": None,
    "syncStateSet": None,
    "brokerMemberGroup": None,
}
MEMBERS = {
    "cluster": "c1",
    "brokerName": "g1",
    "brokerAddrs": {"1": "10.0.0.1:10911", "2": "10.0.0.2:10911", "3": "10.0.0.3:10911"},
}


def elected(
    broker_id: int, master_epoch: int, sss_epoch: int, members: dict[str, Any] | None = MEMBERS
) -> dict[str, Any]:
    return {
        "masterBrokerId": broker_id,
        "masterAddress": f"10.0.0.{broker_id}:10911",
        "masterHaAddress": f"10.0.0.{broker_id}:10912",
        "masterEpoch": master_epoch,
        "syncStateSetEpoch": sss_epoch,
        "syncStateSet": [broker_id],
        "brokerMemberGroup": members,
    }


# ==================================================================================================
# §5.1 GetNextBrokerId


def test_5_1_unknown_set_next_id_is_1() -> None:
    result = handle_get_next_broker_id(EMPTY, GetNextBrokerIdRequest(cluster_name="c1", broker_name="g1"))
    assert result == ControllerResult(
        (), Reply(C.SUCCESS, "", {"clusterName": "c1", "brokerName": "g1", "nextBrokerId": 1})
    )


def test_5_1_known_set_next_id_is_max_plus_one() -> None:
    result = handle_get_next_broker_id(G1_NEW, GetNextBrokerIdRequest(cluster_name="c1", broker_name="g1"))
    assert result.reply.payload_json()["nextBrokerId"] == 4
    assert result.records == ()


def test_5_1_deviation_gap_in_ids_never_hands_out_a_taken_id() -> None:
    # §17.6: the reference's counter would answer 3 here after id 3 was applied out of order by a
    # broker while 2 is free; max+1 answers 4, never an id that is taken.
    state = state_of(group(replicas=replicas(1, 3)))
    result = handle_get_next_broker_id(state, GetNextBrokerIdRequest(cluster_name="c1", broker_name="g1"))
    assert result.reply.payload_json()["nextBrokerId"] == 4


# ==================================================================================================
# §5.2 ApplyBrokerId


def apply_id(broker_id: int, address: str = "10.0.0.9:10911", stamp: int = 1) -> ApplyBrokerIdRequest:
    return ApplyBrokerIdRequest(
        cluster_name="c1",
        broker_name="g1",
        applied_broker_id=broker_id,
        register_check_code=f"{address};{stamp}",
    )


def test_5_2_unknown_set_id_1_creates_the_set() -> None:
    result = handle_apply_broker_id(EMPTY, apply_id(1))
    record = ApplyBrokerIdRecord("c1", "g1", 1, "10.0.0.9:10911", "10.0.0.9:10911;1")
    assert result == ControllerResult(
        (record,), Reply(C.SUCCESS, "", {"clusterName": "c1", "brokerName": "g1"})
    )
    state, reply = commit(EMPTY, result)
    assert reply == result.reply
    assert g1(state) == BrokerGroupState(
        "c1", "g1", {1: ReplicaInfo("10.0.0.9:10911", None, "10.0.0.9:10911;1")}
    )
    assert g1(state).next_broker_id == 2


def test_5_2_unknown_set_other_id_2014() -> None:
    assert handle_apply_broker_id(EMPTY, apply_id(2)) == reject(
        C.CONTROLLER_BROKER_ID_INVALID,
        "Broker-set: g1 hasn't been registered in controller, but broker try to apply brokerId: 2",
    )


def test_5_2_known_set_unused_id_accepted_even_out_of_order() -> None:
    result = handle_apply_broker_id(G1_NEW, apply_id(7))
    assert result.reply.code == C.SUCCESS
    state, _ = commit(G1_NEW, result)
    assert sorted(g1(state).replicas) == [1, 2, 3, 7]


def test_5_2_known_set_same_check_code_is_idempotent() -> None:
    request = apply_id(2, "10.0.0.2:10911", 2)
    result = handle_apply_broker_id(G1_NEW, request)
    assert result.reply.code == C.SUCCESS
    state, reply = commit(G1_NEW, result)
    assert reply.code == C.SUCCESS
    assert state.groups == G1_NEW.groups


def test_5_2_known_set_id_taken_by_another_check_code_2014() -> None:
    assert handle_apply_broker_id(G1_NEW, apply_id(2, "10.0.0.99:10911", 5)) == reject(
        C.CONTROLLER_BROKER_ID_INVALID, "Fail to apply brokerId: 2 in broker-set: g1"
    )


def test_5_2_deviation_ids_below_1_refused() -> None:
    assert handle_apply_broker_id(G1_NEW, apply_id(0)).reply.code == C.CONTROLLER_BROKER_ID_INVALID
    assert handle_apply_broker_id(G1_NEW, apply_id(-1)).reply.code == C.CONTROLLER_BROKER_ID_INVALID


def test_5_2_two_leaders_promise_the_same_id_second_apply_fenced() -> None:
    first = handle_apply_broker_id(G1_NEW, apply_id(4, "10.0.0.4:10911", 1))
    second = handle_apply_broker_id(G1_NEW, apply_id(4, "10.0.0.5:10911", 2))
    state, reply1 = commit(G1_NEW, first)
    state2, reply2 = commit(state, second)
    assert reply1.code == C.SUCCESS
    assert reply2 == Reply(C.CONTROLLER_BROKER_ID_INVALID, "Fail to apply brokerId: 4 in broker-set: g1")
    assert state2.groups == state.groups
    assert g1(state2).replicas[4].address == "10.0.0.4:10911"


def test_5_2_address_is_the_check_code_before_the_first_semicolon() -> None:
    request = ApplyBrokerIdRequest(
        cluster_name="c1", broker_name="g1", applied_broker_id=1, register_check_code="h:1;2;3"
    )
    (record,) = handle_apply_broker_id(EMPTY, request).records
    assert isinstance(record, ApplyBrokerIdRecord)
    assert record.broker_address == "h:1"


# ==================================================================================================
# §5.3 RegisterBroker


def register(
    broker_id: int, address: str | None = None, ha: str | None = None, name: str = "g1"
) -> RegisterBrokerRequest:
    return RegisterBrokerRequest(
        cluster_name="c1",
        broker_name=name,
        broker_id=broker_id,
        broker_address=address or f"10.0.0.{broker_id}:10911",
        ha_address=ha,
    )


def test_5_3_step1_unknown_set_2010() -> None:
    assert handle_register_broker(EMPTY, register(1), NOBODY) == reject(
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker-set: g1 hasn't been registered in controller"
    )


def test_5_3_step2_unknown_id_2010() -> None:
    assert handle_register_broker(G1_NEW, register(9), NOBODY) == reject(
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "BrokerId: 9 hasn't been registered in broker-set: g1"
    )


def test_5_3_step3_live_master_fills_master_fields_and_no_record_when_address_same() -> None:
    result = handle_register_broker(G1_MASTER1, register(2), alive(1, 2))
    assert result == ControllerResult(
        (),
        Reply(
            C.SUCCESS,
            "",
            {
                "clusterName": "c1",
                "brokerName": "g1",
                "masterBrokerId": 1,
                "masterAddress": "10.0.0.1:10911",
                "masterHaAddress": "10.0.0.1:10912",
                "masterEpoch": 1,
                "syncStateSetEpoch": 2,
                "syncStateSet": [1, 2, 3],
            },
        ),
    )


@pytest.mark.parametrize(("state", "liveness"), [(G1_MASTER1, alive(2)), (G1_NO_MASTER, alive(1, 2, 3))])
def test_5_3_step3_dead_or_absent_master_leaves_master_fields_null_step4_sss_attached(
    state: ControllerState, liveness: LivenessSnapshot
) -> None:
    payload = handle_register_broker(state, register(2), liveness).reply.payload_json()
    assert payload == {
        "clusterName": "c1",
        "brokerName": "g1",
        "masterBrokerId": None,
        "masterAddress": None,
        "masterHaAddress": None,
        "masterEpoch": None,
        "syncStateSetEpoch": None,
        "syncStateSet": sorted(g1(state).sync_state_set),
    }


def test_5_3_step5_changed_address_emits_update_record() -> None:
    # The replica moved: its process at the old address is gone (not alive here).
    result = handle_register_broker(G1_MASTER1, register(2, "10.9.9.9:1"), alive(1))
    assert result.records == (UpdateBrokerAddressRecord("c1", "g1", 2, "10.9.9.9:1", None),)
    state, reply = commit(G1_MASTER1, result)
    assert reply == result.reply
    assert reply.payload_json()["masterBrokerId"] == 1
    assert g1(state).replicas[2] == ReplicaInfo("10.9.9.9:1", "10.0.0.2:10912", "10.0.0.2:10911;2")


def test_5_3_step5_changed_ha_address_emits_update_record() -> None:
    result = handle_register_broker(G1_MASTER1, register(2, ha="10.0.0.2:20000"), alive(1, 2))
    assert result.records == (UpdateBrokerAddressRecord("c1", "g1", 2, "10.0.0.2:10911", "10.0.0.2:20000"),)
    state, _ = commit(G1_MASTER1, result)
    assert g1(state).replicas[2].ha_address == "10.0.0.2:20000"


def test_5_3_master_re_registering_elsewhere_reports_its_new_address() -> None:
    moved = replace(hb(1), broker_addr="10.1.1.1:1")  # it already heartbeats from there
    result = handle_register_broker(G1_MASTER1, register(1, "10.1.1.1:1"), alive(moved))
    assert result.reply.payload_json()["masterAddress"] == "10.1.1.1:1"
    _, reply = commit(G1_MASTER1, result)
    assert reply == result.reply


def test_5_3_an_id_a_live_process_holds_elsewhere_is_refused_without_a_record() -> None:
    # docs/architecture.md §3.2: a clone of 2's store (or an identity naming 2) at another address.
    result = handle_register_broker(G1_MASTER1, register(2, "10.9.9.9:1"), alive(1, 2))
    assert result.records == ()
    assert result.reply.code == C.CONTROLLER_BROKER_ID_INVALID
    assert "10.0.0.2:10911" in result.reply.remark and "10.9.9.9:1" in result.reply.remark


def test_5_3_an_id_another_store_applied_is_refused_even_with_nobody_alive() -> None:
    # docs/architecture.md §9.4: the store id recorded at apply time (third in the check code).
    store = "0123456789abcdef0123456789abcdef"
    applied = ReplicaInfo("10.0.0.2:10911", "10.0.0.2:10912", f"10.0.0.2:10911;2;{store}")
    state = state_of(group(master_broker_id=1, master_epoch=1, replicas={**replicas(1, 3), 2: applied}))
    other = msgspec.structs.replace(register(2), store_id="f" * 32)
    result = handle_register_broker(state, other, NOBODY)
    assert result.records == () and result.reply.code == C.CONTROLLER_BROKER_ID_INVALID
    assert f"was applied by store {store}" in result.reply.remark
    assert handle_register_broker(
        state, msgspec.structs.replace(register(2), store_id=store), NOBODY
    ).reply.ok


def test_5_3_reply_from_outcome_drops_master_fields_when_an_election_interleaved() -> None:
    result = handle_register_broker(G1_MASTER1, register(2, "10.9.9.9:1"), alive(1))
    # Before the register's record commits, another write elects 3.
    moved = state_of(replace_group(G1_MASTER1, master_broker_id=3, master_epoch=2, sync_state_set={3}))
    _, outcome = apply(moved, result.records[0], 11)
    reply = reply_from_outcome(result, outcome)
    assert reply.code == C.SUCCESS
    assert reply.payload_json()["masterBrokerId"] is None
    assert reply.payload_json()["syncStateSet"] == [3]


def test_5_3_step6_registration_never_elects() -> None:
    result = handle_register_broker(G1_NEW, register(1, "10.9.9.9:1"), alive(1, 2, 3))
    assert all(not isinstance(r, ElectMasterRecord) for r in result.records)
    state, _ = commit(G1_NEW, result)
    assert g1(state).master_broker_id is None
    assert g1(state).master_epoch == 0


def replace_group(state: ControllerState, **changes: Any) -> BrokerGroupState:
    from dataclasses import replace

    return replace(g1(state), **changes)


# ==================================================================================================
# §5.4 ElectMaster


def test_5_4_step1_unknown_set_2010() -> None:
    assert handle_elect_master(EMPTY, elect_req(1), NOBODY, CLEAN) == reject(
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered"
    )


def test_5_4_step3_first_election_requester_wins_without_liveness_check() -> None:
    result = handle_elect_master(G1_NEW, elect_req(2), NOBODY, CLEAN)
    record = ElectMasterRecord("c1", "g1", 2, 0, 0, unclean=False)
    assert result == ControllerResult((record,), Reply(C.SUCCESS, "", elected(2, 1, 1)))
    state, reply = commit(G1_NEW, result)
    assert reply == result.reply
    assert g1(state) == replace_group(
        G1_NEW, master_broker_id=2, master_epoch=1, sync_state_set={2}, sync_state_set_epoch=1
    )


def test_5_4_step3_deviation_first_election_requester_must_be_registered() -> None:
    # §17.1: the reference would make unregistered broker 9 master.
    assert handle_elect_master(G1_NEW, elect_req(9), alive(9), CLEAN) == reject(
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "BrokerId: 9 hasn't been registered in broker-set: g1"
    )


def test_5_4_step3_first_election_controller_trigger_falls_through_to_policy() -> None:
    # masterEpoch 0 and no requester: the policy runs over the (empty) SyncStateSet -> nothing -> 2004.
    # Deviation: no record. The reference bumps masterEpoch to 1 with no master and an empty SSS,
    # after which neither a first election nor a clean election is possible.
    assert handle_elect_master(G1_NEW, elect_req(None), alive(1, 2, 3), CLEAN) == reject(
        C.CONTROLLER_MASTER_NOT_AVAILABLE,
        "Old master has down and failed to elect a new broker master",
        NULL_ELECT,
    )


def test_5_4_step3_first_election_controller_trigger_with_unclean_takes_the_best_replica() -> None:
    result = handle_elect_master(G1_NEW, elect_req(None), alive(hb(1), hb(2, epoch=0)), UNCLEAN)
    assert result.records == (ElectMasterRecord("c1", "g1", 2, 0, 0, unclean=True),)


def test_5_4_minus_one_is_the_controller_trigger() -> None:
    assert elect_req(-1).requested_id is None
    result = handle_elect_master(G1_MASTER1_ALONE, elect_req(-1), alive(2, 3), CLEAN)
    assert result.reply.code == C.CONTROLLER_MASTER_NOT_AVAILABLE


def test_5_4_step5_old_master_still_alive_2011_with_current_header() -> None:
    result = handle_elect_master(G1_MASTER1, elect_req(2), alive(1, 2, 3), CLEAN)
    assert result == reject(
        C.CONTROLLER_MASTER_STILL_EXIST,
        "The old master 1 is still alive, not need to elect new master for broker g1",
        {
            "masterBrokerId": 1,
            "masterAddress": "10.0.0.1:10911",
            "masterHaAddress": "10.0.0.1:10912",
            "masterEpoch": 1,
            "syncStateSetEpoch": 2,
            "syncStateSet": [1, 2, 3],
            "brokerMemberGroup": None,
        },
    )


def test_5_4_step4_broker_trigger_is_not_a_preference() -> None:
    # Broker 2 asks, but 3 ranks higher (§17.2).
    liveness = alive(hb(2, epoch=1, offset=10), hb(3, epoch=1, offset=20))
    result = handle_elect_master(G1_MASTER1, elect_req(2), liveness, CLEAN)
    assert result.records == (ElectMasterRecord("c1", "g1", 3, 1, 2),)


def test_5_4_step6_success_header_is_epochs_plus_one_and_body_has_member_group() -> None:
    result = handle_elect_master(G1_MASTER1, elect_req(None), alive(2, 3), CLEAN)
    record = ElectMasterRecord("c1", "g1", 2, 1, 2)
    assert result == ControllerResult((record,), Reply(C.SUCCESS, "", elected(2, 2, 3)))
    state, reply = commit(G1_MASTER1, result)
    assert reply == result.reply
    assert g1(state) == replace_group(
        G1_MASTER1, master_broker_id=2, master_epoch=2, sync_state_set={2}, sync_state_set_epoch=3
    )


def test_5_4_step7_controller_trigger_no_candidate_clears_master_2004() -> None:
    result = handle_elect_master(G1_MASTER1_ALONE, elect_req(None), alive(2, 3), CLEAN)
    record = ElectMasterRecord("c1", "g1", None, 1, 1)
    assert result == ControllerResult(
        (record,),
        Reply(
            C.CONTROLLER_MASTER_NOT_AVAILABLE,
            "Old master has down and failed to elect a new broker master",
            NULL_ELECT,
        ),
    )
    state, reply = commit(G1_MASTER1_ALONE, result)
    assert reply == result.reply
    # §17.9: master cleared, masterEpoch+1, SyncStateSet and its epoch kept.
    assert g1(state) == replace_group(G1_MASTER1_ALONE, master_broker_id=None, master_epoch=2)


def test_5_4_step7_broker_trigger_no_candidate_2012_changes_nothing() -> None:
    assert handle_elect_master(G1_MASTER1_ALONE, elect_req(2), alive(2, 3), CLEAN) == reject(
        C.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master", NULL_ELECT
    )


def test_5_4_no_master_set_elects_again_once_the_in_sync_broker_returns() -> None:
    result = handle_elect_master(G1_NO_MASTER, elect_req(2), alive(1, 2), CLEAN)
    assert result.records == (ElectMasterRecord("c1", "g1", 1, 2, 1),)
    assert result.reply.payload_json()["masterEpoch"] == 3


# §6 worked examples, end to end (SSS {1,2,3}, old master 1).


def test_6_example_all_alive_no_preference_keeps_old_master_2011() -> None:
    result = handle_elect_master(G1_MASTER1, elect_req(None), alive(1, 2, 3), CLEAN)
    assert result.reply.code == C.CONTROLLER_MASTER_STILL_EXIST


def test_6_example_epoch_wins() -> None:
    liveness = alive(hb(2, epoch=1, offset=2), hb(3, epoch=0, offset=3))
    assert handle_elect_master(G1_MASTER1, elect_req(None), liveness, CLEAN).records[0] == ElectMasterRecord(
        "c1", "g1", 2, 1, 2
    )


def test_6_example_offset_wins() -> None:
    liveness = alive(hb(2, epoch=1, offset=2), hb(3, epoch=1, offset=3))
    assert (
        handle_elect_master(G1_MASTER1, elect_req(None), liveness, CLEAN).reply.payload_json()[
            "masterBrokerId"
        ]
        == 3
    )


def test_6_example_lower_priority_value_wins() -> None:
    liveness = alive(hb(2, epoch=1, offset=3, prio=2), hb(3, epoch=1, offset=3, prio=1))
    assert (
        handle_elect_master(G1_MASTER1, elect_req(None), liveness, CLEAN).reply.payload_json()[
            "masterBrokerId"
        ]
        == 3
    )


def test_6_example_sss_of_dead_master_unclean_disabled_2004() -> None:
    result = handle_elect_master(G1_MASTER1_ALONE, elect_req(None), alive(2, 3), CLEAN)
    assert result.reply.code == C.CONTROLLER_MASTER_NOT_AVAILABLE
    state, _ = commit(G1_MASTER1_ALONE, result)
    assert (g1(state).master_broker_id, g1(state).master_epoch) == (None, 2)


def test_6_example_sss_of_dead_master_unclean_enabled_best_of_the_rest() -> None:
    liveness = alive(hb(2, epoch=1, offset=5), hb(3, epoch=1, offset=9))
    result = handle_elect_master(G1_MASTER1_ALONE, elect_req(None), liveness, UNCLEAN)
    assert result.records == (ElectMasterRecord("c1", "g1", 3, 1, 1, unclean=True),)
    state, reply = commit(G1_MASTER1_ALONE, result)
    assert reply.payload_json()["syncStateSet"] == [3]
    assert g1(state).sync_state_set == {3}


def test_6_example_designated_dead_broker_2012() -> None:
    assert handle_elect_master(G1_MASTER1, elect_req(1, designate=True), alive(2, 3), CLEAN).reply.code == (
        C.CONTROLLER_ELECT_MASTER_FAILED
    )


def test_6_example_designated_current_master_alive_2011() -> None:
    assert handle_elect_master(
        G1_MASTER1, elect_req(1, designate=True), alive(1, 2, 3), CLEAN
    ).reply.code == (C.CONTROLLER_MASTER_STILL_EXIST)


def test_5_4_designated_live_in_sync_broker_replaces_a_live_master() -> None:
    result = handle_elect_master(G1_MASTER1, elect_req(3, designate=True), alive(1, 2, 3), CLEAN)
    assert result.records == (ElectMasterRecord("c1", "g1", 3, 1, 2),)


def test_5_4_designated_outside_sss_only_with_unclean() -> None:
    liveness = alive(1, 2, 3)
    assert handle_elect_master(
        G1_MASTER1_ALONE, elect_req(2, designate=True), liveness, CLEAN
    ).reply.code == (C.CONTROLLER_ELECT_MASTER_FAILED)
    result = handle_elect_master(G1_MASTER1_ALONE, elect_req(2, designate=True), liveness, UNCLEAN)
    assert result.records == (ElectMasterRecord("c1", "g1", 2, 1, 1, unclean=True),)


def test_5_4_deviation_designated_election_checks_the_cluster_name() -> None:
    # mqadmin electMaster -c: the reference ignores the name and prints it back; mqha refuses a set that
    # is registered in another cluster (docs/architecture.md §7) and changes nothing.
    request = ElectMasterRequest(broker_name="g1", cluster_name="c9", broker_id=3, designate_elect=True)
    assert handle_elect_master(G1_MASTER1, request, alive(1, 2, 3), CLEAN) == reject(
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker-set: g1 is registered in cluster c1, not in c9"
    )
    # No name (the HTTP API allows it) is no check; a broker's own trigger is never checked.
    unnamed = ElectMasterRequest(broker_name="g1", broker_id=3, designate_elect=True)
    assert handle_elect_master(G1_MASTER1, unnamed, alive(1, 2, 3), CLEAN).reply.code == C.SUCCESS
    broker = ElectMasterRequest(broker_name="g1", cluster_name="c9", broker_id=2)
    assert handle_elect_master(G1_MASTER1_ALONE, broker, alive(2, 3), CLEAN).reply.code != (
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    )


def test_5_4_two_leaders_elect_on_the_same_state_second_apply_fenced_2000() -> None:
    first = handle_elect_master(G1_MASTER1, elect_req(None), alive(2), CLEAN)
    second = handle_elect_master(G1_MASTER1, elect_req(None), alive(3), CLEAN)
    state, reply1 = commit(G1_MASTER1, first)
    state2, reply2 = commit(state, second)
    assert (reply1.code, reply1.payload_json()["masterBrokerId"]) == (C.SUCCESS, 2)
    assert reply2.code == C.CONTROLLER_FENCED_MASTER_EPOCH
    assert reply2.payload_json() == {}
    assert state2.groups == state.groups


# ==================================================================================================
# §5.5 AlterSyncStateSet — checks in this exact order.


def test_5_5_step1_unknown_set_2013() -> None:
    assert handle_alter_sync_state_set(EMPTY, alter_req({1, 2}), alive(1, 2)) == reject(
        C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed"
    )


def test_5_5_unchanged_set_checked_first_2013() -> None:
    # A stale master (wrong id and epochs) re-sending the current set gets 2013, not 2002/2000/2001.
    request = alter_req({1, 2, 3}, master=2, master_epoch=0, sss_epoch=0)
    assert handle_alter_sync_state_set(G1_MASTER1, request, NOBODY) == reject(
        C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
    )


def test_5_5_step3_no_master_2002() -> None:
    request = alter_req({1, 2}, master=1, master_epoch=2, sss_epoch=1)
    result = handle_alter_sync_state_set(G1_NO_MASTER, request, alive(1, 2))
    assert result.reply.code == C.CONTROLLER_INVALID_MASTER
    assert result.records == ()


def test_5_5_step3_not_the_master_before_epochs_2002() -> None:
    result = handle_alter_sync_state_set(
        G1_MASTER1, alter_req({2, 3}, master=2, master_epoch=0, sss_epoch=0), NOBODY
    )
    assert result == reject(
        C.CONTROLLER_INVALID_MASTER,
        "Rejecting alter syncStateSet of g1: broker 2 is not the current master (1)",
    )


def test_5_5_step4_stale_master_epoch_before_sss_epoch_2000() -> None:
    result = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 2}, master_epoch=0, sss_epoch=0), NOBODY)
    assert result == reject(
        C.CONTROLLER_FENCED_MASTER_EPOCH,
        "Rejecting alter syncStateSet of g1: masterEpoch 0 is not the current masterEpoch 1",
    )


def test_5_5_step5_stale_sss_epoch_2001() -> None:
    result = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 2}, sss_epoch=1), NOBODY)
    assert result == reject(
        C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        "Rejecting alter syncStateSet of g1: syncStateSetEpoch 1 is not the current syncStateSetEpoch 2",
    )


def test_5_5_step6_unregistered_member_2003() -> None:
    result = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 2, 9}), alive(1, 2, 9))
    assert result == reject(
        C.CONTROLLER_INVALID_REPLICAS, "Rejecting alter syncStateSet of g1: replica 9 is not registered"
    )


def test_5_5_step6_dead_member_2006() -> None:
    result = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 2}), alive(1))
    assert result == reject(
        C.CONTROLLER_BROKER_NOT_ALIVE, "Rejecting alter syncStateSet of g1: replica 2 is not alive"
    )


def test_5_5_step6_members_checked_in_ascending_order() -> None:
    # 2 is dead and 9 unregistered: 2 comes first, so 2006 rather than 2003.
    result = handle_alter_sync_state_set(G1_MASTER1, alter_req({9, 1, 2}), alive(1, 9))
    assert result.reply.code == C.CONTROLLER_BROKER_NOT_ALIVE


def test_5_5_step6_the_master_itself_must_be_alive() -> None:
    result = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 2}), alive(2))
    assert result.reply == Reply(
        C.CONTROLLER_BROKER_NOT_ALIVE, "Rejecting alter syncStateSet of g1: replica 1 is not alive"
    )


def test_5_5_step7_master_missing_from_new_set_2013() -> None:
    result = handle_alter_sync_state_set(G1_MASTER1, alter_req({2, 3}), alive(1, 2, 3))
    assert result == reject(
        C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        "Rejecting alter syncStateSet of g1: the new syncStateSet does not contain the master 1",
    )


def test_5_5_step8_success_bumps_sss_epoch() -> None:
    result = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 3}), alive(1, 3))
    record = AlterSyncStateSetRecord("g1", 1, frozenset({1, 3}), 1, 2)
    payload = {"newSyncStateSetEpoch": 3, "syncStateSet": [1, 3], "syncStateSetEpoch": 3}
    assert result == ControllerResult((record,), Reply(C.SUCCESS, "", payload))
    state, reply = commit(G1_MASTER1, result)
    assert reply == result.reply
    assert g1(state) == replace_group(G1_MASTER1, sync_state_set={1, 3}, sync_state_set_epoch=3)


def test_5_5_two_alters_decided_on_the_same_state_second_apply_fenced_2001() -> None:
    shrink = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 2}), alive(1, 2, 3))
    other = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 3}), alive(1, 2, 3))
    state, reply1 = commit(G1_MASTER1, shrink)
    state2, reply2 = commit(state, other)
    assert reply1.code == C.SUCCESS
    assert reply2 == Reply(
        C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        "Fenced: decided against syncStateSetEpoch 2, but the current syncStateSetEpoch of g1 is 3",
    )
    assert g1(state2).sync_state_set == {1, 2}


def test_5_5_alter_decided_before_an_election_fenced_2002_on_apply() -> None:
    shrink = handle_alter_sync_state_set(G1_MASTER1, alter_req({1, 2}), alive(1, 2, 3))
    election = handle_elect_master(G1_MASTER1, elect_req(None), alive(2, 3), CLEAN)
    state, _ = commit(G1_MASTER1, election)
    state2, reply = commit(state, shrink)
    assert reply.code == C.CONTROLLER_INVALID_MASTER
    assert state2.groups == state.groups


# ==================================================================================================
# §5.6 GetReplicaInfo


def test_5_6_unknown_set_2008() -> None:
    assert handle_get_replica_info(EMPTY, GetReplicaInfoRequest(broker_name="g1")) == reject(
        C.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed"
    )


def test_5_6_with_master() -> None:
    assert handle_get_replica_info(G1_MASTER1, GetReplicaInfoRequest(broker_name="g1")) == ControllerResult(
        (),
        Reply(
            C.SUCCESS,
            "",
            {
                "masterBrokerId": 1,
                "masterAddress": "10.0.0.1:10911",
                "masterHaAddress": "10.0.0.1:10912",
                "masterEpoch": 1,
                "syncStateSet": [1, 2, 3],
                "syncStateSetEpoch": 2,
            },
        ),
    )


def test_5_6_without_master_master_fields_null_epoch_always_returned() -> None:
    payload = handle_get_replica_info(
        G1_NO_MASTER, GetReplicaInfoRequest(broker_name="g1")
    ).reply.payload_json()
    assert payload == {
        "masterBrokerId": None,
        "masterAddress": None,
        "masterHaAddress": None,
        "masterEpoch": 2,
        "syncStateSet": [1],
        "syncStateSetEpoch": 1,
    }


# ==================================================================================================
# §5.7 GetSyncStateData


def test_5_7_empty_list_is_system_error_1() -> None:
    assert handle_get_sync_state_data(G1_MASTER1, GetSyncStateDataRequest(), NOBODY) == reject(
        C.SYSTEM_ERROR, "not set any response code"
    )


def identity(broker_id: int, is_alive: bool) -> dict[str, Any]:
    return {
        "brokerName": "g1",
        "brokerId": broker_id,
        "brokerAddress": f"10.0.0.{broker_id}:10911",
        "alive": is_alive,
    }


def test_5_7_in_and_not_in_sync_with_alive_flags_unknown_names_skipped() -> None:
    state = state_of(group(master_broker_id=1, master_epoch=3, sync_state_set={1, 3}, sync_state_set_epoch=4))
    request = GetSyncStateDataRequest(broker_names=("g1", "nope"))
    result = handle_get_sync_state_data(state, request, alive(1, 2))
    assert result == ControllerResult(
        (),
        Reply(
            C.SUCCESS,
            "",
            {
                "replicasInfoTable": {
                    "g1": {
                        "masterBrokerId": 1,
                        "masterAddress": "10.0.0.1:10911",
                        "masterEpoch": 3,
                        "syncStateSetEpoch": 4,
                        "inSyncReplicas": [identity(1, True), identity(3, False)],
                        "notInSyncReplicas": [identity(2, True)],
                    }
                }
            },
        ),
    )


def test_5_7_by_cluster_name() -> None:
    other = BrokerGroupState("c2", "g2", replicas(1))
    state = state_of(group(), other)
    result = handle_get_sync_state_data(state, GetSyncStateDataRequest(cluster_name="c2"), NOBODY)
    assert list(result.reply.payload_json()["replicasInfoTable"]) == ["g2"]


def test_5_7_only_unknown_names_success_with_empty_table() -> None:
    result = handle_get_sync_state_data(EMPTY, GetSyncStateDataRequest(broker_names=("x",)), NOBODY)
    assert result.reply == Reply(C.SUCCESS, "", {"replicasInfoTable": {}})


# ==================================================================================================
# §5.10 CleanBrokerData


def clean(
    ids: tuple[int, ...] | str | None = None, living: bool = False, name: str = "g1"
) -> CleanBrokerDataRequest:
    return CleanBrokerDataRequest(
        broker_name=name, cluster_name="c1", broker_controller_ids_to_clean=ids, clean_living_broker=living
    )


def test_5_10_no_ids_and_a_master_2009_still_alive() -> None:
    assert handle_clean_broker_data(G1_MASTER1, clean(), NOBODY) == reject(
        C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "Broker g1 is still alive, clean up failure"
    )


@pytest.mark.parametrize("ids", [None, (), "", "  "])
def test_5_10_blank_ids_without_master_removes_the_whole_set(ids: tuple[int, ...] | str | None) -> None:
    result = handle_clean_broker_data(G1_NO_MASTER, clean(ids), NOBODY)
    assert result == ControllerResult((CleanBrokerDataRecord("c1", "g1", None, 2, 1),), Reply(C.SUCCESS))
    state, reply = commit(G1_NO_MASTER, result)
    assert reply == Reply(C.SUCCESS)
    assert state.group("g1") is None


@pytest.mark.parametrize("living", [False, True])
def test_5_10_deviation_a_set_of_another_cluster_is_not_cleaned(living: bool) -> None:
    # cleanBrokerMetadata -c: the reference checks liveness under the given name, so a wrong one finds
    # every replica dead and cleans a living set; mqha refuses the name (docs/architecture.md §7).
    request = CleanBrokerDataRequest(
        broker_name="g1", cluster_name="c9", broker_controller_ids_to_clean=(3,), clean_living_broker=living
    )
    assert handle_clean_broker_data(G1_MASTER1, request, alive(1, 2)) == reject(
        C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "Broker-set: g1 is registered in cluster c1, not in c9"
    )


def test_5_10_malformed_ids_2009() -> None:
    assert handle_clean_broker_data(G1_MASTER1, clean("1;x"), NOBODY) == reject(
        C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        "Please set the option <brokerControllerIdsToClean> according to the format, "
        'exception: For input string: "x"',
    )


def test_5_10_alive_id_2009_with_two_spaces() -> None:
    assert handle_clean_broker_data(G1_MASTER1, clean((3, 2)), alive(2)) == reject(
        C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "Broker [g1,  2] is still alive, clean up failure"
    )


def test_5_10_text_ids_parsed_like_the_reference() -> None:
    result = handle_clean_broker_data(G1_MASTER1, clean("2;3"), alive(1))
    assert result.records == (CleanBrokerDataRecord("c1", "g1", frozenset({2, 3}), 1, 2),)


def test_5_10_partial_clean_of_dead_ids_no_epoch_change() -> None:
    result = handle_clean_broker_data(G1_MASTER1, clean((3,)), alive(1, 2))
    assert result == ControllerResult(
        (CleanBrokerDataRecord("c1", "g1", frozenset({3}), 1, 2),), Reply(C.SUCCESS)
    )
    state, _ = commit(G1_MASTER1, result)
    assert g1(state) == replace_group(G1_MASTER1, replicas=replicas(1, 2), sync_state_set={1, 2})


def test_5_10_living_flag_ignores_ids_and_liveness_removes_the_whole_set() -> None:
    result = handle_clean_broker_data(G1_MASTER1, clean((2,), living=True), alive(1, 2, 3))
    assert result.records == (CleanBrokerDataRecord("c1", "g1", None, 1, 2),)
    state, _ = commit(G1_MASTER1, result)
    assert state.groups == {}


@pytest.mark.parametrize("request_", [clean(), clean((1,)), clean(living=True)])
def test_5_10_unknown_set_2009_not_existed(request_: CleanBrokerDataRequest) -> None:
    assert handle_clean_broker_data(EMPTY, request_, NOBODY) == reject(
        C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "Broker g1 is not existed,clean broker data failure."
    )


def test_17_20a_deviation_partial_clean_emptying_sss_keeps_the_set() -> None:
    # SSS {1}, no master; cleaning 1 empties the SSS. The reference drops the sync-state entry and
    # orphans 2 and 3; we keep the set with its epochs.
    result = handle_clean_broker_data(G1_NO_MASTER, clean((1,)), alive(2, 3))
    state, _ = commit(G1_NO_MASTER, result)
    assert g1(state) == replace_group(G1_NO_MASTER, replicas=replicas(2, 3), sync_state_set=frozenset())
    next_id = handle_get_next_broker_id(state, GetNextBrokerIdRequest(cluster_name="c1", broker_name="g1"))
    assert next_id.reply.payload_json()["nextBrokerId"] == 4


def test_17_5_deviation_cleaning_the_dead_master_clears_it() -> None:
    # The reference keeps masterBrokerId = 1 (no longer registered, outside the SSS).
    result = handle_clean_broker_data(G1_MASTER1, clean((1,)), alive(2, 3))
    state, _ = commit(G1_MASTER1, result)
    assert g1(state) == replace_group(
        G1_MASTER1, replicas=replicas(2, 3), master_broker_id=None, master_epoch=2, sync_state_set={2, 3}
    )


def test_5_10_partial_clean_of_every_id_removes_the_set() -> None:
    result = handle_clean_broker_data(G1_NO_MASTER, clean((1, 2, 3)), NOBODY)
    state, _ = commit(G1_NO_MASTER, result)
    assert state.groups == {}


def test_5_10_clean_decided_before_an_election_is_fenced() -> None:
    cleaning = handle_clean_broker_data(G1_NO_MASTER, clean(), NOBODY)
    election = handle_elect_master(G1_NO_MASTER, elect_req(1), alive(1), CLEAN)
    state, _ = commit(G1_NO_MASTER, election)
    state2, reply = commit(state, cleaning)
    assert reply.code == C.CONTROLLER_FENCED_MASTER_EPOCH
    assert state2.groups == state.groups


# ==================================================================================================
# reply_from_outcome


def test_reply_from_outcome_of_a_read_is_the_read_reply() -> None:
    result = handle_get_replica_info(G1_MASTER1, GetReplicaInfoRequest(broker_name="g1"))
    _, outcome = apply(G1_MASTER1, ElectMasterRecord("c1", "g1", 2, 1, 2), 11)
    assert reply_from_outcome(result, outcome) is result.reply


def test_reply_from_outcome_reflects_the_applied_state_not_the_prediction() -> None:
    # Decided on G1_MASTER1; by commit time a concurrent alter changed nothing the CAS checks
    # for ApplyBrokerId, so it applies; the reply comes from the outcome.
    result = handle_apply_broker_id(G1_MASTER1, apply_id(4))
    _, outcome = apply(G1_NO_MASTER, result.records[0], 11)
    assert reply_from_outcome(result, outcome) == Reply(
        C.SUCCESS, "", {"clusterName": "c1", "brokerName": "g1"}
    )
