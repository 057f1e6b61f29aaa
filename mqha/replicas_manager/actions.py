"""The planner's vocabulary (core): the actions it asks for and the values the shell feeds back.

Every action belongs to one *phase*; the runner executes one batch of actions in phase order
(docs/architecture.md §11 rule 6, the etcd Ready order):

    PERSIST  identity files (docs/reference-behaviour.md §9.3)            awaited, in batch order, before
    anything is sent SEND     controller calls and heartbeats        started concurrently; replies come back
    as inputs APPLY    broker hooks (fence, id, role, SSS)    after the sends of the same batch

Controller calls carry a ``seq`` number: the planner keeps at most one call of each kind in flight
and ignores a reply whose ``seq`` is not the one it is waiting for (a stale reply).

Nothing here does IO; the identity records are plain values (the file codec is ``identity.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from mqha.errors import RemoteProtocolError
from mqha.replicas_manager.hooks import MasterInfo
from mqha.wire.controller_api import (
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    BrokerHeartbeatRequest,
    ElectMasterRequest,
    GetNextBrokerIdRequest,
    GetReplicaInfoRequest,
    RegisterBrokerRequest,
)


class Phase(Enum):
    PERSIST = 0
    SEND = 1
    APPLY = 2


# --------------------------------------------------------------------------------------------------
# Identity records (docs/reference-behaviour.md §9.3).


@dataclass(frozen=True)
class BrokerIdentity:
    """The metadata file: ``<clusterName>#<brokerName>#<brokerId>``."""

    cluster_name: str
    broker_name: str
    broker_id: int


@dataclass(frozen=True)
class TempBrokerIdentity:
    """The temp file: the metadata fields plus ``registerCheckCode`` = ``<brokerAddr>;<millis>``."""

    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str


# --------------------------------------------------------------------------------------------------
# Actions.


class Action:
    phase: ClassVar[Phase]


@dataclass(frozen=True)
class WriteTempIdentity(Action):
    """Write the temp file for ``broker_id`` with a fresh check code (the shell reads the wall clock)
    and feed the written record back with ``on_temp_identity_written``."""

    phase: ClassVar[Phase] = Phase.PERSIST
    broker_id: int


@dataclass(frozen=True)
class WriteIdentity(Action):
    """Write the metadata file; the result goes to ``on_identity_written``."""

    phase: ClassVar[Phase] = Phase.PERSIST
    identity: BrokerIdentity


@dataclass(frozen=True)
class DeleteTempIdentity(Action):
    phase: ClassVar[Phase] = Phase.PERSIST


@dataclass(frozen=True)
class DeleteIdentity(Action):
    phase: ClassVar[Phase] = Phase.PERSIST


class ControllerCall(Action):
    """A request to the controller leader; the reply (or ``None``: unreachable) goes to
    ``on_controller_reply``."""

    phase: ClassVar[Phase] = Phase.SEND
    kind: ClassVar[str]
    seq: int


@dataclass(frozen=True)
class GetMetadata(ControllerCall):
    """Leader discovery (docs/reference-behaviour.md §5.8) on every listed controller."""

    kind: ClassVar[str] = "metadata"
    seq: int


@dataclass(frozen=True)
class GetNextBrokerId(ControllerCall):
    kind: ClassVar[str] = "nextBrokerId"
    seq: int
    request: GetNextBrokerIdRequest


@dataclass(frozen=True)
class ApplyBrokerId(ControllerCall):
    kind: ClassVar[str] = "applyBrokerId"
    seq: int
    request: ApplyBrokerIdRequest


@dataclass(frozen=True)
class RegisterBroker(ControllerCall):
    kind: ClassVar[str] = "registerBroker"
    seq: int
    request: RegisterBrokerRequest


@dataclass(frozen=True)
class GetReplicaInfo(ControllerCall):
    kind: ClassVar[str] = "replicaInfo"
    seq: int
    request: GetReplicaInfoRequest


@dataclass(frozen=True)
class ElectMaster(ControllerCall):
    """The broker trigger of docs/reference-behaviour.md §5.4: own id, no designation."""

    kind: ClassVar[str] = "electMaster"
    seq: int
    request: ElectMasterRequest


@dataclass(frozen=True)
class ProposeSyncStateSet(ControllerCall):
    """AlterSyncStateSet (docs/reference-behaviour.md §9.5): the new set with the master epoch and SSS epoch
    it expects."""

    kind: ClassVar[str] = "alterSyncStateSet"
    seq: int
    request: AlterSyncStateSetRequest


@dataclass(frozen=True)
class SendHeartbeat(Action):
    """Heartbeat to every controller (docs/reference-behaviour.md §9.7).

    ``confirm=False``: over each open session, fire-and-forget. ``confirm=True`` (the one heartbeat of
    the start sequence, docs/reference-behaviour.md §9.2): by HTTP to every controller, awaited, and the
    number of controllers that recorded it goes to ``on_heartbeat_sent`` -- so the leader knows the broker is
    alive before the broker asks it for an election.
    """

    phase: ClassVar[Phase] = Phase.SEND
    request: BrokerHeartbeatRequest
    confirm: bool = False
    seq: int = 0


@dataclass(frozen=True)
class SetFenced(Action):
    phase: ClassVar[Phase] = Phase.APPLY
    fenced: bool


@dataclass(frozen=True)
class SetBrokerControllerId(Action):
    phase: ClassVar[Phase] = Phase.APPLY
    broker_id: int


@dataclass(frozen=True)
class BecomeMaster(Action):
    """``hooks.change_to_master``; the verdict goes to ``on_role_change_result``."""

    phase: ClassVar[Phase] = Phase.APPLY
    epoch: int
    sync_state_set_epoch: int
    sync_state_set: frozenset[int]


@dataclass(frozen=True)
class BecomeSlave(Action):
    """``hooks.change_to_slave``; the verdict goes to ``on_role_change_result``."""

    phase: ClassVar[Phase] = Phase.APPLY
    master: MasterInfo
    epoch: int


@dataclass(frozen=True)
class ApplySyncStateSet(Action):
    phase: ClassVar[Phase] = Phase.APPLY
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


@dataclass(frozen=True)
class CheckSyncStateSet(Action):
    """Ask ``hooks.maybe_shrink_sync_state_set()``; the answer goes to ``on_sync_state_set_check``."""

    phase: ClassVar[Phase] = Phase.APPLY


RoleChange = BecomeMaster | BecomeSlave


def in_phase_order(actions: list[Action]) -> list[Action]:
    """The batch in execution order: PERSIST, SEND, APPLY, keeping batch order inside a phase."""
    return sorted(actions, key=lambda action: action.phase.value)


# --------------------------------------------------------------------------------------------------
# Inputs that are not controller replies.


def _opt_int(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RemoteProtocolError(f"field '{key}' of roleChanged: expected an integer or null")
    return value


def _opt_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RemoteProtocolError(f"field '{key}' of roleChanged: expected a string or null")
    return value


@dataclass(frozen=True)
class RoleNotification:
    """A ``roleChanged`` push of the controller (docs/reference-behaviour.md §7.4;
    ``mqha/controller/sessions.py`` format)."""

    broker_name: str | None
    master_broker_id: int | None
    master_address: str | None
    master_ha_address: str | None
    master_epoch: int | None
    sync_state_set_epoch: int | None
    sync_state_set: frozenset[int]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RoleNotification:
        """Parse a push (unknown fields ignored); raises ``RemoteProtocolError`` on a wrong type."""
        raw_set = obj.get("syncStateSet") or []
        if not isinstance(raw_set, list) or any(
            isinstance(item, bool) or not isinstance(item, int) for item in raw_set
        ):
            raise RemoteProtocolError("field 'syncStateSet' of roleChanged: expected an array of integers")
        return cls(
            broker_name=_opt_str(obj, "brokerName"),
            master_broker_id=_opt_int(obj, "masterBrokerId"),
            master_address=_opt_str(obj, "masterAddress"),
            master_ha_address=_opt_str(obj, "masterHaAddress"),
            master_epoch=_opt_int(obj, "masterEpoch"),
            sync_state_set_epoch=_opt_int(obj, "syncStateSetEpoch"),
            sync_state_set=frozenset(raw_set),
        )
