"""Reply payloads of the controller's decisions, and the final reply of a write built from what ``apply`` did
(docs/raft.md §3; core). Shared by ``operations`` (decisions) and the shell (``write_path``)."""

from __future__ import annotations

from typing import Any

from mqha.codes import ResponseCode
from mqha.controller.apply import Outcome, apply
from mqha.controller.records import (
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    DeleteTopicRecord,
    ElectMasterRecord,
    Record,
    UpdateBrokerAddressRecord,
    UpdateConsumerOffsetRecord,
    UpdateTopicRecord,
)
from mqha.controller.result import ControllerResult
from mqha.controller.state import BrokerGroupState, ControllerState
from mqha.wire import controller_api as api
from mqha.wire.codec import Payload
from mqha.wire.controller_api import Reply

SUCCESS = ResponseCode.SUCCESS

# --------------------------------------------------------------------------------------------------
# Payload builders: pure functions of a group, shared by decisions and ``reply_from_outcome``.


def member_group(group: BrokerGroupState) -> api.BrokerMemberGroup:
    return api.BrokerMemberGroup(
        cluster=group.cluster_name,
        broker_name=group.broker_name,
        broker_addrs={broker_id: info.address for broker_id, info in sorted(group.replicas.items())},
    )


def _master_fields(group: BrokerGroupState) -> dict[str, Any]:
    """The master and SyncStateSet fields the elect and replica-info replies both carry."""
    return {
        "master_broker_id": group.master_broker_id,
        "master_address": group.master_address,
        "master_ha_address": group.master_ha_address,
        "master_epoch": group.master_epoch,
        "sync_state_set_epoch": group.sync_state_set_epoch,
        "sync_state_set": group.sync_state_set,
    }


def elect_payload(group: BrokerGroupState, with_member_group: bool) -> api.ElectMasterPayload:
    """The elect reply of a group that has a master (SUCCESS and MASTER_STILL_EXIST)."""
    return api.ElectMasterPayload(
        **_master_fields(group), broker_member_group=member_group(group) if with_member_group else None
    )


NO_MASTER_ELECT_PAYLOAD = api.ElectMasterPayload()
"""2004 / 2012: the reference's header fields are all null."""


def register_payload(group: BrokerGroupState, master_alive: bool) -> api.RegisterBrokerPayload:
    """docs/reference-behaviour.md §5.3 steps 3-4: master fields only when a master exists and is alive; SSS
    always."""
    has_master = master_alive and group.master_broker_id is not None
    return api.RegisterBrokerPayload(
        cluster_name=group.cluster_name,
        broker_name=group.broker_name,
        master_broker_id=group.master_broker_id if has_master else None,
        master_address=group.master_address if has_master else None,
        master_ha_address=group.master_ha_address if has_master else None,
        master_epoch=group.master_epoch if has_master else None,
        sync_state_set_epoch=group.sync_state_set_epoch if has_master else None,
        sync_state_set=group.sync_state_set,
    )


def alter_payload(group: BrokerGroupState) -> api.AlterSyncStateSetPayload:
    return api.AlterSyncStateSetPayload(
        new_sync_state_set_epoch=group.sync_state_set_epoch,
        sync_state_set=group.sync_state_set,
        sync_state_set_epoch=group.sync_state_set_epoch,
    )


def replica_info_payload(group: BrokerGroupState) -> api.ReplicaInfoPayload:
    return api.ReplicaInfoPayload(**_master_fields(group))


# --------------------------------------------------------------------------------------------------
# From apply's outcome to the final reply (docs/raft.md §3).


def reply_from_outcome(result: ControllerResult, outcome: Outcome) -> Reply:
    """The final reply of a write, built from what ``apply`` did with its (single) record.

    A rejected outcome (fenced by a concurrent write, or the set vanished) answers with apply's code
    and remark. An accepted one answers with the decision's code and remark (SUCCESS, or 2004 for a
    controller-triggered election that cleared the master) and a payload read from the group as it
    is after the entry. A result without records is a read: its reply is returned unchanged.
    """
    if not result.records:
        return result.reply
    if not outcome.accepted:
        return Reply(outcome.code, outcome.remark)
    code, remark = result.reply.code, result.reply.remark
    record, group = outcome.record, outcome.group
    if isinstance(record, UpdateTopicRecord | DeleteTopicRecord | UpdateConsumerOffsetRecord):
        return result.reply  # apply accepts every topic and offset record: its reply is the decision's
    if isinstance(record, ApplyBrokerIdRecord):
        return Reply(
            code,
            remark,
            api.ApplyBrokerIdPayload(cluster_name=record.cluster_name, broker_name=record.broker_name),
        )
    if group is None:  # only a clean leaves no group behind
        return Reply(code, remark)
    if isinstance(record, UpdateBrokerAddressRecord):
        # The decision filled master fields only if the master was alive; keep that judgement only
        # while the master is still the same broker (a newer master's liveness is unknown here).
        draft = result.reply.payload
        predicted = draft.master_broker_id if isinstance(draft, api.RegisterBrokerPayload) else None
        alive = predicted is not None and predicted == group.master_broker_id
        return Reply(code, remark, register_payload(group, alive))
    if isinstance(record, ElectMasterRecord):
        if record.new_master_broker_id is None:
            return Reply(code, remark, NO_MASTER_ELECT_PAYLOAD)
        return Reply(code, remark, elect_payload(group, with_member_group=True))
    if isinstance(record, AlterSyncStateSetRecord):
        return Reply(code, remark, alter_payload(group))
    return Reply(code, remark)


def write_result(state: ControllerState, record: Record, draft: Reply) -> ControllerResult:
    """A write result whose reply is predicted by applying the record to the decision's state."""
    result = ControllerResult((record,), draft)
    _, outcome = apply(state, record, state.applied_index)
    return ControllerResult((record,), reply_from_outcome(result, outcome))


def reject_result(code: ResponseCode, remark: str, payload: Payload | None = None) -> ControllerResult:
    return ControllerResult((), Reply(code, remark) if payload is None else Reply(code, remark, payload))
