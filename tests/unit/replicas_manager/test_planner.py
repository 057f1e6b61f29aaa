"""ReplicasPlanner: the broker-side start sequence, registration, role changes and SSS upkeep
(docs/reference-behaviour.md §9).

Pure: every test feeds values (time, replies, verdicts) and compares the actions that come out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mqha.codes import ResponseCode
from mqha.errors import LocalProtocolError
from mqha.replicas_manager import actions as act
from mqha.replicas_manager.hooks import BrokerProgress, MasterInfo
from mqha.replicas_manager.planner import ReplicasPlanner
from mqha.replicas_manager.planner_states import (
    METADATA_RETRY_MS,
    RETRY_INTERVAL_MS,
    PlannerConfig,
    RegisterState,
    State,
)
from mqha.wire.controller_api import Reply

Code = ResponseCode

CFG = PlannerConfig(
    cluster_name="c1",
    broker_name="b1",
    broker_address="127.0.0.1:10911",
    ha_address="127.0.0.1:10912",
    sync_broker_metadata_period_ms=5000,
    check_sync_state_set_period_ms=4000,
    sync_controller_metadata_period_ms=10000,
    heartbeat_timeout_ms=9000,
    election_priority=7,
    heartbeat_interval_ms=1000,
)
CHECK_CODE = "127.0.0.1:10911;1700000000000"
MASTER_1 = MasterInfo(1, "127.0.0.1:20911", "127.0.0.1:20912")


def ok(**payload: Any) -> Reply:
    return Reply(Code.SUCCESS, "", payload)


def err(code: ResponseCode, remark: str = "no") -> Reply:
    return Reply(code, remark)


def one(actions: list[act.Action], cls: type) -> Any:
    found = [a for a in actions if isinstance(a, cls)]
    assert len(found) == 1, actions
    return found[0]


def kinds(actions: list[act.Action]) -> list[type]:
    return [type(a) for a in actions]


def without_refresh(actions: list[act.Action]) -> list[act.Action]:
    """Drop the periodic controller-metadata refresh (it runs from FIRST_TIME_SYNC on)."""
    return [a for a in actions if not isinstance(a, act.GetMetadata)]


def master_info(broker_id: int, epoch: int, sss: set[int], sss_epoch: int, **extra: Any) -> dict[str, Any]:
    addr = "127.0.0.1:10911" if broker_id == 2 else f"127.0.0.1:{20900 + 10 * broker_id + 1}"
    return {
        "masterBrokerId": broker_id,
        "masterAddress": addr,
        "masterHaAddress": addr[:-1] + "2",
        "masterEpoch": epoch,
        "syncStateSetEpoch": sss_epoch,
        "syncStateSet": sorted(sss),
        **extra,
    }


def registered_reply(**payload: Any) -> Reply:
    return ok(clusterName="c1", brokerName="b1", **payload)


def to_first_time_sync(p: ReplicasPlanner, now: int = 0) -> list[act.Action]:
    out = p.start(now)
    meta = one(out, act.GetMetadata)
    return p.on_controller_reply(meta, ok(leaderAddress="127.0.0.1:9878"), now)


def register_with_files(p: ReplicasPlanner, broker_id: int = 2, now: int = 0) -> list[act.Action]:
    """From a fresh start to the act.RegisterBroker call with id ``broker_id``."""
    out = to_first_time_sync(p, now)
    out = p.on_controller_reply(
        one(out, act.GetNextBrokerId), ok(clusterName="c1", brokerName="b1", nextBrokerId=broker_id), now
    )
    temp = act.TempBrokerIdentity("c1", "b1", broker_id, CHECK_CODE)
    out = p.on_temp_identity_written(one(out, act.WriteTempIdentity), temp, now)
    out = p.on_controller_reply(one(out, act.ApplyBrokerId), ok(clusterName="c1", brokerName="b1"), now)
    return p.on_identity_written(one(out, act.WriteIdentity), True, now)


def running_master(now: int = 0) -> ReplicasPlanner:
    """Broker 2, master at epoch 1 with SyncStateSet {2} (epoch 1), RUNNING."""
    p = ReplicasPlanner(CFG, seed=1)
    p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 2), None)
    out = to_first_time_sync(p, now)
    out = p.on_controller_reply(one(out, act.RegisterBroker), registered_reply(), now)
    out = p.on_heartbeat_sent(one(out, act.SendHeartbeat), 3, now)
    out = p.on_controller_reply(one(out, act.ElectMaster), ok(**master_info(2, 1, {2}, 1)), now)
    out = p.on_role_change_result(one(out, act.BecomeMaster), True, now)
    p.on_sync_state_set_check(frozenset({2}), now)
    assert p.state is State.RUNNING and p.is_master
    return p


def running_slave(now: int = 0, epoch: int = 3) -> ReplicasPlanner:
    """Broker 2, slave of broker 1 at ``epoch``, RUNNING."""
    p = ReplicasPlanner(CFG, seed=1)
    p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 2), None)
    out = to_first_time_sync(p, now)
    out = p.on_controller_reply(
        one(out, act.RegisterBroker), registered_reply(**master_info(1, epoch, {1}, 5)), now
    )
    out = p.on_role_change_result(one(out, act.BecomeSlave), True, now)
    p.on_heartbeat_sent(one(out, act.SendHeartbeat), 3, now)
    assert p.state is State.RUNNING and p.role == "SLAVE"
    return p


# -- start sequence, fresh broker (docs/reference-behaviour.md §9.2, §9.3)
# --------------------------------------------------


def test_fresh_broker_start_sequence_to_master_spec_9_2_9_3() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    out = p.start(0)
    assert out == [act.SetFenced(True), act.GetMetadata(one(out, act.GetMetadata).seq)]
    assert p.state is State.INITIAL

    out = p.on_controller_reply(one(out, act.GetMetadata), ok(leaderAddress="127.0.0.1:9878"), 10)
    assert p.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE
    next_id = one(out, act.GetNextBrokerId)
    assert next_id.request.to_json() == {"clusterName": "c1", "brokerName": "b1"}

    out = p.on_controller_reply(next_id, ok(clusterName="c1", brokerName="b1", nextBrokerId=2), 20)
    assert out == [act.WriteTempIdentity(2)]
    assert p.register_state is RegisterState.INITIAL  # only once the file is written

    temp = act.TempBrokerIdentity("c1", "b1", 2, CHECK_CODE)
    out = p.on_temp_identity_written(out[0], temp, 30)
    assert p.register_state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE
    apply = one(out, act.ApplyBrokerId)
    assert apply.request.to_json() == {
        "clusterName": "c1",
        "brokerName": "b1",
        "appliedBrokerId": 2,
        "registerCheckCode": CHECK_CODE,
    }

    out = p.on_controller_reply(apply, ok(clusterName="c1", brokerName="b1"), 40)
    assert out == [act.WriteIdentity(act.BrokerIdentity("c1", "b1", 2))]

    out = p.on_identity_written(out[0], True, 50)
    assert p.register_state is RegisterState.CREATE_METADATA_FILE_DONE and p.broker_id == 2
    assert kinds(out) == [act.DeleteTempIdentity, act.SetBrokerControllerId, act.RegisterBroker]
    assert out[1] == act.SetBrokerControllerId(2)
    assert out[2].request.to_json() == {
        "clusterName": "c1",
        "brokerName": "b1",
        "brokerId": 2,
        "brokerAddress": "127.0.0.1:10911",
        "haAddress": "127.0.0.1:10912",
    }

    # No live master: registration elects nobody (docs/reference-behaviour.md §5.3), the start heartbeat is
    # confirmed first.
    out = p.on_controller_reply(out[2], registered_reply(syncStateSet=[]), 60)
    assert p.register_state is RegisterState.REGISTERED
    assert p.state is State.REGISTER_TO_CONTROLLER_DONE
    heartbeat = one(out, act.SendHeartbeat)
    assert heartbeat.confirm

    out = p.on_heartbeat_sent(heartbeat, 3, 70)
    elect = one(out, act.ElectMaster)
    assert elect.request.to_json() == {
        "brokerName": "b1",
        "clusterName": "c1",
        "brokerId": 2,
        "designateElect": False,
    }

    out = p.on_controller_reply(elect, ok(**master_info(2, 1, {2}, 1)), 80)
    assert out == [act.BecomeMaster(1, 1, frozenset({2}))]
    assert p.state is State.REGISTER_TO_CONTROLLER_DONE and p.master_epoch == 0  # not yet accepted

    out = p.on_role_change_result(out[0], True, 90)
    assert p.state is State.RUNNING
    assert (p.master_broker_id, p.master_epoch, p.sync_state_set, p.sync_state_set_epoch) == (2, 1, {2}, 1)
    assert p.master_address == "127.0.0.1:10911" and p.master_ha_address == "127.0.0.1:10912"
    assert kinds(out) == [act.CheckSyncStateSet, act.SetFenced]
    assert out[1] == act.SetFenced(False)


def test_fenced_until_running_and_nothing_unfences_before_spec_9_2() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    seen = register_with_files(p)
    assert act.SetFenced(False) not in seen
    assert p.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE


def test_slave_path_heartbeat_then_running_spec_9_2() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    out = register_with_files(p)
    out = p.on_controller_reply(
        one(out, act.RegisterBroker), registered_reply(**master_info(1, 3, {1}, 4)), 0
    )
    out = p.on_role_change_result(one(out, act.BecomeSlave), True, 5)
    heartbeat = one(out, act.SendHeartbeat)
    assert heartbeat.confirm
    out = p.on_heartbeat_sent(heartbeat, 1, 6)
    assert out == [act.SetFenced(False)]
    assert p.state is State.RUNNING and p.role == "SLAVE"
    assert (p.master_broker_id, p.master_address, p.master_ha_address) == (
        1,
        MASTER_1.address,
        MASTER_1.ha_address,
    )
    assert p.master_epoch == 3
    assert p.sync_state_set == frozenset() and p.sync_state_set_epoch == 0  # only a master keeps it


# -- restart from the identity files (docs/reference-behaviour.md §9.3 "restart resumes")
# -----------------------------------


def test_restart_with_metadata_file_goes_straight_to_register_spec_9_3() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 3), None)
    assert p.register_state is RegisterState.CREATE_METADATA_FILE_DONE and p.broker_id == 3
    out = p.start(0)
    assert kinds(out) == [act.SetFenced, act.SetBrokerControllerId, act.GetMetadata]
    assert out[1] == act.SetBrokerControllerId(3)
    out = p.on_controller_reply(out[2], ok(leaderAddress="x:1"), 1)
    register = one(out, act.RegisterBroker)
    assert register.request.broker_id == 3
    assert not any(
        isinstance(a, act.GetNextBrokerId | act.ApplyBrokerId | act.WriteTempIdentity) for a in out
    )


def test_restart_with_temp_file_reapplies_the_same_id_and_check_code_spec_9_3() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    p.on_identity_loaded(None, act.TempBrokerIdentity("c1", "b1", 5, CHECK_CODE))
    assert p.register_state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE
    out = p.start(0)
    assert kinds(out) == [act.SetFenced, act.GetMetadata]  # the id is not known yet
    out = p.on_controller_reply(out[1], ok(leaderAddress="x:1"), 1)
    apply = one(out, act.ApplyBrokerId)
    assert (apply.request.applied_broker_id, apply.request.register_check_code) == (5, CHECK_CODE)


def test_metadata_file_wins_over_temp_file() -> None:
    p = ReplicasPlanner(CFG)
    p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 3), act.TempBrokerIdentity("c1", "b1", 4, CHECK_CODE))
    assert p.broker_id == 3 and p.register_state is RegisterState.CREATE_METADATA_FILE_DONE


def test_identity_after_start_is_a_programming_error() -> None:
    p = ReplicasPlanner(CFG)
    p.start(0)
    with pytest.raises(LocalProtocolError):
        p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 3), None)


# -- failure paths of docs/reference-behaviour.md §9.3
# ----------------------------------------------------------------------


def _to_apply(p: ReplicasPlanner) -> act.ApplyBrokerId:
    out = to_first_time_sync(p)
    out = p.on_controller_reply(
        one(out, act.GetNextBrokerId), ok(clusterName="c1", brokerName="b1", nextBrokerId=2), 0
    )
    out = p.on_temp_identity_written(
        one(out, act.WriteTempIdentity), act.TempBrokerIdentity("c1", "b1", 2, CHECK_CODE), 0
    )
    return one(out, act.ApplyBrokerId)


@pytest.mark.parametrize(
    "reply",
    [
        err(Code.CONTROLLER_BROKER_ID_INVALID, "Fail to apply brokerId: 2"),
        None,
        err(Code.SERVICE_NOT_AVAILABLE),
    ],
)
def test_apply_id_failure_deletes_temp_and_starts_over_spec_9_3_step_4(reply: Reply | None) -> None:
    p = ReplicasPlanner(CFG, seed=1)
    apply = _to_apply(p)
    out = p.on_controller_reply(apply, reply, 100)
    assert out == [act.DeleteTempIdentity()]
    assert p.register_state is RegisterState.INITIAL and p.temp_identity is None
    assert p.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE
    # Next attempt after a random pause below 1 s: a new id is asked for.
    out = p.tick(1100)
    assert kinds(out) == [act.GetNextBrokerId]


def test_temp_write_failure_clears_temp_and_retries_spec_9_3_step_3() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    out = to_first_time_sync(p)
    out = p.on_controller_reply(
        one(out, act.GetNextBrokerId), ok(clusterName="c1", brokerName="b1", nextBrokerId=2), 0
    )
    out = p.on_temp_identity_written(one(out, act.WriteTempIdentity), None, 0)
    assert out == [act.DeleteTempIdentity()]
    assert p.register_state is RegisterState.INITIAL
    assert kinds(p.tick(1000)) == [act.GetNextBrokerId]


def test_metadata_write_failure_keeps_temp_and_reapplies_the_same_id_spec_9_3_step_4() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    apply = _to_apply(p)
    out = p.on_controller_reply(apply, ok(clusterName="c1", brokerName="b1"), 0)
    out = p.on_identity_written(one(out, act.WriteIdentity), False, 0)
    assert out == [act.DeleteIdentity()]
    assert p.register_state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE and p.broker_id is None
    again = one(p.tick(1000), act.ApplyBrokerId)
    assert again.request == apply.request


def test_register_failure_keeps_state_and_retries_spec_9_3_step_5() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    out = register_with_files(p)
    out = p.on_controller_reply(
        one(out, act.RegisterBroker), err(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED), 0
    )
    assert out == []
    assert p.register_state is RegisterState.CREATE_METADATA_FILE_DONE
    assert kinds(p.tick(1000)) == [act.RegisterBroker]


def test_five_register_failures_wait_the_retry_interval_spec_9_2() -> None:
    p = ReplicasPlanner(CFG, seed=3)
    out = register_with_files(p)
    call = one(out, act.RegisterBroker)
    now = 0
    for attempt in range(1, 6):
        p.on_controller_reply(call, None, now)
        if attempt < 5:
            now += 1000  # the random pause is below 1 s
            call = one(without_refresh(p.tick(now)), act.RegisterBroker)
    assert without_refresh(p.tick(now + RETRY_INTERVAL_MS - 1)) == []
    assert kinds(without_refresh(p.tick(now + RETRY_INTERVAL_MS))) == [act.RegisterBroker]
    assert p.basic_service_failures == 5


def test_next_id_failure_retries_spec_9_3() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    out = to_first_time_sync(p)
    assert p.on_controller_reply(one(out, act.GetNextBrokerId), None, 0) == []
    assert kinds(p.tick(1000)) == [act.GetNextBrokerId]


def test_metadata_failures_retry_after_1_s_then_5_s_spec_9_2() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    call = one(p.start(0), act.GetMetadata)
    assert p.on_controller_reply(call, None, 0) == []
    assert p.tick(METADATA_RETRY_MS - 1) == []
    call = one(p.tick(METADATA_RETRY_MS), act.GetMetadata)
    p.on_controller_reply(call, ok(leaderAddress=None), 1000)  # no leader known counts as failure
    call = one(p.tick(2000), act.GetMetadata)
    p.on_controller_reply(call, None, 2000)
    assert p.tick(2000 + METADATA_RETRY_MS) == []
    assert kinds(p.tick(2000 + RETRY_INTERVAL_MS)) == [act.GetMetadata]
    assert p.state is State.INITIAL


# -- brokerElect (docs/reference-behaviour.md §9.6)
# ------------------------------------------------------------------------


def _at_elect(p: ReplicasPlanner) -> act.ElectMaster:
    out = register_with_files(p)
    out = p.on_controller_reply(one(out, act.RegisterBroker), registered_reply(), 0)
    return one(p.on_heartbeat_sent(one(out, act.SendHeartbeat), 3, 0), act.ElectMaster)


def test_elect_master_still_exist_naming_a_master_is_success_spec_9_6() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    elect = _at_elect(p)
    reply = Reply(Code.CONTROLLER_MASTER_STILL_EXIST, "still alive", master_info(1, 4, {1, 3}, 6))
    out = p.on_controller_reply(elect, reply, 0)
    assert out == [act.BecomeSlave(MASTER_1, 4)]
    assert p.on_role_change_result(out[0], True, 1) == [act.SetFenced(False)]  # heartbeat already sent
    assert p.state is State.RUNNING


@pytest.mark.parametrize(
    "reply",
    [
        err(Code.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master"),
        Reply(Code.CONTROLLER_MASTER_STILL_EXIST, "", {"masterBrokerId": None, "masterAddress": None}),
        Reply(Code.SUCCESS, "", {"masterBrokerId": 1, "masterAddress": ""}),
        None,
    ],
)
def test_elect_failure_retries_the_step_after_5_s_spec_9_2(reply: Reply | None) -> None:
    p = ReplicasPlanner(CFG, seed=1)
    elect = _at_elect(p)
    assert p.on_controller_reply(elect, reply, 100) == []
    assert p.state is State.REGISTER_TO_CONTROLLER_DONE
    # Meanwhile only the periodic heartbeats go out (issue 25: a replica waiting for a master is alive).
    waiting = without_refresh(p.tick(100 + RETRY_INTERVAL_MS - 1))
    assert all(isinstance(a, act.SendHeartbeat) and not a.confirm for a in waiting)
    out = [a for a in without_refresh(p.tick(100 + RETRY_INTERVAL_MS)) if getattr(a, "confirm", True)]
    assert kinds(out) == [act.SendHeartbeat]  # the step starts again with its heartbeat
    assert kinds(p.on_heartbeat_sent(out[0], 0, 5200)) == [act.ElectMaster]


# -- role changes (docs/reference-behaviour.md §9.6, docs/architecture.md §7)
# -----------------------------------------------------


def test_refused_role_change_leaves_role_and_epoch_unchanged_arch_7() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    elect = _at_elect(p)
    out = p.on_controller_reply(elect, ok(**master_info(2, 1, {2}, 1)), 0)
    out = p.on_role_change_result(one(out, act.BecomeMaster), False, 10)
    assert out == []
    assert (p.master_broker_id, p.master_epoch, p.role) == (None, 0, "NONE")
    assert p.state is State.REGISTER_TO_CONTROLLER_DONE  # not RUNNING: still fenced
    assert p.last_failure == "no master after the election"

    s = running_slave(epoch=3)
    note = act.RoleNotification("b1", 4, "127.0.0.1:4", None, 5, 9, frozenset({4}))
    out = s.on_role_notification(note, 100)
    assert s.on_role_change_result(one(out, act.BecomeSlave), False, 101) == []
    assert (s.master_broker_id, s.master_epoch, s.state) == (1, 3, State.RUNNING)
    # The same push again is considered again (nothing was recorded).
    assert kinds(s.on_role_notification(note, 200)) == [act.BecomeSlave]


def test_push_needs_a_master_and_a_newer_epoch_spec_9_6() -> None:
    p = running_slave(epoch=3)
    same = act.RoleNotification("b1", 4, "127.0.0.1:4", None, 3, 9, frozenset({4}))
    older = act.RoleNotification("b1", 4, "127.0.0.1:4", None, 2, 9, frozenset({4}))
    no_master = act.RoleNotification("b1", None, None, None, 4, 9, frozenset({4}))
    other_set = act.RoleNotification("b2", 4, "127.0.0.1:4", None, 9, 9, frozenset({4}))
    for note in (same, older, other_set):
        assert p.on_role_notification(note, 10) == []
    # A cleared master at a newer epoch fences the slave (docs/architecture.md §3.2), once.
    assert p.on_role_notification(no_master, 10) == [act.StopFollowing(4)]
    assert p.on_role_notification(no_master, 10) == []
    assert p.heartbeat_request().known_master_epoch == 4
    newer = act.RoleNotification("b1", 2, "127.0.0.1:10911", "127.0.0.1:10912", 4, 7, frozenset({2, 3}))
    out = p.on_role_notification(newer, 10)
    assert out == [act.BecomeMaster(4, 7, frozenset({2, 3}))]
    out = p.on_role_change_result(out[0], True, 11)
    assert kinds(out) == [act.CheckSyncStateSet]
    assert (p.role, p.master_epoch, p.sync_state_set, p.sync_state_set_epoch) == ("MASTER", 4, {2, 3}, 7)


def test_one_role_change_in_flight_newest_waits_older_dropped_spec_9_6() -> None:
    p = running_slave(epoch=3)
    e4 = act.RoleNotification("b1", 4, "127.0.0.1:4", None, 4, 9, frozenset({4}))
    e6 = act.RoleNotification("b1", 6, "127.0.0.1:6", None, 6, 11, frozenset({6}))
    e5 = act.RoleNotification("b1", 5, "127.0.0.1:5", None, 5, 10, frozenset({5}))
    first = one(p.on_role_notification(e4, 0), act.BecomeSlave)
    assert p.on_role_notification(e6, 1) == []
    assert p.on_role_notification(e5, 2) == []  # older than the waiting one
    assert p.on_role_notification(e4, 3) == []  # the one in flight
    out = p.on_role_change_result(first, True, 4)
    assert out == [act.BecomeSlave(MasterInfo(6, "127.0.0.1:6", None), 6)]
    p.on_role_change_result(out[0], True, 5)
    assert (p.master_broker_id, p.master_epoch) == (6, 6)


def test_stale_role_result_is_ignored() -> None:
    p = running_slave(epoch=3)
    assert p.on_role_change_result(act.BecomeSlave(MASTER_1, 9), True, 0) == []
    assert p.master_epoch == 3


def test_master_demoted_by_push_stops_sync_state_set_checks_spec_9_5() -> None:
    p = running_master()
    note = act.RoleNotification("b1", 3, "127.0.0.1:3", "127.0.0.1:4", 2, 2, frozenset({3}))
    p.on_role_change_result(one(p.on_role_notification(note, 0), act.BecomeSlave), True, 0)
    assert p.role == "SLAVE"
    out = p.tick(100_000)
    assert not any(isinstance(a, act.CheckSyncStateSet) for a in out)
    assert p.on_sync_state_set_proposal(frozenset({2, 3}), 100_000) == []


# -- replica-info sync (docs/reference-behaviour.md §9.4)
# -----------------------------------------------------------------


def _replica_info_call(p: ReplicasPlanner, now: int) -> act.GetReplicaInfo:
    return one(p.tick(now), act.GetReplicaInfo)


def test_replica_info_sync_starts_after_3_s_then_every_period_spec_9_4() -> None:
    p = running_slave()
    assert not any(isinstance(a, act.GetReplicaInfo) for a in p.tick(2999))
    call = _replica_info_call(p, 3000)
    assert call.request.to_json() == {"brokerName": "b1"}
    assert not any(isinstance(a, act.GetReplicaInfo) for a in p.tick(5000))  # one in flight, not due
    p.on_controller_reply(call, ok(**master_info(1, 3, {1}, 5)), 3100)
    assert not any(isinstance(a, act.GetReplicaInfo) for a in p.tick(7999))
    assert any(isinstance(a, act.GetReplicaInfo) for a in p.tick(8000))


def test_replica_info_newer_epoch_with_master_changes_role_spec_9_4() -> None:
    p = running_slave(epoch=3)
    call = _replica_info_call(p, 3000)
    out = p.on_controller_reply(call, ok(**master_info(2, 4, {2, 1}, 8)), 3001)
    assert out == [act.BecomeMaster(4, 8, frozenset({1, 2}))]


def test_replica_info_newer_epoch_without_master_elects_spec_9_4() -> None:
    p = running_slave(epoch=3)
    call = _replica_info_call(p, 3000)
    reply = ok(masterBrokerId=None, masterAddress=None, masterEpoch=4, syncStateSet=[1], syncStateSetEpoch=5)
    out = p.on_controller_reply(call, reply, 3001)
    assert kinds(out) == [act.StopFollowing, act.ElectMaster]  # fenced first (docs/architecture.md §3.2)
    assert out[1].request.broker_id == 2 and not out[1].request.designate_elect
    # A failed broker-triggered election while RUNNING changes nothing.
    assert p.on_controller_reply(out[1], err(Code.CONTROLLER_ELECT_MASTER_FAILED), 3002) == []
    assert p.state is State.RUNNING and p.master_epoch == 3


def test_replica_info_equal_epoch_applies_only_a_newer_sss_on_the_master_spec_9_4_9_5() -> None:
    p = running_master()  # epoch 1, SSS {2} epoch 1
    call = _replica_info_call(p, 3000)
    out = p.on_controller_reply(call, ok(**master_info(2, 1, {2, 3}, 2)), 3001)
    assert out == [act.ApplySyncStateSet(frozenset({2, 3}), 2)]
    assert (p.sync_state_set, p.sync_state_set_epoch) == ({2, 3}, 2)
    call = _replica_info_call(p, 8001)
    assert p.on_controller_reply(call, ok(**master_info(2, 1, {2}, 2)), 8002) == []  # not newer

    s = running_slave(epoch=3)
    call = _replica_info_call(s, 3000)
    assert s.on_controller_reply(call, ok(**master_info(1, 3, {1, 2}, 9)), 3001) == []  # slave


def test_replica_info_lower_epoch_is_ignored_spec_9_4() -> None:
    p = running_slave(epoch=3)
    call = _replica_info_call(p, 3000)
    assert p.on_controller_reply(call, ok(**master_info(2, 2, {2}, 9)), 3001) == []


def test_replica_info_unknown_set_registers_again_spec_9_4() -> None:
    p = running_slave(epoch=3)
    call = _replica_info_call(p, 3000)
    out = p.on_controller_reply(call, err(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST), 3001)
    assert kinds(out) == [act.RegisterBroker] and out[0].request.broker_id == 2
    out = p.on_controller_reply(out[0], registered_reply(syncStateSet=[]), 3002)
    assert out == [] and p.register_state is RegisterState.REGISTERED and p.state is State.RUNNING


def test_stale_reply_is_ignored() -> None:
    p = running_slave()
    call = _replica_info_call(p, 3000)
    stale = act.GetReplicaInfo(call.seq - 1, call.request)
    assert p.on_controller_reply(stale, ok(**master_info(2, 9, {2}, 9)), 3001) == []
    assert p.on_controller_reply(call, ok(**master_info(2, 9, {2}, 9)), 3001) != []


# -- SyncStateSet check and reports (docs/reference-behaviour.md §9.5)
# ----------------------------------------------------


def test_sss_check_runs_on_the_master_period_and_reports_a_difference_spec_9_5() -> None:
    p = running_master()  # became master at 0: the check ran once, next at 4000
    assert not any(isinstance(a, act.CheckSyncStateSet) for a in p.tick(3999))
    assert any(isinstance(a, act.CheckSyncStateSet) for a in p.tick(4000))
    assert p.on_sync_state_set_check(frozenset({2}), 4001) == []  # unchanged: nothing to report
    p.tick(8000)
    out = p.on_sync_state_set_check(frozenset({3}), 8001)  # own id is added
    propose = one(out, act.ProposeSyncStateSet)
    assert propose.request.to_json() == {
        "brokerName": "b1",
        "masterBrokerId": 2,
        "masterEpoch": 1,
        "syncStateSet": [2, 3],
        "syncStateSetEpoch": 1,
    }
    reply = ok(newSyncStateSetEpoch=2, syncStateSet=[2, 3], syncStateSetEpoch=2)
    assert p.on_controller_reply(propose, reply, 8002) == [act.ApplySyncStateSet(frozenset({2, 3}), 2)]
    assert (p.sync_state_set, p.sync_state_set_epoch) == ({2, 3}, 2)


def test_empty_check_answer_proposes_nothing() -> None:
    p = running_master()
    p.tick(4000)
    assert p.on_sync_state_set_check(frozenset(), 4001) == []


def test_reports_merge_identical_in_flight_and_queue_the_newest_spec_9_5() -> None:
    p = running_master()
    first = one(p.on_sync_state_set_proposal(frozenset({2, 3}), 0), act.ProposeSyncStateSet)
    assert p.on_sync_state_set_proposal(frozenset({2, 3}), 1) == []  # same one in flight
    assert p.on_sync_state_set_proposal(frozenset({3}), 2) == []  # queued ({2,3} is in flight)
    assert p.on_sync_state_set_proposal(frozenset({2, 3, 4}), 3) == []  # replaces the queued one
    # Failure is only logged; the queued proposal goes next with the current epochs.
    out = p.on_controller_reply(first, err(Code.CONTROLLER_BROKER_NOT_ALIVE), 4)
    nxt = one(out, act.ProposeSyncStateSet)
    assert nxt.request.sync_state_set == {2, 3, 4} and nxt.request.sync_state_set_epoch == 1
    assert p.sync_state_set == {2}


def test_a_check_answered_during_an_expansion_does_not_undo_it() -> None:
    """The check's answer ({2}) predates the expansion to {2, 3} in flight: once the controller confirms
    the expansion, the planner asks the HA layer again instead of proposing {2} (the set used to flap
    {2, 3} -> {2} -> {2, 3} every check period)."""
    p = running_master()
    expand = one(p.on_sync_state_set_proposal(frozenset({2, 3}), 0), act.ProposeSyncStateSet)
    assert act.CheckSyncStateSet in kinds(p.tick(10_000))
    assert p.on_sync_state_set_check(frozenset({2}), 10_001) == []  # queued behind the expansion
    out = p.on_controller_reply(
        expand, ok(newSyncStateSetEpoch=2, syncStateSet=[2, 3], syncStateSetEpoch=2), 502
    )
    assert p.sync_state_set == {2, 3}
    assert act.ProposeSyncStateSet not in kinds(out)
    assert act.CheckSyncStateSet in kinds(out)
    # A report of the HA layer itself (a connection loss) queued the same way still goes next.
    p.on_sync_state_set_check(frozenset({2, 3}), 10_600)
    shrink = one(p.on_sync_state_set_proposal(frozenset({2}), 10_601), act.ProposeSyncStateSet)
    assert p.on_sync_state_set_proposal(frozenset({2, 3}), 10_602) == []
    out = p.on_controller_reply(
        shrink, ok(newSyncStateSetEpoch=3, syncStateSet=[2], syncStateSetEpoch=3), 10_603
    )
    assert one(out, act.ProposeSyncStateSet).request.sync_state_set == {2, 3}


def test_report_equal_to_the_current_set_or_on_a_slave_is_dropped() -> None:
    p = running_master()
    assert p.on_sync_state_set_proposal(frozenset({2}), 0) == []
    assert running_slave().on_sync_state_set_proposal(frozenset({1, 2}), 0) == []


def test_alter_reply_with_an_older_epoch_changes_nothing_spec_9_5() -> None:
    p = running_master()
    propose = one(p.on_sync_state_set_proposal(frozenset({2, 3}), 0), act.ProposeSyncStateSet)
    reply = ok(newSyncStateSetEpoch=1, syncStateSet=[2, 3], syncStateSetEpoch=1)
    assert p.on_controller_reply(propose, reply, 1) == []


# -- heartbeats (docs/reference-behaviour.md §9.7)
# ------------------------------------------------------------------------


def test_heartbeat_content_and_period_spec_9_7() -> None:
    p = running_slave()
    p.on_local_progress(BrokerProgress(last_epoch=3, max_offset=4096, confirm_offset=2048))
    assert not any(isinstance(a, act.SendHeartbeat) for a in p.tick(999))
    heartbeat = one(p.tick(1000), act.SendHeartbeat)
    assert not heartbeat.confirm
    assert heartbeat.request.to_json() == {
        "clusterName": "c1",
        "brokerName": "b1",
        "brokerAddr": "127.0.0.1:10911",
        "brokerId": 2,
        "epoch": 3,
        "maxOffset": 4096,
        "confirmOffset": 2048,
        "heartbeatTimeoutMills": 9000,
        "electionPriority": 7,
        "knownMasterEpoch": 3,
    }
    assert not any(isinstance(a, act.SendHeartbeat) for a in p.tick(1999))
    assert any(isinstance(a, act.SendHeartbeat) for a in p.tick(2000))


def test_no_scheduled_heartbeat_before_running_spec_9_7() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    register_with_files(p)
    assert not any(isinstance(a, act.SendHeartbeat) for a in p.tick(60_000))


def test_empty_epoch_file_reports_minus_one() -> None:
    p = ReplicasPlanner(CFG)
    p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 2), None)
    assert p.heartbeat_request().epoch == -1 and p.heartbeat_request().max_offset == -1


# -- controller outage, shutdown, tables ---------------------------------------------------------


def test_controller_outage_after_running_never_fences() -> None:
    p = running_master()
    seen: list[act.Action] = []
    for now in range(0, 60_000, 500):
        for action in p.tick(now):
            seen.append(action)
            if isinstance(action, act.ControllerCall):
                seen += p.on_controller_reply(action, None, now)
    assert act.SetFenced(True) not in seen
    assert p.state is State.RUNNING and p.role == "MASTER"
    assert any(isinstance(a, act.GetReplicaInfo) for a in seen) and any(
        isinstance(a, act.GetMetadata) for a in seen
    )


def test_shutdown_fences_and_stops_everything() -> None:
    p = running_master()
    call = _replica_info_call(p, 3000)
    assert p.shutdown(3001) == [act.SetFenced(True)]
    assert p.state is State.SHUTDOWN
    assert p.tick(100_000) == [] and p.next_wakeup_ms() is None
    assert p.on_controller_reply(call, ok(**master_info(3, 9, {3}, 9)), 3002) == []
    assert (
        p.on_role_notification(act.RoleNotification("b1", 3, "a:1", None, 9, 9, frozenset({3})), 3003) == []
    )
    assert p.shutdown(3004) == []


def test_next_wakeup_follows_the_timers() -> None:
    p = ReplicasPlanner(CFG, seed=1)
    assert p.next_wakeup_ms() is None
    call = one(p.start(0), act.GetMetadata)
    p.on_controller_reply(call, None, 0)
    assert p.next_wakeup_ms() == METADATA_RETRY_MS
    m = running_master()
    assert m.next_wakeup_ms() == 1000  # the first heartbeat


def test_illegal_transition_raises_and_leaves_state() -> None:
    from mqha.replicas_manager.planner_states import RegisterEvent, StateEvent

    p = ReplicasPlanner(CFG)
    with pytest.raises(LocalProtocolError, match="RUNNING"):
        p.state = State.RUNNING
        p._transition(StateEvent.METADATA_SYNCED)
    assert p.state is State.RUNNING
    with pytest.raises(LocalProtocolError, match="register state INITIAL"):
        p._register_transition(RegisterEvent.REGISTER_SUCCEEDED)
    assert p.register_state is RegisterState.INITIAL


def test_actions_run_persist_then_send_then_apply() -> None:
    batch: list[act.Action] = [
        act.SetFenced(False),
        act.GetMetadata(1),
        act.DeleteTempIdentity(),
        act.SetBrokerControllerId(2),
    ]
    ordered = act.in_phase_order(batch)
    assert [a.phase for a in ordered] == [act.Phase.PERSIST, act.Phase.SEND, act.Phase.APPLY, act.Phase.APPLY]
    assert ordered[2:] == [act.SetFenced(False), act.SetBrokerControllerId(2)]


def test_role_notification_parsing() -> None:
    note = act.RoleNotification.from_json(
        {"type": "roleChanged", "brokerName": "b1", **master_info(1, 2, {1, 3}, 4), "extra": 1}
    )
    assert note == act.RoleNotification(
        "b1", 1, "127.0.0.1:20911", "127.0.0.1:20912", 2, 4, frozenset({1, 3})
    )
    from mqha.errors import RemoteProtocolError

    with pytest.raises(RemoteProtocolError, match="masterEpoch"):
        act.RoleNotification.from_json({"masterEpoch": "2"})
    with pytest.raises(RemoteProtocolError, match="syncStateSet"):
        act.RoleNotification.from_json({"syncStateSet": [True]})


def test_no_due_in_the_past_while_the_start_step_is_in_flight() -> None:
    # Chaos (issue 25, whole-group power cut): the start election failed (the controller waited for a
    # complete replica), the controller then elected this broker (a push) while the retried start
    # heartbeat was in flight. tick() skips the retry and the RUNNING-only timers then; a wake-up time in
    # the past made the runner spin with a zero timeout, which never took the heartbeat's result from
    # its queue: the broker stayed fenced as master for good.
    p = ReplicasPlanner(CFG, seed=1)
    elect = _at_elect(p)
    assert p.on_controller_reply(elect, err(Code.CONTROLLER_ELECT_MASTER_FAILED, "waiting"), 100) == []
    now = 100 + RETRY_INTERVAL_MS
    start_heartbeat = [a for a in p.tick(now) if isinstance(a, act.SendHeartbeat) and a.confirm]
    assert len(start_heartbeat) == 1
    note = act.RoleNotification("b1", 2, CFG.broker_address, CFG.ha_address, 2, 2, frozenset({2}))
    pushed = p.on_role_change_result(one(p.on_role_notification(note, now), act.BecomeMaster), True, now)
    assert p.state is State.REGISTER_TO_CONTROLLER_DONE and p.is_master
    assert kinds(pushed) == [act.CheckSyncStateSet]  # the start step is still in flight
    for later in (now + 1, now + CFG.check_sync_state_set_period_ms + 1, now + 60_000):
        p.tick(later)
        wake = p.next_wakeup_ms()
        assert wake is None or wake > later, (later, wake)
    p.on_heartbeat_sent(start_heartbeat[0], 3, now + 60_001)
    assert p.state is State.RUNNING


def test_heartbeats_report_the_ack_rule_for_elections() -> None:
    p = ReplicasPlanner(replace(CFG, all_ack_in_sync_state_set=False, in_sync_replicas=2))
    p.on_identity_loaded(act.BrokerIdentity("c1", "b1", 2), None)
    body = p.heartbeat_request()
    assert body.all_ack_in_sync_state_set is False and body.in_sync_replicas == 2
    unset = ReplicasPlanner(CFG)
    unset.on_identity_loaded(act.BrokerIdentity("c1", "b1", 2), None)
    assert unset.heartbeat_request().in_sync_replicas is None  # an agent without the keys reports nothing


def test_a_closed_master_link_makes_a_slave_heartbeat_at_once() -> None:
    slave = running_slave()
    assert not any(isinstance(a, act.SendHeartbeat) for a in slave.tick(1))
    assert slave.on_master_link_closed(2) == []
    assert any(isinstance(a, act.SendHeartbeat) for a in slave.tick(2))
    master = running_master()
    master.on_master_link_closed(2)
    assert not any(isinstance(a, act.SendHeartbeat) for a in master.tick(2))


# -- another live process holds this broker's id (docs/architecture.md §3.2)
# -----------------------------------


HELD = "BrokerId: 3 of broker-set: b1 is held by another live process at 10.0.0.9:10911"


def test_a_register_refused_for_a_held_id_retries_for_one_heartbeat_timeout_then_gives_up() -> None:
    p = ReplicasPlanner(CFG, seed=3)
    call = one(register_with_files(p, 3), act.RegisterBroker)
    now = 0
    while now < CFG.heartbeat_timeout_ms:  # a replica that moved may be ahead of its old entry's expiry
        assert p.on_controller_reply(call, err(Code.CONTROLLER_BROKER_ID_INVALID, HELD), now) == []
        assert p.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE
        retry: list[act.Action] = []
        while not retry:
            now += 100
            retry = without_refresh(p.tick(now))
        call = one(retry, act.RegisterBroker)
    out = p.on_controller_reply(call, err(Code.CONTROLLER_BROKER_ID_INVALID, HELD), now)
    assert out == [act.SetFenced(True), act.GiveUpBrokerId(3, HELD)]
    assert p.state is State.SHUTDOWN
    assert p.tick(now + 60_000) == []  # nothing more is asked


def test_a_register_that_passes_after_a_refusal_starts_the_grace_afresh() -> None:
    p = ReplicasPlanner(CFG, seed=3)
    call = one(register_with_files(p, 3), act.RegisterBroker)
    assert p.on_controller_reply(call, err(Code.CONTROLLER_BROKER_ID_INVALID, HELD), 0) == []
    call = one(without_refresh(p.tick(1000)), act.RegisterBroker)
    p.on_controller_reply(call, registered_reply(**master_info(1, 2, {1}, 1)), 1000)
    assert p._id_held_since_ms is None


def test_a_refused_heartbeat_gives_up_at_once_fenced() -> None:
    p = ReplicasPlanner(CFG, seed=3)
    register_with_files(p, 3)
    out = p.on_heartbeat_refused("10.0.0.1:9876", HELD, 5)
    assert out == [act.SetFenced(True), act.GiveUpBrokerId(3, f"controller 10.0.0.1:9876: {HELD}")]
    assert p.on_heartbeat_refused("10.0.0.2:9876", HELD, 6) == []  # once
