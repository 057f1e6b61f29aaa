"""Apply one committed record to the state: the only place the controller state and its epochs change.

``apply(state, record, raft_index)`` is compare-and-set: it checks the expectations the record was
decided against (see the table in ``mqha.controller.records``) and either applies the delta — bumping
masterEpoch / syncStateSetEpoch here and nowhere else — or returns a rejection ``Outcome`` with the
fencing code and leaves the groups untouched. Either way ``applied_index`` advances.

It is deterministic (no clock, no randomness, no liveness: those stayed with the decision) and it
NEVER raises: it runs inside PySyncObj's replicated method, where an exception wedges the node
(docs/raft.md §4, P3). Undecodable bytes and unexpected errors become a ``SYSTEM_ERROR`` outcome.

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
    ElectMasterRecord,
    NoopRecord,
    Record,
    RecordFormatError,
    UpdateBrokerAddressRecord,
    decode_record,
)
from mqha.controller.state import BrokerGroupState, ControllerState, ReplicaInfo

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


def _accept(state: ControllerState, record: Record, raft_index: int, name: str) -> Outcome:
    return Outcome(SUCCESS, "", raft_index, record, name, state.group(name))


def _reject(
    state: ControllerState, record: Record, raft_index: int, name: str, why: tuple[ResponseCode, str]
) -> tuple[ControllerState, Outcome]:
    code, remark = why
    return state, Outcome(code, remark, raft_index, record, name, state.group(name))


def _check_epochs(
    group: BrokerGroupState, master_epoch: int, sss_epoch: int
) -> tuple[ResponseCode, str] | None:
    """The fencing check shared by the records that touch the master or the SyncStateSet."""
    if group.master_epoch != master_epoch:
        return (
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            f"Fenced: decided against masterEpoch {master_epoch}, but the current masterEpoch of "
            f"{group.broker_name} is {group.master_epoch}",
        )
    if group.sync_state_set_epoch != sss_epoch:
        return (
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            f"Fenced: decided against syncStateSetEpoch {sss_epoch}, but the current syncStateSetEpoch "
            f"of {group.broker_name} is {group.sync_state_set_epoch}",
        )
    return None


# --------------------------------------------------------------------------------------------------
# One function per record type: (state, record, raft_index) -> (state, outcome), never partial.


def _apply_noop(
    state: ControllerState, record: NoopRecord, raft_index: int
) -> tuple[ControllerState, Outcome]:
    return state, Outcome(SUCCESS, "", raft_index, record)


def _apply_broker_id(
    state: ControllerState, record: ApplyBrokerIdRecord, raft_index: int
) -> tuple[ControllerState, Outcome]:
    name = record.broker_name
    replica = ReplicaInfo(record.broker_address, None, record.register_check_code)
    group = state.group(name)
    if group is None:
        # An unknown set is created with this broker as its only replica, no master, epochs 0.
        group = BrokerGroupState(record.cluster_name, name, {record.broker_id: replica})
        state = state.with_group(group)
        return state, _accept(state, record, raft_index, name)
    existing = group.replicas.get(record.broker_id)
    if existing is not None:
        if existing.register_check_code == record.register_check_code:
            return state, _accept(state, record, raft_index, name)  # idempotent re-apply
        # Two brokers were promised the same id (e.g. by two self-believed leaders): first wins.
        return _reject(
            state,
            record,
            raft_index,
            name,
            (
                ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                f"Fail to apply brokerId: {record.broker_id} in broker-set: {name}",
            ),
        )
    group = replace(group, replicas=group.replicas.set(record.broker_id, replica))  # type: ignore[attr-defined]
    state = state.with_group(group)
    return state, _accept(state, record, raft_index, name)


def _apply_update_address(
    state: ControllerState, record: UpdateBrokerAddressRecord, raft_index: int
) -> tuple[ControllerState, Outcome]:
    name = record.broker_name
    group = state.group(name)
    if group is None:
        return _reject(
            state,
            record,
            raft_index,
            name,
            (
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"Broker-set: {name} hasn't been registered in controller",
            ),
        )
    existing = group.replicas.get(record.broker_id)
    if existing is None:
        return _reject(
            state,
            record,
            raft_index,
            name,
            (
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"BrokerId: {record.broker_id} hasn't been registered in broker-set: {name}",
            ),
        )
    ha_address = existing.ha_address if record.ha_address is None else record.ha_address
    replica = replace(existing, address=record.broker_address, ha_address=ha_address)
    group = replace(group, replicas=group.replicas.set(record.broker_id, replica))  # type: ignore[attr-defined]
    state = state.with_group(group)
    return state, _accept(state, record, raft_index, name)


def _apply_elect_master(
    state: ControllerState, record: ElectMasterRecord, raft_index: int
) -> tuple[ControllerState, Outcome]:
    name = record.broker_name
    group = state.group(name)
    if group is None:
        return _reject(
            state,
            record,
            raft_index,
            name,
            (
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                "Broker hasn't been registered",
            ),
        )
    fenced = _check_epochs(group, record.expected_master_epoch, record.expected_sync_state_set_epoch)
    if fenced is not None:
        return _reject(state, record, raft_index, name, fenced)
    new_master = record.new_master_broker_id
    if new_master is None:
        # No candidate: the master is cleared (masterEpoch+1); the SyncStateSet and its epoch stay.
        group = replace(group, master_broker_id=None, master_epoch=group.master_epoch + 1)
    else:
        if not group.is_registered(new_master):
            return _reject(
                state,
                record,
                raft_index,
                name,
                (
                    ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                    f"Failed to elect a new master: broker {new_master} is no longer registered in {name}",
                ),
            )
        group = replace(
            group,
            master_broker_id=new_master,
            master_epoch=group.master_epoch + 1,
            sync_state_set=frozenset({new_master}),
            sync_state_set_epoch=group.sync_state_set_epoch + 1,
        )
    state = state.with_group(group)
    return state, _accept(state, record, raft_index, name)


def _apply_alter_sync_state_set(
    state: ControllerState, record: AlterSyncStateSetRecord, raft_index: int
) -> tuple[ControllerState, Outcome]:
    name = record.broker_name
    group = state.group(name)
    reject = ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    if group is None:
        return _reject(state, record, raft_index, name, (reject, "Broker metadata is not existed"))
    if group.master_broker_id is None or group.master_broker_id != record.master_broker_id:
        return _reject(
            state,
            record,
            raft_index,
            name,
            (
                ResponseCode.CONTROLLER_INVALID_MASTER,
                f"Rejecting alter syncStateSet of {name}: broker {record.master_broker_id} is not the "
                f"current master ({group.master_broker_id})",
            ),
        )
    fenced = _check_epochs(group, record.expected_master_epoch, record.expected_sync_state_set_epoch)
    if fenced is not None:
        return _reject(state, record, raft_index, name, fenced)
    for broker_id in sorted(record.new_sync_state_set):
        if not group.is_registered(broker_id):
            return _reject(
                state,
                record,
                raft_index,
                name,
                (
                    ResponseCode.CONTROLLER_INVALID_REPLICAS,
                    f"Rejecting alter syncStateSet of {name}: replica {broker_id} is not registered",
                ),
            )
    if record.master_broker_id not in record.new_sync_state_set:
        return _reject(
            state,
            record,
            raft_index,
            name,
            (
                reject,
                f"Rejecting alter syncStateSet of {name}: the new syncStateSet does not contain the master "
                f"{record.master_broker_id}",
            ),
        )
    group = replace(
        group,
        sync_state_set=record.new_sync_state_set,
        sync_state_set_epoch=group.sync_state_set_epoch + 1,
    )
    state = state.with_group(group)
    return state, _accept(state, record, raft_index, name)


def _apply_clean(
    state: ControllerState, record: CleanBrokerDataRecord, raft_index: int
) -> tuple[ControllerState, Outcome]:
    name = record.broker_name
    group = state.group(name)
    if group is None:
        return _reject(
            state,
            record,
            raft_index,
            name,
            (
                ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                f"Broker {name} is not existed,clean broker data failure.",
            ),
        )
    fenced = _check_epochs(group, record.expected_master_epoch, record.expected_sync_state_set_epoch)
    if fenced is not None:
        return _reject(state, record, raft_index, name, fenced)
    if not record.broker_ids:
        state = state.without_group(name)
        return state, _accept(state, record, raft_index, name)
    replicas = group.replicas.remove(*record.broker_ids)  # type: ignore[attr-defined]
    if not replicas:
        state = state.without_group(name)
        return state, _accept(state, record, raft_index, name)
    # Deviation: the set keeps its sync-state entry (epochs, master history) while replicas remain.
    group = replace(group, replicas=replicas, sync_state_set=group.sync_state_set - record.broker_ids)
    if group.master_broker_id in record.broker_ids:
        group = replace(group, master_broker_id=None, master_epoch=group.master_epoch + 1)
    state = state.with_group(group)
    return state, _accept(state, record, raft_index, name)


_APPLIERS: dict[type[Any], Callable[[ControllerState, Any, int], tuple[ControllerState, Outcome]]] = {
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
        new_state, outcome = applier(state, record, raft_index)
        return _advance(new_state, raft_index), outcome
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
