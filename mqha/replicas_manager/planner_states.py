"""The ReplicasPlanner's states, transition tables, settings and reply helpers (core;
docs/reference-behaviour.md §9.1, §9.2, §16.2)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, TypeVar

from mqha.codes import ResponseCode
from mqha.errors import LocalProtocolError, RemoteProtocolError
from mqha.replicas_manager.hooks import BrokerStart
from mqha.wire.controller_api import (
    Reply,
)

log = logging.getLogger("mqha.replicas_manager.planner")

Code = ResponseCode
_S = TypeVar("_S", bound=Enum)

FIRST_RUN_DELAY_MS = 3000  # docs/reference-behaviour.md §9.2/§9.4/§9.5: periodic tasks start after 3 s
METADATA_ATTEMPTS = 3
METADATA_RETRY_MS = 1000
REGISTER_ATTEMPTS = 5
REGISTER_JITTER_MS = 1000  # random 0-999 ms between register attempts
RETRY_INTERVAL_MS = 5000  # RETRY_INTERVAL_SECOND of startBasicService
REREGISTER_PAUSE_MS = 2000  # after CONTROLLER_BROKER_METADATA_NOT_EXIST (docs/reference-behaviour.md §9.4)

START_HEARTBEAT = "startHeartbeat"  # in-flight key of the start sequence's confirmed heartbeat

# --------------------------------------------------------------------------------------------------
# States and their transition tables (docs/reference-behaviour.md §9.1). Nobody else assigns these fields.


class State(Enum):
    """Names the planner's lifecycle states (docs/reference-behaviour.md §9.1, §9.2)."""

    INITIAL = "INITIAL"
    FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE = "FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE"
    REGISTER_TO_CONTROLLER_DONE = "REGISTER_TO_CONTROLLER_DONE"
    RUNNING = "RUNNING"
    SHUTDOWN = "SHUTDOWN"


class RegisterState(Enum):
    """Names how far the register flow has got (docs/reference-behaviour.md §9.3)."""

    INITIAL = "INITIAL"
    CREATE_TEMP_METADATA_FILE_DONE = "CREATE_TEMP_METADATA_FILE_DONE"
    CREATE_METADATA_FILE_DONE = "CREATE_METADATA_FILE_DONE"
    REGISTERED = "REGISTERED"


class StateEvent(Enum):
    """Names what happened to move the planner's lifecycle state."""

    METADATA_SYNCED = "controller metadata synced"
    REGISTERED = "registered to the controller"
    MASTER_KNOWN = "master known"
    SHUTDOWN = "shutdown"


class RegisterEvent(Enum):
    """Names what happened to move the register flow's state."""

    METADATA_FILE_FOUND = "metadata file loaded"
    TEMP_FILE_FOUND = "temp metadata file loaded"
    TEMP_FILE_WRITTEN = "temp metadata file written"
    APPLY_FAILED = "applyBrokerId failed"
    METADATA_FILE_WRITTEN = "metadata file written"
    REGISTER_SUCCEEDED = "registerBroker succeeded"


S, R = State, RegisterState

STATE_TRANSITIONS: Mapping[tuple[State, StateEvent], State] = {
    (S.INITIAL, StateEvent.METADATA_SYNCED): S.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE,
    (S.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE, StateEvent.REGISTERED): S.REGISTER_TO_CONTROLLER_DONE,
    (S.REGISTER_TO_CONTROLLER_DONE, StateEvent.MASTER_KNOWN): S.RUNNING,
    **{(state, StateEvent.SHUTDOWN): S.SHUTDOWN for state in State if state is not S.SHUTDOWN},
}

REGISTER_TRANSITIONS: Mapping[tuple[RegisterState, RegisterEvent], RegisterState] = {
    (R.INITIAL, RegisterEvent.METADATA_FILE_FOUND): R.CREATE_METADATA_FILE_DONE,
    (R.INITIAL, RegisterEvent.TEMP_FILE_FOUND): R.CREATE_TEMP_METADATA_FILE_DONE,
    (R.INITIAL, RegisterEvent.TEMP_FILE_WRITTEN): R.CREATE_TEMP_METADATA_FILE_DONE,
    (R.CREATE_TEMP_METADATA_FILE_DONE, RegisterEvent.APPLY_FAILED): R.INITIAL,
    (R.CREATE_TEMP_METADATA_FILE_DONE, RegisterEvent.METADATA_FILE_WRITTEN): R.CREATE_METADATA_FILE_DONE,
    (R.CREATE_METADATA_FILE_DONE, RegisterEvent.REGISTER_SUCCEEDED): R.REGISTERED,
    # re-register (docs/reference-behaviour.md §9.4)
    (R.REGISTERED, RegisterEvent.REGISTER_SUCCEEDED): R.REGISTERED,
}


# --------------------------------------------------------------------------------------------------
# Configuration.


@dataclass(frozen=True)
class PlannerConfig:
    """The broker config keys the planner uses (docs/reference-behaviour.md §16.2), in milliseconds."""

    cluster_name: str
    broker_name: str
    broker_address: str
    ha_address: str
    sync_broker_metadata_period_ms: int = 5000
    check_sync_state_set_period_ms: int = 5000
    sync_controller_metadata_period_ms: int = 10000
    heartbeat_timeout_ms: int = 10000
    election_priority: int = 2**31 - 1
    heartbeat_interval_ms: int = 1000
    start: BrokerStart | None = None
    """How this process started (register, heartbeats); None for an agent without a store (tests)."""
    all_ack_in_sync_state_set: bool | None = None
    in_sync_replicas: int | None = None
    """The ack rule heartbeats report (docs/architecture.md §3.2); None: not reported (tests)."""
    store_id: str | None = None
    """This store's id (docs/architecture.md §9.4): in the check code, the identity file and the
    register; None for an agent without a store (tests)."""

    @classmethod
    def from_broker_config(cls, config: Mapping[str, Any]) -> PlannerConfig:
        return cls(
            cluster_name=config["brokerClusterName"],
            broker_name=config["brokerName"],
            broker_address=f"{config['brokerIP1']}:{config['listenPort']}",
            ha_address=f"{config['brokerIP1']}:{config['haListenPort']}",
            sync_broker_metadata_period_ms=config["syncBrokerMetadataPeriod"],
            check_sync_state_set_period_ms=config["checkSyncStateSetPeriod"],
            sync_controller_metadata_period_ms=config["syncControllerMetadataPeriod"],
            heartbeat_timeout_ms=config["controllerHeartBeatTimeoutMills"],
            election_priority=config["brokerElectionPriority"],
            heartbeat_interval_ms=config["brokerHeartbeatInterval"],
            all_ack_in_sync_state_set=config["allAckInSyncStateSet"],
            in_sync_replicas=config["inSyncReplicas"],
        )


class MasterFacts(Protocol):
    """Who the master is, as a register / elect / replica-info reply or a roleChanged push says."""

    @property
    def master_broker_id(self) -> int | None: ...
    @property
    def master_address(self) -> str | None: ...
    @property
    def master_ha_address(self) -> str | None: ...
    @property
    def master_epoch(self) -> int | None: ...
    @property
    def sync_state_set_epoch(self) -> int | None: ...
    @property
    def sync_state_set(self) -> frozenset[int] | None: ...


def _next(table: Mapping[tuple[Any, Any], _S], current: _S, event: Enum, what: str) -> _S:
    """The state ``table`` moves ``current`` to on ``event``; an event the table does not allow is a bug."""
    target = table.get((current, event))
    if target is None:
        raise LocalProtocolError(f"ReplicasManager cannot handle {event.value!r} in {what} {current.value}")
    log.debug("%s %s -> %s (%s)", what, current.value, target.value, event.value)
    return target


def _parse(payload_cls: Any, reply: Reply) -> Any | None:
    """The reply's payload, or None when the controller sent something malformed."""
    try:
        return payload_cls.from_json(dict(reply.payload))
    except RemoteProtocolError as exc:
        log.warning("malformed %s reply from the controller: %s", payload_cls.__name__, exc)
        return None


def _describe(reply: Reply | None) -> str:
    if reply is None:
        return "no controller answered"
    return f"{reply.code.name} ({int(reply.code)}): {reply.remark}"
