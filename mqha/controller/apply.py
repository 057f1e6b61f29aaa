"""Apply one committed record to the state: the only place the controller state and its epochs change.

``apply(state, record, raft_index)`` is compare-and-set: it checks the expectations the record was
decided against (see the table in ``mqha.controller.records``) and either applies the delta — bumping
masterEpoch / syncStateSetEpoch here and nowhere else — or returns a rejection ``Outcome`` with the
fencing code and leaves the groups untouched. Either way ``applied_index`` advances.

It is deterministic (no clock, no randomness, no liveness: those stayed with the decision) and it
NEVER raises: it runs inside PySyncObj's replicated method, where an exception wedges the node
(docs/raft.md §4, P3). Undecodable bytes and unexpected errors become a ``SYSTEM_ERROR`` outcome.

The election rule's state (docs/architecture.md §3.2) moves here too: an AlterSyncStateSet moves the
members it removes into the ELR (credit: its confirm offset, else the watermark) and takes the members
it adds out; an ElectMaster moves the old SyncStateSet members other than the new master into the ELR
(credit: the decision's watermark) and takes the new master out. Only a known credit (>= 0) admits a
replica: with nothing known acknowledged there is no ELR and elections are the reference's. The
watermark only grows, except that an election declaring acknowledged data lost resets it to what
survives (``fromOffset``).

Deviations applied here (docs/architecture.md §7 and our own, see ``handle_clean_broker_data``):
- a partial clean keeps the set (and its sync-state entry) while any replica stays registered;
- a partial clean that removes the current master also clears the master and bumps masterEpoch
  (the reference keeps a master id that is no longer registered, outside the SyncStateSet).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mqha.codes import ResponseCode
from mqha.controller.records import (
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    DeleteAclUserRecord,
    DeleteTopicRecord,
    ElectMasterRecord,
    NoopRecord,
    PutAclPolicyRecord,
    PutAclUserRecord,
    Record,
    RecordFormatError,
    UpdateBrokerAddressRecord,
    UpdateConsumerOffsetRecord,
    UpdateTopicRecord,
    decode_record,
)
from mqha.controller.state import (
    AclUserState,
    BrokerGroupState,
    ControllerState,
    ReplicaInfo,
    TopicQueues,
    TopicState,
)
from mqha.errors import MqhaError

SUCCESS = ResponseCode.SUCCESS


@dataclass(frozen=True)
class Outcome:
    """What applying one record did.

    ``group`` is the broker set as it is after this entry (None when it does not exist), whether the
    record was accepted or rejected, so a reply can always be built from it.
    """

    code: ResponseCode
    remark: str
    raft_index: int
    record: Record | None
    broker_name: str | None = None
    group: BrokerGroupState | None = None

    @property
    def accepted(self) -> bool:
        return self.code == SUCCESS


class _Rejected(MqhaError):
    """Carries a record's rejection (code and remark) from its applier back to ``apply``."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code, self.remark = code, remark


def _registered(state: ControllerState, name: str, code: ResponseCode, remark: str) -> BrokerGroupState:
    """The broker set ``name``; rejects the record with ``code``/``remark`` when there is none."""
    group = state.group(name)
    if group is None:
        raise _Rejected(code, remark)
    return group


def _check_epochs(
    group: BrokerGroupState, record: ElectMasterRecord | AlterSyncStateSetRecord | CleanBrokerDataRecord
) -> None:
    """The fencing check shared by the records that touch the master or the SyncStateSet."""
    master_epoch, sss_epoch = record.expected_master_epoch, record.expected_sync_state_set_epoch
    if group.master_epoch != master_epoch:
        raise _Rejected(
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            f"Fenced: decided against masterEpoch {master_epoch}, but the current masterEpoch of "
            f"{group.broker_name} is {group.master_epoch}",
        )
    if group.sync_state_set_epoch != sss_epoch:
        raise _Rejected(
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            f"Fenced: decided against syncStateSetEpoch {sss_epoch}, but the current syncStateSetEpoch "
            f"of {group.broker_name} is {group.sync_state_set_epoch}",
        )


# --------------------------------------------------------------------------------------------------
# One function per record type: (state, record) -> the new state, or ``_Rejected``; never partial.


def _apply_noop(state: ControllerState, record: NoopRecord) -> ControllerState:
    return state


def _apply_broker_id(state: ControllerState, record: ApplyBrokerIdRecord) -> ControllerState:
    name = record.broker_name
    replica = ReplicaInfo(record.broker_address, None, record.register_check_code)
    group = state.group(name)
    if group is None:
        # An unknown set is created with this broker as its only replica, no master, epochs 0.
        return state.with_group(BrokerGroupState(record.cluster_name, name, {record.broker_id: replica}))
    existing = group.replicas.get(record.broker_id)
    if existing is not None:
        if existing.register_check_code == record.register_check_code:
            return state  # idempotent re-apply
        # Two brokers were promised the same id (e.g. by two self-believed leaders): first wins.
        raise _Rejected(
            ResponseCode.CONTROLLER_BROKER_ID_INVALID,
            f"Fail to apply brokerId: {record.broker_id} in broker-set: {name}",
        )
    replicas = group.replicas.set(record.broker_id, replica)  # type: ignore[attr-defined]
    return state.with_group(replace(group, replicas=replicas))


def _apply_update_address(state: ControllerState, record: UpdateBrokerAddressRecord) -> ControllerState:
    name = record.broker_name
    unregistered = ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    group = _registered(state, name, unregistered, f"Broker-set: {name} hasn't been registered in controller")
    existing = group.replicas.get(record.broker_id)
    if existing is None:
        raise _Rejected(
            unregistered, f"BrokerId: {record.broker_id} hasn't been registered in broker-set: {name}"
        )
    ha_address = existing.ha_address if record.ha_address is None else record.ha_address
    replica = replace(existing, address=record.broker_address, ha_address=ha_address)
    replicas = group.replicas.set(record.broker_id, replica)  # type: ignore[attr-defined]
    return state.with_group(replace(group, replicas=replicas))


def _apply_elect_master(state: ControllerState, record: ElectMasterRecord) -> ControllerState:
    name = record.broker_name
    group = _registered(
        state, name, ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered"
    )
    _check_epochs(group, record)
    new_master = record.new_master_broker_id
    lost = record.acked_data_lost
    if new_master is None:
        # No candidate: the master is cleared (masterEpoch+1); the SyncStateSet and its epoch stay. The
        # decision's watermark is kept: it may hold soft facts (a master's last confirm offset) that the
        # epoch change would otherwise forget.
        return state.with_group(
            replace(
                group,
                master_broker_id=None,
                master_epoch=group.master_epoch + 1,
                acked_watermark=max(group.acked_watermark, record.acked_watermark),
            )
        )
    if not group.is_registered(new_master):
        raise _Rejected(
            ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
            f"Failed to elect a new master: broker {new_master} is no longer registered in {name}",
        )
    # What is gone is declared: the watermark restarts at what survives.
    watermark = lost.from_offset if lost is not None else max(group.acked_watermark, record.acked_watermark)
    # The new master acknowledges past every credit as soon as it serves: the election releases the
    # ELR at once (docs/architecture.md §3.2), so the first put after a failover waits for nothing.
    group = replace(
        group,
        master_broker_id=new_master,
        master_epoch=group.master_epoch + 1,
        sync_state_set=frozenset({new_master}),
        sync_state_set_epoch=group.sync_state_set_epoch + 1,
        eligible_replicas={},
        acked_watermark=watermark,
    )
    return state.with_group(group)


def _apply_alter_sync_state_set(state: ControllerState, record: AlterSyncStateSetRecord) -> ControllerState:
    name = record.broker_name
    failed = ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    group = _registered(state, name, failed, "Broker metadata is not existed")
    rejecting = f"Rejecting alter syncStateSet of {name}:"
    if group.master_broker_id is None or group.master_broker_id != record.master_broker_id:
        raise _Rejected(
            ResponseCode.CONTROLLER_INVALID_MASTER,
            f"{rejecting} broker {record.master_broker_id} is not the current master "
            f"({group.master_broker_id})",
        )
    _check_epochs(group, record)
    for broker_id in sorted(record.new_sync_state_set):
        if not group.is_registered(broker_id):
            raise _Rejected(
                ResponseCode.CONTROLLER_INVALID_REPLICAS, f"{rejecting} replica {broker_id} is not registered"
            )
    if record.master_broker_id not in record.new_sync_state_set:
        raise _Rejected(
            failed, f"{rejecting} the new syncStateSet does not contain the master {record.master_broker_id}"
        )
    new_set = record.new_sync_state_set
    watermark = group.acked_watermark
    if record.confirm_offset is not None:
        watermark = max(watermark, record.confirm_offset)
    credit = watermark if record.confirm_offset is None else record.confirm_offset
    eligible = {b: c for b, c in group.eligible_replicas.items() if b not in new_set}
    if credit >= 0:
        for removed in group.sync_state_set - new_set:
            eligible[removed] = credit
    if record.release_eligible:
        # The master acknowledges beyond every credit next: a replica outside the set would no longer
        # hold everything acknowledged, so none stays eligible (docs/architecture.md §3.2).
        eligible = {}
    changed = new_set != group.sync_state_set
    group = replace(
        group,
        sync_state_set=new_set,
        sync_state_set_epoch=group.sync_state_set_epoch + (1 if changed else 0),
        eligible_replicas=eligible,
        acked_watermark=watermark,
    )
    return state.with_group(group)


def _apply_clean(state: ControllerState, record: CleanBrokerDataRecord) -> ControllerState:
    name = record.broker_name
    group = _registered(
        state,
        name,
        ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        f"Broker {name} is not existed,clean broker data failure.",
    )
    _check_epochs(group, record)
    if not record.broker_ids:
        return state.without_group(name)
    replicas = group.replicas.remove(*record.broker_ids)  # type: ignore[attr-defined]
    if not replicas:
        return state.without_group(name)
    # Deviation: the set keeps its sync-state entry (epochs, master history) while replicas remain.
    eligible = {b: c for b, c in group.eligible_replicas.items() if b not in record.broker_ids}
    group = replace(
        group,
        replicas=replicas,
        sync_state_set=group.sync_state_set - record.broker_ids,
        eligible_replicas=eligible,
    )
    if group.master_broker_id in record.broker_ids:
        group = replace(group, master_broker_id=None, master_epoch=group.master_epoch + 1)
    return state.with_group(group)


def _apply_update_topic(state: ControllerState, record: UpdateTopicRecord) -> ControllerState:
    # No compare-and-set: a topic's queues are the operator's latest word, so a re-applied or
    # replayed record sets the same values again (idempotent).
    topic = state.topics.get(record.topic_name) or TopicState(record.topic_name)
    queues = TopicQueues(record.read_queue_nums, record.write_queue_nums, record.perm)
    table = dict(topic.queues)
    for name in record.broker_names:
        table[name] = queues
    return state.with_topic(TopicState(record.topic_name, table))


def _apply_delete_topic(state: ControllerState, record: DeleteTopicRecord) -> ControllerState:
    topic = state.topics.get(record.topic_name)
    if topic is None:
        return state  # deleted already: idempotent
    table = {name: q for name, q in topic.queues.items() if name not in record.broker_names}
    state = state.without_consumer_offsets(record.topic_name, record.broker_names)
    return state.with_topic(TopicState(record.topic_name, table))


def _apply_consumer_offsets(state: ControllerState, record: UpdateConsumerOffsetRecord) -> ControllerState:
    # The larger offset wins per queue, so a replayed, reordered or stale record moves nothing back.
    return state.with_consumer_offsets(
        state.raised_offsets((entry.key, entry.commit_offset) for entry in record.offsets)
    )


def _apply_put_acl_user(state: ControllerState, record: PutAclUserRecord) -> ControllerState:
    return state.with_acl_user(record.username, AclUserState(record.user_type, record.sealed_password))


def _apply_delete_acl_user(state: ControllerState, record: DeleteAclUserRecord) -> ControllerState:
    return state.with_acl_user(record.username, None)


def _apply_put_acl_policy(state: ControllerState, record: PutAclPolicyRecord) -> ControllerState:
    return state.with_acl_policy(record.username, record.entries)


_APPLIERS: dict[type[Any], Callable[[ControllerState, Any], ControllerState]] = {
    PutAclUserRecord: _apply_put_acl_user,
    DeleteAclUserRecord: _apply_delete_acl_user,
    PutAclPolicyRecord: _apply_put_acl_policy,
    UpdateTopicRecord: _apply_update_topic,
    DeleteTopicRecord: _apply_delete_topic,
    UpdateConsumerOffsetRecord: _apply_consumer_offsets,
    NoopRecord: _apply_noop,
    ApplyBrokerIdRecord: _apply_broker_id,
    UpdateBrokerAddressRecord: _apply_update_address,
    ElectMasterRecord: _apply_elect_master,
    AlterSyncStateSetRecord: _apply_alter_sync_state_set,
    CleanBrokerDataRecord: _apply_clean,
}


def _advance(state: ControllerState, raft_index: int) -> ControllerState:
    # A replayed (older) index never moves applied_index backwards.
    if raft_index > state.applied_index:
        return replace(state, applied_index=raft_index)
    return state


def _outcome(
    state: ControllerState, record: Record, raft_index: int, code: ResponseCode = SUCCESS, remark: str = ""
) -> Outcome:
    """The outcome of ``record``: its set as it stands in ``state`` (after it, or untouched when rejected)."""
    name: str | None = getattr(record, "broker_name", None)
    group = None if name is None else state.group(name)
    return Outcome(code, remark, raft_index, record, name, group)


def apply(state: ControllerState, record: Record, raft_index: int) -> tuple[ControllerState, Outcome]:
    """Apply one record; never raises (see module docstring)."""
    try:
        applier = _APPLIERS.get(type(record))
        if applier is None:
            outcome = Outcome(
                ResponseCode.SYSTEM_ERROR,
                f"not a controller record: {type(record).__name__}",
                raft_index,
                None,
            )
            return _advance(state, raft_index), outcome
        try:
            new_state = applier(state, record)
        except _Rejected as rejected:  # the groups stay as they were
            return _advance(state, raft_index), _outcome(
                state, record, raft_index, rejected.code, rejected.remark
            )
        return _advance(new_state, raft_index), _outcome(new_state, record, raft_index)
    except Exception as exc:  # the safety net: a bug must not wedge the Raft node
        outcome = Outcome(
            ResponseCode.SYSTEM_ERROR,
            f"internal error applying {type(record).__name__}: {type(exc).__name__}: {exc}",
            raft_index,
            None,
        )
        try:
            return _advance(state, raft_index), outcome
        except Exception:
            return state, outcome


def apply_encoded(state: ControllerState, data: bytes, raft_index: int) -> tuple[ControllerState, Outcome]:
    """Decode and apply one log entry; undecodable bytes give a ``SYSTEM_ERROR`` outcome, never raise."""
    try:
        record = decode_record(data)
    except RecordFormatError as exc:
        return _advance(state, raft_index), Outcome(
            ResponseCode.SYSTEM_ERROR, f"undecodable record: {exc}", raft_index, None
        )
    except Exception as exc:  # decode_record should only raise RecordFormatError; stay safe anyway
        return _advance(state, raft_index), Outcome(
            ResponseCode.SYSTEM_ERROR, f"undecodable record: {type(exc).__name__}", raft_index, None
        )
    return apply(state, record, raft_index)


def replay(
    records: list[Record] | tuple[Record, ...],
    state: ControllerState | None = None,
    first_index: int = 1,
) -> ControllerState:
    """Apply records in order from ``state`` (default: empty), numbering them from ``first_index``."""
    current = ControllerState.empty() if state is None else state
    for offset, record in enumerate(records):
        current, _ = apply(current, record, first_index + offset)
    return current
