"""The planner's vocabulary (core): the actions it asks for and the values the shell feeds back.

Every action belongs to one *phase*; the runner executes one batch of actions in phase order
(docs/architecture.md §11 rule 6, the etcd Ready order):

    PERSIST  identity files (docs/reference-behaviour.md §9.3)   awaited, in batch order, before anything
                                                               is sent
    SEND     controller calls and heartbeats                   started concurrently; replies come back
                                                               as inputs
    APPLY    broker hooks (fence, id, role, SSS)               after the sends of the same batch

Controller calls carry a ``seq`` number: the planner keeps at most one call of each kind in flight
and ignores a reply whose ``seq`` is not the one it is waiting for (a stale reply).

Nothing here does IO; the identity records are plain values (the file codec is ``identity.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, dataclass_transform

from mqha.replicas_manager.hooks import MasterInfo
from mqha.wire.controller_api import (
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    BrokerHeartbeatRequest,
    ElectMasterRequest,
    GetNextBrokerIdRequest,
    GetReplicaInfoRequest,
    RegisterBrokerRequest,
    RoleChangedMessage,
)


class Phase(Enum):
    """Names when the runner executes an action of a batch: persist, then send, then apply."""

    PERSIST = 0
    SEND = 1
    APPLY = 2


# --------------------------------------------------------------------------------------------------
# Identity records (docs/reference-behaviour.md §9.3).


@dataclass(frozen=True)
class BrokerIdentity:
    """The metadata file: ``<clusterName>#<brokerName>#<brokerId>#<storeId>`` (checksummed)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    store_id: str | None = None  # None: an older broker's file, bound to no store yet


@dataclass(frozen=True)
class TempBrokerIdentity:
    """The temp file: the metadata fields plus ``registerCheckCode`` = ``<brokerAddr>;<millis>;<storeId>``."""

    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str


# --------------------------------------------------------------------------------------------------
# Actions.


@dataclass_transform(frozen_default=True)
class Action:
    """Something the planner asks the shell to do.

    Every subclass is a frozen dataclass and names its phase once, in its class line:
    ``class SetFenced(Action, phase=Phase.APPLY)``.
    """

    phase: ClassVar[Phase]

    def __init_subclass__(cls, *, phase: Phase | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if phase is not None:
            cls.phase = phase
        dataclass(frozen=True)(cls)


class WriteTempIdentity(Action, phase=Phase.PERSIST):
    """Write the temp identity file for ``broker_id`` with a fresh check code.

    The shell reads the wall clock for the check code and feeds the written record back with
    ``on_temp_identity_written``.
    """

    broker_id: int


class WriteIdentity(Action, phase=Phase.PERSIST):
    """Write the metadata file; the result goes to ``on_identity_written``."""

    identity: BrokerIdentity


class DeleteTempIdentity(Action, phase=Phase.PERSIST):
    """Delete the temp file (it is gone or was never written: no verdict comes back)."""


class DeleteIdentity(Action, phase=Phase.PERSIST):
    """Delete the metadata file after a failed write (no verdict comes back)."""


class ControllerCall(Action, phase=Phase.SEND):
    """A request to the controller leader, whose reply goes back to the planner.

    The reply (or ``None``: unreachable) goes to ``on_controller_reply``. A subclass names its ``kind``
    (the in-flight key) in its class line.
    """

    kind: ClassVar[str]
    seq: int

    def __init_subclass__(cls, *, kind: str, **kwargs: Any) -> None:
        cls.kind = kind
        super().__init_subclass__(**kwargs)


class GetMetadata(ControllerCall, kind="metadata"):
    """Leader discovery (docs/reference-behaviour.md §5.8) on every listed controller."""


class GetNextBrokerId(ControllerCall, kind="nextBrokerId"):
    """Ask for the id to try next (docs/reference-behaviour.md §9.3 step 3)."""

    request: GetNextBrokerIdRequest


class ApplyBrokerId(ControllerCall, kind="applyBrokerId"):
    """Claim the id the temp file holds (docs/reference-behaviour.md §9.3 step 4)."""

    request: ApplyBrokerIdRequest


class RegisterBroker(ControllerCall, kind="registerBroker"):
    """Register with the controller; the reply names the master.

    docs/reference-behaviour.md §9.3 step 5 (and re-register, §9.4).
    """

    request: RegisterBrokerRequest


class GetReplicaInfo(ControllerCall, kind="replicaInfo"):
    """Ask for the broker set's master and SyncStateSet (docs/reference-behaviour.md §9.4)."""

    request: GetReplicaInfoRequest


class ElectMaster(ControllerCall, kind="electMaster"):
    """The broker trigger of docs/reference-behaviour.md §5.4: own id, no designation."""

    request: ElectMasterRequest


class ProposeSyncStateSet(ControllerCall, kind="alterSyncStateSet"):
    """Ask the controller to alter the SyncStateSet (docs/reference-behaviour.md §9.5).

    The request carries the new set with the master epoch and SyncStateSet epoch it expects.
    """

    request: AlterSyncStateSetRequest


class ReleaseEligibleReplicas(ControllerCall, kind="releaseEligible"):
    """Empty the group's ELR before this master acknowledges beyond its credits.

    An alterSyncStateSet of the current set with ``releaseEligible`` (docs/architecture.md §3.2); the
    verdict goes to the HA layer as ``EligibleReleaseDone``.
    """

    request: AlterSyncStateSetRequest


class SendHeartbeat(Action, phase=Phase.SEND):
    """Heartbeat to every controller (docs/reference-behaviour.md §9.7).

    ``confirm=False``: over each open session, fire-and-forget. ``confirm=True`` (the one heartbeat of
    the start sequence, docs/reference-behaviour.md §9.2): by HTTP to every controller, awaited, and the
    number of controllers that recorded it goes to ``on_heartbeat_sent`` -- so the leader knows the broker is
    alive before the broker asks it for an election.
    """

    request: BrokerHeartbeatRequest
    confirm: bool = False
    seq: int = 0


class SetFenced(Action, phase=Phase.APPLY):
    """Refuse (True) or take (False) puts, through ``hooks.set_fenced``."""

    fenced: bool


class StopFollowing(Action, phase=Phase.APPLY):
    """Replicate from no master older than ``epoch``, at which the set's master was cleared.

    Through ``hooks.stop_following``; the fence of an election by count (docs/architecture.md §3.2)."""

    epoch: int


class SetBrokerControllerId(Action, phase=Phase.APPLY):
    """Tell the broker the id the controller knows it by, through ``hooks.set_broker_controller_id``."""

    broker_id: int


class BecomeMaster(Action, phase=Phase.APPLY):
    """Make this broker the master (``hooks.change_to_master``).

    The verdict goes to ``on_role_change_result``.
    """

    epoch: int
    sync_state_set_epoch: int
    sync_state_set: frozenset[int]


class BecomeSlave(Action, phase=Phase.APPLY):
    """Make this broker a slave (``hooks.change_to_slave``).

    The verdict goes to ``on_role_change_result``.
    """

    master: MasterInfo
    epoch: int


class ApplySyncStateSet(Action, phase=Phase.APPLY):
    """Give the broker a newer SyncStateSet and its epoch, through ``hooks.apply_sync_state_set``."""

    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


class CheckSyncStateSet(Action, phase=Phase.APPLY):
    """Ask ``hooks.maybe_shrink_sync_state_set()``; the answer goes to ``on_sync_state_set_check``."""


class EligibleReleaseDone(Action, phase=Phase.APPLY):
    """Tell the HA layer whether the controller emptied the ELR.

    Through ``hooks.eligible_release_done``, as of ``master_epoch`` / ``sync_state_set_epoch``.
    """

    master_epoch: int
    sync_state_set_epoch: int
    ok: bool


class GiveUpBrokerId(Action, phase=Phase.APPLY):
    """Stop the process: another live process holds this broker's id (docs/architecture.md §3.2).

    ``remark`` is the controller's, naming the holder; the planner has fenced the broker and shut down."""

    broker_id: int | None
    remark: str


RoleChange = BecomeMaster | BecomeSlave


def in_phase_order(actions: list[Action]) -> list[Action]:
    """The batch in execution order: PERSIST, SEND, APPLY, keeping batch order inside a phase."""
    return sorted(actions, key=lambda action: action.phase.value)


# --------------------------------------------------------------------------------------------------
# Inputs that are not controller replies.


@dataclass(frozen=True)
class RoleNotification:
    """A ``roleChanged`` push of the controller, as the planner reads it.

    Format: docs/reference-behaviour.md §7.4 and ``mqha/controller/sessions.py``.
    """

    broker_name: str | None
    master_broker_id: int | None
    master_address: str | None
    master_ha_address: str | None
    master_epoch: int | None
    sync_state_set_epoch: int | None
    sync_state_set: frozenset[int]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RoleNotification:
        """Parse a push with the wire layer's struct (unknown fields ignored); raises
        ``RemoteProtocolError`` on a wrong type."""
        push = RoleChangedMessage.from_json(obj)
        return cls(
            broker_name=push.broker_name,
            master_broker_id=push.master_broker_id,
            master_address=push.master_address,
            master_ha_address=push.master_ha_address,
            master_epoch=push.master_epoch,
            sync_state_set_epoch=push.sync_state_set_epoch,
            sync_state_set=frozenset(push.sync_state_set or ()),
        )
