"""Role-change pushes to brokers after a successful election (shell; docs/reference-behaviour.md §7.4).

With ``notifyBrokerRoleChanged``, every member of the set that is alive in this node's heartbeat table
and has a session here gets a ``roleChanged`` push, built from the committed reply (both epochs, so a
broker can recognise a stale push).
"""

from __future__ import annotations

from mqha.controller.parts import NodePart
from mqha.controller.sessions import ROLE_CHANGED
from mqha.wire.controller_api import ElectMasterPayload, RoleChangedMessage


class RoleChangeFanout(NodePart):
    """Pushes ``roleChanged`` to the live, connected members of a broker set after its election."""

    def notify_role_change(self, broker_name: str, payload: ElectMasterPayload) -> None:
        """docs/reference-behaviour.md §7.4, to every member alive here that has a session on this node."""
        if not self.config["notifyBrokerRoleChanged"]:
            return
        members = payload.broker_member_group
        if not members:
            return
        message = RoleChangedMessage(
            type=ROLE_CHANGED,
            cluster_name=members.cluster,
            broker_name=broker_name,
            master_broker_id=payload.master_broker_id,
            master_address=payload.master_address,
            master_ha_address=payload.master_ha_address,
            master_epoch=payload.master_epoch,
            sync_state_set_epoch=payload.sync_state_set_epoch,
            sync_state_set=payload.sync_state_set,
        ).to_json()
        epoch = payload.master_epoch or 0
        now = self.clock.now_ms()
        for broker_id in members.broker_addrs:
            if self.heartbeats.is_alive(now, broker_name, broker_id):
                self.sessions.push((broker_name, broker_id), message, epoch)
