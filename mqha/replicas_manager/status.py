"""The replicas manager's state, read-only, for the broker's ``/v1/status``, its metrics and tests (shell)."""

from __future__ import annotations

from typing import Any

from mqha.replicas_manager.client import ControllerClient
from mqha.replicas_manager.planner import ReplicasPlanner
from mqha.replicas_manager.planner_states import RegisterState, State


class ReplicasStatus:
    """Reads the controller agent's state: its planner's decisions and its controller sessions."""

    def __init__(self, planner: ReplicasPlanner, client: ControllerClient) -> None:
        self._planner = planner
        self._client = client

    @property
    def state(self) -> State:
        return self._planner.state

    @property
    def register_state(self) -> RegisterState:
        return self._planner.register_state

    @property
    def role(self) -> str:
        return self._planner.role

    @property
    def broker_controller_id(self) -> int | None:
        return self._planner.broker_id

    @property
    def master_broker_id(self) -> int | None:
        return self._planner.master_broker_id

    @property
    def master_address(self) -> str | None:
        return self._planner.master_address

    @property
    def master_epoch(self) -> int:
        return self._planner.master_epoch

    @property
    def sync_state_set(self) -> frozenset[int]:
        return self._planner.sync_state_set

    @property
    def sync_state_set_epoch(self) -> int:
        return self._planner.sync_state_set_epoch

    @property
    def controller_leader(self) -> str | None:
        return self._client.leader

    def sessions(self) -> dict[str, dict[str, Any]]:
        return self._client.heartbeats.sessions()

    def document(self) -> dict[str, Any]:
        """JSON-friendly view for the broker's ``/v1/status`` and metrics."""
        planner = self._planner
        return {
            "state": planner.state.value,
            "registerState": planner.register_state.value,
            "role": planner.role,
            "brokerControllerId": planner.broker_id,
            "storeId": planner.config.store_id,  # docs/architecture.md §9.4
            "masterBrokerId": planner.master_broker_id,
            "masterAddress": planner.master_address,
            "masterHaAddress": planner.master_ha_address,
            "masterEpoch": planner.master_epoch,
            "syncStateSet": sorted(planner.sync_state_set),
            "syncStateSetEpoch": planner.sync_state_set_epoch,
            "controllerLeader": self._client.leader,
            "controllerSessions": self._client.heartbeats.sessions(),
            "lastFailure": planner.last_failure,
        }
