"""Controller decisions and the election rule (docs/architecture.md §3.2): waiting, declared loss, the
incarnation-bound SyncStateSet expansion and the lossy master's registration."""

from __future__ import annotations

from dataclasses import replace

from mqha.codes import ResponseCode as C
from mqha.controller.apply import apply
from mqha.controller.election import ElectionPolicy
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.operations import (
    handle_alter_sync_state_set,
    handle_elect_master,
    handle_register_broker,
)
from mqha.controller.records import AckedDataLost, AlterSyncStateSetRecord, ElectMasterRecord
from mqha.controller.state import BrokerGroupState, ControllerState, ReplicaInfo
from mqha.wire.controller_api import AlterSyncStateSetRequest, ElectMasterRequest, RegisterBrokerRequest

NOW = 1_000_000
POLICY = ElectionPolicy(unclean_recovery_timeout_ms=60_000)
REPLICAS = {b: ReplicaInfo(f"10.0.0.{b}:10911", f"10.0.0.{b}:10912", f"x;{b}") for b in (1, 2, 3)}


def hb(broker_id: int, offset: int, **extra: object) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        "c1",
        "g1",
        broker_id,
        f"10.0.0.{broker_id}:10911",
        1,
        offset,
        -1,
        2**31 - 1,
        10_000,
        NOW,
        **extra,  # type: ignore[arg-type]
    )


def state(**changes: object) -> ControllerState:
    group = BrokerGroupState("c1", "g1", REPLICAS, None, 3, frozenset({1}), 4, {2: 4440, 3: 4440}, 4440)
    return ControllerState({"g1": replace(group, **changes)}, 10)  # type: ignore[arg-type]


def controller_elect() -> ElectMasterRequest:
    return ElectMasterRequest(broker_name="g1")


LOSSY_1 = hb(1, 2215, lossy_recovery=True, confirm_offset_before_recovery=4440, first_seen_master_epoch=3)


def test_a_set_without_master_waits_without_writing_anything() -> None:
    result = handle_elect_master(state(), controller_elect(), LivenessSnapshot.of(NOW, [LOSSY_1]), POLICY)
    assert result.records == () and result.reply.code == C.CONTROLLER_MASTER_NOT_AVAILABLE
    assert "waiting for a replica that holds every acknowledged message" in result.reply.remark
    assert result.election is not None and result.election.waiting_for == (2, 3)


def test_a_broker_asking_while_the_set_waits_gets_2012_with_the_reason() -> None:
    request = ElectMasterRequest(broker_name="g1", broker_id=1)
    result = handle_elect_master(state(), request, LivenessSnapshot.of(NOW, [LOSSY_1]), POLICY)
    assert (
        result.reply.code == C.CONTROLLER_ELECT_MASTER_FAILED
        and "broker(s) 2, 3 not alive" in result.reply.remark
    )


def test_a_dead_master_with_only_a_lossy_replica_alive_is_cleared_carrying_the_watermark() -> None:
    s = state(master_broker_id=1, sync_state_set=frozenset({1, 2}), eligible_replicas={})
    live = LivenessSnapshot.of(NOW, [hb(3, 100)])  # 3 outside every pool: nothing to elect, nothing to wait
    result = handle_elect_master(s, controller_elect(), live, POLICY)
    assert result.records == (ElectMasterRecord("c1", "g1", None, 3, 4, acked_watermark=4440),)


def test_the_returning_healthy_replica_is_elected() -> None:
    live = LivenessSnapshot.of(NOW, [LOSSY_1, hb(2, 4440)])
    result = handle_elect_master(state(), controller_elect(), live, POLICY, waited_ms=1500)
    assert result.records == (ElectMasterRecord("c1", "g1", 2, 3, 4, acked_watermark=4440),)
    new_state, outcome = apply(state(), result.records[0], 11)
    group = new_state.group("g1")
    assert outcome.accepted and group is not None
    assert (group.eligible_replicas, group.acked_watermark) == ({}, 4440)


def test_after_the_timeout_the_loss_is_declared_in_record_and_remark() -> None:
    live = LivenessSnapshot.of(NOW, [LOSSY_1])
    result = handle_elect_master(state(), controller_elect(), live, POLICY, waited_ms=60_000)
    record = ElectMasterRecord(
        "c1", "g1", 1, 3, 4, acked_watermark=4440, acked_data_lost=AckedDataLost(2215, 4440)
    )
    assert result.records == (record,) and result.reply.code == C.SUCCESS
    assert "acknowledged data lost: offsets [2215, 4440)" in result.reply.remark


def test_a_designated_lossy_broker_is_obeyed_declaring_the_loss() -> None:
    request = ElectMasterRequest(broker_name="g1", broker_id=1, designate_elect=True)
    result = handle_elect_master(state(), request, LivenessSnapshot.of(NOW, [LOSSY_1]), POLICY)
    assert result.records[0].acked_data_lost == AckedDataLost(2215, 4440)  # type: ignore[union-attr]


def test_a_lossy_old_master_still_alive_is_replaced() -> None:
    s = state(master_broker_id=1, sync_state_set=frozenset({1, 2}), eligible_replicas={})
    live = LivenessSnapshot.of(NOW, [LOSSY_1, hb(2, 4440)])
    assert handle_elect_master(s, controller_elect(), live, POLICY).records[0].new_master_broker_id == 2  # type: ignore[union-attr]


def test_a_lossy_master_registering_is_not_told_it_is_master() -> None:
    s = state(master_broker_id=1, sync_state_set=frozenset({1}))
    request = RegisterBrokerRequest(
        cluster_name="c1", broker_name="g1", broker_id=1, broker_address="10.0.0.1:10911", lossy_recovery=True
    )
    reply = handle_register_broker(s, request, LivenessSnapshot.of(NOW, [LOSSY_1])).reply
    assert reply.ok and reply.payload_json()["masterBrokerId"] is None


def _register_master(**start: object) -> RegisterBrokerRequest:
    return RegisterBrokerRequest(
        cluster_name="c1", broker_name="g1", broker_id=1, broker_address="10.0.0.1:10911", **start
    )  # type: ignore[arg-type]


def test_a_master_back_from_a_crash_is_re_elected_under_a_new_epoch() -> None:
    # It may have lost a tail its slaves hold; resuming masterEpoch 3 it would write other messages
    # there under the same epoch (issue 27's soak). A clean restart (or an older broker) resumes.
    s = state(master_broker_id=1, sync_state_set=frozenset({1}), eligible_replicas={})
    live = LivenessSnapshot.of(NOW, [hb(1, 4440)])
    crashed = handle_register_broker(s, _register_master(clean_shutdown=False), live).reply
    assert crashed.ok and crashed.payload_json()["masterBrokerId"] is None
    for start in ({"clean_shutdown": True}, {}):
        resumed = handle_register_broker(s, _register_master(**start), live).reply
        assert resumed.payload_json()["masterBrokerId"] == 1
    asks = ElectMasterRequest(broker_name="g1", broker_id=1)
    result = handle_elect_master(s, asks, live, POLICY)
    record = result.records[0]
    assert result.reply.ok and isinstance(record, ElectMasterRecord)
    assert (record.new_master_broker_id, record.expected_master_epoch) == (1, 3)  # applied: masterEpoch 4
    designated = ElectMasterRequest(broker_name="g1", broker_id=1, designate_elect=True)
    for other in (controller_elect(), designated):
        still = handle_elect_master(s, other, live, POLICY)
        assert still.records == () and still.reply.code == C.CONTROLLER_MASTER_STILL_EXIST


# --------------------------------------------------------------------------------------------------
# AlterSyncStateSet: confirmOffset and memberIncarnations.


def alter(
    new_set: set[int], incarnations: dict[int, str] | None, confirm: int | None = 500
) -> AlterSyncStateSetRequest:
    return AlterSyncStateSetRequest(
        broker_name="g1",
        master_broker_id=1,
        master_epoch=3,
        sync_state_set=frozenset(new_set),
        sync_state_set_epoch=4,
        confirm_offset=confirm,
        member_incarnations=incarnations,
    )


MASTER_STATE = state(master_broker_id=1, sync_state_set=frozenset({1}), eligible_replicas={})
LIVE_2 = LivenessSnapshot.of(
    NOW, [hb(1, 500), hb(2, 500, incarnation="b" * 32), hb(3, 500, incarnation="c" * 32)]
)


def test_an_expansion_with_the_live_incarnation_is_accepted_with_the_confirm_offset() -> None:
    result = handle_alter_sync_state_set(MASTER_STATE, alter({1, 2}, {2: "b" * 32}), LIVE_2)
    assert result.records == (AlterSyncStateSetRecord("g1", 1, frozenset({1, 2}), 3, 4, confirm_offset=500),)


def test_an_expansion_naming_an_older_incarnation_is_refused_2003() -> None:
    result = handle_alter_sync_state_set(MASTER_STATE, alter({1, 2}, {2: "a" * 32}), LIVE_2)
    assert result.records == () and result.reply.code == C.CONTROLLER_INVALID_REPLICAS
    assert "replica 2 caught up as incarnation " + "a" * 32 in result.reply.remark
    assert "restarted since" in result.reply.remark


def test_an_expansion_without_an_incarnation_for_the_added_member_is_refused() -> None:
    result = handle_alter_sync_state_set(MASTER_STATE, alter({1, 2, 3}, {2: "b" * 32}), LIVE_2)
    assert result.reply.code == C.CONTROLLER_INVALID_REPLICAS and "replica 3" in result.reply.remark


def test_a_master_that_reports_no_incarnations_is_not_checked() -> None:
    result = handle_alter_sync_state_set(MASTER_STATE, alter({1, 2}, None, confirm=None), LIVE_2)
    assert result.reply.ok and result.records[0].confirm_offset is None  # type: ignore[union-attr]


def test_a_shrink_needs_no_incarnation() -> None:
    s = replace(
        MASTER_STATE, groups={"g1": replace(MASTER_STATE.groups["g1"], sync_state_set=frozenset({1, 2, 3}))}
    )
    assert handle_alter_sync_state_set(s, alter({1, 2}, {}), LIVE_2).reply.ok


def test_a_dead_master_is_cleared_only_when_the_second_attempt_still_waits() -> None:
    s = state(master_broker_id=1, sync_state_set=frozenset({1}), eligible_replicas={2: 4440})
    stale = LivenessSnapshot.of(NOW, [hb(2, 4000)])  # 2's last heartbeat predates its credit
    first = handle_elect_master(s, controller_elect(), stale, POLICY)
    assert first.records == () and first.election is not None and first.election.waiting_for == (1, 3)
    again = handle_elect_master(s, controller_elect(), stale, POLICY, waited_ms=500)
    assert again.records == (ElectMasterRecord("c1", "g1", None, 3, 4, acked_watermark=4440),)
    fresh = LivenessSnapshot.of(NOW, [hb(2, 4440)])
    elected = handle_elect_master(s, controller_elect(), fresh, POLICY, waited_ms=500).records[0]
    assert elected.new_master_broker_id == 2  # type: ignore[union-attr]


def release(new_set: set[int], sss_epoch: int = 4) -> AlterSyncStateSetRequest:
    return AlterSyncStateSetRequest(
        broker_name="g1",
        master_broker_id=1,
        master_epoch=3,
        sync_state_set=frozenset(new_set),
        sync_state_set_epoch=sss_epoch,
        confirm_offset=600,
        release_eligible=True,
    )


def test_a_release_of_the_same_set_is_written_while_the_elr_holds_someone() -> None:
    s = state(master_broker_id=1, sync_state_set=frozenset({1}))
    result = handle_alter_sync_state_set(s, release({1}), LIVE_2)
    assert result.reply.ok and result.records == (
        AlterSyncStateSetRecord("g1", 1, frozenset({1}), 3, 4, confirm_offset=600, release_eligible=True),
    )
    new_state, outcome = apply(s, result.records[0], s.applied_index + 1)
    assert outcome.accepted and new_state.groups["g1"].eligible_replicas == {}


def test_a_release_with_nothing_eligible_answers_without_a_write() -> None:
    result = handle_alter_sync_state_set(MASTER_STATE, release({1}), LIVE_2)
    assert result.reply.ok and result.records == ()
    assert result.reply.payload is not None


def test_a_release_is_fenced_like_any_alter() -> None:
    s = state(master_broker_id=1, sync_state_set=frozenset({1}))
    result = handle_alter_sync_state_set(s, release({1}, sss_epoch=3), LIVE_2)
    assert result.records == () and result.reply.code == C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH


def test_the_same_set_without_a_release_is_still_refused() -> None:
    result = handle_alter_sync_state_set(MASTER_STATE, alter({1}, {}), LIVE_2)
    assert result.records == () and not result.reply.ok
