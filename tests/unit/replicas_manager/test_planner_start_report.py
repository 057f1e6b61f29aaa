"""ReplicasPlanner and issue 25 (docs/architecture.md §3.2): register and heartbeats carry the start report;
SyncStateSet proposals carry the master's ack point and the incarnations its HA layer saw catch up."""

from __future__ import annotations

from dataclasses import replace

from mqha.replicas_manager import actions as act
from mqha.replicas_manager.hooks import BrokerProgress, BrokerStart
from mqha.replicas_manager.planner import ReplicasPlanner
from tests.unit.replicas_manager.test_planner import (
    CFG,
    master_info,
    ok,
    one,
    registered_reply,
    to_first_time_sync,
)

START = BrokerStart("ab" * 16, clean_shutdown=False, lossy_recovery=True, confirm_offset_before_recovery=4440)
REPORT = {
    "incarnation": "ab" * 16,
    "cleanShutdown": False,
    "lossyRecovery": True,
    "confirmOffsetBeforeRecovery": 4440,
}


def master(all_ack: bool) -> ReplicasPlanner:
    p = ReplicasPlanner(replace(CFG, start=START), seed=1)
    p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 2), None)
    out = to_first_time_sync(p)
    register = one(out, act.RegisterBroker)
    assert {k: register.request.to_json().get(k) for k in REPORT} == REPORT
    out = p.on_controller_reply(register, registered_reply(), 0)
    heartbeat = one(out, act.SendHeartbeat)
    assert {k: heartbeat.request.to_json().get(k) for k in REPORT} == REPORT
    out = p.on_heartbeat_sent(heartbeat, 1, 0)
    out = p.on_controller_reply(one(out, act.ElectMaster), ok(**master_info(2, 1, {2}, 1)), 0)
    p.on_role_change_result(one(out, act.BecomeMaster), True, 0)
    ack_point = 800 if all_ack else None  # async acks: no ack point (the broker's BrokerRuntime.ack_point)
    p.on_local_progress(BrokerProgress(last_epoch=1, max_offset=900, confirm_offset=800, ack_point=ack_point))
    return p


def test_an_expansion_carries_the_confirm_offset_and_the_incarnations_seen() -> None:
    p = master(all_ack=True)
    out = p.on_sync_state_set_proposal(frozenset({2, 3}), 10, {3: "c" * 32, 4: "d" * 32})
    request = one(out, act.ProposeSyncStateSet).request
    assert (request.confirm_offset, dict(request.member_incarnations)) == (800, {3: "c" * 32})


def test_without_an_ack_point_no_confirm_offset_is_sent() -> None:
    p = master(all_ack=False)
    request = one(p.on_sync_state_set_check(frozenset({2, 3}), 10, {}), act.ProposeSyncStateSet).request
    assert request.confirm_offset is None and dict(request.member_incarnations) == {}
    assert "confirmOffset" not in request.to_json()


def test_an_ha_layer_that_cannot_tell_sends_no_incarnations() -> None:
    request = one(
        master(all_ack=True).on_sync_state_set_proposal(frozenset({2, 3}), 10), act.ProposeSyncStateSet
    ).request
    assert request.member_incarnations is None and "memberIncarnations" not in request.to_json()


def test_a_release_asked_as_master_goes_out_with_the_current_set_and_its_verdict_comes_back() -> None:
    p = master(all_ack=True)
    release = one(p.on_release_eligible_request(1, 10), act.ReleaseEligibleReplicas)
    request = release.request
    assert request.release_eligible and request.sync_state_set == {2}
    assert (request.master_epoch, request.sync_state_set_epoch, request.confirm_offset) == (1, 1, 800)
    assert p.on_release_eligible_request(1, 11) == []  # one in flight
    payload = {"newSyncStateSetEpoch": 1, "syncStateSet": [2], "syncStateSetEpoch": 1}
    done = one(p.on_controller_reply(release, ok(**payload), 12), act.EligibleReleaseDone)
    assert done == act.EligibleReleaseDone(1, 1, True)


def test_a_failed_release_says_so() -> None:
    p = master(all_ack=True)
    release = one(p.on_release_eligible_request(1, 10), act.ReleaseEligibleReplicas)
    assert one(p.on_controller_reply(release, None, 12), act.EligibleReleaseDone) == act.EligibleReleaseDone(
        1, 1, False
    )


def test_a_release_for_another_master_epoch_is_ignored() -> None:
    assert master(all_ack=True).on_release_eligible_request(7, 10) == []
