"""Role-change pushes to brokers after a successful election (shell; docs/reference-behaviour.md §7.4).

With ``notifyBrokerRoleChanged``, every member of the set that is alive in this node's heartbeat table
and has a session here gets a ``roleChanged`` push, built from the committed reply (both epochs, so a
broker can recognise a stale push).
"""

from __future__ import annotations

from mqha.controller.parts import NodePart
from mqha.controller.sessions import ROLE_CHANGED
from mqha.wire.controller_api import Reply


class RoleChangeFanout(NodePart):
    """Pushes ``roleChanged`` to the live, connected members of a broker set after its election."""

    # ------------------------------------------------------------------ role-change pushes

    def _notify_role_change(self, broker_name: str, reply: Reply) -> None:
        """docs/reference-behaviour.md §7.4, to every member alive here that has a session on this node."""
        if not self.config["notifyBrokerRoleChanged"]:
            return
        payload = reply.payload
        members = payload.get("brokerMemberGroup")
        if not members:
            return
        message = {
            "type": ROLE_CHANGED,
            "clusterName": members.get("cluster"),
            "brokerName": broker_name,
            "masterBrokerId": payload.get("masterBrokerId"),
            "masterAddress": payload.get("masterAddress"),
            "masterHaAddress": payload.get("masterHaAddress"),
            "masterEpoch": payload.get("masterEpoch"),
            "syncStateSetEpoch": payload.get("syncStateSetEpoch"),
            "syncStateSet": payload.get("syncStateSet"),
        }
        epoch = payload.get("masterEpoch") or 0
        now = self.clock.now_ms()
        for key in members.get("brokerAddrs", {}):
            broker_id = int(key)
            if self.heartbeats.is_alive(now, broker_name, broker_id):
                self.sessions.push((broker_name, broker_id), message, epoch)
